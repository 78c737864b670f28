import dataclasses

import pytest

from bench.errors import BenchError
from bench.spec import ADDED_DEFAULTS, RunSpec, TrainConfig, slug


def make(**changes):
    base = dict(method="ce", dataset="mr", encoder="minilm", seed=1, data_fingerprint="abc123")
    base.update(changes)
    return RunSpec(**base)


def test_canonical_string_names_everything():
    spec = make(method_config=(("tau", 5.0),))
    text = spec.canonical()
    assert text.startswith("ce:dataset=mr,encoder=minilm,seed=1,data=abc123,")
    for name in TrainConfig.field_names():  # the data-regime fields, added later, only when not at their default
        assert (f",{name}=" in text) == (name not in ADDED_DEFAULTS)
    assert text.endswith("ce.tau=5.0")
    regime = make(train=TrainConfig(train_size=100, label_noise=0.2)).canonical()
    assert regime.endswith(",data_seed=0,train_size=100,label_noise=0.2,data_draw=per-seed") and "shots" not in regime
    fixed = make(train=TrainConfig(train_size=100, label_noise=0.2, data_draw="fixed")).canonical()
    assert fixed.endswith(",data_seed=0,train_size=100,label_noise=0.2")  # the key of runs made before draws varied


def test_data_draw_resolves_per_seed_in_a_regime_and_fixed_without_one():
    assert TrainConfig().data_draw == "fixed" and TrainConfig(data_draw="per-seed").data_draw == "fixed"
    assert TrainConfig(shots=4).data_draw == "per-seed" and TrainConfig(label_noise=0.2).data_draw == "per-seed"
    assert TrainConfig(train_size=20, data_draw="fixed").data_draw == "fixed"
    assert TrainConfig(train_size=20).draw(3) == (0, 3) and TrainConfig(train_size=20, data_draw="fixed").draw(3) == (0,)
    with pytest.raises(BenchError, match="--data-draw must be one of"):
        TrainConfig(train_size=20, data_draw="sometimes")


def test_a_spec_written_before_draws_varied_reads_as_one_fixed_draw():
    old = make(train=TrainConfig(train_size=100, data_draw="fixed")).to_json()
    del old["train"]["data_draw"]  # what runs made before the field wrote
    again = RunSpec.from_json(old)
    assert again.train.data_draw == "fixed" and again.key == old["key"]


def test_key_is_readable_and_hashed():
    spec = make(encoder="sentence-transformers/all-MiniLM-L6-v2")
    assert spec.key == f"ce_mr_sentence-transformers--all-MiniLM-L6-v2_s1_{spec.config_hash}"
    assert len(spec.config_hash) == 10


@pytest.mark.parametrize("change", [
    {"seed": 2}, {"dataset": "trec"}, {"encoder": "tiny-bert"}, {"data_fingerprint": "zzz"},
    {"train": TrainConfig(lr=1e-4)}, {"train": TrainConfig(data_seed=1)}, {"method_config": (("tau", 1.0),)},
])
def test_any_change_changes_the_key(change):
    assert make().key != make(**change).key


def test_equal_specs_have_equal_keys():
    assert make().key == make().key
    assert make(train=TrainConfig(lr=2e-5)).key == make(train=TrainConfig(lr=2e-5)).key


def test_json_round_trip():
    spec = make(method_config=(("pairs", ("a", "b")), ("tau", 5.0)), train=TrainConfig(epochs=3))
    again = RunSpec.from_json(spec.to_json())
    assert again == spec and again.key == spec.key


def test_method_version_one_keeps_old_keys_and_a_new_version_gets_its_own():
    old = make(method_config=(("tau", 5.0),))
    assert "version" not in old.canonical()
    stored = old.to_json()
    del stored["method_version"]  # a spec.json written before methods had versions
    assert RunSpec.from_json(stored).key == old.key
    newer = make(method_config=(("tau", 5.0),), method_version=2)
    assert newer.canonical().endswith("ce.tau=5.0,ce.version=2") and newer.key != old.key
    assert RunSpec.from_json(newer.to_json()) == newer


def test_a_renamed_knob_keeps_the_run_key_of_its_old_name():
    """clld's lambda_ became ce_weight (same objective): runs stored before the rename keep their keys."""
    from bench.registry import METHODS
    from bench.spec import method_config

    import bench.methods  # noqa: F401

    config = method_config("clld-adaptive", {"ce_weight": 0.7})
    renamed = make(method="clld-adaptive", method_config=config, method_version=2,
                   key_names=tuple(METHODS.get("clld-adaptive").key_names.items()))
    before = make(method="clld-adaptive", method_config=tuple(sorted(
        ("lambda_" if k == "ce_weight" else k, v) for k, v in config)), method_version=2)
    assert renamed.key == before.key and "clld-adaptive.lambda_=0.7" in renamed.canonical()
    assert RunSpec.from_json(renamed.to_json()) == renamed
    assert make(method="clld-adaptive", method_config=config, method_version=2).key != before.key  # the mapping counts
    with pytest.raises(ValueError, match="share a name"):
        make(method_config=(("a", 1), ("b", 2)), key_names=(("a", "b"),)).canonical()


def test_run_spec_is_stamped_with_the_method_version(monkeypatch):
    from bench.registry import METHODS
    from bench.running.runner import run_spec
    from bench.spec import method_config

    data = type("Data", (), {"name": "mr", "fingerprint": "abc123"})()
    spec = run_spec("clld-adaptive", data, "minilm", 1, TrainConfig(), method_config("clld-adaptive", {}))
    assert spec.method_version == METHODS.get("clld-adaptive").version == 3
    assert spec.key_names == (("ce_weight", "lambda_"),)  # a renamed knob keeps its old name in the key
    monkeypatch.setattr(METHODS.get("ce"), "version", 3)
    assert run_spec("ce", data, "minilm", 1, TrainConfig(), ()).key != make().key


def test_spec_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        make().seed = 3


@pytest.mark.parametrize("bad", [{"epochs": 0}, {"lr": 0.0}, {"pooling": "max"}, {"precision": "fp16"},
                                 {"val_fraction": 0.7}, {"batch_size": 0}])
def test_bad_settings_fail_with_a_message(bad):
    with pytest.raises(BenchError):
        TrainConfig(**bad)


def test_slug_of_paths_and_ids():
    assert slug("/home/me/models/my-bert/") == "my-bert"
    assert slug("bert-base-uncased") == "bert-base-uncased"
    assert slug("org/model") == "org--model"


def test_the_variant_knob_is_in_the_run_key_and_in_the_rows():
    from bench.spec import method_config

    released, paper = (make(method="cline", method_config=method_config("cline", knobs))
                       for knobs in ({}, {"variant": "paper"}))
    assert released.variant == "released" and paper.variant == "paper" and make().variant == ""
    assert released.key != paper.key and "cline.variant=paper" in paper.canonical()


# ----------------------------------------------------------------------------------------------- variant knobs

def cline_knobs(**knobs):
    from bench.spec import method_config

    return dict(method_config("cline", knobs))


IMPLIED = ("weights", "sentence_loss", "redraw_same_word")


def test_each_cline_variant_implies_its_weights_sentence_loss_and_random_word_rule():
    """The default runs the released objective whole, and draws its random words as the released code does (a
    draw equal to the word skips it: redraw_same_word false); `paper` is the paper's fixed weights and Eq. 6, its
    random words drawn again until they differ."""
    released = {"weights": "learned", "sentence_loss": "bce", "redraw_same_word": False}
    assert cline_knobs()["variant"] == "released"
    assert {k: cline_knobs()[k] for k in IMPLIED} == released
    assert {k: cline_knobs(variant="released")[k] for k in IMPLIED} == released
    paper = cline_knobs(variant="paper")
    assert (paper["variant"], paper["weights"], paper["sentence_loss"], paper["redraw_same_word"]) == \
        ("paper", "fixed", "eq6", True)
    # the knobs no variant implies keep their field defaults
    assert {k: v for k, v in paper.items() if k not in ("variant", *IMPLIED)} == \
        {k: v for k, v in cline_knobs().items() if k not in ("variant", *IMPLIED)}


def test_an_explicit_knob_wins_over_the_one_the_variant_implies():
    assert cline_knobs(variant="paper", weights="learned")["weights"] == "learned"
    assert cline_knobs(variant="paper", weights="learned")["sentence_loss"] == "eq6"  # still implied
    assert cline_knobs(sentence_loss="eq6")["sentence_loss"] == "eq6"
    assert cline_knobs(sentence_loss="eq6")["weights"] == "learned"
    assert cline_knobs(redraw_same_word=True)["redraw_same_word"] is True  # the project's earlier draw, released
    assert cline_knobs(variant="paper", redraw_same_word=False)["redraw_same_word"] is False
    with pytest.raises(BenchError, match="variant is released or paper"):
        cline_knobs(variant="authors")


def test_the_run_key_records_the_resolved_knobs_of_each_variant():
    from bench.registry import METHODS

    version = METHODS.get("cline").version
    assert version == 4  # 4: the released random-word rule (redraw_same_word), so version-3 runs are not reused
    released, paper = (make(method="cline", method_config=tuple(sorted(cline_knobs(**k).items())),
                            method_version=version) for k in ({}, {"variant": "paper"}))
    assert released.key != paper.key
    assert "cline.sentence_loss=bce" in released.canonical() and "cline.weights=learned" in released.canonical()
    assert "cline.sentence_loss=eq6" in paper.canonical() and "cline.weights=fixed" in paper.canonical()
    assert "cline.redraw_same_word=False" in released.canonical() and "cline.redraw_same_word=True" in paper.canonical()
    assert released.canonical().endswith(",cline.version=4")
    # the paper variant asked for with its knobs spelt out is the same run as the variant alone
    spelt = make(method="cline", method_version=version, method_config=tuple(sorted(
        cline_knobs(variant="paper", weights="fixed", sentence_loss="eq6", redraw_same_word=True).items())))
    assert spelt.key == paper.key


def test_knobs_a_variant_implies_are_not_reported_as_changed():
    """changed_settings against the defaults of the run's own variant: a `paper` run changed the variant only;
    a knob set against what its variant implies is a change."""
    from bench.registry import METHODS
    from bench.spec import knob_defaults

    cline = METHODS.get("cline")
    assert knob_defaults(cline) == cline.config_fields()
    assert knob_defaults(cline, "paper") == {**cline.config_fields(), "weights": "fixed", "sentence_loss": "eq6",
                                             "redraw_same_word": True}

    def changed(**knobs):
        spec = make(method="cline", method_config=tuple(sorted(cline_knobs(**knobs).items())))
        return spec.changed_settings(knob_defaults(cline, spec.variant or None))

    assert changed() == {}
    assert changed(variant="paper") == {"cline.variant": "paper"}
    assert changed(variant="paper", weights="learned") == {"cline.variant": "paper", "cline.weights": "learned"}
    assert changed(sentence_loss="eq6") == {"cline.sentence_loss": "eq6"}
    assert knob_defaults(METHODS.get("supcon")) == METHODS.get("supcon").config_fields()  # no variant table


def test_variant_knobs_are_generic():
    """Any method's Config may declare VARIANT_KNOBS; method_config applies it between defaults and --set."""
    from dataclasses import dataclass

    from bench.methods.ce import CrossEntropy
    from bench.registry import METHODS
    from bench.spec import method_config

    @dataclass(frozen=True)
    class ToyConfig:
        VARIANT_KNOBS = {"a": {"tau": 1.0}, "b": {"tau": 2.0, "mode": "y"}}
        variant: str = "a"
        tau: float = 1.0
        mode: str = "x"

    class Toy(CrossEntropy):
        Config = ToyConfig

    if "variant-knobs-test" not in METHODS:
        METHODS.add("variant-knobs-test", Toy)
    toy = METHODS.get("variant-knobs-test")
    assert "VARIANT_KNOBS" not in toy.config_fields()  # a class attribute, not a knob
    assert dict(method_config("variant-knobs-test", {})) == {"variant": "a", "tau": 1.0, "mode": "x"}
    assert dict(method_config("variant-knobs-test", {"variant": "b"})) == {"variant": "b", "tau": 2.0, "mode": "y"}
    assert dict(method_config("variant-knobs-test", {"variant": "b", "tau": 3.0})) == \
        {"variant": "b", "tau": 3.0, "mode": "y"}
