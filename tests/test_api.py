"""The Python API (`import clbench`, bench.api) gives what the command line gives: the rows `clbench run` stores,
the rows and comparison table `clbench results` / `clbench report` read and print, and the same one-line
BenchError for bad input; docs/examples/api_quickstart.py runs."""

from __future__ import annotations

import json
import math
import re
import runpy
import shutil

import pandas as pd
import pytest
from conftest import FIXTURE, ROOT

import clbench
from bench.cli.main import build_parser
from bench.cli.run_options import checked_run_options
from bench.errors import BenchError

KEY = ["run_key", "evaluator", "split", "metric", "label"]
# tiny-bert on the fixture at the tests' scale (conftest.FAST); at lr 5e-3 ce and supcon part ways on the test
# items within two epochs (one leaves both predicting one class), so the comparison has numbers to check
TINY = {"encoder": "tiny-bert", "epochs": 2, "lr": 5e-3, "batch_size": 8, "max_length": 32, "evaluators": "none"}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """ce and supcon on the tiny fixture, seed 1, run once through the API: (its rows, the results folder, the
    data folder). No run counts as collapsed (one epoch may collapse; these tests are about the plumbing)."""
    folder = tmp_path_factory.mktemp("api")
    data = folder / "tiny"
    shutil.copytree(FIXTURE, data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setattr("bench.evaluators.metrics.collapse_note", lambda *args: "")
        rows = clbench.run(methods="ce,supcon", datasets=[data], seeds=[1], results_dir=folder / "results", **TINY)
    return rows, folder / "results", data


def disk_rows(results) -> pd.DataFrame:
    """Every clean row of every run folder, read straight from its rows.json."""
    rows = [row for path in sorted(results.glob("*/rows.json")) for row in json.loads(path.read_text())]
    return pd.DataFrame(rows)


def values(frame: pd.DataFrame) -> dict[tuple, float]:
    """(run key, evaluator, split, metric, label) -> value, NaN-free."""
    frame = frame.fillna({"label": ""})
    return {tuple(str(v) for v in key): float(value) for *key, value in
            frame[[*KEY, "value"]].itertuples(index=False, name=None) if not math.isnan(float(value))}


def test_run_returns_the_rows_stored_on_disk(sweep):
    rows, results, _ = sweep
    assert rows.attrs["results_dir"] == str(results)
    assert sorted(rows["method"].unique()) == ["ce", "supcon"] and set(rows["seed"]) == {1}
    stored = disk_rows(results)
    assert set(rows["run_key"]) == set(stored["run_key"]) and len(stored["run_key"].unique()) == 2
    assert len(rows) == len(stored) and values(rows) == values(stored)
    assert set(rows["collapsed"]) == {0}  # flagged on every row, as clbench.load_results and the report do


def test_a_second_run_skips_the_finished_shards_and_returns_their_rows(sweep):
    rows, results, data = sweep
    written = {p: p.stat().st_mtime_ns for p in results.glob("*/rows.json")}
    again = clbench.run(methods=["ce", "supcon"], datasets=str(data), seeds=1, results_dir=str(results), **TINY)
    assert {p: p.stat().st_mtime_ns for p in results.glob("*/rows.json")} == written  # nothing retrained
    assert values(again) == values(rows)


def test_load_results_reads_what_clbench_results_exports(sweep, cli, tmp_path):
    _, results, _ = sweep
    exported = tmp_path / "rows.csv"
    code, _, err = cli("results", "--results-dir", results, "--export", "csv", "--output", exported)
    assert code == 0, err
    frame = clbench.load_results(results)
    assert frame.attrs["results_dir"] == str(results)
    assert len(frame) == len(pd.read_csv(exported)) and values(frame) == values(pd.read_csv(exported))
    only_ce = clbench.load_results(results, filters=["method=ce"])
    assert set(only_ce["method"]) == {"ce"} and values(only_ce) == values(frame[frame["method"] == "ce"])


def report_csv(cli, results, folder, *extra: str) -> pd.DataFrame:
    """The tidy cells of `clbench report --table compare --format csv` (the table the command prints)."""
    code, _, err = cli("report", "--table", "compare", "--format", "csv", "--bootstrap", "300",
                       "--results-dir", results, "--reports-dir", folder, *extra)
    assert code == 0, err
    return pd.read_csv(next(folder.glob("compare*.csv"))).set_index(["row", "column"])


def test_compare_gives_the_numbers_clbench_report_prints(sweep, cli, tmp_path):
    _, results, _ = sweep
    cells = report_csv(cli, results, tmp_path)
    table = clbench.compare(clbench.load_results(results), bootstrap=300)
    assert table[["dataset", "encoder", "method", "baseline"]].values.tolist() == [["tiny", "tiny-bert", "supcon",
                                                                                      "ce"]]
    row = table.iloc[0]
    # one run: no verdict (a tiny model is often near chance too, and then says so)
    assert row["verdict"] == ("near chance" if row["near_chance"] else "inconclusive")
    assert row["runs"] == 1 and not row["significant"]
    assert pd.isna(row["ci_low"]) and pd.isna(row["p"])  # no interval over one run
    assert row["items_ci_low"] <= row["delta"] <= row["items_ci_high"]  # the secondary, item-level one
    assert row["delta"] == pytest.approx(cells.loc[("supcon", "Δ acc"), "mean"], abs=1e-4)
    assert row["items_ci_low"] == pytest.approx(cells.loc[("supcon", "items CI ‡"), "low"], abs=1e-4)
    assert row["items_ci_high"] == pytest.approx(cells.loc[("supcon", "items CI ‡"), "high"], abs=1e-4)
    assert row["items_p"] == pytest.approx(cells.loc[("supcon", "items CI ‡"), "p"], abs=1e-4)
    assert cells.loc[("supcon", "verdict"), "text"] == row["verdict"]
    assert row["seeds"] == 1 and row["mcnemar"] == cells.loc[("supcon", "McNemar p ‡"), "text"]
    assert table.attrs["title"].startswith("Paired comparison with ce")
    # the other way round, from rows filtered with pandas (the folder still known), and as the printed table
    reverse = report_csv(cli, results, tmp_path / "vs", "--baseline", "supcon")
    stored = clbench.load_results(results)
    flipped = clbench.compare(stored, baseline="supcon", bootstrap=300)
    assert flipped.iloc[0]["delta"] == pytest.approx(reverse.loc[("ce", "Δ acc"), "mean"], abs=1e-4)
    shown = clbench.table(stored[stored["seed"] == 1], "compare", bootstrap=300)
    assert shown.loc["supcon", "Δ acc"] == cells.loc[("supcon", "Δ acc"), "text"]


def test_table_is_the_printed_table(sweep, cli, tmp_path):
    _, results, _ = sweep
    code, out, err = cli("report", "--results-dir", results, "--reports-dir", tmp_path)
    assert code == 0, err
    table = clbench.table(clbench.load_results(results))
    assert f"### {table.attrs['title']}" in out and table.index.name == "dataset"
    line = next(line for line in out.splitlines() if line.startswith(f"| {table.index[0]} |"))
    assert [cell.strip(" *") for cell in line.strip("|").split("|")[1:]] == list(table.iloc[0])


def test_compare_needs_the_folder_of_rows_it_cannot_place(sweep):
    rows, results, _ = sweep
    bare = pd.DataFrame(rows.to_dict("records"))  # no attrs: where the predictions are is unknown
    with pytest.raises(BenchError, match="pass results_dir="):
        clbench.compare(bare)
    assert len(clbench.compare(bare, results_dir=results, bootstrap=50)) == 1
    with pytest.raises(BenchError, match="accuracy reads the runs' test predictions: pass results_dir="):
        clbench.table(bare, "accuracy")
    assert clbench.table(bare, "accuracy", results_dir=results, bootstrap=50).index.name == "method"
    with pytest.raises(BenchError, match="unknown table 'best'"):
        clbench.table(rows, "best")
    with pytest.raises(BenchError, match="--bootstrap must be >= 1"):
        clbench.compare(rows, bootstrap=0)


@pytest.mark.parametrize("given,flags", [
    ({"methods": "nope"}, ["--methods", "nope"]),
    ({"methods": []}, ["--methods", ""]),
    ({"epochs": 0}, ["--epochs", "0"]),
    ({"lr": "fast"}, ["--lr", "fast"]),
    ({"colour": "red"}, ["--set", "colour=red"]),
    ({"clld": {"taux": 5}}, ["--set", "clld.taux=5"]),
    ({"seeds": "3-1"}, ["--seeds", "3-1"]),
    ({"jobs": 0}, ["--jobs", "0"]),
])
def test_bad_input_raises_the_message_of_the_command(cli, tiny, results, given, flags):
    base = {"methods": "ce", "seeds": 1, **given}
    with pytest.raises(BenchError) as raised:
        clbench.run(datasets=[tiny], encoder="tiny-bert", results_dir=results, **base)
    argv = ["--methods", "ce", "--seeds", "1", *flags]
    code, _, err = cli("run", "--datasets", tiny, "--encoder", "tiny-bert", "--results-dir", results, *argv)
    assert code == 2 and err.strip().splitlines()[-1] == f"error: {raised.value}"


def test_a_switch_takes_only_true_or_false(tiny):
    with pytest.raises(BenchError, match="overwrite must be True or False, got 'yes'"):
        clbench.run(methods="ce", datasets=[tiny], overwrite="yes")


def test_keywords_reach_the_run_as_the_same_flags_would(tiny, results):
    from bench.api import run_arguments

    given = run_arguments({"methods": ["ce", "clld", "supcon"], "datasets": [tiny], "encoders": "tiny-bert",
                           "seeds": [1, 2], "results_dir": results, "epochs": 1, "lr": 1e-5, "clld": {"tau": 2},
                           "supcon.lambda": 0.5, "grid": {"clld.ce_weight": [0.25, 0.75]}, "overwrite": True,
                           "save_model": False,
                           "train_size": [20, 40], "evaluators": ["repr"], "checklist_n": 7})
    typed = build_parser().parse_args([
        "run", "--no-progress", "--methods", "ce,clld,supcon", "--datasets", str(tiny), "--encoder", "tiny-bert",
        "--seeds", "1,2", "--results-dir", str(results), "--epochs", "1", "--lr", "1e-5", "--set", "clld.tau=2",
        "--set", "supcon.lambda=0.5", "--grid", "clld.ce_weight=0.25,0.75", "--overwrite", "--no-save-model",
        "--train-size", "20,40", "--evaluators", "repr", "--checklist-n", "7"])
    assert vars(given) == vars(typed)
    opts, request = checked_run_options(given)
    assert opts.knobs == {"clld-adaptive": {"tau": 2.0}, "supcon": {"lambda_": 0.5}}
    assert opts.overrides["lr"] == 1e-5 and opts.grid == (("clld-adaptive.ce_weight", (0.25, 0.75)),)
    assert opts.overwrite and list(opts.seeds) == [1, 2]
    assert [r["train_size"] for r in opts.regimes] == [20, 40] and not request["save_model"]
    assert request["options"].checklist_n == 7 and request["evaluators"] == ("repr",)


def test_a_failed_shard_raises_after_the_sweep(tiny, results, monkeypatch):
    from bench.running.shard import ShardOutcome

    def sweep(shards, opts, report=None):
        return [ShardOutcome(shards[0].spec.key, "failed", "loss became nan")]

    monkeypatch.setattr("bench.running.runner.execute_sweep", sweep)
    with pytest.raises(BenchError, match=r"1 of 1 shard\(s\) failed: ce_tiny_.*: loss became nan .*a rerun skips"):
        clbench.run(methods="ce", datasets=[tiny], results_dir=results, **TINY)


def test_collapsed_runs_are_a_warning_and_flagged(sweep, tiny, results, monkeypatch):
    from bench.running.shard import ShardOutcome

    rows, _, _ = sweep
    ce = [dict(row, collapsed=1) for row in rows.to_dict("records") if row["method"] == "ce"]
    monkeypatch.setattr("bench.running.runner.execute_sweep",
                        lambda shards, opts, report=None: [ShardOutcome(ce[0]["run_key"], "done", rows=ce)])
    with pytest.warns(UserWarning, match=r"1 shard\(s\) collapsed .*" + ce[0]["run_key"]):
        frame = clbench.run(methods="ce", datasets=[tiny], results_dir=results, **TINY)
    assert set(frame["collapsed"]) == {1} and len(frame) == len(ce)


def test_clbench_names_the_api_and_lists_what_the_command_lists(cli):
    import bench.api

    assert clbench.__all__ == bench.api.__all__ and clbench.run is bench.api.run
    for kind, names in (("methods", clbench.list_methods()), ("datasets", clbench.list_datasets()),
                        ("evaluators", clbench.list_evaluators())):
        code, out, _ = cli("list", kind)
        listed = [line.split(":")[0].split()[0] for line in out.splitlines() if line and not line[0].isspace()]
        assert code == 0 and names == listed, kind
    assert "tiny-bert" in clbench.list_encoders() and "ce" in clbench.list_methods()


def test_the_quickstart_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # no patch: whether a run collapses on this CPU or not, the example prints (include_collapsed=True)
    runpy.run_path(str(ROOT / "docs" / "examples" / "api_quickstart.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert re.search(r"\d+ rows, 2 runs in results-quickstart", out)
    assert "clld-adaptive" in out and "delta" in out and "tiny-bert ce" in out and "collapsed" in out
    assert len(list((tmp_path / "results-quickstart").glob("*/rows.json"))) == 2
