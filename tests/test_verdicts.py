"""The run-level verdict (bench.reporting.verdicts): interval, test, verdict words, runs needed, ASO."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from bench.reporting import verdicts
from bench.reporting.verdicts import VerdictSettings, run_level, task_level, verdict


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
    constant = run_level([2.0, 2.0, 2.0])  # identical differences: no spread to test with, never p = 0
    assert math.isnan(constant.low) and math.isnan(constant.pvalue) and constant.std == 0
    assert verdict(constant, math.nan) == "inconclusive"
    zero = run_level([0.0, 0.0, 0.0])
    assert math.isnan(zero.pvalue) and verdict(zero, 1.0) == "inconclusive"
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
    assert verdict(task_level(deltas), q) == expected  # without items: the same


def test_rope_is_settable():
    level = run_level([0.6, 0.8, 0.7, 0.75, 0.65])
    assert verdict(level, 0.001) == "better"
    assert verdict(level, 0.001, VerdictSettings(rope=1.0)) == "equivalent"


# ----------------------------------------------------------------------------------------------- task level

def brute_two_level(items: np.ndarray) -> tuple[float, float, float, float]:
    """The crossed runs x items estimate written out with loops: Δ, its variance, the interval and p (points)."""
    d = 100.0 * np.asarray(items, dtype=float)
    runs, n = d.shape
    grand = sum(d[r, i] for r in range(runs) for i in range(n)) / (runs * n)
    row = [sum(d[r]) / n for r in range(runs)]
    col = [sum(d[r, i] for r in range(runs)) / runs for i in range(n)]
    s2_runs = sum((x - grand) ** 2 for x in row) / (runs - 1)
    ms_items = runs * sum((c - grand) ** 2 for c in col) / (n - 1)
    ms_error = sum((d[r, i] - row[r] - col[i] + grand) ** 2 for r in range(runs) for i in range(n)) / (
        (runs - 1) * (n - 1))
    if s2_runs == 0:  # identical per-run differences: the residual's share stands in
        s2_runs = ms_error / n
    variance = s2_runs / runs + max(0.0, ms_items - ms_error) / (runs * n)
    half = scipy_stats.t.ppf(0.975, runs - 1) * math.sqrt(variance)
    p = 2 * scipy_stats.t.sf(abs(grand) / math.sqrt(variance), runs - 1)
    return grand, variance, max(-100.0, grand - half), min(100.0, grand + half), p  # clipped to what Δ can be


def paired_items(rng, runs, n, lean):
    """runs x n paired correctness differences, the first `lean` items always won by the method."""
    base, method = rng.random((runs, n)) < 0.7, rng.random((runs, n)) < 0.7
    method[:, :lean], base[:, :lean] = True, False
    return method.astype(int) - base.astype(int)


@pytest.mark.parametrize("runs,n,lean", [(3, 40, 0), (5, 60, 6), (10, 25, 3), (2, 30, 2)])  # (2, 30, 2): equal runs
def test_task_level_is_the_crossed_runs_by_items_estimate(runs, n, lean):
    items = paired_items(np.random.default_rng(runs * n + lean), runs, n, lean)
    level = task_level(100 * items.mean(axis=1), items)
    delta, variance, low, high, p = brute_two_level(items)
    assert level.n == runs and level.items == n and level.df == runs - 1
    assert level.delta == pytest.approx(delta) and level.se ** 2 == pytest.approx(variance)
    assert (level.low, level.high, level.pvalue) == pytest.approx((low, high, p))
    only = run_level(100 * items.mean(axis=1))
    if math.isnan(only.low):  # equal runs: runs alone give no interval; runs and items still do
        assert level.std == 0 and level.high - level.low > 1
        return
    assert level.low <= only.low + 1e-9 and level.high >= only.high - 1e-9  # never narrower than runs alone
    if lean:  # items leaning to the method widen it
        assert level.high - level.low > only.high - only.low


def test_task_level_edge_cases():
    assert task_level([]).n == 0 and math.isnan(task_level([]).delta)
    one = task_level([3.0], np.ones((1, 10)))
    assert one.delta == 3.0 and math.isnan(one.low) and verdict(one, 0.0) == "inconclusive"
    missing = task_level([1.0, float("nan"), 2.0], np.array([[1, 0], [0, 0], [0, 1]]))  # a missing run left out
    assert missing.n == 2 and missing.items == 2
    wide = task_level([90.0, -90.0, 95.0])
    assert -100 <= wide.low and wide.high <= 100
    everything = task_level([100.0] * 3, np.ones((3, 20)))  # the method right and the baseline wrong everywhere
    assert everything.pvalue == pytest.approx(2 * 0.5 ** 20) and everything.high == 100
    bad_shape = task_level([1.0, 2.0, 3.0], np.ones((2, 5)))  # items of other runs: ignored, runs alone
    assert bad_shape.items == 0 and bad_shape.low == pytest.approx(run_level([1.0, 2.0, 3.0]).low)


# ----------------------------------------------------------------------------------------------- runs needed

def test_runs_needed_is_a_plug_in_estimate_with_a_range():
    level = task_level([7.19, 9.17, -1.10, 2.96])  # issue 41: lcl vs ce at 100 examples, seeds 2-5
    needed = verdicts.runs_needed(level)
    assert needed.runs > level.n and needed.low < needed.runs < needed.high
    assert verdicts.needed_text(needed, level.n) == f"≈ {needed.runs} ({needed.low}-{needed.high})"
    # the estimate reaches 80% power at the plug-in values, and one run fewer does not
    se = math.sqrt(level.run_var / needed.runs)
    df = needed.runs - 1
    critical = scipy_stats.t.ppf(0.975, df)
    power = scipy_stats.nct.sf(critical, df, level.delta / se) + scipy_stats.nct.cdf(-critical, df, level.delta / se)
    assert power >= 0.8
    fewer = needed.runs - 1
    se, df = math.sqrt(level.run_var / fewer), fewer - 1
    critical = scipy_stats.t.ppf(0.975, df)
    assert scipy_stats.nct.sf(critical, df, level.delta / se) + scipy_stats.nct.cdf(-critical, df, level.delta / se) \
        < 0.8
    near_zero = task_level([0.3, -0.4, 0.2, -0.1])  # inside the ROPE but too spread: equivalence needs more runs
    assert verdicts.runs_needed(near_zero).runs > near_zero.n
    assert verdicts.runs_needed(task_level([1.0])).runs is None
    assert verdicts.needed_text(verdicts.Needed(None), 2) == "≥ 3 (+1)"
    assert verdicts.needed_text(verdicts.Needed(2000), 5) == "> 1000"


def test_a_small_test_set_can_need_more_items_not_runs():
    tie = task_level([0.0, 0.0, 0.0], np.zeros((3, 30)))  # 30 items agreeing: ±11.6 whatever the runs
    needed = verdicts.runs_needed(tie)
    assert needed.more_items and verdicts.needed_text(needed, 3) == "more test items, not runs"


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


def test_runs_needed_grows_with_the_run_variance_even_far_in_the_tail():
    """scipy's noncentral t gives NaN far in its tail (issue 52 saw `≈ 4 (6-52)`): more spread never needs fewer
    runs, and the range brackets the estimate."""
    needed = [verdicts.settle_runs(0.494, 0.0241 * f, 0.0) for f in np.linspace(0.05, 80, 400)]
    assert all(a <= b for a, b in zip(needed, needed[1:]))
    level = task_level([-0.384, -0.604])  # issue 30: clld-adaptive vs ce at 40% flipped labels, 2 runs
    found = verdicts.runs_needed(level)
    assert found.low <= found.runs <= found.high


def every_count(delta, run_var, item_var, settings=VerdictSettings(), power=verdicts.POWER):
    """settle_runs by trying every count from 2 to MAX_RUNS (the reference for its bisection)."""
    from scipy import special

    n = np.arange(2, verdicts.MAX_RUNS + 1, dtype=float)
    df, se = n - 1, np.sqrt(run_var / n + item_var)
    critical = special.stdtrit(df, 1 - settings.alpha / 2)
    reached = np.zeros(n.size, dtype=bool)
    if delta > 0:
        shift = delta / se
        far = np.nan_to_num(special.nctdtr(df, shift, -critical), nan=0.0)
        reached |= (np.nan_to_num(1 - special.nctdtr(df, shift, critical), nan=1.0) + far) >= power
    margin = settings.rope - delta
    if margin > 0:
        reached |= (critical + special.stdtrit(df, power)) * se <= margin
    if reached.any():
        return max(verdicts.MIN_RUNS, int(n[np.flatnonzero(reached)[0]]))
    return "beyond"


@pytest.mark.parametrize("case", range(60))
def test_runs_needed_by_bisection_equals_trying_every_count(case):
    rng = np.random.default_rng(case)
    delta = float(rng.choice([0.0, 0.001, 0.2, 0.45, 0.6, 1.5, 4.0, 12.0])) * float(rng.uniform(0.5, 1.5))
    run_var = float(10 ** rng.uniform(-4, 2.5))
    item_var = float(rng.choice([0.0, 10 ** rng.uniform(-5, 0)]))
    found = verdicts.settle_runs(delta, run_var, item_var)
    expected = every_count(delta, run_var, item_var)
    if expected == "beyond":
        assert found is None or found == verdicts.MAX_RUNS + 1
    else:
        assert found == expected, (delta, run_var, item_var)
