"""The compare table's McNemar, item bootstrap and Benjamini-Hochberg (bench.reporting.stats, written with numpy
and scipy.special so that a report does not import scipy.stats and statsmodels) against those libraries, and the
verdicts' t, chi-square and noncentral-t quantities against scipy.stats, on random cases."""

from __future__ import annotations

import numpy as np
import pytest

from bench.reporting import stats, verdicts


@pytest.mark.parametrize("case", range(40))
def test_mcnemar_equals_statsmodels(case):
    from statsmodels.stats.contingency_tables import mcnemar

    rng = np.random.default_rng(case)
    n = int(rng.integers(5, 400))
    a = rng.random(n) < rng.uniform(0.3, 0.95)
    b = np.where(rng.random(n) < rng.uniform(0.0, 0.4), ~a, a)
    ours = stats.mcnemar_test(a, b)
    table = [[ours.both, ours.only_a], [ours.only_b, ours.neither]]
    if ours.only_a + ours.only_b == 0:
        assert (ours.statistic, ours.pvalue) == (0.0, 1.0)
        return
    reference = mcnemar(table, exact=ours.exact, correction=True)
    assert ours.statistic == pytest.approx(float(reference.statistic), rel=1e-12)
    assert ours.pvalue == pytest.approx(float(reference.pvalue), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("case", range(20))
def test_bootstrap_equals_scipy(case):
    from scipy.stats import bootstrap

    rng = np.random.default_rng(100 + case)
    runs, items = int(rng.integers(1, 6)), int(rng.integers(2, 900))
    differences = rng.choice([-1, 0, 0, 0, 1], size=(runs, items)).astype(float)
    resamples = int(rng.choice([1, 7, 500, 1234, 10_000]))
    ours = stats.paired_bootstrap(differences, n_resamples=resamples, seed=case)
    reference = bootstrap((differences.mean(axis=0),), np.mean, n_resamples=resamples, batch=stats.BATCH,
                          vectorized=True, method="percentile", confidence_level=0.95,
                          rng=np.random.default_rng(case))
    assert ours.low == pytest.approx(float(reference.confidence_interval.low), abs=1e-12)
    assert ours.high == pytest.approx(float(reference.confidence_interval.high), abs=1e-12)
    wins = np.rint(reference.bootstrap_distribution * runs * items)  # exact: scipy's float means round near 0
    assert ours.pvalue == min(1.0, 2 * min(float(np.mean(wins <= 0)), float(np.mean(wins >= 0))))


@pytest.mark.parametrize("items", [2, 3, 872, 1821])
def test_bootstrap_draws_as_int32_are_numpys_default_draws_and_kept_counts_give_the_same_result(items, monkeypatch):
    ours = np.concatenate(list(stats.resample_indices(items, 1234, 5)))
    reference = np.random.default_rng(5)
    expected = np.concatenate([reference.integers(0, items, (min(stats.BATCH, 1234 - start), items))
                               for start in range(0, 1234, stats.BATCH)])
    np.testing.assert_array_equal(ours, expected)
    differences = np.random.default_rng(items).choice([-1.0, 0.0, 1.0], size=(3, items))
    kept = stats.paired_bootstrap(differences, n_resamples=1234, seed=5)
    monkeypatch.setattr(stats, "KEPT_COUNTS", 0)
    assert stats.paired_bootstrap(differences, n_resamples=1234, seed=5) == kept


def test_bootstrap_of_whole_differences_is_exact_where_wins_and_losses_cancel():
    # three runs, 300 items: per-item means in thirds, whose float sums miss 0 by a rounding error where the
    # resample's wins and losses cancel; the bootstrap counts those resamples as exactly 0 (ties, both sides)
    differences = np.random.default_rng(3).choice([-1.0, 0.0, 0.0, 1.0], size=(3, 300))
    resampled = stats.resampled_means(differences, 2000, 0)
    draws = np.concatenate(list(stats.resample_indices(300, 2000, 0)))
    wins = differences.sum(axis=0).astype(int)[draws].sum(axis=1)
    assert np.sum(wins == 0) > 10
    np.testing.assert_array_equal(resampled, wins / 900)
