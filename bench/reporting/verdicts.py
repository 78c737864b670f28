"""Run-level verdicts: does a method beat the baseline, counting runs (seed x training draw), not test items.

The unit is the paired run: the method and the baseline trained with the same seed (and so, with per-seed draws,
on the same training sample); its datum is the difference of their test accuracies, in points.

* Interval and test: the Student-t 95% interval of the mean per-run difference and the paired t-test (scipy
  `ttest_1samp`), so the spread from seed to seed and from draw to draw is what the interval measures. With the
  test set fixed, test-item sampling enters only through each run's own accuracy; the item-level bootstrap
  (`bench.reporting.stats`) answers the other question, "would these trained models differ on other items?".
* Distribution level: Almost Stochastic Order (Dror et al. 2019; deepsig `aso`) of the method's run accuracies
  over the baseline's: ε_min < 0.5 says the method's accuracies almost stochastically dominate.
* Verdict, with q the Benjamini-Hochberg q-value of the t-test's p over the table and the ROPE (region of
  practical equivalence) ±`rope` points: fewer than MIN_RUNS paired runs: inconclusive, always; the interval
  inside the ROPE: equivalent; q < alpha: better (Δ > 0) or worse (Δ < 0); otherwise inconclusive.
* Runs needed, for an inconclusive verdict: at the observed mean and spread, the paired runs at which a t-test
  reaches 80% power (statsmodels `TTestPower`) to find the observed Δ, or, when |Δ| is inside the ROPE, at which
  the interval is expected to fit inside it, whichever is fewer.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as scipy_stats

MIN_RUNS = 3          # fewer paired runs: inconclusive, always
ROPE = 0.5            # points of accuracy either side of 0 that count as practically equivalent
ALPHA = 0.05
POWER = 0.8           # the power the runs-needed estimate aims at
ASO_ITERATIONS = 500  # deepsig's bootstrap iterations for ASO's variance (its default is 1000; 0: no ASO);
ASO_ENV = "BENCH_ASO_ITERATIONS"  # overrides the default (the test suite sets a small number: ASO costs ~7 ms each)
ASO_SEED = 0
MAX_RUNS = 1000       # runs-needed estimates above this are shown as "> 1000"
VERDICTS = ("better", "worse", "equivalent", "inconclusive")


@dataclass(frozen=True)
class VerdictSettings:
    """What a verdict reads besides the runs: the ROPE half-width (points), α, and ASO's iterations."""

    rope: float = ROPE
    alpha: float = ALPHA
    aso_iterations: int = field(default_factory=lambda: default_aso_iterations())

    def describe(self) -> str:
        """The settings in words, for table notes."""
        return f"ROPE ±{self.rope:g} points, α = {self.alpha:g} (BH q), at least {MIN_RUNS} paired runs"


def default_aso_iterations() -> int:
    """ASO's iterations: $BENCH_ASO_ITERATIONS when set (a whole number), else ASO_ITERATIONS."""
    value = os.environ.get(ASO_ENV, "")
    return int(value) if value.strip().isdigit() else ASO_ITERATIONS


@dataclass(frozen=True)
class RunLevel:
    """The paired per-run differences (points) of one comparison and their interval and test."""

    deltas: tuple[float, ...]
    delta: float
    std: float
    low: float
    high: float
    pvalue: float

    @property
    def n(self) -> int:
        """Paired runs."""
        return len(self.deltas)


def run_level(deltas: list[float] | np.ndarray, confidence: float = 0.95) -> RunLevel:
    """Mean, sample std, Student-t interval (clipped to ±100 points) and paired t-test p of per-run differences
    in points. One run: no interval; no spread at all: the interval is the point and p is 0 (or 1 at Δ = 0)."""
    d = np.asarray(deltas, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return RunLevel((), math.nan, math.nan, math.nan, math.nan, math.nan)
    mean = float(d.mean())
    if d.size < 2:
        return RunLevel(tuple(d.tolist()), mean, math.nan, math.nan, math.nan, math.nan)
    std = float(d.std(ddof=1))
    if std <= 1e-12 * max(1.0, abs(mean)):
        return RunLevel(tuple(d.tolist()), mean, 0.0, mean, mean, 1.0 if mean == 0 else 0.0)
    result = scipy_stats.ttest_1samp(d, 0.0)
    interval = result.confidence_interval(confidence)
    low, high = (max(-100.0, float(interval.low)), min(100.0, float(interval.high)))
    return RunLevel(tuple(d.tolist()), mean, std, low, high, float(result.pvalue))


def verdict(result: RunLevel, q: float, settings: VerdictSettings = VerdictSettings()) -> str:
    """better / worse / equivalent / inconclusive (see the module docstring for the rule)."""
    if result.n < MIN_RUNS or math.isnan(result.low):
        return "inconclusive"
    if -settings.rope <= result.low and result.high <= settings.rope:
        return "equivalent"
    if not math.isnan(q) and q < settings.alpha:
        return "better" if result.delta > 0 else "worse"
    return "inconclusive"


def runs_needed(result: RunLevel, settings: VerdictSettings = VerdictSettings()) -> int | None:
    """Paired runs that would likely settle an inconclusive comparison at its observed mean and spread (see the
    module docstring); None without a spread to go on (fewer than 2 runs)."""
    if result.n < 2 or math.isnan(result.std):
        return None
    if result.std == 0:
        return max(MIN_RUNS, result.n)
    candidates = []
    effect = abs(result.delta) / result.std
    if effect > 0:
        candidates.append(power_runs(effect, settings.alpha))
    margin = settings.rope - abs(result.delta)
    if margin > 0:
        candidates.append(equivalence_runs(result.std, margin, settings.alpha))
    return max(MIN_RUNS, min(candidates)) if candidates else None


def power_runs(effect: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """The fewest paired runs (at least 2) at which a two-sided t-test has `power` against a standardised effect
    (statsmodels' power function, searched over n: its solver fails to converge for some effects)."""
    from statsmodels.stats.power import TTestPower

    n = np.arange(2, MAX_RUNS + 1)
    reached = np.flatnonzero(TTestPower().power(effect_size=effect, nobs=n, alpha=alpha,
                                                alternative="two-sided") >= power)
    return int(n[reached[0]]) if reached.size else MAX_RUNS + 1


def equivalence_runs(std: float, margin: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """The paired runs at which the interval is expected to fit inside the ROPE with `power`, the observed mean
    `margin` points inside it: the smallest n with (t(1-α/2, n-1) + t(power, n-1)) · std / √n <= margin."""
    for n in range(2, MAX_RUNS + 1):
        reach = (scipy_stats.t.ppf(1 - alpha / 2, n - 1) + scipy_stats.t.ppf(power, n - 1)) * std / math.sqrt(n)
        if reach <= margin:
            return n
    return MAX_RUNS + 1


def needed_text(needed: int | None, have: int) -> str:
    """`≈ 12 (+7)`, `> 1000`, or '' when unknown."""
    if needed is None:
        return f"≥ {MIN_RUNS} (+{MIN_RUNS - have})" if have < MIN_RUNS else ""
    if needed > MAX_RUNS:
        return f"> {MAX_RUNS}"
    return f"≈ {needed} (+{max(0, needed - have)})"


def aso_epsilon(method: list[float], baseline: list[float], iterations: int = ASO_ITERATIONS,
                seed: int = ASO_SEED) -> float:
    """ASO's ε_min of the method's run scores over the baseline's (deepsig; < 0.5: the method almost stochastically
    dominates); NaN with fewer than MIN_RUNS scores on a side or `iterations` 0."""
    if iterations < 1 or len(method) < MIN_RUNS or len(baseline) < MIN_RUNS:
        return math.nan
    import warnings

    from deepsig import aso

    with warnings.catch_warnings():  # identical score sets divide by zero inside; ε is still defined (0 or 1)
        warnings.simplefilter("ignore")
        return float(aso(np.asarray(method, dtype=float), np.asarray(baseline, dtype=float), confidence_level=0.95,
                         num_bootstrap_iterations=iterations, show_progress=False, num_jobs=1, seed=seed))
