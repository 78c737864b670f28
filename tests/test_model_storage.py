"""How a run's model is stored and kept: model.safetensors in float32 or float16 (bench.results.modelfile), the
float16 check (bench.training.precision), the keep policy (`--keep-models`, bench.running.keeping), the
safetensors damage checks (bench.results.runfiles), the default reports folder (bench.results.store.reports_dir)
and all of it end to end through the CLI. Each test's docstring names the mistake it catches."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from bench.cli.main import main
from bench.errors import BenchError
from bench.results import manifest, modelfile, runfiles, store
from bench.results.manifest import Damaged
from bench.results.names import CHECKPOINT, LEGACY_MODEL, MODEL, ROWS, TRAIN_LOG
from bench.running import keeping
from bench.running.outcome import ShardOutcome
from bench.spec import REGIME_FIELDS
from bench.training import precision
from conftest import FIXTURE, ROOT

# a tiny-bert sweep on the tiny fixture, quick on the CPU (the runs may collapse: nothing here needs them not to)
TRAIN = ["--encoders", "tiny-bert", "--epochs", "2", "--lr", "5e-3", "--max-length", "32", "--no-progress"]


# ------------------------------------------------------------------------------------------------ helpers

class Toy(nn.Module):
    """A method as model_state sees it: an encoder and a head (stored), a projector (method-only, never stored),
    and an integer buffer (stored, never cast)."""

    def __init__(self, seed: int = 0):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.encoder = nn.Linear(2, 2, bias=False)
        self.head = nn.Linear(2, 2)
        self.projector = nn.Linear(2, 3)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=generator))
        self.encoder.register_buffer("steps", torch.arange(3) + seed)


class FakeTrainer:
    """predict(test) computes the logits from the method's live weights; counts its calls."""

    def __init__(self, method: nn.Module):
        self.method = method
        self.calls = 0

    def predict(self, test: torch.Tensor) -> np.ndarray:
        self.calls += 1
        with torch.no_grad():
            return self.method.head(self.method.encoder(test)).numpy()

    def require_finite_outputs(self, x: np.ndarray, what: str) -> np.ndarray:
        return x


def flip_model() -> Toy:
    """A toy whose encoder weight 1.0001 rounds to 1.0 in float16 (head: identity, no bias), so that an item
    [1, 1.00005] is class 0 in float32 and class 1 once rounded; [2, 0] is class 0 either way."""
    toy = Toy()
    with torch.no_grad():
        toy.encoder.weight.copy_(torch.tensor([[1.0001, 0.0], [0.0, 1.0]]))
        toy.head.weight.copy_(torch.eye(2))
        toy.head.bias.zero_()
    return toy


def items(flipping: int, n: int = 1000) -> torch.Tensor:
    """n test items of which `flipping` change their predicted class when flip_model is rounded to float16."""
    return torch.tensor([[1.0, 1.00005]] * flipping + [[2.0, 0.0]] * (n - flipping))


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().view(torch.int32)


def weights(method: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in method.state_dict().items()}


def run_folder(tmp_path: Path, name: str = "run") -> Path:
    """A run folder with a manifest (as a shard leaves one): its spec written through runfiles."""
    run_dir = tmp_path / "results" / name
    run_dir.mkdir(parents=True, exist_ok=True)
    runfiles.write_json(run_dir, store.SPEC, {"key": name})
    return run_dir


def one_line_error(run_dir: Path) -> str:
    with pytest.raises(BenchError) as refused:
        modelfile.require_model(run_dir)
    message = str(refused.value)
    assert "\n" not in message
    return message


def tiny_bert(pooling: str) -> nn.Module:
    """A method around a tiny BERT (which has a pooler) under `pooling`."""
    from transformers import BertConfig, BertModel

    from bench.encoders.models import HFEncoder

    torch.manual_seed(0)
    config = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16)
    method = nn.Module()
    method.encoder = HFEncoder(BertModel(config), pooling)
    method.head = nn.Linear(8, 2)
    return method


# ------------------------------------------------------------------------------------------------ precision

def test_round_to_half_keeps_the_rounding_at_exactly_the_agreement_threshold():
    """Catches: `>` for `>=` at HALF_AGREEMENT; rounding a copy instead of the live weights; returning the
    trained logits instead of the rounded model's."""
    toy, test = flip_model(), items(5)  # 995 of 1000 agree: exactly 0.995
    trainer = FakeTrainer(toy)
    logits = trainer.predict(test)
    agreement, kept = precision.round_to_half(trainer, toy, test, logits)
    assert agreement == 0.995 == precision.HALF_AGREEMENT
    assert toy.encoder.weight[0, 0].item() == 1.0  # the live weight is the rounded one
    for name, tensor in modelfile.model_state(toy).items():
        if tensor.is_floating_point():
            assert torch.equal(tensor, tensor.half().float()), name
    np.testing.assert_array_equal(kept, trainer.predict(test))  # the rounded model's logits
    assert (kept.argmax(1) != logits.argmax(1)).sum() == 5


def test_round_to_half_restores_the_trained_weights_bit_exactly_below_the_threshold():
    """Catches: weights left rounded when the agreement is too low (not restoring), a restore that is not
    bit-exact, and returning the rounded model's logits instead of the given ones."""
    toy, test = flip_model(), items(6)  # 994 of 1000: below
    with torch.no_grad():
        toy.head.bias.copy_(torch.tensor([1e-9, -3.3e-9]))  # float16 would make these 0
    before = weights(toy)
    trainer = FakeTrainer(toy)
    logits = trainer.predict(test)
    agreement, kept = precision.round_to_half(trainer, toy, test, logits)
    assert agreement == pytest.approx(0.994)
    assert kept is logits
    for name, tensor in toy.state_dict().items():
        if tensor.is_floating_point():
            assert torch.equal(bits(tensor), bits(before[name])), name
        else:
            assert torch.equal(tensor, before[name]), name
    assert trainer.calls == 2  # the trained prediction and one with the rounded weights


def test_round_to_half_leaves_a_model_beyond_float16s_range_alone():
    """Catches: rounding (to inf) a weight beyond 65504 instead of giving up, and checking `>=` 65504 (the
    largest finite float16, which is fine)."""
    toy, test = flip_model(), items(0, n=10)
    with torch.no_grad():
        toy.head.weight[1, 0] = 70000.0
    before, trainer = weights(toy), FakeTrainer(toy)
    logits = trainer.predict(test)
    assert precision.round_to_half(trainer, toy, test, logits) == (None, logits)
    assert trainer.calls == 1 and all(torch.equal(bits(v), bits(before[k]))
                                      for k, v in toy.state_dict().items() if v.is_floating_point())
    with torch.no_grad():
        toy.head.weight[1, 0] = -precision.FLOAT16_MAX  # exactly the largest: rounds to itself
    agreement, _ = precision.round_to_half(trainer, toy, test, trainer.predict(test))
    assert agreement is not None


def test_round_to_half_rounds_only_what_the_model_file_stores():
    """Catches: rounding (and range-checking) every parameter of the method instead of model_state's -- a
    method-only projector beyond float16's range must neither block the check nor be rounded."""
    toy, test = flip_model(), items(0, n=20)
    with torch.no_grad():
        toy.projector.weight.fill_(1e6 + 0.5)
    projector = bits(toy.projector.weight)
    trainer = FakeTrainer(toy)
    agreement, _ = precision.round_to_half(trainer, toy, test, trainer.predict(test))
    assert agreement == 1.0
    assert torch.equal(bits(toy.projector.weight), projector)
    assert toy.encoder.weight[0, 0].item() == 1.0


@pytest.mark.parametrize("agreement, asked, dtype", [
    (0.995, "auto", "float16"), (1.0, "auto", "float16"), (0.9949, "auto", "float32"), (None, "auto", "float32"),
    (1.0, "float32", "float32"), (None, "float32", "float32")])
def test_storage_picks_float16_only_at_or_above_the_threshold_under_auto(agreement, asked, dtype):
    """Catches: a strict `>` at 0.995, float16 under --model-precision float32, float16 when the range check
    failed (None)."""
    chosen, about = precision.storage(agreement, asked)
    assert chosen == about["dtype"] == dtype
    assert about["test_agreement_float16"] == agreement and about["why"]
    if asked == "float32":
        assert "--model-precision float32" in about["why"]
    elif agreement is None:
        assert "range" in about["why"]


def test_storage_refuses_an_unknown_precision():
    """Catches: an unknown --model-precision silently stored as float32."""
    with pytest.raises(ValueError, match="model-precision"):
        precision.storage(1.0, "bfloat16")


# ------------------------------------------------------------------------------------------------ the file

def test_float16_model_is_a_safetensors_file_read_back_widened_into_float32(tmp_path):
    """Catches: storing float32 whatever the dtype asked, casting integer buffers, storing the method-only
    projector, a pickle (zip) instead of safetensors, and not widening float16 into the float32 model."""
    from safetensors import safe_open

    run_dir = run_folder(tmp_path)
    toy = Toy(seed=1)
    modelfile.save_model(run_dir, toy, "float16", {"why": "test"})
    path = run_dir / MODEL
    assert modelfile.has_model(run_dir) and modelfile.stored_dtype(run_dir) == "float16"
    assert not zipfile.is_zipfile(path) and runfiles.safetensors_problem(path) == ""
    with safe_open(path, framework="pt") as handle:
        assert json.loads(handle.metadata()["clbench"]) == {"dtype": "float16", "why": "test"}
    first = path.read_bytes()
    modelfile.save_model(run_dir, toy, "float16", {"why": "test", "more": 1, "and": [2]})
    modelfile.save_model(run_dir, toy, "float16", {"why": "test"})
    assert path.read_bytes() == first  # the same weights, the same bytes (metadata order included)
    state = modelfile.read_state(run_dir)
    assert set(state) == {"encoder.weight", "encoder.steps", "head.weight", "head.bias"}
    assert state["encoder.weight"].dtype == torch.float16 and state["encoder.steps"].dtype == torch.int64
    assert manifest.load(run_dir)["files"][MODEL]["size"] == path.stat().st_size

    fresh = Toy(seed=2)
    projector = fresh.projector.weight.detach().clone()
    modelfile.load_model(run_dir, fresh)
    for name in ("encoder.weight", "head.weight", "head.bias"):
        got, trained = fresh.state_dict()[name], toy.state_dict()[name]
        assert got.dtype == torch.float32
        assert torch.equal(got, trained.half().float()), name
    assert torch.equal(fresh.encoder.steps, toy.encoder.steps)
    assert torch.equal(fresh.projector.weight, projector)  # never stored, never loaded


def test_float32_model_round_trips_bit_exactly(tmp_path):
    """Catches: rounding a float32-stored model (to float16 or anything else) on the way to or from disk."""
    run_dir = run_folder(tmp_path)
    toy, fresh = Toy(seed=1), Toy(seed=2)
    modelfile.save_model(run_dir, toy, "float32")
    assert modelfile.stored_dtype(run_dir) == "float32"
    assert modelfile.read_state(run_dir)["head.weight"].dtype == torch.float32
    modelfile.load_model(run_dir, fresh)
    for name in ("encoder.weight", "head.weight", "head.bias"):
        assert torch.equal(bits(fresh.state_dict()[name]), bits(toy.state_dict()[name])), name
    with pytest.raises(ValueError, match="float32 or float16"):
        modelfile.save_model(run_dir, toy, "bfloat16")


@pytest.mark.parametrize("pooling, stored", [("cls", False), ("mean", False), ("pooler", True)])
def test_model_state_leaves_out_the_bert_pooler_unless_it_pools(pooling, stored):
    """Catches: storing the pooler that --pooling cls/mean never reads, and dropping it under --pooling pooler."""
    method = tiny_bert(pooling)
    keys = set(modelfile.model_state(method))
    assert any(k.startswith("encoder.model.pooler.") for k in method.state_dict())
    assert any(k.startswith("encoder.model.pooler.") for k in keys) is stored
    assert "head.weight" in keys and any(k.startswith("encoder.model.embeddings.") for k in keys)


def test_a_model_without_its_unused_pooler_loads_and_one_that_needs_it_does_not(tmp_path):
    """Catches: load_model demanding the pooler it left out (strict loading), and accepting a file without the
    pooler into an encoder that pools with it."""
    run_dir = run_folder(tmp_path)
    modelfile.save_model(run_dir, tiny_bert("cls"), "float32")
    assert not any(k.startswith("encoder.model.pooler.") for k in modelfile.read_state(run_dir))
    modelfile.load_model(run_dir, tiny_bert("cls"))
    with pytest.raises(BenchError, match="does not fit"):
        modelfile.load_model(run_dir, tiny_bert("pooler"))


def test_a_legacy_model_pt_still_loads_and_is_replaced_by_a_new_save(tmp_path):
    """Catches: load_model reading model.safetensors only (older runs' model.pt), preferring model.pt over a
    newer model.safetensors, and a new save leaving the old model.pt (and its manifest entry) behind."""
    run_dir = run_folder(tmp_path)
    toy = Toy(seed=3)
    runfiles.save_torch(run_dir, LEGACY_MODEL, {k: v.clone() for k, v in toy.state_dict().items()
                                                if k.startswith(("encoder.", "head."))})
    assert modelfile.has_model(run_dir) and modelfile.model_name(run_dir) == LEGACY_MODEL
    assert modelfile.stored_dtype(run_dir) == "float32"
    fresh = Toy(seed=4)
    modelfile.load_model(run_dir, fresh)
    assert torch.equal(fresh.head.weight, toy.head.weight) and torch.equal(fresh.encoder.weight, toy.encoder.weight)

    modelfile.save_model(run_dir, Toy(seed=5), "float16")
    assert not (run_dir / LEGACY_MODEL).exists() and LEGACY_MODEL not in manifest.load(run_dir)["files"]
    assert modelfile.model_name(run_dir) == MODEL and modelfile.stored_dtype(run_dir) == "float16"


def test_drop_model_notes_why_and_a_new_save_clears_the_note(tmp_path):
    """Catches: dropping without a note (commands could not say why), leaving the file or its manifest entry,
    reporting the wrong bytes freed, and a `dropped` note that outlives a model written again."""
    run_dir = run_folder(tmp_path)
    modelfile.save_model(run_dir, Toy(), "float32")
    size = (run_dir / MODEL).stat().st_size
    assert modelfile.why_gone(run_dir) == ""
    assert modelfile.drop_model(run_dir, "not kept: because") == size
    assert not modelfile.has_model(run_dir) and modelfile.why_gone(run_dir) == "not kept: because"
    record = manifest.load(run_dir)
    assert MODEL not in record["files"] and record["dropped"] == {MODEL: "not kept: because"}
    assert runfiles.problems(run_dir, deep=True) == []  # a dropped model is not damage

    modelfile.save_model(run_dir, Toy(), "float32")  # manifest.record clears the note
    assert modelfile.why_gone(run_dir) == "" and MODEL not in manifest.load(run_dir).get("dropped", {})
    modelfile.require_model(run_dir)  # there: no error


def test_require_model_says_why_and_hints_keep_models_only_where_it_helps(tmp_path):
    """Catches: a message that does not say why the model is gone, a multi-line error, no retrain hint, and the
    `--keep-models all` hint for a model moved aside as damaged (keeping would not have helped)."""
    never = run_folder(tmp_path, "never")
    message = one_line_error(never)
    assert "never" in message and "--overwrite" in message and "--keep-models all" in message
    with pytest.raises(BenchError):
        modelfile.read_state(never)

    dropped = run_folder(tmp_path, "dropped")
    modelfile.save_model(dropped, Toy(), "float16")
    modelfile.drop_model(dropped, "not kept: --keep-models best kept other_run_s1, the best")
    message = one_line_error(dropped)
    assert "other_run_s1" in message and "--overwrite" in message and "--keep-models all" in message

    damaged = run_folder(tmp_path, "damaged")
    modelfile.save_model(damaged, Toy(), "float16")
    manifest.move_aside(damaged, [MODEL], "its content differs from what was written (SHA-256 mismatch)")
    message = one_line_error(damaged)
    assert "SHA-256 mismatch" in message and "moved to damaged/" in message and "--overwrite" in message
    assert "--keep-models" not in message


def test_require_model_gives_no_keep_models_hint_for_an_hf_only_save_format(tmp_path):
    """Catches: the --keep-models all hint where --save-format hf (not the keep policy) left the run without
    model.safetensors (the note bench/running/shard.py writes then)."""
    run_dir = run_folder(tmp_path)
    modelfile.drop_model(run_dir, modelfile.HF_ONLY)
    message = one_line_error(run_dir)
    assert "--save-format hf" in message and "--overwrite" in message
    assert "--keep-models all" not in message


# ------------------------------------------------------------------------------------------------ run files

def test_gzip_json_lines_of_the_same_rows_are_the_same_bytes(tmp_path, monkeypatch):
    """Catches: gzip's header holding the time of writing or the temporary file's name, so that a rerun of the
    same run writes other bytes (its predictions then hash differently)."""
    import gzip

    from bench.results import atomic

    clock = iter([1_000_000_000.0, 1_000_000_500.0])
    monkeypatch.setattr(gzip.time, "time", lambda: next(clock))
    rows = [{"id": "1", "text": "é"}, {"id": "2"}]
    atomic.write_jsonl_gz(tmp_path / "a.jsonl.gz", rows)
    atomic.write_jsonl_gz(tmp_path / "b.jsonl.gz", rows)
    assert (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()
    assert runfiles.read_jsonl_gz(tmp_path, "a.jsonl.gz") == rows


def test_write_bytes_records_the_file_and_a_changed_byte_is_damage(tmp_path):
    """Catches: write_bytes not recording the file in the manifest (its damage would go unseen)."""
    run_dir = run_folder(tmp_path)
    runfiles.write_bytes(run_dir, "blob.bin", b"0123456789")
    entry = manifest.load(run_dir)["files"]["blob.bin"]
    assert entry["size"] == 10 and entry["sha256"] == manifest.digest_bytes(b"0123456789")[1]
    assert runfiles.read_bytes(run_dir, "blob.bin") == b"0123456789"
    (run_dir / "blob.bin").write_bytes(b"0123456780")
    with pytest.raises(Damaged, match="SHA-256"):
        runfiles.read_bytes(run_dir, "blob.bin")


def test_a_truncated_or_garbled_safetensors_file_is_damaged(tmp_path):
    """Catches: a cut safetensors file passing (the header alone checked), a garbled header passing, and
    `clbench verify` (problems, deep) not reading an unlisted model.safetensors."""
    good = run_folder(tmp_path, "good")
    modelfile.save_model(good, Toy(), "float16")
    data = (good / MODEL).read_bytes()
    assert runfiles.safetensors_problem(good / MODEL) == ""
    runfiles.check_readable(good, MODEL)

    cases = {"cut": data[:-3], "longer": data + b"\0\0", "header": b"\xff" * 8 + data[8:], "empty": b"",
             "text": b"version https://git-lfs.github.com/spec/v1\n"}
    for name, content in cases.items():
        run_dir = tmp_path / "loose" / name  # no manifest: the content alone must tell
        run_dir.mkdir(parents=True)
        (run_dir / MODEL).write_bytes(content)
        assert runfiles.safetensors_problem(run_dir / MODEL), name
        with pytest.raises(Damaged, match="not a safetensors file"):
            runfiles.check_readable(run_dir, MODEL)
        found = runfiles.problems(run_dir, deep=True)
        assert [d.name for d in found] == [MODEL], name
        if name != "longer":  # safetensors itself may read a file with trailing bytes
            with pytest.raises(Damaged):
                modelfile.read_state(run_dir)


def test_store_run_writes_files_then_model_then_rows_and_drops_the_checkpoint(tmp_path):
    """Catches: rows written before the model (a killed process would leave a finished run without it), the
    checkpoint kept, and a model written where the callback is None."""
    run_dir = run_folder(tmp_path)
    runfiles.save_torch(run_dir, CHECKPOINT, {"epoch": 1})
    toy, order = Toy(), []

    def save() -> None:
        order.append(((run_dir / TRAIN_LOG).is_file(), (run_dir / store.PREDICTIONS).is_file(),
                      (run_dir / ROWS).exists()))
        modelfile.save_model(run_dir, toy, "float16")

    rows = [{"evaluator": "clean", "metric": "accuracy", "value": 0.5}]
    runfiles.store_run(run_dir, {TRAIN_LOG: {"best_epoch": 1}, store.PREDICTIONS: [{"id": "a"}]}, save, rows)
    assert order == [(True, True, False)]
    assert runfiles.read_json(run_dir, ROWS) == rows and runfiles.read_jsonl_gz(run_dir, store.PREDICTIONS) == [
        {"id": "a"}]
    assert not (run_dir / CHECKPOINT).exists() and CHECKPOINT not in manifest.load(run_dir)["files"]
    assert modelfile.stored_dtype(run_dir) == "float16"

    other = run_folder(tmp_path, "other")
    runfiles.store_run(other, {TRAIN_LOG: {}}, None, rows)
    assert runfiles.is_finished(other) and not modelfile.has_model(other)


# ------------------------------------------------------------------------------------------------ keep policy

def clean_rows(method: str, seed: int, val: float, test: float = 0.5, dataset: str = "d", encoder: str = "e",
               **regime) -> list[dict]:
    """A run's clean rows: per-label validation rows first (never the run's accuracy), then the overall ones."""
    base = {"method": method, "dataset": dataset, "encoder": encoder, "seed": seed, "evaluator": "clean", **regime}
    return [{**base, "split": "validation", "metric": "accuracy", "label": "x", "value": 1.0 - val},
            {**base, "split": "test", "metric": "accuracy", "label": "", "value": test},
            {**base, "split": "validation", "metric": "accuracy", "label": "", "value": val}]


def outcome(key: str, *args, status: str = "done", **kwargs) -> ShardOutcome:
    """A shard's outcome; an evaluator's row first (never read as the run's accuracy or group)."""
    rows = [{"evaluator": "repr", "split": "validation", "metric": "accuracy", "label": "", "value": 0.0,
             "seed": 0}] + clean_rows(*args, **kwargs)
    return ShardOutcome(key, status, rows=rows)


def sweep_outcomes() -> list[ShardOutcome]:
    return [outcome("ce_s1", "ce", 1, 0.5, test=0.99), outcome("ce_s10", "ce", 10, 0.8), outcome("ce_s2", "ce", 2, 0.8),
            outcome("ce_n100_s1", "ce", 1, 0.1, train_size=100),
            outcome("supcon_s1", "supcon", 1, 0.3, status="skipped"), outcome("supcon_s2", "supcon", 2, 0.9),
            outcome("ce_other_s1", "ce", 1, 0.2, encoder="e2")]


def test_runs_are_ranked_best_first_on_validation_ties_the_lowest_seed():
    """Catches: keeping the worst run, ranking by test instead of validation accuracy, reading a per-label row or
    an evaluator's row as the run's accuracy, ties broken by the highest seed or by the seed as text (10 < 2), and
    groups that ignore the encoder or the data regime."""
    best = keeping.ranked_per_group(sweep_outcomes())
    by_kept = {ranked[0]: sorted(ranked[1:]) for ranked in best.values()}
    assert by_kept == {"ce_s2": ["ce_s1", "ce_s10"], "ce_n100_s1": [], "supcon_s2": ["supcon_s1"],
                       "ce_other_s1": []}
    group = next(g for g, ranked in best.items() if ranked[0] == "ce_n100_s1")
    assert group[:3] == ("ce", "d", "e") and "100" in group[3:]
    assert len(group) == 3 + len(REGIME_FIELDS)


def keep_setup(tmp_path: Path) -> tuple[Path, list[ShardOutcome]]:
    outcomes = sweep_outcomes()
    for o in outcomes:
        modelfile.save_model(run_folder(tmp_path, o.key), Toy(), "float16")
    return tmp_path / "results", outcomes


def kept_models(results: Path) -> set[str]:
    return {p.parent.name for p in results.glob(f"*/{MODEL}")}


@pytest.mark.parametrize("policy", ["all", "none"])
def test_only_best_drops_models(tmp_path, policy):
    """Catches: a keep policy other than `best` dropping anything."""
    results, outcomes = keep_setup(tmp_path)
    assert keeping.apply_keep_policy(results, outcomes, policy) == ""
    assert len(kept_models(results)) == len(outcomes)


def test_keep_best_drops_the_others_and_says_whom_it_kept(tmp_path):
    """Catches: dropping the best instead of the others, dropping nothing for a skipped (earlier) shard, a
    dropped run's message not naming the kept run, and a lease left behind on a dropped run."""
    results, outcomes = keep_setup(tmp_path)
    line = keeping.apply_keep_policy(results, outcomes, "best")
    assert kept_models(results) == {"ce_s2", "ce_n100_s1", "supcon_s2", "ce_other_s1"}
    assert "dropped 3 other(s)" in line and "4 method x dataset x encoder group(s)" in line
    message = one_line_error(results / "ce_s10")
    assert "not kept" in message and "ce_s2" in message and "--keep-models all" in message
    assert "supcon_s2" in one_line_error(results / "supcon_s1")
    assert not list(results.glob("*/lease.json"))
    assert keeping.apply_keep_policy(results, outcomes, "best") == ""  # nothing left to drop: nothing to say


def test_keep_best_keeps_the_best_run_that_still_has_its_model(tmp_path):
    """Catches: "keeping" a best run whose model an earlier sweep already dropped, leaving its group with none."""
    results, outcomes = keep_setup(tmp_path)
    modelfile.drop_model(results / "ce_s2", "not kept: an earlier sweep's")
    keeping.apply_keep_policy(results, outcomes, "best")
    assert {"ce_s10"} == {key for key in kept_models(results) if key in ("ce_s1", "ce_s2", "ce_s10")}
    assert "ce_s10" in one_line_error(results / "ce_s1")


@pytest.mark.parametrize("status", ["failed", "held", "stopped"])
def test_keep_best_drops_nothing_while_a_shard_is_unfinished(tmp_path, status):
    """Catches: dropping models while the group's best may be among the unfinished shards, silently."""
    results, outcomes = keep_setup(tmp_path)
    outcomes[0].status = status
    line = keeping.apply_keep_policy(results, outcomes, "best")
    assert len(kept_models(results)) == len(outcomes)
    assert "1 unfinished" in line


HOLD = ("import sys; from bench.results import lease; held = lease.acquire(sys.argv[1]); print('held', flush=True);"
        " sys.stdin.read(); held.release()")


def test_keep_best_leaves_a_run_another_live_process_holds_alone(tmp_path):
    """Catches: dropping the model of a run another runner is at (e.g. retraining it) instead of leaving it."""
    results, outcomes = keep_setup(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(results / "ce_s10")], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        line = keeping.apply_keep_policy(results, outcomes, "best")
    finally:
        holder.communicate("", timeout=30)
    assert kept_models(results) == {"ce_s10", "ce_s2", "ce_n100_s1", "supcon_s2", "ce_other_s1"}
    assert "dropped 2 other(s)" in line and "1 busy run(s)" in line
    assert modelfile.why_gone(results / "ce_s10") == ""


def spec(method: str, seed: int, encoder: str = "bert-base") -> SimpleNamespace:
    return SimpleNamespace(method=method, dataset="d", encoder=encoder, seed=seed,
                           train=SimpleNamespace(**{f: 0 for f in REGIME_FIELDS}))


def test_disk_line_speaks_from_ten_gib_and_not_under_none():
    """Catches: a line for small sweeps (the threshold), none for 2,000 bert-base runs, and one under
    --keep-models none (which keeps nothing)."""
    assert keeping.disk_line([spec("ce", s) for s in range(24)], "all") == ""  # 24 x 438 MB = 9.8 GiB
    assert keeping.disk_line([spec("ce", s) for s in range(25)], "all") != ""  # 10.2 GiB
    assert keeping.disk_line([spec("ce", s, "tiny-bert") for s in range(500)], "all") == ""
    big = [spec(m, s) for m in ("ce", "supcon") for s in range(1000)]
    line = keeping.disk_line(big, "all")
    assert "2000 runs" in line and "816 GB" in line and "would keep 2 of them" in line
    best = keeping.disk_line(big, "best")
    assert best and "under --keep-models best" in best and "would keep" not in best
    assert keeping.disk_line(big, "none") == ""


# ------------------------------------------------------------------------------------------------ reports folder

def test_reports_dir_sits_beside_the_results_folder(tmp_path, monkeypatch):
    """Catches: every results folder sharing ./reports, a trailing slash or `.` giving a `reports-` or
    `reports-.` folder."""
    assert store.reports_dir("results") == Path("reports")
    assert store.reports_dir("results-mine") == Path("reports-results-mine")
    assert store.reports_dir("results-mine/") == Path("reports-results-mine")
    assert store.reports_dir("/a/b/runs") == Path("/a/b/reports-runs")
    assert store.reports_dir("/a/b/results/") == Path("/a/b/reports")
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    assert store.reports_dir(".") == tmp_path / "reports-project"


def test_reports_dir_of_the_parent_folder(tmp_path, monkeypatch):
    """Catches: `..` taken literally (a folder named `reports-..` inside the working directory)."""
    inner = tmp_path / "project" / "inner"
    inner.mkdir(parents=True)
    monkeypatch.chdir(inner)
    assert store.reports_dir("..").resolve() == tmp_path / "reports-project"


# ------------------------------------------------------------------------------------------------ end to end

@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """ce and supcon, seeds 1,2, repr evaluated, --keep-models best: the pristine results folder (tests copy it)."""
    base = tmp_path_factory.mktemp("keep")
    shutil.copytree(FIXTURE, base / "tiny")
    results = base / "sweep"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(base)
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.delenv("BENCH_DATA_DIR", raising=False)
        code = main(["run", "--methods", "ce,supcon", "--datasets", str(base / "tiny"), "--seeds", "1,2", *TRAIN,
                     "--evaluators", "repr", "--keep-models", "best", "--results-dir", str(results)])
    assert code == 0
    return results


@pytest.fixture
def swept(sweep, results, tmp_path, monkeypatch) -> Path:
    """A copy of the sweep in this test's results folder ($BENCH_RESULTS_DIR), the working directory tmp_path."""
    shutil.copytree(sweep, results)
    monkeypatch.chdir(tmp_path)
    return results


def runs_of(results: Path) -> list[Path]:
    return sorted(p.parent for p in results.glob(f"*/{ROWS}"))


def expected_best(results: Path) -> dict[str, str]:
    """Method -> the run --keep-models best must keep, from the runs' own rows: highest validation, lowest seed."""
    ranked: dict[str, list] = {}
    for run_dir in runs_of(results):
        rows = json.loads((run_dir / ROWS).read_text())
        val = next(r["value"] for r in rows if r["split"] == "validation" and r["metric"] == "accuracy")
        ranked.setdefault(rows[0]["method"], []).append((-val, rows[0]["seed"], run_dir.name))
    return {method: min(runs)[2] for method, runs in ranked.items()}


def eval_values(run_dir: Path) -> dict[str, float]:
    (path,) = list((run_dir / store.EVALS).glob("repr-*.json"))
    stored = json.loads(path.read_text())
    assert stored["status"] == "done"
    return {r["metric"]: r["value"] for r in stored["rows"]}


def test_keep_best_sweep_keeps_one_model_per_method_and_explains_the_others(swept, cli):
    """Catches: keeping every model (or none), keeping another than the best on validation, deleting a dropped
    run's results with its model, an evaluate error that does not name the kept run or is more than one line,
    and `clbench verify` taking a dropped model for damage."""
    runs = runs_of(swept)
    assert len(runs) == 4
    best = expected_best(swept)
    assert kept_models(swept) == set(best.values())
    assert not list(swept.glob(f"*/{LEGACY_MODEL}"))
    for run_dir in runs:
        assert eval_values(run_dir)  # its evaluation stays
        if run_dir.name in best.values():
            continue
        kept = best[run_dir.name.split("_")[0]]
        code, _, err = cli("evaluate", run_dir.name, "--evaluators", "repr")
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1, err
        assert kept in lines[0] and "--overwrite" in lines[0] and "not kept" in lines[0]
    code, out, err = cli("verify")
    assert code == 0 and "no problems" in out + err, out + err


def test_kept_model_is_the_rounded_one_the_run_evaluated(swept, cli):
    """Catches: storing float32 when float16 agrees (or float16 when it does not), train_log and file metadata
    disagreeing, and a run whose in-memory model (its predictions and evaluators) is not the one on disk: a later
    `clbench evaluate` must give the very numbers the run's own repr evaluation gave."""
    from safetensors import safe_open

    dtypes = []
    for run_dir in sorted(swept / key for key in kept_models(swept)):
        assert (run_dir / MODEL).is_file() and not (run_dir / LEGACY_MODEL).exists()
        about = json.loads((run_dir / TRAIN_LOG).read_text())["model_storage"]
        agreement = about["test_agreement_float16"]
        assert 0.0 <= agreement <= 1.0
        assert about["dtype"] == modelfile.stored_dtype(run_dir) == (
            "float16" if agreement >= precision.HALF_AGREEMENT else "float32")
        with safe_open(run_dir / MODEL, framework="pt") as handle:
            assert json.loads(handle.metadata()["clbench"]) == about
        dtypes.append(about["dtype"])
    assert "float16" in dtypes  # the tiny runs agree fully once rounded

    run_dir = next(swept / key for key in sorted(kept_models(swept)) if modelfile.stored_dtype(swept / key) ==
                   "float16")
    state = modelfile.read_state(run_dir)
    assert {t.dtype for t in state.values() if t.is_floating_point()} == {torch.float16}
    assert not any(k.startswith("encoder.model.pooler.") for k in state)  # --pooling cls: never read
    trained = eval_values(run_dir)
    (stored,) = list((run_dir / store.EVALS).glob("repr-*.json"))
    written = json.loads(stored.read_text())["rows"][0]["finished_at"]
    code, _, err = cli("evaluate", run_dir.name, "--evaluators", "repr", "--overwrite")
    assert code == 0, err
    assert json.loads(stored.read_text())["rows"][0]["finished_at"] != written  # scored again, from the file
    assert eval_values(run_dir) == trained


def test_keep_none_keeps_no_model_and_no_save_model_with_best_is_refused(cli, tiny, results, tmp_path,
                                                                         monkeypatch):
    """Catches: --keep-models none still storing a model (or a model_storage claiming a dtype), and
    --no-save-model --keep-models best accepted (contradictory) or training before it is refused."""
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, "--seeds", "1", *TRAIN, "--evaluators", "repr",
                       "--keep-models", "none")
    assert code == 0, err
    (run_dir,) = runs_of(results)
    assert modelfile.model_name(run_dir) is None and eval_values(run_dir)
    assert json.loads((run_dir / TRAIN_LOG).read_text())["model_storage"]["dtype"] is None
    assert "--keep-models none" in one_line_error(run_dir)

    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, "--seeds", "2", *TRAIN, "--evaluators", "none",
                       "--no-save-model", "--keep-models", "best")
    assert code == 2 and "--no-save-model" in err and "--keep-models best" in err
    assert runs_of(results) == [run_dir] and not list(results.glob("*_s2_*"))


def test_keep_models_best_in_a_config_file_works_like_the_flag(cli, tiny, results, tmp_path, monkeypatch):
    """Catches: `keep_models` read from --config but not applied (every model kept)."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "sweep.yaml"
    config.write_text(f"methods: ce\ndatasets: {tiny}\nseeds: [1, 2]\nkeep_models: best\n")
    code, _, err = cli("run", "--config", config, *TRAIN, "--evaluators", "none")
    assert code == 0, err
    assert len(runs_of(results)) == 2
    assert kept_models(results) == set(expected_best(results).values())
    assert "--keep-models best: kept" in err


def test_model_precision_float32_stores_float32(cli, tiny, results, tmp_path, monkeypatch):
    """Catches: --model-precision float32 ignored (float16 stored where it agrees)."""
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, "--seeds", "1", *TRAIN, "--evaluators", "none",
                       "--model-precision", "float32")
    assert code == 0, err
    (run_dir,) = runs_of(results)
    assert modelfile.stored_dtype(run_dir) == "float32"
    assert {t.dtype for t in modelfile.read_state(run_dir).values() if t.is_floating_point()} == {torch.float32}
    about = json.loads((run_dir / TRAIN_LOG).read_text())["model_storage"]
    assert about["dtype"] == "float32" and "--model-precision float32" in about["why"]


def test_report_writes_beside_its_results_folder_never_into_the_working_directory(sweep, cli, tmp_path,
                                                                                  monkeypatch):
    """Catches: `clbench report` writing into ./reports (shared by every results folder) instead of
    reports-<name> beside --results-dir."""
    shutil.copytree(sweep, tmp_path / "work" / "mine")
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("report", "--results-dir", "work/mine", "--table", "compare", "--filter", "collapsed=0,1")
    assert code == 0, err
    written = sorted(p.name for p in (tmp_path / "work" / "reports-mine").iterdir())
    assert written and all(name.startswith("compare") for name in written), written
    assert not (tmp_path / "reports").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["mine", "reports-mine"]


def test_evaluate_a_run_whose_model_was_moved_aside_gives_no_keep_models_hint(swept, cli):
    """Catches: `clbench evaluate` telling a user whose model was damaged (and moved aside) to keep models, which
    would not have helped (require_model itself leaves that hint out there)."""
    run_dir = swept / sorted(kept_models(swept))[0]
    manifest.move_aside(run_dir, [MODEL], "its content differs from what was written (SHA-256 mismatch)")
    assert "--keep-models" not in one_line_error(run_dir)
    code, _, err = cli("evaluate", run_dir.name, "--evaluators", "repr")
    assert code == 2 and "SHA-256 mismatch" in err and "--overwrite" in err
    assert "--keep-models all" not in err


def test_run_options_say_the_keep_policy_the_request_holds():
    """Catches: the command or the API applying `all` to a sweep asked to keep `best` or `none` (both read
    RunOptions.keep_models)."""
    from bench.running.options import RunOptions
    from bench.running.outcome import ShardRequest

    bare = RunOptions(("ce",), ("mr",), ("minilm",), (1,), Path("results"))
    assert bare.keep_models == "all"  # no request built yet
    for policy in ("best", "none"):
        assert replace(bare, request=ShardRequest(keep_models=policy)).keep_models == policy
