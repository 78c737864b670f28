"""Sweeps beyond methods x datasets x encoders x seeds: knob grids (`--grid`, `--sample`, `--grid-seed`, `--yes`) and
data regimes (`--train-size 8,16`, `--label-noise 0,0.25`). Run keys made before regimes stay valid; a grid gives
each method its own knobs; every mistake is one line before anything runs; a sweep trains every combination once,
labels each row with its combination and regime, and every method sees the same sample of the data."""

from __future__ import annotations

import contextlib
import io
import json
import pickle
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import bench.methods  # noqa: F401  (registers the methods)
from bench.cli.main import build_parser, main
from bench.cli.run_options import checked_run_options
from bench.data.loading import DataRef, load_dataset
from bench.data.regimes import apply_regime
from bench.errors import BenchError
from bench.registry import METHODS
from bench.running import grid
from bench.running.grid import MAX_SHARDS
from bench.spec import ADDED_DEFAULTS, REGIME_DEFAULTS, REGIME_FIELDS, RunSpec, TrainConfig, regime_label
from conftest import FIXTURE, read_fixture

# one quick epoch of tiny-bert per shard (the numbers do not matter here: what was planned, recorded and labelled)
TRAIN = ["--encoder", "tiny-bert", "--epochs", "1", "--batch-size", "8", "--max-length", "32", "--evaluators",
         "none", "--no-progress"]
SWEEP = ["--methods", "ce,supcon", "--train-size", "8,16", "--label-noise", "0,0.25", "--grid",
         "supcon.tau=0.1,0.3", "--seeds", "1"]
REGIMES = [(8, 0.0), (8, 0.25), (16, 0.0), (16, 0.25)]  # (train_size, label_noise) of SWEEP
AXES = (("lr", (1e-5, 2e-5, 3e-5)), ("supcon.tau", (0.1, 0.3)))


def make(**changes) -> RunSpec:
    base = dict(method="ce", dataset="mr", encoder="minilm", seed=1, data_fingerprint="abc123")
    base.update(changes)
    return RunSpec(**base)


def options(argv: list[str]):
    """The checked RunOptions of `clbench ARGV` (nothing planned, loaded or trained)."""
    args = build_parser().parse_args([str(a) for a in argv])
    args.demo = False
    return checked_run_options(args)[0]


def run_folders(results: Path) -> list[Path]:
    return sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")) \
        if results.exists() else []


def read(path: Path):
    return json.loads(path.read_text())


# ----------------------------------------------------------------------------------------------- 1. run keys

def test_run_keys_made_before_regimes_are_unchanged():
    # the keys these specs had before the regime fields existed (bench/spec.py at HEAD, computed once)
    assert make().key == "ce_mr_minilm_s1_77b62d476f"
    tuned = make(method="supcon", dataset="tiny", encoder="tiny-bert", seed=3, data_fingerprint="fp",
                 train=TrainConfig(lr=2e-5, epochs=2), method_config=(("tau", 0.1),))
    assert tuned.key == "supcon_tiny_tiny-bert_s3_e13d684827"
    text = make().canonical()
    assert text.endswith(",data_seed=0")
    for name in REGIME_FIELDS:
        assert f",{name}=" not in text, name
    # a spec.json written before the regime fields existed reads back to the same key
    stored = tuned.to_json()
    for name in REGIME_FIELDS:
        del stored["train"][name]
    assert RunSpec.from_json(stored).key == tuned.key
    # a regime field given at its default is the same run
    assert make(train=TrainConfig(train_size=0, label_noise=0.0, noise_kind="symmetric")).key == make().key


@pytest.mark.parametrize("field, value, shown", [
    ("train_size", 100, "train_size=100"), ("shots", 4, "shots=4"), ("val_size", -1, "val_size=-1"),
    ("label_noise", 0.2, "label_noise=0.2"), ("noise_kind", "asymmetric", "noise_kind=asymmetric"),
])
def test_a_regime_value_enters_the_key(field, value, shown):
    spec = make(train=TrainConfig(**{field: value}))
    assert f",{shown}" in spec.canonical()
    assert spec.key != make().key and spec.combo != make().combo
    assert RunSpec.from_json(spec.to_json()).key == spec.key


def test_combo_is_equal_across_seeds_only():
    base = make(method="supcon", method_config=(("tau", 0.1),))
    other_seed = make(method="supcon", method_config=(("tau", 0.1),), seed=2)
    assert base.key != other_seed.key and base.combo == other_seed.combo
    assert len(base.combo) == 10
    others = [make(method="supcon", method_config=(("tau", 0.3),)),
              make(method="supcon", method_config=(("tau", 0.1),), train=TrainConfig(lr=1e-4)),
              make(method="supcon", method_config=(("tau", 0.1),), train=TrainConfig(train_size=8)),
              make(method="supcon", method_config=(("tau", 0.1),), train=TrainConfig(train_size=16)),
              make(method="supcon", method_config=(("tau", 0.1),), train=TrainConfig(label_noise=0.2)),
              make(method="supcon", method_config=(("tau", 0.1),), dataset="trec")]
    combos = [base.combo, *(o.combo for o in others)]
    assert len(set(combos)) == len(combos)


def test_changed_settings_name_knobs_and_settings_but_no_regime():
    defaults = METHODS.get("supcon").config_fields()
    config = tuple(sorted({**defaults, "tau": 0.1}.items()))
    spec = make(method="supcon", method_config=config, train=TrainConfig(lr=1e-4, train_size=8, label_noise=0.2))
    assert spec.changed_settings(defaults) == {"supcon.tau": 0.1, "lr": 1e-4}
    assert make(method="supcon", method_config=tuple(sorted(defaults.items()))).changed_settings(defaults) == {}


# ----------------------------------------------------------------------------------------------- 2. grids

def test_combinations_are_the_product_of_each_methods_own_axes():
    assert grid.combinations(AXES, "supcon") == [
        ({"lr": 1e-5}, {"tau": 0.1}), ({"lr": 1e-5}, {"tau": 0.3}),
        ({"lr": 2e-5}, {"tau": 0.1}), ({"lr": 2e-5}, {"tau": 0.3}),
        ({"lr": 3e-5}, {"tau": 0.1}), ({"lr": 3e-5}, {"tau": 0.3})]
    # ce has no tau: it gets the training setting only
    assert grid.method_axes(AXES, "ce") == (("lr", (1e-5, 2e-5, 3e-5)),)
    assert grid.combinations(AXES, "ce") == [({"lr": 1e-5}, {}), ({"lr": 2e-5}, {}), ({"lr": 3e-5}, {})]
    # another method's knob never reaches this one
    assert grid.combinations((("clld-adaptive.tau", (1.0, 5.0)),), "supcon") == [({}, {})]
    assert grid.combinations((), "ce") == [({}, {})]


def test_sample_draws_n_distinct_combinations_seeded_by_the_grid_seed():
    full = grid.combinations(AXES, "supcon")

    def draw(seed: int, n: int = 4):
        return grid.combinations(AXES, "supcon", sample=n, grid_seed=seed)

    first = draw(0)
    assert len(first) == 4
    assert len({json.dumps(c, sort_keys=True) for c in first}) == 4  # distinct
    assert all(c in full for c in first)
    assert [full.index(c) for c in first] == sorted(full.index(c) for c in first)  # in product order
    assert draw(0) == first  # deterministic for one grid seed
    assert draw(1) != first  # and another seed draws other combinations
    assert draw(0, 3) != draw(1, 3)
    for n in (0, 6, 7, 100):  # all of them (0: no sampling; N >= the product)
        assert grid.combinations(AXES, "supcon", sample=n, grid_seed=5) == full
    assert grid.combinations(AXES, "ce", sample=4) == grid.combinations(AXES, "ce")  # 3 < 4: all of ce's


def test_shard_count_and_budget_line():
    assert grid.shard_count(AXES, ["ce", "supcon"], 0, 4, 2, 1, 3) == (3 + 6) * 4 * 2 * 3
    assert grid.shard_count(AXES, ["ce", "supcon"], 2, 1, 1, 1, 1) == 2 + 2
    assert grid.budget_line(AXES, ["ce", "supcon"], 0, 5) == \
        "clbench: tuning budget: ce 3 combinations, supcon 6 combinations, x 5 seeds each"
    assert grid.budget_line((("supcon.tau", (0.1, 0.3)),), ["ce", "supcon"], 0, 1) == \
        "clbench: tuning budget: ce 1 combination, supcon 2 combinations, x 1 seed each"
    assert grid.budget_line((), ["ce"], 0, 3) == ""


# ----------------------------------------------------------------------------------------------- 3. regimes

def test_regimes_are_the_product_of_the_lists():
    assert grid.regimes({"label_noise": [0.0, 0.25], "train_size": [8, 16]}) == [
        {"train_size": 8, "label_noise": 0.0}, {"train_size": 8, "label_noise": 0.25},
        {"train_size": 16, "label_noise": 0.0}, {"train_size": 16, "label_noise": 0.25}]
    assert grid.regimes({"shots": [2], "noise_kind": ["symmetric", "asymmetric"], "label_noise": [0.1]}) == [
        {"shots": 2, "label_noise": 0.1, "noise_kind": "symmetric"},
        {"shots": 2, "label_noise": 0.1, "noise_kind": "asymmetric"}]
    assert grid.regimes({}) == [{}]


@pytest.mark.parametrize("lists, message", [
    ({"train_size": [8], "shots": [2]}, "--train-size and --shots both size the training sample; give one"),
    ({"train_size": [0, 8], "shots": [0, 2]}, "--train-size and --shots"),  # only one of the four conflicts
    ({"label_noise": [0.0, 1.5]}, r"--label-noise must be in \[0, 1\)"),
    ({"noise_kind": ["loud"]}, "--noise-kind must be one of symmetric, asymmetric"),
])
def test_a_regime_that_cannot_be_is_a_bench_error(lists, message):
    with pytest.raises(BenchError, match=message):
        grid.regimes(lists)


# ----------------------------------------------------------------------------------------------- 4. CLI errors

def assert_one_line_error(code: int, err: str, results: Path, *fragments: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert not run_folders(results) and not (results / "results.parquet").exists()


TOO_MANY = ",".join(f"{i}e-6" for i in range(1, MAX_SHARDS + 2))  # MAX_SHARDS + 1 learning rates


@pytest.mark.parametrize("args, fragments", [
    (["--methods", "ce", "--grid", "supcon.tau=0.1,0.3"],
     ["--grid supcon.tau", "supcon is not among the methods of this run (ce)", "add it to --methods"]),
    (["--methods", "ce", "--grid", "train_size=8,16"],
     ["--grid train_size", "data regime", "give --train-size 8,16 instead"]),
    (["--methods", "ce", "--grid", "label_noise=0,0.2"], ["data regime", "--label-noise"]),
    (["--methods", "supcon", "--grid", "supcon.tau=0.1,0.1"], ["--grid supcon.tau", "repeated", "list each once"]),
    (["--methods", "supcon", "--grid", "supcon.tau=0.1,0.10"], ["repeated"]),  # the same number
    (["--methods", "supcon", "--grid", "supcon.nope=0.1,0.2"], ["'supcon' has no setting 'nope'", "its settings:",
                                                                "tau"]),
    (["--methods", "ce", "--grid", "nope=1,2"], ["unknown setting 'nope'", "use a training setting", "METHOD.KNOB"]),
    (["--methods", "supcon", "--grid", "supcon.tau=0.1,0.2", "--set", "supcon.tau=0.5"],
     ["--grid supcon.tau", "also set to 0.5", "give it one way"]),
    (["--methods", "ce", "--grid", "lr=1e-5,2e-5", "--lr", "1e-3"], ["--grid lr", "also set to 0.001",
                                                                     "give it one way"]),
    (["--methods", "ce", "--sample", "2"], ["--sample", "add --grid"]),
    (["--methods", "ce", "--grid", f"lr={TOO_MANY}"],
     [f"plans {MAX_SHARDS + 1} shards, more than {MAX_SHARDS}", "add --yes", "--sample N"]),
    (["--methods", "ce", "--train-size", "8", "--shots", "2"], ["--train-size and --shots", "give one"]),
    (["--methods", "ce", "--label-noise", "1.5"], ["--label-noise must be in [0, 1)"]),
    (["--methods", "ce", "--label-noise", "0,1.5"], ["--label-noise must be in [0, 1)"]),
    (["--methods", "ce", "--train-size", "8,8"], ["train_size", "repeated", "list each once"]),
    (["--methods", "ce", "--train-size", "2"], ["--train-size 2 is fewer than the 3 classes", "at least 3"]),
    (["--methods", "ce", "--train-size", "500"], ["--train-size 500 is too large", "give at most"]),
])
def test_a_mistaken_sweep_is_one_line_and_writes_nothing(cli, results, args, fragments):
    code, _, err = cli("run", "--datasets", FIXTURE, *TRAIN, "--results-dir", results, *args)
    assert_one_line_error(code, err, results, *fragments)


def test_a_grid_in_a_config_file_must_be_a_mapping(cli, results, tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text("methods: [ce]\ngrid: [lr, 1e-5]\n")
    code, _, err = cli("run", "--config", config, "--datasets", FIXTURE, *TRAIN, "--results-dir", results)
    assert_one_line_error(code, err, results, "config file: grid must be a mapping", "grid: {lr: [2e-5, 5e-5]}")


def test_yes_accepts_a_large_sweep_and_the_limit_is_inclusive():
    base = ["run", "--methods", "ce", "--datasets", FIXTURE, "--encoder", "tiny-bert"]
    opts = options([*base, "--grid", f"lr={TOO_MANY}", "--yes"])
    assert len(dict(opts.grid)["lr"]) == MAX_SHARDS + 1
    exactly = ",".join(f"{i}e-6" for i in range(1, MAX_SHARDS + 1))
    assert len(dict(options([*base, "--grid", f"lr={exactly}"]).grid)["lr"]) == MAX_SHARDS
    # the limit counts regimes and seeds too
    half = ",".join(f"{i}e-6" for i in range(1, MAX_SHARDS // 2 + 2))
    with pytest.raises(BenchError, match="add --yes"):
        options([*base, "--grid", f"lr={half}", "--train-size", "8,16"])
    with pytest.raises(BenchError, match="add --yes"):
        options([*base, "--grid", f"lr={half}", "--seeds", "1,2"])
    assert options([*base, "--grid", f"lr={half}", "--seeds", "1,2", "--yes"]).seeds == (1, 2)


# ----------------------------------------------------------------------------------------------- 5. config file

def test_a_config_files_grid_and_regimes_equal_the_flags(tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text('methods: [ce, supcon]\ngrid: {lr: [1e-5, 2e-5], supcon.tau: "0.1,0.3"}\n'
                      "train_size: [8, 16]\nlabel_noise: 0.25\n")
    common = ["--datasets", FIXTURE, "--encoder", "tiny-bert"]
    from_file = options(["run", "--config", config, *common])
    from_flags = options(["run", "--methods", "ce,supcon", *common, "--grid", "lr=1e-5,2e-5",
                          "--grid", "supcon.tau=0.1,0.3", "--train-size", "8,16", "--label-noise", "0.25"])
    assert from_file.grid == from_flags.grid == (("lr", (1e-5, 2e-5)), ("supcon.tau", (0.1, 0.3)))
    assert all(isinstance(v, float) for _, values in from_file.grid for v in values)
    assert from_file.regimes == from_flags.regimes == ({"train_size": 8, "label_noise": 0.25},
                                                       {"train_size": 16, "label_noise": 0.25})
    assert "train_size" not in from_file.overrides and "label_noise" not in from_file.overrides
    # a flag wins over the file for its key; the file's other axes and regimes stay
    both = options(["run", "--config", config, *common, "--grid", "lr=3e-5", "--train-size", "32"])
    assert both.grid == (("lr", (3e-5,)), ("supcon.tau", (0.1, 0.3)))
    assert both.regimes == ({"train_size": 32, "label_noise": 0.25},)


def test_a_config_files_sample_grid_seed_and_yes(tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text(f"methods: [ce]\ngrid: {{lr: [{TOO_MANY}]}}\nsample: 2\ngrid_seed: 7\n")
    common = ["--config", config, "--datasets", FIXTURE, "--encoder", "tiny-bert"]
    opts = options(["run", *common])
    assert (opts.sample, opts.grid_seed) == (2, 7)
    opts = options(["run", *common, "--sample", "3", "--grid-seed", "1"])
    assert (opts.sample, opts.grid_seed) == (3, 1)
    with pytest.raises(BenchError, match="add --yes"):
        options(["run", *common, "--sample", "0"])
    config.write_text(f'methods: [ce]\ngrid: {{lr: [{TOO_MANY}]}}\n"yes": true\n')  # quoted: YAML reads yes as true
    assert len(options(["run", *common]).grid[0][1]) == MAX_SHARDS + 1


def test_yes_in_a_config_file_as_written(tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text(f"methods: [ce]\ngrid: {{lr: [{TOO_MANY}]}}\nyes: true\n")
    opts = options(["run", "--config", config, "--datasets", FIXTURE, "--encoder", "tiny-bert"])
    assert len(opts.grid[0][1]) == MAX_SHARDS + 1


def test_the_plan_draws_the_grid_seeds_sample(tmp_path):
    from bench.running.runner import plan_sweep

    argv = ["run", "--methods", "ce,supcon", "--datasets", FIXTURE, "--encoder", "tiny-bert", "--results-dir",
            tmp_path / "results", "--grid", "lr=1e-5,2e-5,3e-5", "--grid", "supcon.tau=0.1,0.3", "--sample", "4"]
    for seed in (0, 1):
        shards = plan_sweep(options([*argv, "--grid-seed", str(seed)]))
        planned = [(s.spec.train.lr, dict(s.spec.method_config)["tau"]) for s in shards if s.spec.method == "supcon"]
        drawn = grid.combinations(AXES, "supcon", 4, seed)
        assert planned == [(train["lr"], knobs["tau"]) for train, knobs in drawn]
        assert sorted(s.spec.train.lr for s in shards if s.spec.method == "ce") == [1e-5, 2e-5, 3e-5]
    assert not (tmp_path / "results").exists()


# ----------------------------------------------------------------------------------------------- 6. end to end

@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """SWEEP trained once on a copy of the tiny fixture: (dataset folder, results folder, stderr)."""
    root = tmp_path_factory.mktemp("sweep")
    dataset = root / "tiny"
    shutil.copytree(FIXTURE, dataset)
    results = root / "results"
    err = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("BENCH_DATA_DIR", raising=False)
        patch.setenv("BENCH_RESULTS_DIR", str(results))
        patch.setenv("HF_HUB_OFFLINE", "1")
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["run", "--datasets", str(dataset), *SWEEP, *TRAIN, "--results-dir", str(results)])
    assert code == 0, err.getvalue()
    return dataset, results, err.getvalue()


def specs_of(results: Path) -> dict[str, dict]:
    return {folder.name: read(folder / "spec.json") for folder in run_folders(results)}


def expected_flipped(dataset: Path, train_size: int, noise: float) -> int:
    """round(noise * n_c) summed over the classes of the clean training sample of `train_size`."""
    clean = apply_regime(load_dataset(str(dataset)), {"train_size": train_size}, 0)
    return sum(int(round(noise * n)) for n in Counter(clean.train.labels.tolist()).values())


def test_the_sweep_plans_every_regime_method_and_combination(sweep):
    _, results, err = sweep
    assert "clbench: 12 shard(s)" in err
    assert "clbench: tuning budget: ce 1 combination, supcon 2 combinations, x 1 seed each" in err
    specs = specs_of(results)
    assert len(specs) == 12
    planned = Counter((s["method"], s["train"]["train_size"], s["train"]["label_noise"],
                       s["method_config"].get("tau")) for s in specs.values())
    expected = Counter([("ce", n, p, None) for n, p in REGIMES]
                       + [("supcon", n, p, tau) for n, p in REGIMES for tau in (0.1, 0.3)])
    assert planned == expected
    assert all(s["train"]["noise_kind"] == "symmetric" and s["train"]["shots"] == 0 for s in specs.values())


def test_every_row_carries_its_combination_and_regime(sweep):
    dataset, results, _ = sweep
    combos = set()
    for key, spec_json in specs_of(results).items():
        spec = RunSpec.from_json(spec_json)
        n, p = spec.train.train_size, spec.train.label_noise
        rows = read(results / key / "rows.json")
        assert rows
        combos.add(spec.combo)
        flipped = expected_flipped(dataset, n, p)
        for row in rows:
            assert row["combo"] == spec.combo
            knobs = json.loads(row["knobs"])
            assert knobs.get("supcon.tau") == (0.1 if spec.method_config and dict(spec.method_config)["tau"] == 0.1
                                               else None)
            assert not set(knobs) & set(REGIME_FIELDS)
            assert (row["train_size"], row["label_noise"], row["noise_kind"]) == (n, p, "symmetric")
            assert (row["shots"], row["val_size"]) == (0, 0)
            if row["evaluator"] == "clean":
                assert row["train_examples"] == n
                assert row["flipped"] == flipped
        regime = spec_json["data"]["regime"]
        assert regime["train_examples"] == n and regime["flipped"] == flipped
        assert len(regime["flipped_ids"]) == flipped
        assert spec_json["data"]["sizes"]["train"] == n
    assert len(combos) == 12
    assert expected_flipped(dataset, 16, 0.25) > 0 and expected_flipped(dataset, 8, 0.25) > 0


def test_the_recorded_flipped_ids_are_the_labels_that_changed(sweep):
    dataset, results, _ = sweep
    original = {row["id"]: row["label"] for row in read_fixture("train")}
    for spec_json in specs_of(results).values():
        regime = {k: spec_json["train"][k] for k in REGIME_FIELDS}
        draw = RunSpec.from_json(spec_json).train.draw(spec_json["seed"])
        assert draw == ((0, spec_json["seed"]) if any(regime[k] != ADDED_DEFAULTS[k] for k in REGIME_FIELDS) else (0,))
        data = apply_regime(load_dataset(str(dataset)), regime, draw)
        changed = sorted(i for i, label in zip(data.train.ids, data.train.labels.tolist())
                         if data.label_names[label] != original[i])
        assert spec_json["data"]["regime"]["flipped_ids"] == changed
        assert bool(changed) == (regime["label_noise"] > 0)


def test_rerunning_the_sweep_trains_nothing(sweep, cli, monkeypatch):
    dataset, results, _ = sweep
    before = {f.name: (f / "rows.json").read_text() for f in run_folders(results)}

    def no_training(*args, **kwargs):
        raise AssertionError("a finished shard was trained again")

    monkeypatch.setattr("bench.running.shard.train_and_evaluate", no_training)
    code, _, err = cli("run", "--datasets", dataset, *SWEEP, *TRAIN, "--results-dir", results)
    assert code == 0, err
    progress = [line.split()[1] for line in err.splitlines() if line.startswith("[")]
    assert progress == ["skipped"] * 12, err
    assert {f.name: (f / "rows.json").read_text() for f in run_folders(results)} == before


def test_status_shows_each_shards_setting(sweep, cli):
    _, results, _ = sweep
    code, out, _ = cli("status", "--results-dir", results)
    assert code == 0
    header, *lines = out.splitlines()
    assert header.split()[:4] == ["shard", "state", "job", "setting"]
    specs = specs_of(results)
    shown = {line.split()[0]: line for line in lines if line.split() and line.split()[0] in specs}
    assert set(shown) == set(specs)
    for key, spec_json in specs.items():
        train = spec_json["train"]
        label = f"n={train['train_size']}" + ("+noise=0.25" if train["label_noise"] else "")
        assert f" {label} " in shown[key], shown[key]
        assert ("supcon.tau=0.1" in shown[key]) == (spec_json["method_config"].get("tau") == 0.1)
    assert sum("n=8" in shown[k] for k in shown) == 6


def test_the_results_frame_names_each_regime_and_filters_by_dataset(sweep):
    from bench.reporting.resultsview import apply_filters, load_results

    _, results, _ = sweep
    frame = load_results(results)
    assert set(frame["dataset"]) == {"tiny[n=8]", "tiny[n=16]", "tiny[n=8+noise=0.25]", "tiny[n=16+noise=0.25]"}
    assert set(frame["base_dataset"]) == {"tiny"}
    assert frame.groupby("dataset")["run_key"].nunique().to_dict() == {
        "tiny[n=8]": 3, "tiny[n=16]": 3, "tiny[n=8+noise=0.25]": 3, "tiny[n=16+noise=0.25]": 3}
    assert len(apply_filters(frame, ["dataset=tiny"])) == len(frame)  # every regime of tiny
    one = apply_filters(frame, ["dataset=tiny[n=8]"])
    assert set(one["dataset"]) == {"tiny[n=8]"} and one["run_key"].nunique() == 3
    assert (one["train_size"] == 8).all() and (one["label_noise"] == 0).all()
    two = apply_filters(frame, ["dataset=tiny[n=8],tiny[n=16+noise=0.25]"])
    assert set(two["dataset"]) == {"tiny[n=8]", "tiny[n=16+noise=0.25]"}
    with pytest.raises(BenchError, match="matches no rows"):
        apply_filters(frame, ["dataset=tiny[n=32]"])


def test_regime_labels():
    assert regime_label({}) == "" and regime_label(TrainConfig().regime()) == ""
    assert regime_label({"train_size": 100, "label_noise": 0.2}) == "n=100+noise=0.2"
    assert regime_label({"shots": 4, "val_size": -1, "label_noise": 0.1, "noise_kind": "asymmetric"}) == \
        "k=4+val=all+noise=0.1-asym"


# ----------------------------------------------------------------------------------------------- 7. draws

def test_each_seed_draws_its_own_sample_shared_by_every_method(sweep, tmp_path):
    dataset, results, _ = sweep
    more, fixed = tmp_path / "results", tmp_path / "fixed"
    code = main(["run", "--datasets", str(dataset), "--methods", "ce,supcon", "--train-size", "8", "--seeds", "2",
                 *TRAIN, "--results-dir", str(more)])
    assert code == 0
    code = main(["run", "--datasets", str(dataset), "--methods", "ce", "--train-size", "8", "--seeds", "1,2",
                 "--data-draw", "fixed", *TRAIN, "--results-dir", str(fixed)])
    assert code == 0
    specs = [*specs_of(results).values(), *specs_of(more).values()]
    digests = {}
    for spec_json in specs:
        train = spec_json["train"]
        assert train["data_draw"] == "per-seed"
        assert spec_json["data"]["regime"]["draw_seeds"] == [0, spec_json["seed"]]
        digests.setdefault((train["train_size"], train["label_noise"], spec_json["seed"]), set()).add(
            (spec_json["method"], spec_json["split_ids"]["train"], spec_json["split_ids"]["test"]))
    at_8 = {seed: {tuple(ids) for _, *ids in digests[(8, 0.0, seed)]} for seed in (1, 2)}
    assert {m for m, *_ in digests[(8, 0.0, 1)] | digests[(8, 0.0, 2)]} == {"ce", "supcon"}
    assert all(len(found) == 1 for found in at_8.values())  # ce and supcon at one seed: one (paired) sample
    assert at_8[1] != at_8[2]  # two seeds: two samples
    train_of = {regime: {t for _, t, _ in found} for regime, found in digests.items()}
    assert train_of[(8, 0.0, 1)] != train_of[(16, 0.0, 1)]  # another train size, another sample
    assert train_of[(8, 0.0, 1)] == train_of[(8, 0.25, 1)]  # noise flips labels of the same sample
    assert train_of[(16, 0.0, 1)] == train_of[(16, 0.25, 1)]
    assert len({t for found in digests.values() for _, _, t in found}) == 1  # test untouched
    drawn = [spec_json["data"]["regime"] for spec_json in specs_of(more).values()]
    assert all(len(regime["train_ids"]) == 8 for regime in drawn)  # the drawn ids are in spec.json
    one_draw = list(specs_of(fixed).values())
    assert {s["train"]["data_draw"] for s in one_draw} == {"fixed"} and len(one_draw) == 2
    assert len({s["split_ids"]["train"] for s in one_draw}) == 1  # --data-draw fixed: every seed, one sample
    rows = [row for path in more.glob("*/rows.json") for row in json.loads(path.read_text())]
    # every row says which draw it had (bench.reporting.pairs pairs runs by it)
    assert {(r["data_seed"], r["val_fraction"], r["data_draw"]) for r in rows} == {(0, 0.1, "per-seed")}


# ----------------------------------------------------------------------------------------------- 8. DataRef

def same_data(a, b) -> None:
    for split in ("train", "validation", "test"):
        x, y = getattr(a, split), getattr(b, split)
        assert x.ids == y.ids and x.texts == y.texts, split
        assert np.array_equal(x.labels, y.labels), split
    assert a.label_names == b.label_names and a.fingerprint == b.fingerprint
    assert a.regime == b.regime and a.validation_source == b.validation_source


def test_a_data_ref_reloads_the_planned_shards_data(sweep):
    from bench.running.evaluation import data_for_run
    from bench.running.runner import plan
    from bench.running.shard import ids_digest

    dataset, results, _ = sweep
    regimes = [{"train_size": 16, "label_noise": 0.25}, {"shots": 3, "label_noise": 0.5, "noise_kind": "asymmetric"},
               {"train_size": 8, "val_size": 3}]
    shards = plan(["ce"], [str(dataset)], ["tiny-bert"], [1], {"epochs": 1, "batch_size": 8, "max_length": 32}, None,
                  regimes=regimes,
                  results_dir=results.parent / "unused")
    assert len(shards) == 3
    plain = load_dataset(str(dataset))
    original = dict(zip(plain.train.ids, plain.train.labels.tolist()))
    for shard in shards:
        ref = shard.source
        assert {**REGIME_DEFAULTS, **dict(ref.regime)} == shard.spec.train.regime()  # defaults left out
        assert ref.draw == (0, 1)  # a per-seed draw travels with the reference
        again = DataRef(ref.name, ref.data_dir, ref.data_seed, ref.val_fraction, regime=ref.regime, draw=ref.draw).load()
        same_data(again, shard.data)
        same_data(pickle.loads(pickle.dumps(ref)).load(), shard.data)  # as a SLURM job receives it
        flipped = sorted(i for i, label in zip(again.train.ids, again.train.labels.tolist()) if original[i] != label)
        assert flipped == shard.data.regime["flipped_ids"]
        assert bool(flipped) == (shard.spec.train.label_noise > 0)
        # without its regime the reference loads the whole, clean data
        assert len(DataRef(ref.name, ref.data_dir, ref.data_seed, ref.val_fraction).load().train) == len(plain.train)
    # a saved run is re-evaluated on the data it was trained on
    noisy = shards[0]
    run_dir = results / noisy.spec.key
    assert run_dir.is_dir()  # the same run as the sweep's ce at n=16, noise 0.25
    spec = RunSpec.from_json(read(run_dir / "spec.json"))
    same_data(data_for_run(run_dir, spec, None), noisy.data)
    assert read(run_dir / "spec.json")["split_ids"]["train"] == ids_digest(noisy.data.train.ids)
