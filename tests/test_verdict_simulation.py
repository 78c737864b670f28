"""The verdict's statistic tested by simulation (issue 41): comparisons drawn from a model with run-level variance
(a training draw shared by the paired runs, a seed per run and method) and fixed test items of varying difficulty.

With no true difference the run-level verdict calls "better" or "worse" in at most 7% of 1,000 comparisons (a 5%
test), while the item-level bootstrap, which holds the trained models fixed, calls far more; with a planted
difference the verdict finds it at least as often as the power the suite's runs-needed estimate assumes.
docs/REPORTS.md quotes the rates this prints (`pytest -s`)."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit
from statsmodels.stats.power import TTestPower

from bench.reporting import stats, verdicts

COMPARISONS = 1000
RUNS = 5             # paired runs per comparison
ITEMS = 300          # test items (shared by every run, as a real test set)
DRAW_SD = 0.35       # logit spread of the training draw (shared by the paired runs of one seed)
SEED_SD = 0.25       # logit spread of a run's own seed (initialisation, batch order), per method
BASE = 1.0           # the baseline's mean logit (about 70% accuracy)


def simulate(rng: np.random.Generator, effect: float, runs: int = RUNS) -> tuple[np.ndarray, np.ndarray]:
    """One comparison: per-item correctness (runs x items) of the baseline and the method, the method `effect`
    logits better on every item."""
    difficulty = rng.normal(0.0, 1.5, ITEMS)
    draw = rng.normal(0.0, DRAW_SD, (runs, 1))
    base = BASE + draw + rng.normal(0.0, SEED_SD, (runs, 1)) + difficulty
    method = BASE + effect + draw + rng.normal(0.0, SEED_SD, (runs, 1)) + difficulty
    return rng.random((runs, ITEMS)) < expit(base), rng.random((runs, ITEMS)) < expit(method)


def run_verdict(base: np.ndarray, method: np.ndarray) -> str:
    """The suite's verdict on one comparison (one comparison in its table: q = p)."""
    level = verdicts.run_level(100 * (method.mean(axis=1) - base.mean(axis=1)))
    return verdicts.verdict(level, level.pvalue)


def item_significant(base: np.ndarray, method: np.ndarray) -> bool:
    """Whether the item-level bootstrap (the old verdict) calls a difference at 5%."""
    return stats.paired_bootstrap(method.astype(float) - base.astype(float), n_resamples=200).pvalue < 0.05


def test_false_positive_rate_of_the_run_level_verdict_and_of_the_item_bootstrap():
    rng = np.random.default_rng(41)
    called, item_called = 0, 0
    for _ in range(COMPARISONS):
        base, method = simulate(rng, 0.0)
        called += run_verdict(base, method) in ("better", "worse")
        item_called += item_significant(base, method)
    rate, item_rate = called / COMPARISONS, item_called / COMPARISONS
    print(f"\nfalse-positive rate at 5%, {COMPARISONS} comparisons of {RUNS} paired runs: run-level verdict "
          f"{rate:.1%}, item-level bootstrap {item_rate:.1%}")
    assert rate <= 0.07
    assert item_rate > 0.25  # far above 5%: it ignores the spread between runs


def test_a_planted_effect_is_found_as_often_as_the_power_estimate_says():
    rng = np.random.default_rng(7)
    effect = 0.6  # logits: about +9 points of accuracy
    spread = np.concatenate([100 * (m.mean(axis=1) - b.mean(axis=1)) for b, m in
                             (simulate(rng, effect, runs=50) for _ in range(40))])
    standardised = spread.mean() / spread.std(ddof=1)
    found = sum(run_verdict(*simulate(rng, effect)) == "better" for _ in range(400)) / 400
    power = float(TTestPower().power(effect_size=standardised, nobs=RUNS, alpha=0.05, alternative="two-sided"))
    print(f"\nplanted Δ {spread.mean():.2f} points (sd {spread.std(ddof=1):.2f} over runs): found {found:.1%}, "
          f"power estimate {power:.1%}")
    assert found >= power - 3 * math.sqrt(power * (1 - power) / 400)
    # the runs-needed estimate, fed the true mean and spread, reaches 80% power
    needed = verdicts.power_runs(standardised)
    assert TTestPower().power(effect_size=standardised, nobs=needed, alpha=0.05) >= 0.8
