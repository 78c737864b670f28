"""The run-level verdict (bench.reporting.verdicts): interval, test, verdict words, runs needed, ASO."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from bench.reporting import verdicts
from bench.reporting.verdicts import VerdictSettings, run_level, verdict


def brute_t_interval(d: list[float]) -> tuple[float, float, float]:
    """Student-t interval and two-sided p, written out."""
    x = np.asarray(d, dtype=float)
    n, mean, sd = x.size, x.mean(), x.std(ddof=1)
    half = scipy_stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    p = 2 * scipy_stats.t.sf(abs(mean / (sd / math.sqrt(n))), n - 1)
    return mean - half, mean + half, p


def test_run_level_is_the_student_t_interval_over_runs():
    d = [7.19, 9.17, -1.10, 2.96]  # issue 41: lcl vs ce at 100 examples, seeds 2-5
    level = run_level(d)
    low, high, p = brute_t_interval(d)
    assert level.n == 4 and level.delta == pytest.approx(np.mean(d))
    assert (level.low, level.high, level.pvalue) == pytest.approx((low, high, p))
    assert level.low == pytest.approx(-2.72, abs=0.01) and level.high == pytest.approx(11.84, abs=0.01)
    assert verdict(level, level.pvalue) == "inconclusive"


def test_edge_cases_of_the_interval():
    assert math.isnan(run_level([]).delta) and run_level([]).n == 0
    one = run_level([3.0])
    assert one.delta == 3.0 and math.isnan(one.low) and verdict(one, 0.0) == "inconclusive"
    constant = run_level([2.0, 2.0, 2.0])
    assert (constant.low, constant.high, constant.pvalue) == (2.0, 2.0, 0.0)
    assert verdict(constant, 0.0) == "better"
    zero = run_level([0.0, 0.0, 0.0])
    assert zero.pvalue == 1.0 and verdict(zero, 1.0) == "equivalent"
    wide = run_level([90.0, -90.0, 95.0])
    assert -100 <= wide.low and wide.high <= 100  # clipped to what a difference of accuracies can be
    assert run_level([1.0, float("nan"), 2.0]).n == 2  # a missing run is left out


@pytest.mark.parametrize("deltas, q, expected", [
    ([3.0, 4.0, 5.0, 3.5], 0.01, "better"),
    ([-3.0, -4.0, -5.0, -3.5], 0.01, "worse"),
    ([3.0, 4.0, 5.0, 3.5], 0.2, "inconclusive"),          # significant alone, not after BH
    ([0.1, -0.1, 0.05, 0.0, -0.05], 0.9, "equivalent"),   # interval inside ±0.5
    ([3.0, 4.0], 0.0001, "inconclusive"),                 # 2 runs: never better or worse
    ([0.1, -0.1], 0.9, "inconclusive"),                   # 2 runs: never equivalent either
])
def test_verdict_words(deltas, q, expected):
    assert verdict(run_level(deltas), q) == expected


def test_rope_is_settable():
    level = run_level([0.6, 0.8, 0.7, 0.75, 0.65])
    assert verdict(level, 0.001) == "better"
    assert verdict(level, 0.001, VerdictSettings(rope=1.0)) == "equivalent"


def test_runs_needed():
    level = run_level([7.19, 9.17, -1.10, 2.96])
    needed = verdicts.runs_needed(level)
    effect = level.delta / level.std
    assert needed == verdicts.power_runs(effect) and needed > level.n
    from statsmodels.stats.power import TTestPower

    assert TTestPower().power(effect_size=effect, nobs=needed, alpha=0.05) >= 0.8
    assert TTestPower().power(effect_size=effect, nobs=needed - 1, alpha=0.05) < 0.8
    near_zero = run_level([0.3, -0.4, 0.2, -0.1])  # inside the ROPE but too spread: equivalence needs more runs
    assert verdicts.runs_needed(near_zero) == min(verdicts.power_runs(abs(near_zero.delta) / near_zero.std),
                                                  verdicts.equivalence_runs(near_zero.std, 0.5 - abs(near_zero.delta)))
    assert verdicts.runs_needed(run_level([1.0])) is None
    assert verdicts.needed_text(None, 2) == "≥ 3 (+1)" and verdicts.needed_text(2000, 5) == "> 1000"
    assert verdicts.needed_text(12, 5) == "≈ 12 (+7)"


def test_aso_says_which_scores_dominate():
    better = [0.80, 0.82, 0.81, 0.83, 0.79]
    worse = [0.70, 0.72, 0.71, 0.69, 0.73]
    assert verdicts.aso_epsilon(better, worse, iterations=50) < 0.2
    assert verdicts.aso_epsilon(worse, better, iterations=50) > 0.8
    assert math.isnan(verdicts.aso_epsilon(better[:2], worse, iterations=50))
    assert math.isnan(verdicts.aso_epsilon(better, worse, iterations=0))


def test_report_options_of_the_verdict_are_checked():
    from argparse import Namespace

    from bench.cli.report import verdict_settings
    from bench.errors import BenchError

    assert verdict_settings(Namespace(rope=1.0, aso_iterations=0)) == VerdictSettings(rope=1.0, aso_iterations=0)
    assert verdict_settings(Namespace(rope=None, aso_iterations=None)).rope == verdicts.ROPE
    with pytest.raises(BenchError, match="--rope must be in"):
        verdict_settings(Namespace(rope=-1.0, aso_iterations=None))
    with pytest.raises(BenchError, match="--aso-iterations must be >= 0"):
        verdict_settings(Namespace(rope=None, aso_iterations=-5))


def test_aso_iterations_default_reads_the_environment(monkeypatch):
    monkeypatch.setenv(verdicts.ASO_ENV, "7")
    assert VerdictSettings().aso_iterations == 7
    monkeypatch.setenv(verdicts.ASO_ENV, "many")
    assert VerdictSettings().aso_iterations == verdicts.ASO_ITERATIONS
