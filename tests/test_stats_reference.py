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
    shares = reference.bootstrap_distribution
    assert ours.pvalue == min(1.0, 2 * min(float(np.mean(shares <= 0)), float(np.mean(shares >= 0))))


@pytest.mark.parametrize("case", range(20))
def test_benjamini_hochberg_equals_statsmodels(case):
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(200 + case)
    p = rng.uniform(0, 1, int(rng.integers(1, 30))) ** 3
    p[rng.random(p.size) < 0.2] = p[0]  # ties
    with_missing = np.append(p, np.nan)
    q = stats.bh_adjust(with_missing)
    assert np.isnan(q[-1])
    np.testing.assert_allclose(q[:-1], multipletests(p, method="fdr_bh")[1], rtol=1e-12)


def test_the_verdicts_distributions_equal_scipy_stats():
    from scipy import stats as scipy_stats

    deltas = [0.4, 1.9, -0.3, 2.2, 1.1]
    level = verdicts.run_level(deltas)
    mean, se, df = np.mean(deltas), np.std(deltas, ddof=1) / np.sqrt(5), 4
    assert level.high - level.delta == pytest.approx(scipy_stats.t.ppf(0.975, df) * se, rel=1e-12)
    assert level.pvalue == pytest.approx(2 * scipy_stats.t.sf(abs(mean) / se, df), rel=1e-12)


@pytest.mark.parametrize("delta, run_var, item_var", [(1.0, 2.0, 0.0), (0.3, 0.5, 0.01), (2.5, 9.0, 0.2),
                                                      (0.05, 0.02, 0.0), (4.0, 1.0, 0.5)])
def test_runs_needed_equals_a_scipy_stats_loop(delta, run_var, item_var):
    """settle_runs against the same rule written with scipy.stats's t and nct, run count by run count."""
    from scipy import stats as scipy_stats

    settings = verdicts.VerdictSettings()
    expected = None
    for n in range(2, verdicts.MAX_RUNS + 1):
        df, se = n - 1, np.sqrt(run_var / n + item_var)
        critical = scipy_stats.t.ppf(1 - settings.alpha / 2, df)
        power = scipy_stats.nct.sf(critical, df, delta / se) + scipy_stats.nct.cdf(-critical, df, delta / se)
        fits = settings.rope - delta > 0 and (critical + scipy_stats.t.ppf(verdicts.POWER, df)) * se <= settings.rope - delta
        if power >= verdicts.POWER or fits:
            expected = max(verdicts.MIN_RUNS, n)
            break
    assert verdicts.settle_runs(delta, run_var, item_var, settings) == expected
