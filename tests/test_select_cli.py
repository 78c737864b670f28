"""`clbench report --select-by validation` and `clbench plot curve` from the command line, on a small trained grid:
the choice follows validation even when test says otherwise (a planted disagreement), the chosen knobs and the
budget are written beside the tables, and misuse is one line with exit code 2."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from bench.cli.main import main
from bench.results import runfiles, store
from conftest import FAST, FIXTURE

SWEEP = ["--methods", "ce,supcon", "--train-size", "12,24", "--grid", "supcon.tau=0.1,0.3", "--seeds", "1-3"]
SHOW_ALL = ["--filter", "collapsed=0,1"]  # tiny models may collapse; the selection is what is tested here


def clbench(*argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """The sweep trained once, with a planted disagreement: for supcon at n=12, tau=0.1 is best on validation
    and worst on test in every seed, tau=0.3 the reverse."""
    folder = tmp_path_factory.mktemp("select") / "results"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("BENCH_DATA_DIR", raising=False)
        patch.setenv("HF_HUB_OFFLINE", "1")
        code, _, err = clbench("run", "--datasets", FIXTURE, *SWEEP, *FAST, "--results-dir", folder)
    assert code == 0, err
    for rows_path in folder.glob(f"supcon_*/{store.ROWS}"):
        rows = json.loads(rows_path.read_text())
        if rows[0]["train_size"] != 12:
            continue
        good_on_validation = json.loads(rows[0]["knobs"]).get("supcon.tau") == 0.1
        for row in rows:
            if row["metric"] == "accuracy" and row["label"] == "":
                on_validation = row["split"] == "validation"
                row["value"] = 0.9 if on_validation == good_on_validation else 0.1
        runfiles.write_json(rows_path.parent, store.ROWS, rows)  # through the manifest: planted, not damaged
    return folder


def selection_line(text: str, dataset: str, method: str) -> str:
    """The row of the selection table (printed after the other tables) for one dataset and method."""
    table = text[text.index("Knobs chosen by validation"):]
    return next(line for line in table.splitlines() if line.startswith(f"| {dataset} ") and f" {method} |" in line)


def test_selection_follows_validation_and_reports_held_out_seeds(results, tmp_path):
    code, out, err = clbench("report", "--results-dir", results, "--reports-dir", tmp_path, "--table", "paper-ii",
                             "--select-by", "validation", "--selection-seeds", "1,2", "--eval-seeds", "3", *SHOW_ALL)
    assert code == 0, err
    line = selection_line(out, "tiny[n=12]", "supcon")
    assert "supcon.tau=0.1" in line and "| 90.00 |" in line and "| 2×2 |" in line and line.endswith("| 3 |")
    assert "| 10.00 (1) †" in out  # the table reports the chosen runs' test accuracy: the planted 0.1 of seed 3
    assert "tiny[n=24]" in out and "different budgets" in err and "ce 1×2, supcon 2×2" in err
    assert (tmp_path / "selection-collapsed-0+1.md").is_file() and "optimistic" not in err


def test_selecting_and_reporting_on_the_same_seeds_is_called_optimistic(results, tmp_path):
    code, out, err = clbench("report", "--results-dir", results, "--reports-dir", tmp_path, "--table", "compare",
                             "--select-by", "validation", *SHOW_ALL)
    assert code == 0, err
    assert "optimistic" in err and "| 2×3 |" in selection_line(out, "tiny[n=12]", "supcon")
    assert "Paired comparison" in out


def test_without_selection_a_grid_is_flagged_as_mixed_configs(results, tmp_path):
    code, _, err = clbench("report", "--results-dir", results, "--reports-dir", tmp_path, *SHOW_ALL)
    assert code == 0 and "--select-by validation" in err


@pytest.mark.parametrize("argv, fragment", [
    (["--select-by", "validation", "--selection-seeds", "1,2", "--eval-seeds", "2,3"], "2"),
    (["--eval-seeds", "3"], "--select-by validation"),
    (["--select-by", "validation", "--selection-seeds", "7"], "7"),
])
def test_misuse_is_one_line_and_exit_2(results, tmp_path, argv, fragment):
    code, out, err = clbench("report", "--results-dir", results, "--reports-dir", tmp_path, *argv, *SHOW_ALL)
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(lines) == 1 and fragment in lines[0], err
    assert not list(tmp_path.iterdir())


def test_the_curve_plot_needs_a_choice_per_method(results, tmp_path):
    code, _, err = clbench("plot", "curve", "--results-dir", results, "--reports-dir", tmp_path, *SHOW_ALL)
    assert code == 2 and "--select-by validation" in err
    code, out, err = clbench("plot", "curve", "--results-dir", results, "--reports-dir", tmp_path,
                             "--select-by", "validation", "--selection-seeds", "1", *SHOW_ALL)
    assert code == 0, err
    assert sorted(Path(p).name for p in out.split()) == ["curve-train_size_collapsed-0+1.pdf",
                                                         "curve-train_size_collapsed-0+1.png"]
