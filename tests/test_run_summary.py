"""What `clbench run` prints when it ends (the results table with the paired Δ to ce, one line per evaluator, the
next commands), the sweep's ETA, a shard's relative cost and the demo switch. Tables are built from fabricated run
folders; the end of a run from real tiny-bert runs."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bench.cli.main import build_parser, is_demo
from bench.cli.progress import SweepProgress, duration
from bench.cli.run_options import DEMO_REPORTS, run_options
from bench.cli.run_summary import next_steps, write_demo_reports
from bench.evaluators.base import EvalOptions
from bench.reporting import stats
from bench.reporting.verdicts import task_level
from bench.reporting.summary import SUMMARY_RESAMPLES, evaluator_lines, results_table
from bench.results import store
from bench.running.walltime import shard_weight
from bench.spec import RunSpec, TrainConfig
from conftest import FAST
from test_report import right, write_run

DELTA = "Δacc vs ce [95% CI], verdict"


# ----------------------------------------------------------------------------------------------- the Δ column

@pytest.fixture
def paired(tmp_path):
    """mr: ce and cl, seeds 1-2, on the same 20 items (cl better, by a different amount per seed); trec: cl only."""
    results = tmp_path / "results"
    write_run(results, "ce", "mr", 1, right(12))
    write_run(results, "ce", "mr", 2, right(14, start=3))
    write_run(results, "cl", "mr", 1, right(16, start=5))
    write_run(results, "cl", "mr", 2, right(17, start=11))
    write_run(results, "cl", "trec", 1, right(10))
    rows = [row for run in sorted(results.iterdir()) for row in store.read_json(run / store.ROWS)]
    predictions = stats.load_run_predictions(results, sorted({r["run_key"] for r in rows}))
    return rows, predictions


def delta_cell(table, dataset: str, method: str) -> str:
    """The Δ cell of one row of `results_table`."""
    row = table[(table["dataset"] == dataset) & (table["method"] == method)]
    assert len(row) == 1
    return row[DELTA].iloc[0]


def test_delta_is_the_mean_paired_run_difference_with_its_interval_over_runs_and_the_verdict(paired):
    rows, predictions = paired
    table = results_table(rows, predictions)
    by_key = {(k.split("_")[0], k.split("_")[1], int(k.split("_s")[1].split("_")[0])): f for k, f in predictions.items()}
    per_run = [100 * (by_key["cl", "mr", s]["correct"].mean() - by_key["ce", "mr", s]["correct"].mean()) for s in (1, 2)]
    assert per_run == pytest.approx([100 * 4 / 20, 100 * 3 / 20])   # the fixture is what it says
    cell = delta_cell(table, "mr", "cl")
    match = re.fullmatch(r"([+-]\d+\.\d\d) \[([+-]\d+\.\d\d), ([+-]\d+\.\d\d)\] (\w+) \(2 runs\)", cell)
    assert match, cell
    delta, low, high = map(float, match.groups()[:3])
    assert delta == pytest.approx(np.mean(per_run), abs=0.005)
    t = 12.706  # Student t, 1 degree of freedom, 97.5%
    half = t * np.std(per_run, ddof=1) / np.sqrt(2)  # over runs alone
    items = np.array([(by_key["cl", "mr", s]["correct"].to_numpy(int) - by_key["ce", "mr", s]["correct"].to_numpy(int))
                      for s in (1, 2)])  # the fixture's runs score the same ids in the same order
    level = task_level(per_run, items)  # over runs and test items, as `report --table compare`
    assert (low, high) == pytest.approx((level.low, level.high), abs=0.01)
    assert high - low >= 2 * half - 0.02
    assert match.group(4) == "inconclusive"   # two runs are never a verdict


def test_delta_uses_the_summary_resamples(paired, monkeypatch):
    """The run summary's bootstrap is the quick one (SUMMARY_RESAMPLES), not the report's."""
    calls = []
    real = stats.compare_predictions
    monkeypatch.setattr(stats, "compare_predictions", lambda a, b, n, **kw: calls.append(n) or real(a, b, n, **kw))
    results_table(*paired)
    assert calls and set(calls) == {SUMMARY_RESAMPLES}


def test_baseline_row_and_a_method_without_the_baseline_on_its_dataset_show_a_dash(paired):
    table = results_table(*paired)
    assert delta_cell(table, "mr", "ce") == "—"
    assert delta_cell(table, "trec", "cl") == "—"   # no ce on trec
    assert list(table.columns[-2:]) == [DELTA, "wall_s"]


def test_no_predictions_no_delta_column(paired):
    rows, _ = paired
    assert DELTA not in results_table(rows, None).columns
    assert DELTA not in results_table(rows, {}).columns
    assert list(results_table(rows, None)["accuracy"]) == list(results_table(*paired)["accuracy"])


def test_another_baseline_names_its_column(paired):
    table = results_table(*paired, baseline="cl")
    assert delta_cell(table.rename(columns={"Δacc vs cl [95% CI], verdict": DELTA}), "mr", "cl") == "—"
    ce = delta_cell(table.rename(columns={"Δacc vs cl [95% CI], verdict": DELTA}), "mr", "ce")
    assert ce.startswith(f"{-100 * 7 / 40:+.2f} [")


# ----------------------------------------------------------------------------------------------- evaluator lines

def eval_row(evaluator, metric, value, method="ce", dataset="mr", encoder="minilm", eval_hash="h1", **extra):
    """One evaluator result row as the store keeps it."""
    return {"evaluator": evaluator, "metric": metric, "value": value, "method": method, "dataset": dataset,
            "encoder": encoder, "eval_hash": eval_hash, "label": "", "note": "", "test": "", "capability": "",
            "split": "test", **extra}


def test_checklist_line_is_a_percentage_per_method_lower_is_better_from_overall_rows_of_the_first_settings():
    rows = [eval_row("checklist", "failure_rate", 0.10), eval_row("checklist", "failure_rate", 0.20),
            eval_row("checklist", "failure_rate", 0.05, method="clld-adaptive"),
            eval_row("checklist", "failure_rate", 0.90, test="typos"),               # per test: not overall
            eval_row("checklist", "failure_rate", 0.80, capability="Robustness"),    # per capability
            eval_row("checklist", "failure_rate", 0.70, label="positive"),           # per label
            eval_row("checklist", "failure_rate", 0.99, eval_hash="h2")]             # other settings
    assert evaluator_lines(rows) == ["checklist: CheckList failure rate (lower is better): ce 15.0%, "
                                     "clld-adaptive 5.0%"]


def test_repr_line_is_a_number_higher_is_better_and_clean_rows_are_ignored():
    rows = [eval_row("repr", "cos_gap", 0.1234), eval_row("repr", "uniformity", -1.5),
            eval_row("clean", "accuracy", 0.9)]
    assert evaluator_lines(rows) == ["repr: representation: within- minus across-class cosine (higher is better): "
                                     "ce 0.123"]


def test_a_skipped_evaluator_gives_its_note_and_an_unknown_one_points_to_bench_results():
    rows = [eval_row("contrast", "skipped", math.nan, note="no contrast set for trec"),
            eval_row("mystery", "alpha", 1.0), eval_row("mystery", "beta", 2.0),
            eval_row("repr", "uniformity", -1.5)]   # known, but without its headline metric
    assert evaluator_lines(rows) == [
        "contrast: skipped: no contrast set for trec",
        "mystery: 2 metrics (`clbench results --filter evaluator=mystery`)",
        "repr: 1 metrics (`clbench results --filter evaluator=repr`)"]


def test_skip_markers_beside_results_are_left_out():
    rows = [eval_row("contrast", "consistency", 0.5), eval_row("contrast", "skipped", math.nan, method="cl",
                                                                note="no contrast set")]
    assert evaluator_lines(rows) == ["contrast: contrast-set consistency (original and contrast right) "
                                     "(higher is better): ce 50.0%"]


def test_two_dataset_encoder_groups_prefix_each_method():
    rows = [eval_row("textfooler", "attack_success_rate", 0.4),
            eval_row("textfooler", "attack_success_rate", 0.3, dataset="trec"),
            eval_row("textfooler", "attack_success_rate", 0.2, dataset="trec", method="cl")]
    assert evaluator_lines(rows) == ["textfooler: TextFooler attack success rate (lower is better): mr/minilm/ce "
                                     "40.0%, trec/minilm/ce 30.0%, trec/minilm/cl 20.0%"]
    repr_rows = [eval_row("repr", "cos_gap", 0.5), eval_row("repr", "cos_gap", 0.25, encoder="tiny-bert")]
    assert evaluator_lines(repr_rows) == ["repr: representation: within- minus across-class cosine (higher is "
                                          "better): mr/minilm/ce 0.500, mr/tiny-bert/ce 0.250"]


def test_no_evaluator_rows_no_lines():
    assert evaluator_lines([]) == []
    assert evaluator_lines([eval_row("clean", "accuracy", 0.9)]) == []


# ----------------------------------------------------------------------------------------------- shard weights

SIZES = {"train": 90, "validation": 30, "test": 60}


def spec(method: str, epochs: int = 3, seed: int = 1, **knobs) -> RunSpec:
    return RunSpec(method, "d", "e", seed, "f", TrainConfig(epochs=epochs), tuple(sorted(knobs.items())))


def test_shard_weight_counts_passes_epochs_validations_and_the_test_split():
    assert shard_weight(spec("ce"), SIZES) == 3 * (90 + 30 / 3) + 60 / 3
    assert shard_weight(spec("cl"), SIZES) == 3 * (2 * 90 + 30 / 3) + 60 / 3
    assert shard_weight(spec("ce", epochs=1), SIZES) == 90 + 10 + 20


def test_clld_adaptive_weighs_more_than_ce_on_the_same_data():
    adaptive = shard_weight(spec("clld-adaptive", evals_per_epoch=10), SIZES)
    assert adaptive == 3 * (2 * 90 + 10 * 30 / 3) + 60 / 3
    assert adaptive > shard_weight(spec("ce"), SIZES)


def test_an_unknown_method_counts_one_pass():
    assert shard_weight(spec("mystery"), SIZES) == shard_weight(spec("ce"), SIZES)


# ----------------------------------------------------------------------------------------------- sweep progress

class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def shard(method: str, **knobs):
    """A planned shard as SweepProgress sees it: a spec and data with train/validation/test splits (SIZES)."""
    data = SimpleNamespace(**{split: [None] * n for split, n in SIZES.items()})
    return SimpleNamespace(spec=spec(method, **knobs), data=data)


def test_duration_formats_seconds_minutes_and_hours():
    assert [duration(s) for s in (0, 45, 59.4, 185, 3599, 3720, 7322)] == ["0s", "45s", "59s", "3m05s", "59m59s",
                                                                           "1h02m", "2h02m"]
    assert duration(-3) == "0s"


def test_the_first_shard_is_not_extrapolated_the_eta_comes_from_the_shards_after_it():
    """A sequential sweep whose shards take 0.05 s per unit of weight, the first one 40 s more (start-up, the
    encoder read, the evaluators' resources built: once). Extrapolating the first shard (its time per weight times
    the weight left) said 3.5x the time left; the ETA now waits for the shards after it and is exact."""
    clock = Clock()
    shards = [shard("ce"), shard("cl"), shard("clld-adaptive", evals_per_epoch=10), shard("ce", seed=2)]
    weights = [shard_weight(s.spec, SIZES) for s in shards]
    progress = SweepProgress(shards, clock=clock)
    assert progress.eta() is None
    clock.now += 40 + 0.05 * weights[0]
    assert progress.shard_ended(shards[0].spec.key, trained=True) == ""  # no ETA from the first shard alone
    assert progress.eta() is None
    for i in (1, 2):
        clock.now += 0.05 * weights[i]
        text = progress.shard_ended(shards[i].spec.key, trained=True)
        assert progress.eta() == pytest.approx(0.05 * sum(weights[i + 1:]))  # exactly the time left
        assert text == f"ETA {duration(0.05 * sum(weights[i + 1:]))}"
    clock.now += 0.05 * weights[3]
    assert progress.shard_ended(shards[3].spec.key, trained=True) == ""   # the last one: nothing left
    assert progress.eta() == 0


def test_shards_that_ran_beside_the_first_do_not_make_the_sweep_look_fast():
    """Two workers start two shards at once (after 5 s of start-up); 20 s each. The second ends half a second
    after the first: no ETA from that half second (it would say the sweep is nearly done); once half as long as
    the first shard took has passed, the ETA is within 1.5x of the time left."""
    clock = Clock()
    shards = [shard("ce", seed=i) for i in range(6)]
    progress = SweepProgress(shards, clock=clock)
    ends = [5 + 20 * (i // 2 + 1) + 0.5 * (i % 2) for i in range(6)]  # 25, 25.5, 45, 45.5, 65, 65.5
    etas = []
    for key, end in zip([s.spec.key for s in shards], ends):
        clock.now = 100.0 + end
        progress.shard_ended(key, trained=True)
        etas.append(progress.eta())
    assert etas[:2] == [None, None]
    assert 1 <= etas[2] / (ends[-1] - ends[2]) <= 1.5
    assert etas[-1] == 0


def test_a_skipped_shard_is_not_counted_as_speed():
    clock = Clock()
    shards = [shard("ce"), shard("cl"), shard("clld-adaptive", evals_per_epoch=10), shard("ce", seed=2)]
    weights = [shard_weight(s.spec, SIZES) for s in shards]
    progress = SweepProgress(shards, clock=clock)
    clock.now += 1
    assert progress.shard_ended(shards[0].spec.key, trained=False) == ""   # finished already, skipped
    assert progress.eta() is None
    clock.now += 99
    progress.shard_ended(shards[1].spec.key, trained=True)  # the first that trained here: calibrates nothing
    assert progress.eta() is None
    clock.now += 100
    progress.shard_ended(shards[2].spec.key, trained=True)
    assert progress.eta() == pytest.approx(100 / weights[2] * weights[3])


def test_no_bar_when_stderr_is_not_a_terminal(capsys):
    progress = SweepProgress([shard("ce")], bar=True)
    assert progress.bar is None
    progress.write("[1/1] done")
    progress.close()
    assert capsys.readouterr().err == "[1/1] done\n"


def test_a_bar_on_a_terminal_only_when_asked_for(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert SweepProgress([shard("ce")], bar=False).bar is None
    assert SweepProgress([], bar=True).bar is None
    progress = SweepProgress([shard("ce"), shard("cl")], bar=True)
    assert progress.bar is not None and progress.bar.total == 2
    progress.shard_ended(shard("ce").spec.key, trained=True)
    assert progress.bar.n == 1
    progress.close()


# ----------------------------------------------------------------------------------------------- the demo switch

@pytest.mark.parametrize("argv", [["run"], ["run", "--debug"], ["--debug", "run"], ["run", "--no-progress"],
                                  ["run", "--debug", "--no-progress"]])
def test_bench_run_alone_is_the_demo(argv):
    assert is_demo(argv)


@pytest.mark.parametrize("argv", [["run", "--methods", "ce"], ["run", "--results-dir", "x"], ["list", "methods"],
                                  [], ["--debug"], ["status"], ["run", "--seeds", "1"]])
def test_any_other_arguments_are_not_the_demo(argv):
    assert not is_demo(argv)


def test_main_hands_the_demo_switch_to_the_command(monkeypatch):
    from bench.cli import main as cli_main

    seen = {}

    def fake_run(args) -> int:
        seen[tuple(args.methods or ())] = args.demo
        return 0

    monkeypatch.setitem(cli_main.COMMANDS, "run", fake_run)
    monkeypatch.setattr(cli_main, "configure_logging", lambda **kw: None)
    assert cli_main.main(["run", "--no-progress"]) == 0
    assert cli_main.main(["run", "--methods", "ce"]) == 0
    assert seen == {(): True, ("ce",): False}


def test_the_demo_writes_reports_with_the_evaluator_options_of_any_run():
    """The demo switch adds the reports and nothing else: its evaluator settings are the demo card's, which any
    run on the demo set gets (tests/test_eval_settings.py)."""
    args = build_parser().parse_args(["run"])
    args.demo = True
    demo = run_options(args)
    assert demo.reports_dir == Path("reports") == DEMO_REPORTS
    args.demo = False
    plain = run_options(args)
    assert plain.reports_dir is None
    assert demo.request.options == plain.request.options == EvalOptions(data_dir="")
    assert (demo.methods, demo.datasets, demo.encoders) == (plain.methods, plain.datasets, plain.encoders)


def test_without_the_demo_switch_checklist_n_comes_from_the_flag_and_no_reports_are_written():
    """A namespace without `demo` (any caller but `main`) is not the demo."""
    args = build_parser().parse_args(["run", "--checklist-n", "7"])
    assert run_options(args).request.options.checklist_n == 7
    assert run_options(args).reports_dir is None


# ----------------------------------------------------------------------------------------------- the end of a run

def test_a_local_run_ends_with_the_paired_table_and_the_next_commands(cli, tiny, results, monkeypatch):
    # two epochs of tiny-bert may collapse to one class, and a collapsed ce has no paired Δ (tests/test_collapsed.py):
    # this test is about the table's shape, so no run counts as collapsed here
    monkeypatch.setattr("bench.evaluators.metrics.collapse_note", lambda *args: "")
    code, out, err = cli("run", "--methods", "ce,cl", "--datasets", tiny, *FAST, "--results-dir", results)
    assert code == 0, err
    header = out.splitlines()[0]
    assert DELTA in header and header.split()[-1] == "wall_s"
    ce_row = next(line for line in out.splitlines()[1:] if re.search(r"\bce\b", line))
    cl_row = next(line for line in out.splitlines()[1:] if re.search(r"\bcl\b", line))
    assert "—" in ce_row and re.search(r"[+-]\d+\.\d\d( \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\])?", cl_row)
    keys = sorted(p.name for p in results.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(keys) == 2
    for i, key in enumerate(sorted(keys), 1):
        assert re.search(rf"^\[{i}/2\] done +{re.escape(key)} ", err, re.M)
    assert f"clbench: results in {results} (2 run(s)); next:" in err
    assert f"clbench report --results-dir {results} --html" in err
    assert f"clbench report --results-dir {results} --table compare" in err
    assert f"clbench results --results-dir {results}" in err
    assert f"clbench plot confusion {keys[0]} --results-dir {results}" in err
    assert "clbench plot ldm" not in err   # no clld run
    assert "clbench: reports:" not in err   # not the demo

    code, out, err = cli("run", "--methods", "cl", "--datasets", tiny, *FAST, "--results-dir", results)
    assert code == 0, err
    assert "Δacc" not in out and re.search(r"\bcl\b", out)   # no ce in this sweep: no paired column
    assert "next:" in err and "clbench report" in err


def test_write_demo_reports_says_where_the_reports_are(cli, tiny, results, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("bench.evaluators.metrics.collapse_note", lambda *args: "")  # a collapsed run has no table
    assert cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--results-dir", results)[0] == 0
    rows = [row for run in results.iterdir() if run.is_dir() and not run.name.startswith(".") for row in store.run_rows(run)]
    written = write_demo_reports(rows, results, tmp_path / "reports")
    err = capsys.readouterr().err
    assert written and all(p.is_file() for p in written)
    assert f"clbench: reports: {', '.join(str(p) for p in written)}" in err
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert write_demo_reports(rows, results, blocked / "reports") == []
    assert "clbench: no reports written:" in capsys.readouterr().err


def test_next_steps_name_the_results_folder_unless_it_is_the_default(monkeypatch, tmp_path):
    keys = ["ce_d_e_s1_x", "clld-adaptive_d_e_s1_y"]
    elsewhere = next_steps(SimpleNamespace(results_dir=tmp_path / "r", grid=(), regimes=({},)), keys)
    assert all(f" --results-dir {tmp_path / 'r'}" in step for step in elsewhere)
    assert any(step.startswith("clbench plot ldm clld-adaptive_d_e_s1_y ") for step in elsewhere)
    assert any(step.startswith("clbench plot confusion ce_d_e_s1_x ") for step in elsewhere)
    monkeypatch.chdir(tmp_path)
    for default in (Path("results").resolve(), Path("results")):
        steps = next_steps(SimpleNamespace(results_dir=default, grid=(), regimes=({},)), keys[:1])
        assert not any("--results-dir" in step for step in steps)
        assert not any("plot ldm" in step for step in steps)
        assert steps[0].startswith("clbench results ")
        assert not any("select-by" in step or "plot curve" in step for step in steps)


def test_next_steps_offer_only_what_will_work_on_collapsed_runs():
    """Reports leave collapsed runs out: with every run collapsed they would exit 2, so they are not offered; a
    comparison needs a ce run and another method's, neither collapsed."""
    opts = SimpleNamespace(results_dir=Path("elsewhere"), grid=(), regimes=({},))
    keys = ["ce_d_e_s1_x", "cl_d_e_s1_y"]
    steps = next_steps(opts, keys, collapsed=set(keys))
    assert not any("clbench report" in step for step in steps)
    assert steps[0].startswith("clbench results --results-dir elsewhere --filter collapsed=0,1")
    steps = next_steps(opts, keys, collapsed={"ce_d_e_s1_x"})
    assert not any("--table compare" in step for step in steps) and any("--html" in step for step in steps)
    assert any(step.startswith("clbench plot confusion cl_d_e_s1_y") for step in steps)
    assert any("--table compare" in step for step in next_steps(opts, keys))


def test_after_a_grid_and_regimes_the_next_steps_select_on_validation():
    grid = SimpleNamespace(results_dir=Path("elsewhere"), grid=(("lr", (1e-5, 2e-5)),), regimes=({}, {"shots": 8}))
    steps = next_steps(grid, ["ce_d_e_s1_x", "cl_d_e_s1_y"])
    assert any("--table compare --select-by validation" in step for step in steps)
    assert any(step.startswith("clbench plot curve --results-dir elsewhere --select-by validation")
               for step in steps)
    assert not any("evaluate --selected" in step for step in steps)  # no request: nothing said of evaluators
    for evaluators, said in (((), True), (("repr",), False)):
        grid.request = SimpleNamespace(evaluators=evaluators)
        steps = next_steps(grid, ["ce_d_e_s1_x"])
        assert any(s.startswith("clbench evaluate --selected --results-dir elsewhere") for s in steps) == said


def test_the_delta_is_shown_for_runs_of_a_data_regime(paired):
    """A few-label run's table row names its regime (`mr[n=100]`): the Δ must still find its paired runs."""
    rows, predictions = paired
    regime_rows = [{**row, "train_size": 100} for row in rows]
    table = results_table(regime_rows, predictions)
    assert delta_cell(table, "mr[n=100]", "cl").endswith("inconclusive (2 runs)")


def test_a_skip_reason_is_said_once_per_sweep(capsys):
    """Each shard of a sweep meets the same skip (no contrast set for the dataset): its reason is printed for the
    first, `(as above)` for the rest; a new command (a new `said`) says it again."""
    from bench.cli.common import print_evaluations

    skip = SimpleNamespace(evaluator="contrast", status="skipped", message="no contrast set for 'mr'", seconds=0.0)
    said: set = set()
    print_evaluations([skip], said)
    print_evaluations([skip], said)
    err = capsys.readouterr().err
    assert err.count("no contrast set for 'mr'") == 1 and "contrast: skipped (as above)" in err
    print_evaluations([skip], set())
    assert "no contrast set for 'mr'" in capsys.readouterr().err
