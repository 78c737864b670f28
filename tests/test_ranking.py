"""The ranking with its uncertainty (`bench.reporting.ranking`): Friedman + Nemenyi across blocks (dataset x regime x
encoder) with a critical-difference diagram, in `clbench report --table ranking` and on the HTML page. On synthetic
rows and results folders (nothing is trained)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench.errors import BenchError
from bench.reporting import ranking
from bench.reporting.resultsview import load_results, normalise
from test_report import right, write_run

METHODS = ("ce", "cl", "supcon", "dcl")
# six blocks: two datasets, one of them also in a data regime (n=100), under two encoders
BLOCKS = [(dataset, size, encoder) for dataset, size in (("sst2", 0), ("sst2", 100), ("trec", 0))
          for encoder in ("minilm", "tiny-bert")]


def rows(scores: dict[tuple[str, int, str], dict[str, float]], seeds=(1, 2)) -> pd.DataFrame:
    """Clean test-accuracy rows (as `load_results` gives them) for {(dataset, train_size, encoder): {method: acc}},
    every seed alike."""
    out = []
    for (dataset, size, encoder), accuracies in scores.items():
        for method, accuracy in accuracies.items():
            for seed in seeds:
                out.append({"run_key": f"{method}_{dataset}{size}_{encoder}_s{seed}", "method": method,
                            "dataset": dataset, "train_size": size, "encoder": encoder, "seed": seed,
                            "evaluator": "clean", "split": "test", "metric": "accuracy", "label": "",
                            "value": accuracy})
    return normalise(pd.DataFrame(out))


def clear_winner(blocks=BLOCKS) -> dict:
    """supcon best on every block, then ce, cl, dcl (with some shuffling below the top)."""
    scores = {}
    for i, block in enumerate(blocks):
        scores[block] = {"supcon": 0.90 + 0.005 * i, "ce": 0.85 + 0.004 * i, "cl": 0.80 + 0.01 * (i % 2),
                         "dcl": 0.805 - 0.01 * (i % 2)}
    return scores


def test_a_clear_winner_across_six_blocks_ranks_first_and_is_significant():
    result = ranking.rank_blocks(rows(clear_winner()))
    assert result.tested and len(result.scores) == 6
    assert list(result.scores.index) == ["sst2 · minilm", "sst2 · tiny-bert", "sst2[n=100] · minilm",
                                         "sst2[n=100] · tiny-bert", "trec · minilm", "trec · tiny-bert"]
    assert result.mean_ranks.index[0] == "supcon" and result.mean_ranks["supcon"] == 1.0
    assert result.mean_ranks.to_dict() == pytest.approx({"supcon": 1.0, "ce": 2.0, "cl": 3.5, "dcl": 3.5})
    assert result.p < 0.05
    assert result.cd == pytest.approx(1.9148, abs=1e-4)          # q(0.05, k=4) sqrt(k(k+1) / 6N), Demšar's table
    assert result.groups == [["supcon", "ce"], ["ce", "cl", "dcl"]]  # supcon differs from cl and dcl
    assert "Friedman p = 0.00" in result.headline() and "Nemenyi, CD = 1.91" in result.headline()
    cells = ranking.ranking_cells(result)
    shown = {(r["row"], r["column"]): r for r in cells.to_dict("records")}
    assert shown[("supcon", "mean rank")]["text"] == "1.00" and shown[("supcon", "mean rank")]["best"]
    assert [shown[(m, "group")]["text"] for m in ("supcon", "ce", "cl", "dcl")] == ["a", "ab", "b", "b"]
    assert "Friedman p = 0.00" in cells.attrs["title"] and "6 blocks" in cells.attrs["title"]
    assert any("not of runs or seeds" in n for n in cells.attrs["notes"])


def test_identical_methods_are_not_significantly_different():
    same = {block: {m: 0.8 + 0.01 * i for m in ("ce", "cl", "supcon")} for i, block in enumerate(BLOCKS)}
    result = ranking.rank_blocks(rows(same))
    assert result.tested and result.p == 1.0                       # every block ties: nothing tells them apart
    assert result.mean_ranks.to_dict() == {"ce": 2.0, "cl": 2.0, "supcon": 2.0}
    assert result.groups == [["ce", "cl", "supcon"]]
    assert "shows no difference between the methods" in result.headline()
    noisy = {block: dict(zip(("ce", "cl", "supcon"), [(0.8, 0.81, 0.82), (0.82, 0.8, 0.81), (0.81, 0.82, 0.8)][i % 3]))
             for i, block in enumerate(BLOCKS)}                    # each method first on two blocks
    result = ranking.rank_blocks(rows(noisy))
    assert result.p > 0.05 and len(result.groups) == 1
    caption = [t.get_text() for t in ranking.cd_plot(result).figure.texts]  # the figure alone says no order
    assert caption == [f"Friedman p = {result.p:.3f} over 6 blocks (dataset × regime × encoder); CD = "
                       f"{result.cd:.2f} (Nemenyi, α = 0.05)\np ≥ 0.05: no difference shown, the order is not "
                       "evidence"]
    assert not ranking.cd_caption(0.01, 1.2, 6).endswith("evidence")


def test_the_formulas_equal_autorank():
    """friedman_nemenyi applies autorank's formulas itself (autorank's import costs 2 s): the same p, CD and mean
    ranks as autorank on six blocks; on three (autorank refuses fewer than five) they still rank, with a note."""
    from autorank import autorank

    three = ranking.rank_blocks(rows(clear_winner(BLOCKS[:3])))
    assert three.tested and three.mean_ranks.index[0] == "supcon" and not math.isnan(three.p)
    assert any("autorank itself refuses fewer than 5" in n for n in three.notes)
    scores = ranking.block_scores(ranking.accuracy_cells(rows(clear_winner()))[0])
    with ranking.quiet():
        reference = autorank(scores.reset_index(drop=True), alpha=ranking.ALPHA, verbose=False,
                             force_mode="nonparametric")
    p, cd, ranks = ranking.friedman_nemenyi(scores)
    # the CD's quantile is exact here; autorank's (statsmodels' qsturng) is an approximation within 1e-4 of it
    assert p == pytest.approx(float(reference.pvalue)) and cd == pytest.approx(float(reference.cd), rel=1e-4)
    assert ranks.to_dict() == pytest.approx(reference.rankdf["meanrank"].astype(float).to_dict())


def test_methods_missing_from_blocks_are_named():
    scores = clear_winner()
    del scores[BLOCKS[0]]["dcl"]                                   # dcl misses one block: that block goes
    result = ranking.rank_blocks(rows(scores))
    assert len(result.scores) == 5 and list(result.mean_ranks.index)[0] == "supcon"
    assert any("sst2 · minilm (no dcl)" in n for n in result.notes)
    scores = clear_winner()
    for block in BLOCKS[2:]:                                       # dcl on two blocks: left out, six blocks stay
        del scores[block]["dcl"]
    result = ranking.rank_blocks(rows(scores))
    assert len(result.scores) == 6 and "dcl" not in result.mean_ranks
    assert any("dcl (2 of 6 blocks)" in n for n in result.notes)


def test_fewer_than_three_blocks_or_methods_give_no_test():
    result = ranking.rank_blocks(rows(clear_winner(BLOCKS[:2])))
    assert not result.tested and result.label == "no test: fewer than 3 datasets/regimes"
    assert "run more datasets or regimes" in result.reason
    with pytest.raises(BenchError, match="no ranking with uncertainty: 2 block"):
        ranking.ranking_cells(result)
    two = {block: {"ce": 0.8, "cl": 0.9} for block in BLOCKS}
    result = ranking.rank_blocks(rows(two))
    assert not result.tested and result.label == "no test: fewer than 3 methods"


def test_p_values_read_as_sentences():
    assert [ranking.p_text(p) for p in (0.0123, 0.0004, 1.0)] == ["p = 0.012", "p < 0.001", "p = 1.000"]


def test_nemenyi_groups_are_maximal_runs_within_cd():
    ranks = pd.Series({"a": 1.0, "b": 1.5, "c": 2.6, "d": 4.0})
    assert ranking.nemenyi_groups(ranks, 1.0) == [["a", "b"], ["c"], ["d"]]
    assert ranking.nemenyi_groups(ranks, 1.2) == [["a", "b"], ["b", "c"], ["d"]]
    assert ranking.nemenyi_groups(ranks, 3.0) == [["a", "b", "c", "d"]]


# ----------------------------------------------------------------------------------------------- commands

def write_blocks(results, scores) -> None:
    """One run (seed 1) per block and method of `scores` ({(dataset, _, encoder): {method: share right}})."""
    for (dataset, _, encoder), accuracies in scores.items():
        for method, accuracy in accuracies.items():
            write_run(results, method, dataset, 1, right(round(20 * accuracy)), encoder=encoder)


def test_cli_ranking_writes_the_table_and_the_cd_diagram(cli, tmp_path):
    results, reports = tmp_path / "results", tmp_path / "reports"
    blocks = [(d, 0, "minilm") for d in ("mr", "trec", "sst2", "agnews", "r8", "cr")]
    write_blocks(results, {b: {"ce": 0.8, "cl": 0.7, "supcon": 0.95} for b in blocks})
    code, out, err = cli("report", "--table", "ranking", "--results-dir", results, "--reports-dir", reports)
    assert code == 0, err
    assert "Ranking across 6 blocks" in out and "| supcon | **1.00** | a |" in out
    assert (reports / "ranking.md").read_text(encoding="utf-8") == out
    for suffix in ("png", "pdf"):
        path = reports / f"ranking-cd.{suffix}"
        assert path.is_file() and path.stat().st_size > 1000 and f"wrote {path}" in err
    assert (reports / "ranking-cd.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_ranking_with_fewer_than_three_blocks_is_one_error_line(cli, tmp_path):
    results = tmp_path / "results"
    write_blocks(results, {(d, 0, "minilm"): {"ce": 0.8, "cl": 0.7, "supcon": 0.95} for d in ("mr", "trec")})
    code, out, err = cli("report", "--table", "ranking", "--results-dir", results, "--reports-dir",
                         tmp_path / "reports")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "error: no ranking with uncertainty: 2 block(s) (dataset × regime × encoder) where all of ce, cl, supcon "
        "ran; the Friedman test needs 3 or more: run more datasets or regimes"]
    assert not (tmp_path / "reports" / "ranking-cd.png").exists()


def test_the_html_ranking_opens_with_the_test_or_says_there_is_none(tmp_path):
    from bench.reporting.htmlboard import ranking_section
    from bench.reporting.htmlparts import Absent

    results = tmp_path / "results"
    write_blocks(results, {(d, 0, "minilm"): {"ce": 0.8, "cl": 0.7, "supcon": 0.95}
                           for d in ("mr", "trec", "sst2", "agnews", "r8")})
    text = ranking_section(load_results(results), results, None)
    assert text.index('id="ranking-test"') < text.index('id="fig-ranking-cd"') < text.index('id="table-ranking"')
    assert "Friedman p = 0.007; methods joined by a bar do not differ at α = 0.05 (Nemenyi, CD = 1.48)" in text
    assert 'aria-label="critical-difference diagram"' in text and "detail of the test above" in text
    one = tmp_path / "one"
    write_blocks(one, {("mr", 0, "minilm"): {"ce": 0.8, "cl": 0.7, "supcon": 0.95}})
    absent = ranking_section(load_results(one), one, None)  # one block: nothing to rank across, no section
    assert isinstance(absent, Absent) and "needs runs on at least two" in absent.why
    few = tmp_path / "few"
    write_blocks(few, {(d, 0, "minilm"): {"ce": 0.8, "cl": 0.7, "supcon": 0.95} for d in ("mr", "trec")})
    text = ranking_section(load_results(few), few, None)
    assert "No ranking with uncertainty: 2 block(s)" in text and "<svg" not in text
    assert "mean rank (1 = best) and win rate over head-to-head meetings, with cost (no test: fewer than 3 " \
           "datasets/regimes)" in text


@pytest.mark.parametrize("k", [2, 3, 4, 5, 8, 10, 20, 50])
def test_the_studentized_range_quantile_equals_scipys(k):
    from scipy.stats import studentized_range

    assert ranking.studentized_range_quantile(0.95, k) == pytest.approx(studentized_range.ppf(0.95, k, np.inf),
                                                                         rel=1e-9)


@pytest.mark.parametrize("case", range(12))
def test_the_friedman_p_equals_scipys(case):
    from scipy.stats import friedmanchisquare

    rng = np.random.default_rng(case)
    scores = rng.integers(0, 4 if case % 2 else 100, size=(int(rng.integers(3, 12)), int(rng.integers(3, 7))))
    frame = pd.DataFrame(scores.astype(float))
    ranks = frame.rank(axis=1, ascending=False, method="average").to_numpy()
    expected = friedmanchisquare(*scores.T).pvalue
    got = ranking.friedman_p(ranks)
    assert got == pytest.approx(expected, rel=1e-9) or (np.isnan(expected) and np.isnan(got))
