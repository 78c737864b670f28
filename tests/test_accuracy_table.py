"""The `accuracy` table (bench.reporting.accuracytable): methods as rows, datasets as columns, and a column's best
bold only where the paired verdict calls every other method there worse."""

from __future__ import annotations

import pytest

from bench.reporting import stats, tables
from bench.reporting.accuracytable import accuracy_table
from bench.reporting.resultsview import load_results
from test_report import cells_of, right, write_run

N = 100
BASES = (70, 74, 78, 80)  # ce's correct items per seed: clearly above chance (50%) on 100 items


def floor_rows(value: float, seed: int) -> dict:
    """The tfidf evaluator's row for one draw."""
    return {("tfidf", "f1"): [{"split": "test", "metric": "accuracy", "value": value, "n": N, "draw": f"d{seed}"}]}


@pytest.fixture
def results(tmp_path):
    """mr: supcon 15 points above ce and lcl on every seed (bold). sst2: supcon 15 above ce but lcl up and down
    around supcon (inconclusive: no bold, though supcon has the best mean). trec: ce and cl predict the same items
    (a tie). r8: ce only."""
    folder = tmp_path / "results"
    for seed, base in zip((1, 2, 3, 4), BASES):
        write_run(folder, "ce", "mr", seed, right(base, N), evals=floor_rows(0.6, seed))
        write_run(folder, "supcon", "mr", seed, right(base + 15, N))
        write_run(folder, "lcl", "mr", seed, right(base, N, start=7))
        write_run(folder, "ce", "sst2", seed, right(base, N))
        write_run(folder, "supcon", "sst2", seed, right(base + 15, N))
        write_run(folder, "lcl", "sst2", seed, right(base + (18 if seed % 2 else 10), N))
        write_run(folder, "ce", "trec", seed, right(base, N))
        write_run(folder, "cl", "trec", seed, right(base, N))
        write_run(folder, "ce", "r8", seed, right(base, N))
    return folder


def table_of(folder, **kwargs):
    frame = load_results(folder)
    keys = tables.clean_accuracy(frame)["run_key"]
    return accuracy_table(frame, stats.load_run_predictions(folder, keys), n_resamples=200, **kwargs)


def test_layout_methods_as_rows_datasets_as_columns_floor_last(results):
    table = table_of(results)
    assert list(dict.fromkeys(table["row"])) == ["ce", "cl", "supcon", "lcl", "tf-idf + LR (floor)"]
    assert list(dict.fromkeys(table["column"])) == ["mr", "r8", "sst2", "trec"]
    cells = cells_of(table)
    assert cells[("supcon", "mr")]["text"] == "90.50 ± 4.43 (4)"
    assert cells[("cl", "mr")]["text"] == "—"
    assert cells[("tf-idf + LR (floor)", "mr")]["text"] == "60.00 ± 0.00 (4 draws)"
    assert not cells[("tf-idf + LR (floor)", "mr")]["best"]
    assert table.attrs["title"].endswith("encoder minilm") and table.attrs["row_header"] == "method"


def test_bold_only_where_every_other_method_is_worse(results):
    table = table_of(results)
    cells = cells_of(table)
    assert [c for c, cell in cells.items() if cell["best"]] == [("supcon", "mr")]
    # sst2: supcon has the best mean (but lcl's runs go either side of it): no bold, unlike paper-ii's rule
    assert cells[("supcon", "sst2")]["mean"] > cells[("lcl", "sst2")]["mean"] > cells[("ce", "sst2")]["mean"]
    paper = cells_of(tables.paper_ii(load_results(results)))
    assert paper[("sst2", "minilm supcon")]["best"]
    notes = table.attrs["notes"]
    assert "mr: supcon bold: every other method worse (ce worse, lcl worse)" in notes
    assert "sst2: best mean supcon, not bold: ce worse, lcl inconclusive" in notes
    assert "trec: ce and cl tie, no bold" in notes
    assert "r8: one method only, no bold" in notes
    assert notes[0].startswith("bold: the column's best mean, when the paired comparison")


def test_a_competitor_near_chance_gets_no_verdict_so_no_bold(tmp_path):
    """ce at chance (50 of 100 on every seed, binary): supcon's higher mean is bold only if ce gets a verdict,
    and a comparison with a side near chance gets none."""
    folder = tmp_path / "results"
    for seed in (1, 2, 3, 4):
        write_run(folder, "ce", "mr", seed, right(50, N), extra={"near_chance": 1, "chance": 0.5})
        write_run(folder, "supcon", "mr", seed, right(90, N), extra={"near_chance": 0, "chance": 0.5})
    table = table_of(folder)
    cells = cells_of(table)
    assert cells[("ce", "mr")].get("near_chance") and cells[("ce", "mr")]["text"].endswith("°")
    assert not any(table["best"])
    assert "mr: best mean supcon, not bold: ce near chance" in table.attrs["notes"]


def test_verdict_settings_reach_the_bold_decision(results):
    """A ROPE wider than every gap makes no comparison 'worse'; the alpha of the verdict is the one given."""
    from bench.reporting.verdicts import VerdictSettings

    table = table_of(results, settings=VerdictSettings(alpha=1e-9))
    assert not any(table["best"])
    assert "mr: best mean supcon, not bold: ce inconclusive, lcl inconclusive" in table.attrs["notes"]


def test_cli_accuracy_table_writes_its_file(cli, results, tmp_path):
    reports = tmp_path / "reports"
    code, out, err = cli("report", "--table", "accuracy", "--bootstrap", "200", "--results-dir", results,
                           "--reports-dir", reports)
    assert code == 0 and "| method | mr | r8 | sst2 | trec |" in out
    assert "| supcon | **90.50 ± 4.43 (4)** |" in out
    assert (reports / "accuracy.md").read_text(encoding="utf-8") == out
