"""A collapsed run never looks good (bench.reporting.collapsed): left out of every mean of the tables and summaries
and named in a note, never bold, and flagged by `clbench report` (at the top), `clbench report --html` (a badge),
`clbench status` and the run summary. Result folders are written directly (nothing is trained here; the end-to-end
run with a tiny model that collapses is in tests/test_degenerate_runs.py)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bench.errors import BenchError
from bench.reporting import render, tables
from bench.reporting.collapsed import asked_for, collapsed_keys, flag_runs, split_runs, warning_lines
from bench.reporting.html import build_report
from bench.reporting.resultsview import apply_filters, load_results
from bench.reporting.summary import evaluation_table, evaluator_lines, results_table, summary_table
from bench.results import store
from bench.running.status import shard_states, summary_line
from test_report import cells_of, checklist, contrast, right, write_run

BAD = "ce_trec_tiny-bert_s2_c0"       # collapsed: a high accuracy and a perfect CheckList score that must not count
CE1 = "ce_trec_tiny-bert_s1_c0"
CL1, CL2 = "cl_trec_tiny-bert_s1_c0", "cl_trec_tiny-bert_s2_c0"
SUPCON = "supcon_trec_tiny-bert_s1_c0"  # collapsed, the only run of its method


def flag(run_dir, collapsed: bool) -> None:
    """Set `collapsed` on a run's clean rows, as bench.running.shard does (its evaluator rows do not carry it)."""
    rows = store.read_json(run_dir / store.ROWS)
    store.write_json(run_dir / store.ROWS, [{**r, "collapsed": int(collapsed)} for r in rows])


def run(results, method, seed, n_right, failure, collapsed=False):
    """A trec/tiny-bert run with contrast and checklist rows."""
    run_dir = write_run(results, method, "trec", seed, right(n_right), encoder="tiny-bert",
                        evals={("contrast", "c1"): contrast(0.6, 0.5, 0.4), ("checklist", "k1"): checklist(failure)})
    flag(run_dir, collapsed)
    return run_dir


@pytest.fixture
def folder(tmp_path):
    """trec/tiny-bert: ce seed 1 (60%, failure 30%) and seed 2 collapsed (95%, failure 0%); cl seeds 1-2 (70%,
    75%; failure 20%, 25%); supcon seed 1 collapsed (99%, failure 0%)."""
    results = tmp_path / "results"
    run(results, "ce", 1, 12, 0.30)
    run(results, "ce", 2, 19, 0.0, collapsed=True)
    run(results, "cl", 1, 14, 0.20)
    run(results, "cl", 2, 15, 0.25)
    run(results, "supcon", 1, 20, 0.0, collapsed=True)
    return results


@pytest.fixture
def frame(folder):
    return flag_runs(load_results(folder))


# ----------------------------------------------------------------------------------------------- the policy

def test_the_flag_of_the_clean_rows_reaches_every_row_of_the_run(folder):
    raw = load_results(folder)
    assert set(raw.loc[raw["evaluator"] != "clean", "collapsed"].map(str)) <= {"nan", ""}  # as stored
    flagged = flag_runs(raw)
    assert collapsed_keys(raw) == collapsed_keys(flagged) == [BAD, SUPCON]
    by_run = flagged.groupby("run_key")["collapsed"].unique()
    assert {k: list(v) for k, v in by_run.items()} == {BAD: [1], SUPCON: [1], CE1: [0], CL1: [0], CL2: [0]}
    # so a filter on the flag keeps or drops a run whole, evaluator rows included
    healthy = apply_filters(flagged, ["collapsed=0"])
    assert set(healthy["run_key"]) == {CE1, CL1, CL2} and set(healthy["evaluator"]) == {"clean", "contrast",
                                                                                         "checklist"}


def test_split_leaves_collapsed_runs_out_unless_asked_and_names_them(frame):
    checks = tables.evaluator_rows(frame).drop(columns="collapsed")  # evaluator rows without the flag
    left = split_runs(checks, frame)
    assert left.keys == [BAD, SUPCON] and not left.included
    assert set(left.kept["run_key"]) == {CE1, CL1, CL2} and left.cells(["method"]) == set()
    assert left.notes() == [f"left out of every mean: 2 collapsed run(s) (the model predicts one class whatever "
                            f"the input: not a result): {BAD}, {SUPCON}; show them with --filter collapsed=0,1"]
    kept = split_runs(checks, frame, include=True)
    assert len(kept.kept) == len(checks) and kept.cells(["method"]) == {("ce",), ("supcon",)}
    assert kept.notes()[0].startswith("† = the mean includes 2 collapsed run(s)")
    assert split_runs(checks).keys == []  # without the clean rows nothing says they collapsed
    assert asked_for(["method=ce", "collapsed=0,1"]) and asked_for([" collapsed =1"])
    assert not asked_for(["method=ce"]) and not asked_for(None)
    assert warning_lines([], False) == []
    assert warning_lines([BAD], False)[1:] == [f"  {BAD}"]


# ----------------------------------------------------------------------------------------------- tables

def test_accuracy_means_leave_collapsed_runs_out_and_say_so(frame):
    cells = cells_of(tables.paper_ii(frame))
    ce, supcon = cells[("trec", "tiny-bert ce")], cells[("trec", "tiny-bert supcon")] if \
        ("trec", "tiny-bert supcon") in cells else None
    assert ce["mean"] == pytest.approx(60.0) and ce["n"] == 1          # the collapsed 95% is not averaged in
    assert supcon is None                                               # its only run collapsed: no column
    assert cells[("trec", "tiny-bert cl")]["best"] and not ce["best"]
    notes = tables.paper_ii(frame).attrs["notes"]
    assert any(BAD in n and SUPCON in n and "left out of every mean" in n for n in notes)
    ablation = cells_of(tables.ablation(frame))
    assert ablation[("ce", "trec")]["mean"] == pytest.approx(60.0)


def test_an_included_collapsed_run_is_marked_and_never_best(frame):
    table = tables.paper_ii(frame, include_collapsed=True)
    cells = cells_of(table)
    supcon, ce = cells[("trec", "tiny-bert supcon")], cells[("trec", "tiny-bert ce")]
    assert supcon["mean"] == pytest.approx(100.0) and supcon["text"].endswith("†") and supcon["collapsed"]
    assert ce["mean"] == pytest.approx(77.5) and ce["text"].endswith("†")   # the mean holds the collapsed seed
    assert not supcon["best"] and not ce["best"] and cells[("trec", "tiny-bert cl")]["best"]
    assert not cells[("trec", "tiny-bert cl")]["collapsed"] and table["collapsed"].dtype == bool
    markdown = render.to_markdown(table)
    assert "**100.00 (1) †**" not in markdown and "100.00 (1) †" in markdown and "**72.50 ± 3.54 (2)**" in markdown
    assert r"100.00 (1) \textdagger{}" in render.to_latex(table)


def test_the_robustness_table_never_bolds_a_collapsed_zero(frame):
    column = "CheckList failure rate"
    cells = cells_of(tables.robustness(frame))
    assert cells[("ce", column)]["mean"] == pytest.approx(30.0)
    assert ("supcon", column) not in cells and cells[("cl", column)]["best"]
    assert any(SUPCON in n for n in tables.robustness(frame).attrs["notes"])
    shown = tables.robustness(frame, include_collapsed=True)
    cells = cells_of(shown)
    assert cells[("supcon", column)]["mean"] == 0.0 and not cells[("supcon", column)]["best"]   # lowest, not best
    assert cells[("ce", column)]["text"] == "15.00 ± 21.21 (2) †" and cells[("cl", column)]["best"]
    assert "**0.00 (1)" not in render.to_markdown(shown) and "**22.50 ± 3.54 (2)**" in render.to_markdown(shown)
    # only the checklist rows of the collapsed run are left out when the selection has no clean rows
    only = apply_filters(frame, ["evaluator=checklist"])
    assert cells_of(tables.robustness(only))[("ce", column)]["mean"] == pytest.approx(30.0)


def test_compare_and_vs_paper_follow_the_same_policy(folder, frame):
    from bench.reporting import stats

    keys = sorted(set(frame["run_key"]))
    predictions = stats.load_run_predictions(folder, keys)
    left = tables.compare(frame, predictions, "ce", n_resamples=50)
    assert set(left["row"]) == {"cl"} and cells_of(left)[("cl", "runs")]["text"] == "1 (1 unpaired)"
    assert any(BAD in n for n in left.attrs["notes"])
    kept = tables.compare(frame, predictions, "ce", n_resamples=50, include_collapsed=True)
    assert cells_of(kept)[("cl", "Δ acc")]["text"].endswith("†")     # its baseline ce includes a collapsed seed
    papers = {"trec": {"clld_table2": {"bert": 80.0}}}
    ours = cells_of(tables.vs_paper(frame, papers))[("trec tiny-bert · clld_table2 bert", "ours acc")]
    assert ours["mean"] == pytest.approx(60.0) and "†" not in ours["text"]
    ours = cells_of(tables.vs_paper(frame, papers, include_collapsed=True))[("trec tiny-bert · clld_table2 bert",
                                                                              "ours acc")]
    assert ours["mean"] == pytest.approx(77.5) and ours["text"].endswith("†")


def test_only_collapsed_runs_is_an_error_that_says_so(frame):
    only = frame[frame["method"] == "supcon"]
    with pytest.raises(BenchError, match=rf"but those of 1 collapsed run\(s\).*{SUPCON}.*--filter collapsed=0,1"):
        tables.paper_ii(only)
    assert len(tables.paper_ii(only, include_collapsed=True)) == 1


# ----------------------------------------------------------------------------------------------- clbench report

def test_bench_report_lists_collapsed_runs_at_the_top(cli, folder, tmp_path):
    code, out, err = cli("report", "--results-dir", folder, "--table", "robustness", "--reports-dir",
                         tmp_path / "reports")
    assert code == 0, err
    lines = err.splitlines()
    assert lines[0].startswith("warning: 2 collapsed run(s) (the model predicts one class whatever the input: "
                               "not a result), left out of every table and mean")
    assert lines[1:3] == [f"warning:   {BAD}", f"warning:   {SUPCON}"]
    assert not any("are averaged in" in line for line in lines)       # the mix warnings do not repeat it
    assert "supcon" not in out.split("\n- ")[0] and "**0.00" not in out    # not in the table, never bold
    written = (tmp_path / "reports" / "robustness.md").read_text(encoding="utf-8")
    assert f"left out of every mean: 2 collapsed run(s)" in written and SUPCON in written
    code, out, err = cli("report", "--results-dir", folder, "--filter", "collapsed=0,1", "--reports-dir",
                         tmp_path / "reports")
    assert code == 0, err
    assert "kept by your --filter collapsed=...: marked †, never best" in err.splitlines()[0]
    assert "100.00 (1) †" in out and "**100.00" not in out
    code, out, err = cli("report", "--results-dir", folder, "--table", "robustness", "--filter", "collapsed=0",
                         "--reports-dir", tmp_path / "reports")
    assert code == 0, err   # the flag reaches the evaluator rows: the filter keeps the healthy runs' ones
    assert "30.00 (1)" in out and "collapsed run" not in err
    code, out, err = cli("report", "--results-dir", folder, "--filter", "method=supcon", "--reports-dir",
                         tmp_path / "reports")
    assert code == 2 and err.startswith(f"warning: 1 collapsed run(s)") and "--filter collapsed=0,1" in err


# ----------------------------------------------------------------------------------------------- HTML

def test_the_html_report_shows_a_badge_and_leaves_collapsed_runs_out(folder):
    report = build_report(folder, resamples=50)
    header = report.text.split("</header>")[0]
    assert 'id="collapsed"' in header and "Collapsed runs (2)" in header
    assert f'<span class="badge" title="the model predicts one class whatever the input: not a result">collapsed' \
           f'</span> {SUPCON}</li>' in header
    assert f'<td class="left">{BAD}<span class="badge"' in report.text       # provenance: badge beside the key
    assert f'<td class="left">{CE1}</td>' in report.text                       # a healthy run has none
    robustness = report.text.split('id="table-robustness"')[1].split("</table>")[0]
    assert "supcon" not in robustness and 'class="best">0.00' not in robustness
    assert report.collapsed[0].startswith("2 collapsed run(s)")
    shown = build_report(folder, ["collapsed=0,1"], resamples=50).text
    robustness = shown.split('id="table-robustness"')[1].split("</table>")[0]
    assert '<td class="collapsed">0.00 (1) †<span class="badge"' in robustness
    assert 'class="best collapsed"' not in shown and "kept by the filter" in shown.split("</header>")[0]


# ----------------------------------------------------------------------------------------------- clbench run's summary

def test_the_run_summary_marks_collapsed_runs_instead_of_averaging_them(folder):
    rows = [row for path in sorted(folder.iterdir()) for row in store.read_json(path / store.ROWS)]
    table = summary_table(rows).set_index("method")
    assert table.loc["ce", "accuracy"] == "60.00" and table.loc["ce", "seeds"] == 1
    assert table.loc["ce", "note"] == "1 collapsed seed(s) left out — not results"
    assert table.loc["supcon", "accuracy"] == "collapsed" and table.loc["supcon", "note"] == \
        "1 seed(s), all collapsed — not a result"  # how many ran, not `seeds 0` alone
    assert table.loc["cl", "note"] == "" and table.loc["cl", "accuracy"] == "72.50 ± 3.54"
    from bench.reporting import stats

    predictions = stats.load_run_predictions(folder, sorted({r["run_key"] for r in rows}))
    paired = results_table(rows, predictions).set_index("method")
    assert list(paired.columns)[-2:] == ["wall_s", "note"]
    assert paired.loc["supcon", "Δacc vs ce [95% CI], verdict"] == "—"             # no Δ for a collapsed run
    evaluated = [row for path in sorted(folder.iterdir()) for row in store.run_rows(path)
                 if row["evaluator"] != "clean"]
    (line,) = [line for line in evaluator_lines(rows + evaluated) if line.startswith("checklist")]
    assert line == ("checklist: CheckList failure rate (lower is better): ce 30.0% (1 collapsed run(s) left out), "
                    "cl 22.5%, supcon collapsed — not a result")
    assert "supcon 0.0%" in evaluator_lines(evaluated)[0]   # without the clean rows nothing says it collapsed


def test_the_evaluator_summary_leaves_collapsed_runs_out_with_a_note(folder):
    rows = [row for path in sorted(folder.iterdir()) for row in store.run_rows(path)]
    table = evaluation_table(rows)
    failure = table[table["metric"] == "failure_rate"].set_index("method")["value"]
    assert set(failure.index) == {"ce", "cl"} and failure["ce"] == "0.3"
    assert SUPCON in table.attrs["notes"][0]
    kept = evaluation_table(rows, include_collapsed=True)
    failure = kept[kept["metric"] == "failure_rate"].set_index("method")["value"]
    assert failure["supcon"] == "0 †" and failure["ce"].endswith("†") and not failure["cl"].endswith("†")


def test_collapsed_warning_names_every_collapsed_shard(folder):
    from bench.cli.run_summary import collapsed_warning

    rows = [row for path in sorted(folder.iterdir()) for row in store.run_rows(path)]
    warning = collapsed_warning(rows)
    assert warning.startswith("warning: 2 shard(s) collapsed") and warning.endswith(f"{BAD}, {SUPCON}")
    assert collapsed_warning([r for r in rows if r["run_key"] == CE1]) is None


# ----------------------------------------------------------------------------------------------- clbench status

def test_bench_status_shows_collapsed_shards(cli, folder):
    statuses = {s.key: s for s in shard_states(folder)}
    assert statuses[BAD].state == "done" and statuses[BAD].collapsed and "collapsed" in statuses[BAD].reason
    assert not statuses[CE1].collapsed and statuses[CE1].reason == ""
    assert summary_line(list(statuses.values())) == "5 shard(s): 5 done (2 collapsed: not a result)"
    code, out, err = cli("status", "--results-dir", folder)
    assert code == 0
    assert any(line.startswith(SUPCON) and "collapsed: the model predicts one class" in line
               for line in out.splitlines())
    assert f"warning: 2 shard(s) collapsed" in err and BAD in err


def test_a_run_without_the_flag_is_not_collapsed(tmp_path):
    results = tmp_path / "results"
    write_run(results, "ce", "mr", 1, right(15))  # rows of an older clbench: no collapsed column
    frame = load_results(results)
    assert collapsed_keys(frame) == [] and flag_runs(frame)["collapsed"].eq(0).all()
    assert not shard_states(results)[0].collapsed
    assert not math.isnan(cells_of(tables.paper_ii(frame))[("mr", "minilm ce")]["mean"])
    assert list(pd.DataFrame(summary_table(store.read_json(results / "ce_mr_minilm_s1_c0" / store.ROWS)))
                .columns)[-1] == "wall_s"   # no note column without collapsed runs


def test_summary_figure_leaves_collapsed_runs_out_or_marks_them(folder):
    from bench.reporting import plots

    rows = store.finished_rows(folder)
    left = plots.summary_plot(rows)
    means = {m: v for m, v in zip(left.data["method"], left.data["mean"])}
    assert means == {"ce": pytest.approx(12 / 20), "cl": pytest.approx(14.5 / 20)}  # no ce seed 2, no supcon
    assert f"left out of every mean: 2 collapsed run(s)" in left.figure.get_supxlabel()  # the caption
    kept = plots.summary_plot(rows, filters=["collapsed=0,1"])
    labels = [t.get_text() for t in kept.figure.axes[0].get_xticklabels()]
    assert labels == ["ce†", "cl", "supcon†"] and "† = the mean includes" in kept.figure.get_supxlabel()
    with pytest.raises(BenchError, match="no accuracy rows in the selection but those of 1 collapsed run"):
        plots.summary_plot(rows, filters=["method=supcon"])


def test_the_demo_heatmaps_never_come_from_a_collapsed_run(folder):
    from bench.reporting.sweep_reports import heatmap_run

    assert heatmap_run(store.finished_rows(folder)) == CL1  # supcon's collapsed 99% is not the best method


def test_every_reader_of_the_flag_agrees(tmp_path):
    from bench.reporting.collapsed import flags
    from bench.running.status import is_collapsed

    values = [1, 1.0, "1", True, 2, 0, 0.0, "0", "", None, float("nan"), False, "yes"]
    expected = [True, True, True, True, True, False, False, False, False, False, False, False, False]
    assert list(flags(pd.Series(values, dtype=object))) == expected
    for value, want in zip(values, expected):
        store.write_json(tmp_path / store.ROWS, [{"metric": "accuracy", "collapsed": value}])
        assert is_collapsed(tmp_path) is want, value
