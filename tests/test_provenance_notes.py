"""Where a table's runs were built (bench.reporting.provenance_notes): a run from a modified tree (git_commit
"...+dirty") or runs from several commits are named in a note of every table `clbench report` prints and writes,
and on the HTML page (its tables and its header); runs of one clean commit add nothing. On a synthetic results
folder (rows and predictions written directly; nothing is trained)."""

from __future__ import annotations

import contextlib
import io

import pandas as pd
import pytest

from bench.cli.main import main
from bench.reporting.html import build_report
from bench.reporting.provenance_notes import provenance_notes
from test_report import attack, checklist, contrast, right, write_run

DIRTY = "built from a modified tree (git_commit abc123+dirty): 1 of 3 runs: ce_mr_minilm_s2_c0"
SEVERAL = "the 3 runs come from 2 git commits (code that may differ): abc123 (2 runs), abc123+dirty (1 run)"


def clbench(*argv: object) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def results(folder, dirty: bool = True):
    """mr: ce seeds 1-2 and clld-adaptive seed 1 with evaluator rows; ce seed 2 from a modified tree (when
    `dirty`)."""
    evals = {("contrast", "c1"): contrast(0.8, 0.6, 0.5), ("textfooler", "t1"): attack(0.2, 0.7),
             ("checklist", "k1"): checklist(0.10)}
    write_run(folder, "ce", "mr", 1, right(16), evals=evals, commit="abc123")
    write_run(folder, "ce", "mr", 2, right(18), evals=evals, commit="abc123+dirty" if dirty else "abc123")
    write_run(folder, "clld-adaptive", "mr", 1, right(19), evals=evals, commit="abc123")
    return folder


@pytest.fixture
def folder(tmp_path):
    """The runs, all but one from the clean commit `abc123`."""
    return results(tmp_path / "results")


def test_the_notes_name_the_modified_tree_the_runs_and_the_commits():
    rows = pd.DataFrame({"run_key": ["a", "a", "b", "c", "d", "e"],
                         "git_commit": ["1" * 40 + "+dirty", "1" * 40 + "+dirty", "2" * 12, "", "2" * 12, "2" * 12]})
    notes = provenance_notes(rows)
    assert notes[0] == "built from a modified tree (git_commit 1111111111+dirty): 1 of 5 runs: a"
    assert notes[1] == ("the 5 runs come from 2 git commits (code that may differ): 222222222222 (3 runs), "
                        "1111111111+dirty (1 run)")
    assert notes[2] == "1 of 5 runs record no git commit: c"
    assert provenance_notes(rows[rows["run_key"].isin(["b", "d"])]) == []  # one clean commit: nothing to say
    assert provenance_notes(rows.drop(columns="git_commit")) == []          # nothing recorded: nothing to say


def test_a_run_scored_from_a_modified_tree_counts_for_the_tables_that_read_its_scores():
    rows = pd.DataFrame({"run_key": ["a", "b"], "evaluator": ["contrast", "contrast"],
                         "git_commit": ["c1+dirty", "c1"]})
    trained = pd.DataFrame({"run_key": ["a", "b"], "evaluator": ["clean", "clean"], "git_commit": ["c0", "c0"]})
    notes = provenance_notes(rows, pd.concat([rows, trained]))
    assert notes[0] == "built from a modified tree (git_commit c1+dirty): 1 of 2 runs: a"
    assert notes[1].startswith("the 2 runs come from 3 git commits")


@pytest.mark.parametrize("table", ["paper-ii", "ablation", "robustness", "compare"])
def test_every_report_table_carries_the_notes_printed_and_written(folder, tmp_path, table):
    reports = tmp_path / "reports"
    for fmt in ("md", "latex"):
        code, out, err = clbench("report", "--results-dir", folder, "--reports-dir", reports, "--table", table,
                                 "--format", fmt, "--bootstrap", 50)
        assert code == 0, err
        shown = out.replace("\\_", "_")
        assert DIRTY in shown and SEVERAL in shown
    written = next(reports.glob(f"{table}*.md")).read_text()
    assert DIRTY in written and SEVERAL in written


def test_vs_paper_and_the_selection_table_carry_the_notes(folder, tmp_path):
    code, out, err = clbench("report", "--results-dir", folder, "--reports-dir", tmp_path, "--vs-paper")
    assert code == 0, err
    assert "Ours vs published" in out and DIRTY in out
    code, out, err = clbench("report", "--results-dir", folder, "--reports-dir", tmp_path, "--select-by", "validation")
    assert code == 0, err
    selection = out[out.index("Knobs chosen by validation"):]
    assert DIRTY in selection and SEVERAL in selection


def test_runs_of_one_clean_commit_add_no_note(tmp_path):
    folder = results(tmp_path / "results", dirty=False)
    code, out, err = clbench("report", "--results-dir", folder, "--reports-dir", tmp_path, "--table", "robustness")
    assert code == 0, err
    assert "modified tree" not in out and "git commits" not in out


def test_the_html_page_says_so_in_its_header_and_under_its_tables(folder):
    text = build_report(folder, resamples=50).text
    header = text[text.index('id="built-from"'):]
    assert DIRTY in header[:header.index("</div>")]
    # the header, paper-ii, ranking, cost, ablation, compare, vs-paper, robustness and the evaluator summaries
    assert text.count(DIRTY) >= 8


def test_runs_of_one_fixed_draw_are_named_one_draw():
    from bench.reporting.provenance_notes import draw_notes

    rows = pd.DataFrame({"run_key": ["a", "b", "c", "d"], "base_dataset": ["sst2"] * 4,
                         "dataset": ["sst2[n=100]", "sst2[n=100]", "sst2[n=100]", "sst2"],
                         "data_draw": ["per-seed", "fixed", "", "fixed"]})  # "": a row made before draws varied
    (note,) = draw_notes(rows)
    assert note.startswith("one draw: 2 of 3 runs in a few-label or noisy-label regime") and "b, c" in note
    assert draw_notes(rows[rows["run_key"].isin(["a", "d"])]) == []  # per-seed, or no regime: nothing to say
    assert draw_notes(rows.drop(columns="data_draw").iloc[:1])[0].startswith("one draw: 1 of 1")
