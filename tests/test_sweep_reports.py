"""The reports a finished sweep writes at once (the demo's): the accuracy table as Markdown, the summary figure and
the heatmaps of one run, chosen by `heatmap_run`."""

from __future__ import annotations

from bench.reporting import figures
from bench.reporting.sweep_reports import heatmap_run, write_sweep_reports
from bench.results import store
from conftest import FAST


def clean_row(method: str, seed: int, accuracy: float, dataset: str = "mr") -> dict:
    """The clean test-accuracy row of a run (plus nothing else: heatmap_run reads only these)."""
    return {"run_key": f"{method}_{dataset}_minilm_s{seed}_c0", "method": method, "dataset": dataset,
            "encoder": "minilm", "seed": seed, "evaluator": "clean", "split": "test", "metric": "accuracy",
            "label": "", "value": accuracy}


def test_heatmap_run_is_the_first_seed_of_a_clld_run_even_when_another_method_is_more_accurate():
    rows = [clean_row("ce", 1, 0.9), clean_row("clld-static", 1, 0.3), clean_row("clld-adaptive", 3, 0.5),
            clean_row("clld-adaptive", 2, 0.4)]
    assert heatmap_run(rows) == "clld-adaptive_mr_minilm_s2_c0"


def test_without_clld_heatmap_run_is_the_most_accurate_methods_first_seed():
    rows = [clean_row("ce", 1, 0.9), clean_row("ce", 2, 0.5),            # mean 0.70
            clean_row("cl", 3, 0.8), clean_row("cl", 2, 0.7),            # mean 0.75: the best
            {**clean_row("supcon", 1, 0.99), "split": "validation"},      # not a test accuracy
            {**clean_row("lcl", 1, 0.99), "metric": "macro_f1"},
            {**clean_row("dcl", 1, 0.99), "label": "positive"},
            {**clean_row("cline", 1, 0.99), "evaluator": "contrast"}]
    assert heatmap_run(rows) == "cl_mr_minilm_s2_c0"


def test_no_clean_test_accuracy_no_heatmap_run():
    assert heatmap_run([{**clean_row("ce", 1, 0.9), "split": "validation"}]) is None


def run_rows(results, prefix: str = "") -> list[dict]:
    """Every stored row of the runs under `results` whose key starts with `prefix`."""
    return [row for run in sorted(results.iterdir()) if run.is_dir() and not run.name.startswith(".")
            and run.name.startswith(prefix) for row in store.run_rows(run)]


def test_a_sweep_writes_its_table_summary_and_the_clld_runs_heatmaps_as_pngs(cli, tiny, results, tmp_path,
                                                                             monkeypatch):
    monkeypatch.setattr(figures, "DPI", 30)   # the files, not their resolution, are under test (and 4x faster)
    # two epochs of tiny-bert may collapse, and no heatmap comes from a collapsed run (tests/test_collapsed.py):
    # this test is about the files, so no run counts as collapsed here
    monkeypatch.setattr("bench.evaluators.metrics.collapse_note", lambda *args: "")
    code, _, err = cli("run", "--methods", "ce,clld", "--datasets", tiny, *FAST, "--results-dir", results)
    assert code == 0, err
    rows = run_rows(results)
    (ce,) = {r["run_key"] for r in rows if r["method"] == "ce"}
    (clld,) = {r["run_key"] for r in rows if r["method"] == "clld-adaptive"}
    assert heatmap_run(rows) == clld

    reports = tmp_path / "reports"
    written = write_sweep_reports(results, rows, reports)
    assert written == [reports / "paper-ii.md", reports / "summary.png", reports / f"ldm_{clld}.png",
                       reports / f"confusion-normalised_{clld}.png", reports / f"confusion-normalised_{ce}.png",
                       reports / f"confusion-diff_{ce}_vs_{clld}.png"]  # the baseline's beside it, and the change
    assert all(p.is_file() and p.stat().st_size > 0 for p in written)
    assert all(p.with_suffix(".pdf").is_file() for p in written[1:])   # PDFs beside, not returned
    table = (reports / "paper-ii.md").read_text()
    assert "ce" in table and "clld-adaptive" in table

    only_ce = run_rows(results, "ce_")
    assert heatmap_run(only_ce) == ce
    other = tmp_path / "reports-ce"
    assert write_sweep_reports(results, only_ce, other) == [other / "paper-ii.md", other / "summary.png",
                                                            other / f"confusion-normalised_{ce}.png"]
    assert not list(other.glob("ldm_*"))

    (results / ce / "confusion.json").unlink()   # a figure that cannot be drawn is left out
    third = tmp_path / "reports-3"
    assert write_sweep_reports(results, only_ce, third) == [third / "paper-ii.md", third / "summary.png"]


def test_a_finished_sweeps_reports_are_not_drawn_again(tiny, tmp_path, monkeypatch):
    """Re-running a finished sweep (the demo) writes its table again but reuses every figure whose runs did not
    change (bench.reporting.figurecache.saved); a changed run redraws its own figures only."""
    from bench.reporting import figurecache
    from test_html_report import CE1, CLLD1, fill

    monkeypatch.setattr(figures, "DPI", 30)
    results = fill(tmp_path / "results")
    rows = run_rows(results)
    reports = tmp_path / "reports"
    first = write_sweep_reports(results, rows, reports)
    drawn: list[str] = []
    original = figurecache.builder_named
    monkeypatch.setattr(figurecache, "builder_named", lambda name: drawn.append(name) or original(name))
    assert write_sweep_reports(results, rows, reports) == first and drawn == []
    confusion = store.read_json(results / CE1 / store.CONFUSION)
    confusion["test"] = [[9, 1], [1, 9]]
    store.write_json(results / CE1 / store.CONFUSION, confusion)
    assert write_sweep_reports(results, rows, reports) == first
    assert drawn == ["plots:confusion_plot", "plots:confusion_diff_plot"]  # ce's heatmap and the change
    assert (reports / f"ldm_{CLLD1}.png").is_file()


def test_a_figure_file_overwritten_by_another_is_drawn_again(tmp_path, monkeypatch):
    """Rows A, then rows B (another summary.png), then A again: A's summary is drawn again, not taken from the file
    B overwrote (the index forgets a key whose files another figure has since written)."""
    from bench.reporting import figurecache
    from test_html_report import fill

    monkeypatch.setattr(figures, "DPI", 30)
    results = fill(tmp_path / "results")
    rows = run_rows(results)
    other = [{**r, "value": r["value"] / 2} if r["metric"] == "accuracy" else r for r in rows]
    reports = tmp_path / "reports"
    write_sweep_reports(results, rows, reports)
    write_sweep_reports(results, other, reports)
    drawn: list[str] = []
    original = figurecache.builder_named
    monkeypatch.setattr(figurecache, "builder_named", lambda name: drawn.append(name) or original(name))
    write_sweep_reports(results, rows, reports)
    assert drawn == ["plots:summary_plot"]
