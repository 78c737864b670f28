"""Verdicts about the task: does a method beat the baseline, counting training runs (seed x training draw) and
test items (the test set as a sample of the task's texts).

The unit is the paired run: the method and the baseline trained on the same draw (data seed, seed and regime:
the same training and validation sample; bench.reporting.pairs); its data are the difference of their test
accuracies (points) and, item by item, the difference of their correctness on the same test items.

* Interval and test (`task_level`): a crossed random-effects model of the paired item differences,
  d_ri = μ + a_r + b_i + e_ri with a run effect a (seed, draw), an item effect b (a method better on some texts,
  worse on others) and a residual e, estimated by the two-way ANOVA of the runs x items matrix (Cornfield and
  Tukey 1956; Clark 1973, "The language-as-fixed-effect fallacy", J. Verbal Learn. Verbal Behav. 12, who made
  items a random factor for exactly this reason). The mean's variance is
  Var(Δ) = s²_runs / R + max(0, MS_I - MS_E) / (R N), with s²_runs the variance of the per-run differences
  (which holds the run effect and the residual's share), MS_I and MS_E the item and residual mean squares, R runs
  and N items (a negative item component set to 0, the usual truncation; identical per-run differences: MS_E / N
  stands in for s²_runs). The 95% interval is Student t with R - 1 degrees of freedom, the training runs being the
  replicated unit, and p the matching two-sided test. Without item effects it is the paired t-test over runs.
  Satterthwaite's (1946) degrees of freedom were tried and rejected: measured at 3 and 5 runs with small run
  spread and item effects, they called a true Δ of 0 in 7.3-8.0% of comparisons (tests/test_verdict_simulation.py). No item scored differently in any run: no spread to
  estimate, so the interval is the exact (Clopper-Pearson) 95% bound on the share of items on which the two could
  disagree, ±100 (1 - 0.025^(1/N)) points: an exact tie on 30 items is ±11.6, never equivalent.
* The run-only interval (`run_level`, the test set held fixed) and the item bootstrap (bench.reporting.stats, the
  trained models held fixed) stay as secondary columns.
* Distribution level: Almost Stochastic Order (Dror et al. 2019; deepsig's `aso`, vectorised in bench.reporting.aso) of the method's run accuracies
  over the baseline's: ε_min < 0.5 says the method's accuracies almost stochastically dominate.
* Verdict, with q the Benjamini-Hochberg q-value of the task-level p over the table and the ROPE (region of
  practical equivalence) ±`rope` points: fewer than MIN_RUNS paired runs: inconclusive, always; the interval
  inside the ROPE: equivalent; q < alpha: better (Δ > 0) or worse (Δ < 0); otherwise inconclusive.
* Runs needed (`runs_needed`), for an inconclusive verdict: a plug-in estimate at the observed Δ and variance
  components, the paired runs at which the test reaches 80% power against the observed Δ, or, when |Δ| is inside
  the ROPE, at which the interval is expected to fit inside it, whichever is fewer; given as a range over the 80%
  interval of the run variance (chi-square), since with few runs that variance is itself uncertain. When the test
  items' part of the variance alone keeps the interval too wide, no number of runs settles it ("more items").
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
from scipy import special  # scipy.stats's t, chi2 and nct are these functions; importing it costs 0.9 s more

MIN_RUNS = 3          # fewer paired runs: inconclusive, always
ROPE = 0.5            # points of accuracy either side of 0 that count as practically equivalent
ALPHA = 0.05
POWER = 0.8           # the power the runs-needed estimate aims at
ASO_ITERATIONS = 500  # bootstrap iterations for ASO's variance (deepsig's default is 1000; 0: no ASO);
ASO_ENV = "BENCH_ASO_ITERATIONS"  # overrides the default
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
    """The paired per-run differences (points) of one comparison and their interval and test over runs alone (the
    test items held fixed)."""

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
    in points. One run, or no spread at all: no interval and no p (a t-test needs a spread; identical differences
    are not evidence of none)."""
    d = np.asarray(deltas, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return RunLevel((), math.nan, math.nan, math.nan, math.nan, math.nan)
    mean = float(d.mean())
    if d.size < 2:
        return RunLevel(tuple(d.tolist()), mean, math.nan, math.nan, math.nan, math.nan)
    std = float(d.std(ddof=1))
    if std <= 1e-12 * max(1.0, abs(mean)):
        return RunLevel(tuple(d.tolist()), mean, 0.0, math.nan, math.nan, math.nan)
    se, df = std / math.sqrt(d.size), d.size - 1  # the one-sample t-test, written out (scipy's ttest_1samp
    half = float(special.stdtrit(df, 0.5 + confidence / 2)) * se  # gives the same, at 10x the cost)
    pvalue = float(2 * special.stdtr(df, -abs(mean) / se))
    return RunLevel(tuple(d.tolist()), mean, std, max(-100.0, mean - half), min(100.0, mean + half), pvalue)


@dataclass(frozen=True)
class TaskLevel(RunLevel):
    """One comparison's interval and test over runs and test items (points; see the module docstring): the
    per-run differences, their mean and sd, the interval, p and its df, and the two parts of the mean's variance as
    they scale: `run_var` / R (one run's variance, at least the residual's share) and `item_var` (the test items'
    part, fixed for this test set)."""

    df: float = math.nan
    run_var: float = math.nan
    item_var: float = 0.0
    items: int = 0

    @property
    def se(self) -> float:
        """The standard error of Δ (points)."""
        return math.sqrt(self.run_var / self.n + self.item_var) if self.n else math.nan


def task_level(deltas: list[float] | np.ndarray, items: np.ndarray | None = None,
               confidence: float = 0.95) -> TaskLevel:
    """The two-level interval and test of per-run differences `deltas` (points) and `items`, the runs x items
    matrix of paired correctness differences (method - baseline: -1, 0 or 1) on the items every paired
    run scored, in the order of `deltas` (None or no items: runs alone, as `run_level`). See the module docstring."""
    d = np.asarray(deltas, dtype=float)
    keep = np.isfinite(d)
    d = d[keep]
    matrix = None if items is None else np.asarray(items, dtype=float)
    if matrix is not None and (matrix.ndim != 2 or matrix.shape[0] != keep.size or matrix.shape[1] == 0):
        matrix = None
    if matrix is not None:
        matrix = 100.0 * matrix[keep]
    runs = d.size
    if runs == 0:
        return TaskLevel((), math.nan, math.nan, math.nan, math.nan, math.nan)
    mean = float(d.mean())
    if runs < 2:
        return TaskLevel(tuple(d.tolist()), mean, math.nan, math.nan, math.nan, math.nan)
    run_ms = float(d.var(ddof=1))  # s² of the per-run differences: E = σ²_run + σ²_e / N
    run_var, n_items, item_var = run_ms, 0, 0.0
    if matrix is not None:
        n_items = matrix.shape[1]
        row, column, grand = matrix.mean(axis=1, keepdims=True), matrix.mean(axis=0, keepdims=True), matrix.mean()
        error_df = (runs - 1) * (n_items - 1)
        ms_error = float(((matrix - row - column + grand) ** 2).sum() / error_df) if error_df else 0.0
        ms_items = float(runs * ((column - grand) ** 2).sum() / (n_items - 1)) if n_items > 1 else 0.0
        if run_ms <= 1e-12 * max(1.0, mean * mean):  # identical per-run differences are not evidence of no
            run_var = ms_error / n_items               # spread: the residual's share stands in
        item_var = max(0.0, ms_items - ms_error) / (runs * n_items)
    variance = run_var / runs + item_var
    if variance <= 1e-12 * max(1.0, mean * mean):  # nothing varies: bound what the test set cannot see
        return degenerate(d, mean, n_items, confidence)
    df = runs - 1  # the training runs are the replicated unit (Satterthwaite's df called 8% at 3 runs: too many)
    se = math.sqrt(variance)
    half = float(special.stdtrit(df, 0.5 + confidence / 2)) * se
    pvalue = float(2 * special.stdtr(df, -abs(mean) / se))
    return TaskLevel(tuple(d.tolist()), mean, math.sqrt(run_ms), max(-100.0, mean - half), min(100.0, mean + half),
                     pvalue, df, run_var, item_var, n_items)


def degenerate(d: np.ndarray, mean: float, n_items: int, confidence: float) -> TaskLevel:
    """`task_level` when every paired item difference is the same (no spread to estimate): the exact
    Clopper-Pearson bound, with no item seen to differ, on the share of items the two could score differently,
    ±100 (1 - ((1 - confidence) / 2)^(1/N)) points around Δ; p 1 at Δ = 0, else the sign test of N items. Without
    items, no interval."""
    if not n_items:
        return TaskLevel(tuple(d.tolist()), mean, 0.0, math.nan, math.nan, math.nan)
    bound = 100.0 * (1.0 - ((1.0 - confidence) / 2) ** (1.0 / n_items))
    pvalue = 1.0 if mean == 0 else min(1.0, 2.0 * 0.5 ** n_items)
    # item_var: the variance a normal interval of that half-width has, so that runs_needed sees a test-set limit
    return TaskLevel(tuple(d.tolist()), mean, 0.0, max(-100.0, mean - bound), min(100.0, mean + bound), pvalue,
                     math.inf, 0.0, (bound / 1.96) ** 2, n_items)


def verdict(result: TaskLevel | RunLevel, q: float, settings: VerdictSettings = VerdictSettings()) -> str:
    """better / worse / equivalent / inconclusive (see the module docstring for the rule)."""
    if result.n < MIN_RUNS or math.isnan(result.low):
        return "inconclusive"
    if -settings.rope <= result.low and result.high <= settings.rope:
        return "equivalent"
    if not math.isnan(q) and q < settings.alpha:
        return "better" if result.delta > 0 else "worse"
    return "inconclusive"


@dataclass(frozen=True)
class Needed:
    """A plug-in estimate of the paired runs that would settle a comparison: `runs` at the observed run variance,
    `low`-`high` over its 80% interval; `more_items`: no number of runs would (the test items' part alone)."""

    runs: int | None
    low: int | None = None
    high: int | None = None
    more_items: bool = False


def runs_needed(result: TaskLevel, settings: VerdictSettings = VerdictSettings()) -> Needed:
    """Paired runs that would likely settle an inconclusive comparison (see the module docstring); runs None
    without a spread to go on (fewer than 2 runs)."""
    if result.n < 2 or math.isnan(result.run_var):
        return Needed(None)
    if result.run_var == 0 and result.item_var == 0:
        return Needed(max(MIN_RUNS, result.n))
    point = settle_runs(abs(result.delta), result.run_var, result.item_var, settings)
    if point is None:
        return Needed(None, more_items=True)
    df = result.n - 1
    upper, lower = (result.run_var * df / (2 * special.gammaincinv(df / 2, q)) for q in (0.1, 0.9))
    ends = [settle_runs(abs(result.delta), v, result.item_var, settings) for v in (lower, upper)]
    return Needed(point, ends[0], ends[1] if ends[1] is not None else MAX_RUNS + 1)


def settle_runs(delta: float, run_var: float, item_var: float, settings: VerdictSettings = VerdictSettings(),
                power: float = POWER) -> int | None:
    """The fewest paired runs (at least MIN_RUNS; MAX_RUNS + 1 when more) at which the task-level test has `power`
    against `delta`, or, with `delta` inside the ROPE, the interval is expected to fit inside it, whichever is
    fewer; None when the items' part `item_var` alone keeps both out of reach. Both only grow with the runs (the
    standard error and the critical t shrink), so the fewest is found by bisection: 10 evaluations, not 999
    (tests/test_verdicts.py holds it equal to trying every count)."""
    if settled(MAX_RUNS, delta, run_var, item_var, settings, power):
        low, high = 1, MAX_RUNS  # not settled at `low` (below the counts tried), settled at `high`
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if settled(middle, delta, run_var, item_var, settings, power) else (middle, high)
        return max(MIN_RUNS, high)
    limit = math.sqrt(item_var)  # with endless runs
    margin = settings.rope - delta
    if (delta > 0 and delta / max(limit, 1e-12) > 1.96 + 0.84) or (margin > 0 and 2.8 * limit < margin):
        return MAX_RUNS + 1
    return None


def settled(runs: int, delta: float, run_var: float, item_var: float, settings: VerdictSettings,
            power: float) -> bool:
    """Whether `runs` paired runs (at least 2) reach `power` against `delta`, or, with `delta` inside the ROPE, an
    interval expected to fit inside it."""
    if runs < 2:
        return False
    df, se = runs - 1.0, math.sqrt(run_var / runs + item_var)
    critical = float(special.stdtrit(df, 1 - settings.alpha / 2))
    if delta > 0:
        shift = delta / se
        far = float(np.nan_to_num(special.nctdtr(df, shift, -critical), nan=0.0))  # scipy: NaN far in the tail
        if float(np.nan_to_num(1 - special.nctdtr(df, shift, critical), nan=1.0)) + far >= power:
            return True
    margin = settings.rope - delta
    return margin > 0 and (critical + float(special.stdtrit(df, power))) * se <= margin


def needed_text(needed: Needed, have: int) -> str:
    """`≈ 12 (8-40)`, `> 1000`, `more test items`, or '' when unknown (`≥ 3 (+1)` below MIN_RUNS)."""
    if needed.more_items:
        return "more test items, not runs"
    if needed.runs is None:
        return f"≥ {MIN_RUNS} (+{MIN_RUNS - have})" if have < MIN_RUNS else ""
    if needed.runs > MAX_RUNS:
        return f"> {MAX_RUNS}"

    if needed.low is None or needed.high is None or needed.low == needed.high:
        return f"≈ {needed.runs}"
    high = f"over {MAX_RUNS}" if needed.high > MAX_RUNS else str(needed.high)
    return f"≈ {needed.runs} ({needed.low}-{high})" if needed.high <= MAX_RUNS else f"≈ {needed.runs} ({needed.low} to {high})"


def aso_epsilon(method: list[float], baseline: list[float], iterations: int = ASO_ITERATIONS,
                seed: int = ASO_SEED) -> float:
    """ASO's ε_min of the method's run scores over the baseline's (bench.reporting.aso: deepsig's test, vectorised;
    < 0.5: the method almost stochastically dominates); NaN with fewer than MIN_RUNS scores on a side or
    `iterations` 0."""
    if iterations < 1 or len(method) < MIN_RUNS or len(baseline) < MIN_RUNS:
        return math.nan
    from bench.reporting.aso import epsilon_min

    return epsilon_min(method, baseline, iterations=iterations, seed=seed, confidence=0.95)
