"""The HTML page of a knob grid (`clbench report --html [--select-by validation]`), on a fabricated results folder
(rows, predictions and run files written directly; nothing is trained): the main table with macro-F1 and each
method's knobs, the combination chosen on validation with its budget (never the one test prefers), and the
confusion change of each method against the baseline."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from bench.reporting import html
from bench.reporting.html import build_report
from bench.reporting.htmlgrid import diff_pairs, knob_labels, main_table
from bench.reporting.resultsview import load_results
from bench.results import store
from test_report import LABELS, right, write_run

RESAMPLES = 100
SEEDS = (1, 2, 3)
# method -> combo -> (knobs, validation accuracy, test items right of 20); supcon's tau=0.1 is best on validation
# and worst on test: a page that chose on test would show tau=0.3
GRID = {"ce": {"ce0": ({"epochs": 3}, 0.80, 16)},
        "supcon": {"tA": ({"epochs": 3, "supcon.tau": 0.1}, 0.90, 12),
                   "tB": ({"epochs": 3, "supcon.tau": 0.3}, 0.70, 19)}}
CHOSEN, PASSED_OVER = "supcon_mr_minilm_s1_tA", "supcon_mr_minilm_s1_tB"


def grid_run(results: Path, method: str, combo: str, seed: int, knobs: dict, val: float, n_right: int) -> Path:
    """One finished run of the grid: rows (test accuracy, a macro-F1 0.05 below it, validation accuracy, combo and
    knobs), predictions, spec, confusion and training log."""
    correct = right(n_right, start=seed)
    run = write_run(results, method, "mr", seed, correct, config=combo)
    text = json.dumps(knobs, sort_keys=True, separators=(",", ":"))
    rows = []
    for row in store.read_json(run / store.ROWS):
        row = {**row, "combo": combo, "knobs": text}
        if row["metric"] == "macro_f1":
            row["value"] -= 0.05
        if row["split"] == "validation":
            row["value"] = val
        rows.append(row)
    store.write_json(run / store.ROWS, rows)
    store.write_json(run / store.SPEC, {
        "key": run.name, "method": method, "dataset": "mr", "encoder": "minilm", "seed": seed, "config_hash": combo,
        "data": {"label_names": list(LABELS)}, "split_ids": {"test": "test-mr"},
        "method_config": {"tau": knobs.get("supcon.tau", 0.1), "lambda_": 0.9} if method == "supcon" else {}})
    counts = np.zeros((2, 2), dtype=int)
    for i, ok in enumerate(correct):
        counts[i % 2, i % 2 if ok else 1 - i % 2] += 1
    store.write_json(run / store.CONFUSION, {"labels": list(LABELS), "test": counts.tolist(), "validation": None})
    history = [{"epoch": e, "val_accuracy": val, "train_loss": 1.0 / e, "train_ce": 0.1 / e, "seconds": 1.0,
                "train_seq_per_s": 100.0} for e in (1, 2)]
    store.write_json(run / store.TRAIN_LOG, {"history": history, "best_epoch": 2})
    return run


def grid_folder(results: Path) -> Path:
    """Every run of GRID on every seed."""
    for method, combos in GRID.items():
        for combo, (knobs, val, n_right) in combos.items():
            for seed in SEEDS:
                grid_run(results, method, combo, seed, knobs, val, n_right)
    return results


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return grid_folder(tmp_path_factory.mktemp("grid") / "results")


@pytest.fixture
def quick(monkeypatch):
    """Leave out the figures not under test (they take most of a page's time)."""
    monkeypatch.setattr(html, "method_figures", lambda *_: "")
    monkeypatch.setattr(html, "summary_figure", lambda *_: "")


def section(text: str, name: str) -> str:
    """The body of one <section> of the page."""
    return text.split(f'<section id="{name}">')[1].split("</section>")[0]


def row_cells(table: str) -> dict[str, list[str]]:
    """Row header -> the texts of its cells (badges left out)."""
    body = table.split("<tbody>")[1]
    rows = re.findall(r'<tr><th scope="row">(.*?)</th>(.*?)</tr>', body)
    return {head: [re.sub(r"<span.*?</span>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", cells)]
            for head, cells in rows}


# ----------------------------------------------------------------------------------------------- main table

def test_main_table_gives_macro_f1_beside_accuracy_and_keeps_combinations_apart(results):
    table = main_table(load_results(results))
    assert list(dict.fromkeys(table["column"])) == ["mr acc (%)", "mr macro-F1 (%)"]
    cells = {(r, c): t for r, c, t in zip(table["row"], table["column"], table["text"])}
    assert set(table["row"]) == {"ce", "supcon (tau=0.1)", "supcon (tau=0.3)"}  # never averaged together
    assert cells[("supcon (tau=0.3)", "mr acc (%)")] == "95.00 ± 0.00 (3)"
    assert cells[("supcon (tau=0.3)", "mr macro-F1 (%)")] == "90.00 ± 0.00 (3)"   # the F1 rows, not accuracy
    assert any("every run changed epochs=3" in n for n in table.attrs["notes"])   # shared: said once


def test_knob_labels_keep_a_methods_own_knobs_and_drop_shared_settings():
    import pandas as pd

    runs = pd.DataFrame({"run_key": ["a", "b", "c"], "dataset": ["d"] * 3, "encoder": ["e"] * 3,
                         "method": ["ce", "supcon", "supcon"],
                         "knobs": ['{"lr":2e-05}', '{"lr":2e-05,"supcon.tau":0.1}', '{"lr":5e-05,"supcon.tau":0.3}']})
    labels, notes = knob_labels(runs)
    assert labels == {"a": "lr=2e-05", "b": "lr=2e-05, tau=0.1", "c": "lr=5e-05, tau=0.3"} and notes == []
    labels, notes = knob_labels(runs.iloc[:2])
    assert labels == {"a": "", "b": "tau=0.1"} and notes == ["d (e): every run changed lr=2e-05"]


# ----------------------------------------------------------------------------------------------- the page

def test_the_page_of_every_run_names_each_combination(results, quick):
    text = build_report(results, resamples=RESAMPLES).text
    main = row_cells(section(text, "accuracy"))
    assert list(main) == ["ce", "supcon (tau=0.1)", "supcon (tau=0.3)"]
    assert 'id="selection"' not in text and "every run (no --select-by)" in text


def test_without_select_by_ranking_cost_and_compare_never_pool_a_methods_combinations(results, quick, monkeypatch):
    drawn = []
    monkeypatch.setattr(html, "summary_figure", lambda frame, filters: drawn.append(frame) or "")
    text = build_report(results, resamples=RESAMPLES).text
    (figure,) = drawn                                                    # the accuracy figure: each combination apart
    assert sorted(set(figure["method"])) == ["ce", "supcon (tau=0.1)", "supcon (tau=0.3)"]
    said = "methods that ran several knob combinations (supcon on mr · minilm (2))"
    assert said in section(text, "cost") and "--select-by validation" in section(text, "cost")
    absent, = re.findall(r'<p class="note" id="not-shown">(.*?)</p>', text)  # nothing left to rank or compare
    assert absent.count(said) == 2 and "Ranking across datasets" in absent and "Comparison with ce" in absent
    supcon_row = '<td class="left">supcon</td>'
    assert supcon_row not in section(text, "cost") and '<td class="left">ce</td>' in section(text, "cost")
    chosen = build_report(results, resamples=RESAMPLES, select_by="validation").text
    assert "several knob combinations" not in chosen                     # the choice leaves one per method
    assert supcon_row in section(chosen, "cost")
    alone = build_report(results, ["method=supcon"], resamples=RESAMPLES).text   # nothing left to rank: a note
    assert said in section(alone, "cost")


def test_the_figures_names_are_the_main_tables_even_for_a_knob_only_the_grid_shares(tmp_path):
    from bench.reporting.htmlgrid import combinations_apart

    results = tmp_path / "results"
    grid_run(results, "ce", "ce0", 1, {"epochs": 3}, 0.8, 16)
    for combo, tau in (("tA", 0.1), ("tB", 0.3)):  # both combinations changed lr, which ce did not
        grid_run(results, "supcon", combo, 1, {"epochs": 3, "lr": 1e-4, "supcon.tau": tau}, 0.8, 15)
    frame = load_results(results)
    rows = list(row_cells(html.cells_table(main_table(frame), "t")))
    assert rows == ["ce", "supcon (lr=0.0001, tau=0.1)", "supcon (lr=0.0001, tau=0.3)"]
    assert sorted(set(combinations_apart(frame)["method"])) == rows


def test_select_by_validation_shows_the_chosen_combination_its_knobs_and_budget(results, quick):
    report = build_report(results, resamples=RESAMPLES, select_by="validation")
    text = report.text
    assert re.findall(r'<section id="([^"]+)"', text)[:2] == ["selection", "accuracy"]
    chosen = row_cells(section(text, "selection"))
    assert chosen["supcon"][:3] == ["supcon.tau=0.1 (tuned), epochs=3", "90.00", "2×3"]   # knobs, val acc, C×S
    assert chosen["ce"][:3] == ["epochs=3", "80.00", "1×3"]
    assert "Test scores never took part in the choice" in section(text, "selection")
    main = row_cells(section(text, "accuracy"))
    assert list(main) == ["ce", "supcon (tau=0.1)"]                  # the validation choice, not test's tau=0.3
    assert main["supcon (tau=0.1)"] == ["60.00 ± 0.00 (3)", "55.00 ± 0.00 (3)"]
    assert PASSED_OVER not in text and CHOSEN in text
    assert "knobs chosen on validation per method (2 choices); chosen on seeds 1,2,3" in text
    assert any("optimistic" in line for line in report.warnings)     # chosen and reported on the same seeds


def test_held_out_seeds_are_reported_only(results, quick):
    text = build_report(results, resamples=RESAMPLES, select_by="validation", selection_seeds=[1, 2],
                        eval_seeds=[3]).text
    assert "chosen on seeds 1,2, reported on seeds 3" in text
    assert row_cells(section(text, "selection"))["supcon"][2] == "2×2"
    assert "60.00 (1)" in section(text, "accuracy") and "supcon_mr_minilm_s1_tA" not in section(text, "provenance")


def test_confusion_change_of_each_method_against_the_baseline(results, quick):
    pairs, missing = diff_pairs(load_results(results), "ce")
    assert missing == [] and [(p.method, p.knobs, p.seed, p.key, p.base_key) for p in pairs] == [
        ("supcon", "tau=0.1", 1, CHOSEN, "ce_mr_minilm_s1_ce0"),       # one per supcon combination, seed 1
        ("supcon", "tau=0.3", 1, PASSED_OVER, "ce_mr_minilm_s1_ce0")]
    text = build_report(results, resamples=RESAMPLES, select_by="validation").text
    diffs = section(text, "confusion-diff")
    assert re.findall(r'<figure [^>]*id="([^"]+)"', diffs) == [f"fig-confusion-diff_ce_mr_minilm_s1_ce0_vs_{CHOSEN}"]
    assert "supcon (tau=0.1) minus ce" in diffs and '<table class="heatmap">' in diffs


def test_cli_writes_the_page_with_select_by_validation(results, quick, cli, tmp_path):
    reports = tmp_path / "reports"
    code, out, err = cli("report", "--html", "--select-by", "validation", "--selection-seeds", "1,2", "--results-dir",
                         results, "--reports-dir", reports, "--bootstrap", str(RESAMPLES))
    assert code == 0, err
    page = Path(out.strip())
    assert page == reports / "report.html"
    text = page.read_text(encoding="utf-8")
    assert 'id="table-selection"' in text and "supcon (tau=0.1)" in text and "macro-F1 (%)" in text
    assert "fig-confusion-diff_" in text and PASSED_OVER not in text
    code, _, err = cli("report", "--html", "--eval-seeds", "3", "--results-dir", results, "--reports-dir", reports)
    assert code == 2 and "--select-by validation" in err


def test_the_pages_confusion_heatmaps_carry_accuracy_and_regime(results, monkeypatch):
    monkeypatch.setattr(html, "confusion_diff_section", lambda *_: "")
    text = build_report(results, resamples=RESAMPLES, select_by="validation").text
    titles = re.findall(r'<figure id="fig-confusion_[^"]+"><div class="figures"><div><strong>([^<]*)</strong>', text)
    assert titles == ["Test confusion: ce s1 · mr · minilm · test accuracy 80.00%",
                      "Test confusion: supcon s1 · mr · minilm · test accuracy 60.00%"]
