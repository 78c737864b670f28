"""The Python API speaks its own terms about collapsed runs: where `clbench report` says `--filter collapsed=0,1`
(bench.reporting.collapsed.BRING_BACK), `clbench.table` / `clbench.compare` say `include_collapsed=True`, in the
same sentences (one wording, bench.reporting.collapsed.api_terms). Result folders are written directly."""

from __future__ import annotations

import warnings

import pytest

import clbench
from bench.errors import BenchError
from bench.reporting.collapsed import BRING_BACK, api_terms, flag_runs, split_runs
from bench.reporting.resultsview import load_results
from test_collapsed import BAD, SUPCON, run


@pytest.fixture
def folder(tmp_path):
    """trec/tiny-bert: ce seed 1 (60%) and seed 2 collapsed; supcon seed 1 collapsed."""
    results = tmp_path / "results"
    run(results, "ce", 1, 12, 0.30)
    run(results, "ce", 2, 19, 0.0, collapsed=True)
    run(results, "supcon", 1, 20, 0.0, collapsed=True)
    return results


def test_the_command_line_wording_becomes_the_apis():
    assert api_terms(f"left out; show them with {BRING_BACK}") == "left out; show them with include_collapsed=True"
    assert api_terms("re-run them with another --lr or more --epochs") == \
        "re-run them with another lr= or more epochs="
    assert api_terms("kept by your --filter collapsed=...: marked †") == "kept by include_collapsed=True: marked †"
    assert api_terms("no rows in the selection; run `clbench run` or loosen --filter") == \
        "no rows in the selection; run `clbench run` or load more rows (load_results' filters=)"
    assert api_terms("not among the methods: ce (use --baseline)") == "not among the methods: ce (use baseline=)"


def test_an_error_on_an_empty_frame_names_filters_not_the_flag(folder):
    rows = clbench.load_results(folder, filters=["method=ce"]).iloc[0:0]
    with pytest.raises(BenchError) as error:
        clbench.table(rows, "paper-ii")
    assert "filters=" in str(error.value) and "--filter" not in str(error.value), str(error.value)


def test_table_notes_and_warnings_name_include_collapsed(folder):
    rows = clbench.load_results(folder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = clbench.table(rows, "paper-ii")
    said = [str(w.message) for w in caught] + table.attrs["notes"]
    assert any("include_collapsed=True" in line for line in said), said
    assert not any("--filter" in line for line in said), said
    assert any(BAD in note and "show them with include_collapsed=True" in note for note in table.attrs["notes"])
    # the command's own note is the same sentence with its flag
    command = split_runs(flag_runs(load_results(folder)))
    assert any(BRING_BACK in note for note in command.notes())


def test_an_empty_selection_error_names_include_collapsed(folder):
    rows = clbench.load_results(folder, filters=["method=supcon"])  # its only run collapsed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(BenchError) as error:
            clbench.table(rows, "paper-ii")
    message = str(error.value)
    assert SUPCON in message and "show them with include_collapsed=True" in message, message
    assert "--filter" not in message and "another lr= or more epochs=" in message
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert len(clbench.table(rows, "paper-ii", include_collapsed=True)) == 1  # and that keyword works
