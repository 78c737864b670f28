"""Near-chance runs (issue 52): the rule (bench.results.chance), its flag on rows old and new, and every place a
collapsed run is flagged: the results view, the tables (never best), the compare table and the run summary (no
verdict), the page's main table (and the mark of a method below the classical floor), the Python API."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bench import api as clbench
from bench.reporting import compactview, htmlgrid, leaderboard, nearchance, stats, tables
from bench.reporting.resultsview import load_results
from bench.reporting.summary import results_table
from bench.results import chance, store
from test_report import cells_of, right, write_run


def brute_upper_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed term by term (in logs: the terms of n = 1,821 overflow floats)."""
    def log_term(i: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) \
            + (n - i) * math.log1p(-p)

    return sum(math.exp(log_term(i)) for i in range(k, n + 1))


def test_chance_is_the_majority_share_or_one_over_k():
    assert chance.chance_level([50, 30, 20]) == 0.5
    assert chance.chance_level([10, 10, 10]) == pytest.approx(1 / 3)
    assert chance.chance_level([5, 5], classes=4) == 0.5  # two of four classes in the test set: majority 0.5
    assert chance.chance_level([1, 1, 0, 0]) == 0.5
    assert chance.chance_level([3, 3, 3, 3], classes=4) == 0.25


@pytest.mark.parametrize("correct,n,level", [(55, 100, 0.5), (60, 100, 0.5), (59, 100, 0.5), (14, 30, 1 / 3),
                                             (15, 30, 1 / 3), (38, 90, 0.4), (950, 1821, 0.5)])
def test_near_chance_is_the_exact_one_sided_binomial_test(correct, n, level):
    assert chance.near_chance(correct / n, n, level) == (brute_upper_tail(correct, n, level) > 0.05)


def test_the_issue_examples():
    # 3 classes, 90 test items, the majority 40%: ce at 38.0% and the floor at 40.0% are both near chance
    assert chance.near_chance(0.38, 90, chance.chance_level([36, 27, 27]))
    assert not chance.near_chance(0.6, 90, 0.4)
    assert not chance.near_chance(0.5, 0, 0.5) and not chance.near_chance(math.nan, 10, 0.5)


def with_recall(run_dir, supports):
    """Add the per-class recall rows a real run writes (their `n`: each class's test support)."""
    rows = store.read_json(run_dir / store.ROWS)
    base = {k: v for k, v in rows[0].items() if k not in ("metric", "label", "value", "n")}
    rows += [{**base, "metric": "recall", "label": f"class{i}", "value": 0.5, "n": n} for i, n in enumerate(supports)]
    store.write_json(run_dir / store.ROWS, rows)


@pytest.fixture
def guessing(tmp_path):
    """ce and supcon clearly above chance on 200 balanced items; lcl at 54% (near chance, yet the best mean on
    seed 1), 3 seeds each; rows as written before issue 52 (no near_chance column: flagged from recall rows)."""
    results = tmp_path / "results"
    for seed in (1, 2, 3):
        for method, share in (("ce", 0.62 + seed / 100), ("supcon", 0.64 + seed / 100), ("lcl", 0.54)):
            run = write_run(results, method, "mr", seed, right(int(share * 200), 200, start=seed), config=method)
            with_recall(run, [100, 100])
    return results


def test_old_rows_are_flagged_from_their_recall_rows(guessing):
    frame = load_results(guessing)
    assert nearchance.keys(frame) == sorted(f"lcl_mr_minilm_s{s}_lcl" for s in (1, 2, 3))
    assert set(frame["chance"].dropna()) == {0.5}
    assert (frame.loc[frame["method"] == "ce", "near_chance"] == 0).all()


def test_tables_mark_near_chance_cells_and_never_make_them_best(guessing, tmp_path):
    frame = load_results(guessing)
    for run in ("lcl_mr_minilm_s1_lcl",):  # make lcl the highest mean: it still is not best
        rows = store.read_json(guessing / run / store.ROWS)
        store.write_json(guessing / run / store.ROWS, [{**r, "value": 0.99} if r["metric"] == "accuracy" and
                                                        r["split"] == "test" else r for r in rows])
    frame = load_results(guessing)
    cells = cells_of(tables.paper_ii(frame))
    lcl = cells[("mr", "minilm lcl")]
    assert lcl["text"].endswith(nearchance.MARK) and lcl["near_chance"] and not lcl["best"]
    assert cells[("mr", "minilm supcon")]["best"]
    assert any(note.startswith(f"{nearchance.MARK} = the mean includes 2 run(s) near chance")  # s1 now clear of chance
               for note in tables.paper_ii(frame).attrs["notes"])
    _, notes = leaderboard.accuracy_cells(frame)  # the ranking says so (it ranks what was measured)
    assert any(note.startswith("1 cell(s) include a run near chance") and "mr/minilm/lcl" in note for note in notes)
    page = cells_of(htmlgrid.main_table(frame))
    assert page[("lcl", "mr acc (%)")]["near_chance"] and not page[("lcl", "mr acc (%)")]["best"]


def test_a_comparison_with_a_near_chance_side_gets_no_verdict(guessing):
    frame = load_results(guessing)
    keys = tables.clean_accuracy(frame)["run_key"]
    table = tables.compare(frame, stats.load_run_predictions(guessing, keys), "ce", n_resamples=200)
    cells = cells_of(table)
    assert cells[("lcl", "verdict")]["text"] == "near chance" and cells[("lcl", "runs needed")]["text"] == ""
    assert cells[("supcon", "verdict")]["text"] != "near chance"
    rows = clbench.compare(frame, results_dir=guessing, bootstrap=200).set_index("method")
    assert rows.loc["lcl", "verdict"] == "near chance" and rows.loc["lcl", "near_chance"]
    assert not rows.loc["supcon", "near_chance"]


def test_the_run_summary_and_the_results_view_say_near_chance(guessing):
    rows = [r for path in sorted(guessing.glob("*/rows.json")) for r in store.read_json(path)]
    predictions = stats.load_run_predictions(guessing, {r["run_key"] for r in rows})
    table = results_table(rows, predictions).set_index("method")
    assert table.loc["lcl", "accuracy"].endswith(nearchance.MARK)
    assert table.loc["lcl"].iloc[list(table.columns).index("Δacc vs ce [95% CI], verdict")].endswith("near chance")
    assert any("near chance" in note for note in results_table(rows, predictions).attrs["notes"])
    text = compactview.compact_table(load_results(guessing), 200)
    assert f"lcl{nearchance.MARK}" in text and "3 run(s) near chance" in text


def test_a_method_below_the_floor_is_marked_on_the_page():
    cells = [{"row": "ce", "column": "mr accuracy", "mean": 70.0, "text": "70.00 (3)"},
             {"row": "lcl", "column": "mr accuracy", "mean": 81.0, "text": "81.00 (3)"}]
    marked = htmlgrid.below_floor(cells, {("mr",): {"accuracy": [0.80, 0.80]}}, [("mr", "accuracy", "mr accuracy")], 2)
    assert [c["row"] for c in marked] == ["ce"] and cells[0]["text"].endswith(htmlgrid.BELOW_FLOOR)
    assert not cells[1].get("below_floor")


def test_a_trained_run_writes_chance_and_the_flag(cli, tiny, results):
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, "--epochs", "1", "--batch-size", "8",
                       "--max-length", "32", "--device", "cpu")
    assert code == 0, err
    rows = [r for path in results.glob("*/rows.json") for r in store.read_json(path)]
    clean = pd.DataFrame([r for r in rows if r["evaluator"] == "clean"])
    assert clean["chance"].nunique() == 1 and 0 < clean["chance"].iloc[0] < 1
    accuracy = clean[(clean["metric"] == "accuracy") & (clean["split"] == "test")].iloc[0]
    assert accuracy["near_chance"] == int(chance.near_chance(accuracy["value"], accuracy["n"], accuracy["chance"]))


def test_clbench_run_names_near_chance_runs_in_one_warning(guessing):
    from bench.cli.run_summary import near_chance_warning

    rows = [r for path in sorted(guessing.glob("*/rows.json")) for r in store.read_json(path)]
    line = near_chance_warning(rows)
    assert line.startswith("warning: 3 shard(s) near chance") and "lcl_mr_minilm_s2_lcl" in line
    assert near_chance_warning([r for r in rows if r["method"] != "lcl"]) is None


def test_one_near_chance_run_among_many_is_named_but_keeps_the_verdict(tmp_path):
    """Issue 52's SST-2 draws: one supcon run of 20 at 51.8% is near chance; the side is not, so the comparison keeps
    its verdict and names the run."""
    results = tmp_path / "results"
    for seed in range(1, 6):
        write_run(results, "ce", "mr", seed, right(140 + seed, 200, start=seed), config="ce")
        share = 104 if seed == 1 else 120 + seed  # seed 1: 52% on 200 balanced items
        with_recall(write_run(results, "supcon", "mr", seed, right(share, 200, start=seed), config="sc"), [100, 100])
    frame = load_results(results)
    table = tables.compare(frame, stats.load_run_predictions(results, tables.clean_accuracy(frame)["run_key"]), "ce",
                           n_resamples=200)
    cells = cells_of(table)
    assert cells[("supcon", "verdict")]["text"] == "worse"
    assert any("1 run(s) near chance" in note and "supcon_mr_minilm_s1_sc" in note for note in table.attrs["notes"])
