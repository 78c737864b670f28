"""Method wiring: views in one forward pass, gradient flow, hooks, LDM construction and updates,
and one end-to-end `clbench run` per method on the fixture."""

import json
import re

import numpy as np
import pytest
import torch

from bench.data.batching import Encoded
from bench.data.loading import load_dataset
from bench.encoders.models import build_encoder
from bench.errors import BenchError
from bench.registry import METHODS
from bench.spec import method_config
from bench.spec import TrainConfig
from conftest import FAST, FIXTURE
from bench.methods.base import PrepareContext, Progress  # (importing `methods` registers every method module)
from bench.methods.clld import confused_pairs, static_ldm, target_ldm

CFG = TrainConfig(max_length=32)
BUILT_IN = ["ce", "cl", "clld-static", "clld-adaptive", "supcon", "lcl", "cline", "dcl", "simcse", "mirror-bert"]
ALL = list(METHODS)  # every registered method runs end to end below, a newly added one included
KNOBS = {"clld-static": {"pairs": (("food", "sport"),)}}


def build(name, tmp_path, **knobs):
    data = load_dataset(str(FIXTURE))
    torch.manual_seed(0)
    bundle = build_encoder("tiny-bert", data.train.texts, CFG)
    cls = METHODS.get(name)
    config = cls.Config(**dict(method_config(name, {**KNOBS.get(name, {}), **knobs})))
    method = cls(bundle.model, data.num_labels, config)
    method.prepare(PrepareContext(data.train.texts, data.label_names, bundle, 1, tmp_path / "cache", tmp_path))
    train = Encoded(bundle.tokenize(data.train.texts), data.train.labels)
    batch = method.collate(train, np.arange(8), bundle.pad_id, 1, 0, None)  # with its views, as the Trainer's
    return method, batch, data


class CountingEncoder(torch.nn.Module):
    """Wraps an encoder and records the number of rows of every forward call."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.calls = inner, []
        self.hidden_size, self.token_size = inner.hidden_size, inner.token_size

    def forward(self, input_ids, attention_mask):
        self.calls.append(input_ids.shape[0])
        return self.inner(input_ids, attention_mask)


@pytest.mark.parametrize("name,rows", [("ce", 8), ("cl", 16), ("clld-adaptive", 16), ("supcon", 8),
                                       ("lcl", 16)])
def test_views_come_from_one_forward_pass(name, rows, tmp_path):
    method, batch, _ = build(name, tmp_path)
    method.encoder = CountingEncoder(method.encoder)
    method.train()
    method.loss(batch)
    assert method.encoder.calls == [rows]


def test_supcon_two_views_doubles_the_batch(tmp_path):
    method, batch, _ = build("supcon", tmp_path, views=2)
    method.encoder = CountingEncoder(method.encoder)
    method.loss(batch)
    assert method.encoder.calls == [16]


@pytest.mark.parametrize("name", ["cl", "clld-static", "clld-adaptive", "supcon", "lcl"])
def test_losses_are_finite_and_train_every_part(name, tmp_path):
    method, batch, _ = build(name, tmp_path)
    method.train()
    losses = method.loss(batch)
    assert all(torch.isfinite(v) for v in losses.values())
    sum(losses.values()).backward()
    assert all(p.grad is not None for p in method.head.parameters())  # lcl's released head has two layers
    assert method.encoder.model.embeddings.word_embeddings.weight.grad.abs().sum() > 0


def test_cl_is_clld_with_a_uniform_matrix(tmp_path):
    cl, batch, _ = build("cl", tmp_path)
    static, _, _ = build("clld-static", tmp_path, boost=1.0)
    static.load_state_dict(cl.state_dict())
    torch.manual_seed(3)
    a = cl.loss(batch)["contrastive"]
    torch.manual_seed(3)
    b = static.loss(batch)["contrastive"]
    assert torch.allclose(a, b)
    assert torch.equal(cl.ldm, torch.full_like(cl.ldm, 5.0))


def test_lcl_helper_gets_gradient_through_the_weights(tmp_path):
    method, batch, _ = build("lcl", tmp_path, ce_weight=0.0)  # only the LCL term remains
    method.train()
    method.loss(batch)["lcl"].backward()
    assert method.helper_head[1].weight.grad.abs().sum() > 0
    assert method.helper_encoder.model.embeddings.word_embeddings.weight.grad.abs().sum() > 0


def test_lcl_shared_head_has_no_second_encoder(tmp_path):
    method, batch, _ = build("lcl", tmp_path, weighting="shared-head")
    assert method.helper_encoder is None
    method.encoder = CountingEncoder(method.encoder)
    method.loss(batch)
    assert method.encoder.calls == [16]


# ----------------------------------------------------------------------------------------------- CLLD LDMs

def test_static_ldm_from_pairs():
    from bench.methods.clld import StaticConfig

    ldm = static_ldm(StaticConfig(pairs=(("food", "weather"),), boost=3.0), ["food", "sport", "weather"], None)
    assert ldm.tolist() == [[5, 5, 15], [5, 5, 5], [15, 5, 5]]
    with pytest.raises(BenchError, match="must name two of the classes: food, sport, weather"):
        static_ldm(StaticConfig(pairs=(("food", "fish"),)), ["food", "sport", "weather"], None)


def test_static_ldm_from_matrix_file(tmp_path):
    from bench.methods.clld import StaticConfig

    (tmp_path / "m.csv").write_text(",a,b\na,1,2\nb,2,1\n")
    assert static_ldm(StaticConfig(tau=2.0, matrix=str(tmp_path / "m.csv")), ["a", "b"], None).tolist() == \
        [[2, 4], [4, 2]]
    (tmp_path / "bad.csv").write_text("1,2,3\n")
    with pytest.raises(BenchError, match="has 2 classes"):
        static_ldm(StaticConfig(matrix=str(tmp_path / "bad.csv")), ["a", "b"], None)


def test_static_ldm_from_a_finished_run(tmp_path):
    from bench.methods.clld import StaticConfig

    run = tmp_path / "ce_run"
    run.mkdir()
    confusion = [[9, 3, 0], [1, 8, 0], [0, 2, 9]]
    (run / "confusion.json").write_text(json.dumps({"labels": ["a", "b", "c"], "validation": confusion}))
    assert confused_pairs(np.array(confusion), 2) == [(0, 1), (1, 2)]
    ldm = static_ldm(StaticConfig(ldm_from="ce_run", top_k=1), ["a", "b", "c"], tmp_path)
    assert ldm[0, 1] == ldm[1, 0] == 10.0 and ldm[1, 2] == 5.0
    with pytest.raises(BenchError, match="no finished run there"):
        static_ldm(StaticConfig(ldm_from="nothing"), ["a", "b", "c"], tmp_path)
    (run / "confusion.json").write_text(json.dumps({"labels": ["a", "b", "c"], "validation": [], "test": confusion}))
    with pytest.raises(BenchError, match="no validation confusion matrix"):  # never the test labels instead
        static_ldm(StaticConfig(ldm_from="ce_run", top_k=1), ["a", "b", "c"], tmp_path)
    for broken in ('{"labels": ["a", "b"', '["a", "b", "c"]', '{"validation": []}'):  # cut short, not a dict, no labels
        (run / "confusion.json").write_text(broken)
        with pytest.raises(BenchError, match="cannot read .*confusion.json.*re-run that run"):
            static_ldm(StaticConfig(ldm_from="ce_run", top_k=1), ["a", "b", "c"], tmp_path)


def test_static_needs_exactly_one_source():
    from bench.methods.clld import StaticConfig

    with pytest.raises(BenchError, match="exactly one LDM source"):
        StaticConfig()


def test_target_ldm_follows_the_update_rule():
    confusion = np.array([[8, 2, 0], [2, 6, 2], [0, 0, 10]])
    # r_01 = (2+2)/(10+10) = 0.2, r_12 = (2+0)/(10+10) = 0.1, r_02 = 0 -> max r = 0.2
    expected = 5 * np.array([[1, 2, 1], [2, 1, 1.5], [1, 1.5, 1]])
    assert np.allclose(target_ldm(confusion, 5.0), expected)
    assert np.allclose(target_ldm(np.eye(3) * 4, 5.0), 5.0)  # no confusion: uniform


def test_adaptive_ldm_updates_exactly_as_scripted(tmp_path):
    method, _, _ = build("clld-adaptive", tmp_path, update_every=2)
    confusion = np.array([[8, 2, 0], [2, 6, 2], [0, 0, 10]])
    total = 100
    # max_epochs 10 -> no update in epochs 1 and 2 (epoch <= 10/5); every validation is counted all the same
    for epoch, step in ((1, 5), (1, 10), (2, 20)):
        method.on_eval(confusion, Progress(epoch=epoch, max_epochs=10, step=step, total_steps=total))
    assert torch.equal(method.ldm, torch.full((3, 3), 5.0)) and method.evaluations == 3
    method.on_eval(confusion, Progress(3, 10, 30, total))  # 4th validation, epoch 3: update with eps = 0.7
    expected = 5.0 + 0.7 * (target_ldm(confusion, 5.0) - 5.0)
    assert np.allclose(method.ldm.numpy(), expected)
    method.on_eval(confusion, Progress(3, 10, 35, total))  # 5th: odd, no update
    assert np.allclose(method.ldm.numpy(), expected)
    method.on_eval(confusion, Progress(4, 10, 40, total))  # 6th: update with eps = 0.6
    expected = expected + 0.6 * (target_ldm(confusion, 5.0) - expected)
    assert np.allclose(method.ldm.numpy(), expected)
    history = method.state_for_report()["updates"]
    assert [u["step"] for u in history] == [30, 40] and np.allclose(history[-1]["ldm"], expected)
    assert [u["eps"] for u in history] == pytest.approx([0.7, 0.6])


def test_adaptive_ldm_in_a_short_run_updates_at_least_min_updates_times(tmp_path):
    # n = 3 epochs of 10 steps, 10 validations an epoch (one per step): warm-up is the first 6 steps, steps 7-29
    # are eligible (23; step 30 has eps = 0), so every 23 // 4 = 5th validation updates: 4 updates, where every
    # 10th (Algorithm 1's count) would give 2 (steps 10 and 20)
    method, _, _ = build("clld-adaptive", tmp_path)
    confusion = np.array([[8, 2, 0], [2, 6, 2], [0, 0, 10]])
    for step in range(1, 31):
        method.on_eval(confusion, Progress(epoch=(step - 1) // 10 + 1, max_epochs=3, step=step, total_steps=30))
    history = method.state_for_report()["updates"]
    assert [u["step"] for u in history] == [10, 15, 20, 25]
    assert [u["eps"] for u in history] == pytest.approx([2 / 3, 1 / 2, 1 / 3, 1 / 6])
    first = 5.0 + 2 / 3 * (target_ldm(confusion, 5.0) - 5.0)
    assert np.allclose(history[0]["ldm"], first)
    assert method.row_fields() == {"ldm_updates": 4} and method.training_warning() == ""


def test_adaptive_state_survives_a_checkpoint(tmp_path):
    method, _, _ = build("clld-adaptive", tmp_path, update_every=1)
    method.on_eval(np.array([[5, 1, 0], [1, 5, 0], [0, 0, 6]]), Progress(9, 10, 90, 100))
    again, _, _ = build("clld-adaptive", tmp_path, update_every=1)
    again.load_state_dict(method.state_dict())
    assert torch.equal(again.ldm, method.ldm) and again.evaluations == 1 and len(again.history) == 1


# ----------------------------------------------------------------------------------------------- word views

def test_dcl_target_gets_no_gradient_and_follows_the_ema(tmp_path):
    method, batch, _ = build("dcl", tmp_path, momentum=0.9)
    method.train()
    method.loss(batch)["align"].backward()
    assert all(p.grad is None for p in method.target_encoder.parameters())
    assert all(p.grad is None for p in method.target_projector.parameters())
    assert method.projector[0].weight.grad.abs().sum() > 0
    before = {k: v.clone() for k, v in method.target_encoder.state_dict().items()}
    with torch.no_grad():
        for p in method.encoder.parameters():
            p.add_(1.0)
    method.on_step_end(Progress(1, 1, 1, 1))
    online = method.encoder.state_dict()
    for name, value in method.target_encoder.state_dict().items():
        if value.is_floating_point() and name in online:
            assert torch.allclose(value, 0.9 * before[name] + 0.1 * online[name])


def test_cline_views_and_replaced_tokens(tmp_path):
    method, batch, data = build("cline", tmp_path, variant="paper")
    syn = method.syn.rows(batch["index"].numpy(), batch["input_ids"].shape[1])
    assert syn["replaced"].sum() > 0
    assert syn["replaced"][:, 0].sum() == 0  # [CLS] is never "replaced"
    method.encoder = CountingEncoder(method.encoder)
    losses = method.loss(batch)
    assert method.encoder.calls == [24]  # original, synonym and antonym views in one pass
    assert set(losses) == {"ce", "cts", "rtd"} and all(torch.isfinite(v) for v in losses.values())
    assert list((tmp_path / "cache").iterdir())  # views cached on disk


def test_cline_released_views_flag_candidate_words_and_score_them_three_ways(tmp_path):
    from bench.methods.cline import ANTONYM, KEPT, SYNONYM, token_labels

    method, batch, _ = build("cline", tmp_path)  # the default: variant released
    assert method.config.variant == "released" and method.rtd_head[-1].out_features == 3
    for views, cls in ((method.syn, SYNONYM), (method.ant, ANTONYM)):
        view = views.rows(batch["index"].numpy(), batch["input_ids"].shape[1])
        assert view["candidate"][:, 0].sum() == 0 and view["candidate"].sum() >= view["replaced"].sum() > 0
        assert bool((view["candidate"] >= view["replaced"]).all())  # every replaced token is a candidate's
        labels = token_labels(view["replaced"], view["candidate"], cls)
        assert bool((labels[:, 0] == -100).all())  # [CLS] is never scored
        assert set(labels[view["candidate"] == 0].tolist()) == {-100}
        assert set(labels[(view["candidate"] > 0) & (view["replaced"] == 0)].tolist()) <= {KEPT}
        assert set(labels[view["replaced"] > 0].tolist()) == {cls}
    out = method.encode(batch)
    assert out.pooler is not None and out.pooler.shape == out.pooled.shape  # tiny-bert has a pooler layer
    losses = method.loss(batch)
    assert set(losses) == {"ce", "cts", "rtd"} and all(torch.isfinite(v) for v in losses.values())


def test_cline_learned_weights(tmp_path):
    method, batch, _ = build("cline", tmp_path, weights="learned", sentence_loss="bce")
    sum(method.loss(batch).values()).backward()
    assert method.log_vars.grad is not None and torch.isfinite(method.log_vars.grad).all()


# ----------------------------------------------------------------------------------------------- end to end

def test_every_built_in_method_is_discovered():
    assert set(BUILT_IN) <= set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_bench_run_end_to_end(name, cli, tiny, results):
    extra = ["--set", "clld-static.pairs=[[food, sport]]", "--set", "clld.update_every=1",
             "--set", "clld.evals_per_epoch=2", "--set", "clld.warmup_fraction=0.0"]
    code, out, err = cli("run", "--datasets", tiny, "--methods", name, *FAST, *extra)
    assert code == 0, err
    folder = next(results.glob(f"{name}_tiny_*"))
    assert (folder / "rows.json").exists()
    if name.startswith("clld") or name == "cl":
        state = json.loads((folder / "method_state.json").read_text())
        assert np.array(state["ldm"]).shape == (3, 3)
        if name == "clld-adaptive":
            # 2 evaluations per epoch x 2 epochs, each one an update but the last (eps = 0 would change nothing)
            assert [u["eps"] for u in state["updates"]] == pytest.approx([0.75, 0.5, 0.25])
            rows = json.loads((folder / "rows.json").read_text())
            assert {row["ldm_updates"] for row in rows} == {3}


def test_unknown_pair_fails_before_any_shard(cli, tiny, results):
    code, _, err = cli("run", "--datasets", tiny, "--methods", "clld-static", *FAST,
                       "--set", "clld-static.pairs=[[food, fish]]")
    assert code == 2 and "must name two of the classes" in err
    assert not results.exists() or not list(results.iterdir())


def test_lambda_alias(cli, tiny, results):
    code, _, err = cli("run", "--datasets", tiny, "--methods", "supcon", *FAST, "--set", "supcon.lambda=0.7",
                       "--set", "supcon.tau=3")
    assert code == 0, err
    spec = json.loads(next(results.glob("supcon_*/spec.json")).read_text())
    assert spec["method_config"]["lambda_"] == 0.7 and spec["method_config"]["tau"] == 3.0


def test_lambda_weighs_the_contrastive_term_wherever_it_exists():
    """One meaning per knob name: `lambda` (field lambda_) weighs a method's contrastive or alignment term;
    the weight of CE is `ce_weight` (clld, lcl: the papers' λ)."""
    import bench.methods  # noqa: F401
    from bench.registry import METHODS

    with_lambda = {name for name, cls in METHODS.items() if "lambda_" in cls.config_fields()}
    with_ce_weight = {name for name, cls in METHODS.items() if "ce_weight" in cls.config_fields()}
    assert {"supcon", "dcl"} <= with_lambda and not with_lambda & with_ce_weight
    assert {"cl", "clld-static", "clld-adaptive", "lcl"} <= with_ce_weight


def test_clld_lambda_is_refused_with_its_new_name(cli, tiny, results):
    code, _, err = cli("run", "--datasets", tiny, "--methods", "clld", *FAST, "--set", "clld.lambda=0.7")
    assert code == 2 and "has no setting 'lambda'" in err and "ce_weight" in err, err


def test_static_ldm_from_the_sibling_ce_run(cli, tiny, results):
    code, out, err = cli("run", "--datasets", tiny, "--methods", "ce,clld-static", *FAST, "--seeds", "1,2",
                         "--set", "clld-static.ldm_from=ce", "--set", "clld-static.top_k=1")
    assert code == 0, err
    for seed in (1, 2):
        ce_run = next(results.glob(f"ce_tiny_*_s{seed}_*"))
        validation = np.array(json.loads((ce_run / "confusion.json").read_text())["validation"])
        (i, j), = confused_pairs(validation, 1) or [(None, None)]
        ldm = np.array(json.loads(next(results.glob(f"clld-static_tiny_*_s{seed}_*/method_state.json"))
                                  .read_text())["ldm"])
        if i is None:  # the ce run confused nothing: the LDM stays uniform
            assert np.all(ldm == 5.0)
        else:
            assert ldm[i, j] == ldm[j, i] == 10.0 and (ldm == 10.0).sum() == 2


def test_static_ldm_from_a_missing_sibling_fails_the_shard(cli, tiny, results):
    code, _, err = cli("run", "--datasets", tiny, "--methods", "clld-static", *FAST,
                       "--set", "clld-static.ldm_from=ce")
    assert code == 1 and "no finished run there" in err


@pytest.mark.parametrize("name,extra", [("cline", []), ("dcl", []), ("lcl", ["--set", "lcl.views=synonym"])])
def test_missing_wordnet_fails_before_any_shard(name, extra, cli, tiny, results, monkeypatch):
    monkeypatch.setenv("BENCH_WORDNET_DIR", "none")  # as on a machine without WordNet
    code, _, err = cli("run", "--datasets", tiny, "--methods", name, *FAST, *extra)
    assert code == 2 and "apt-get install wordnet-base wordnet-sense-index" in err
    assert not results.exists() or not list(results.glob("*/rows.json"))


@pytest.mark.parametrize("method,knob,value,message", [
    ("dcl", "syn_rate", 1.5, "syn_rate in (0, 1]"), ("dcl", "hidden", 0, "hidden and out >= 1"),
    ("dcl", "powernorm_alpha", 2.0, "powernorm_alpha in [0, 1]"), ("lcl", "syn_rate", 0.0, "lcl: syn_rate"),
    ("cline", "lambda_cts", -1.0, "lambda_cts and lambda_rtd must be >= 0"),
    ("cline", "variant", "authors", "cline: variant is released or paper, got 'authors'"),
])
def test_out_of_range_knobs_are_refused_before_training(method, knob, value, message):
    """Every knob's range is checked by its Config, so `clbench run` refuses it before any shard starts."""
    from bench.errors import BenchError
    from bench.registry import METHODS

    with pytest.raises(BenchError, match=re.escape(message)):
        METHODS.get(method).Config(**{knob: value})
    fine = METHODS.get(method).Config()
    assert getattr(fine, knob) != value
