"""ASO (bench.reporting.aso) against deepsig's `aso` itself: the same ε_min to rounding on 60 score-set pairs of
every shape the compare table meets (3-25 runs a side, ties, identical sets, rounded accuracies, dominance both
ways), and the pieces against their definitions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bench.reporting import aso


def deepsig_aso(a, b, iterations, seed):
    deepsig = pytest.importorskip("deepsig")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return deepsig.aso(np.asarray(a, float), np.asarray(b, float), confidence_level=0.95,
                           num_bootstrap_iterations=iterations, show_progress=False, num_jobs=1, seed=seed)


def cases(n: int = 60):
    rng = np.random.default_rng(52)
    for case in range(n):
        n_a, n_b = (int(x) for x in rng.integers(3, 26, 2))
        a = rng.normal(rng.normal(0, 1), rng.uniform(0.1, 2), n_a).round(int(rng.integers(0, 4)))
        b = rng.normal(0, 1, n_b).round(2)
        if case % 10 == 0:
            b = a.copy()  # identical sets: ε_W2 is 0/0 inside, defined as 0.5
        if case % 10 == 1:
            a = np.full(n_a, 80.0)  # one value a side
            b = np.full(n_b, 80.0 - case % 3)
        yield a, b, int(rng.integers(0, 1000)), int(rng.choice([1, 10, 40]))  # deepsig costs ~10 ms an iteration


@pytest.mark.parametrize("a, b, seed, iterations", list(cases()))
def test_epsilon_min_equals_deepsig(a, b, seed, iterations):
    assert aso.epsilon_min(a, b, iterations=iterations, seed=seed) == pytest.approx(
        deepsig_aso(a, b, iterations, seed), abs=1e-12)


def test_violation_ratio_against_its_definition():
    """ε_W2 by a loop over the grid, with the quantile function written out: F⁻¹(t) = the ⌈nt⌉-th smallest score."""
    rng = np.random.default_rng(3)
    a, b = np.sort(rng.normal(0, 1, 7)), np.sort(rng.normal(0.2, 1, 11))
    dt = 0.01

    def quantile(sorted_scores, t):
        k = int(np.ceil(len(sorted_scores) * t))
        return sorted_scores[min(max(k, 1), len(sorted_scores)) - 1]

    whole = part = 0.0
    for i, t in enumerate(np.arange(dt, 1, dt)):
        f, g = quantile(a, t), quantile(b, t)
        whole += (g - f) ** 2 * dt
        if i > 0 and f < g:
            part += (g - f) ** 2 * dt
    assert float(aso.violation_ratios(a, b, dt)) == pytest.approx(part / whole, rel=1e-12)
    assert float(aso.violation_ratios(a, a, dt)) == 0.5


def test_dominance_reads_the_right_way_round_and_is_seeded():
    better, worse = [91.0, 92.0, 93.0, 92.5, 91.5], [85.0, 86.0, 87.0, 86.5, 85.5]
    assert aso.epsilon_min(better, worse, 500, seed=0) == 0.0
    assert aso.epsilon_min(worse, better, 500, seed=0) > 0.99  # the first grid point is outside the numerator
    mixed_a, mixed_b = [90.0, 85.0, 88.0, 91.0], [89.0, 87.0, 86.0, 90.5]
    assert aso.epsilon_min(mixed_a, mixed_b, 300, seed=4) == aso.epsilon_min(mixed_a, mixed_b, 300, seed=4)
    assert 0.0 < aso.epsilon_min(mixed_a, mixed_b, 300, seed=4) < 1.0
    with pytest.raises(ValueError):
        aso.epsilon_min([], [1.0], 10, seed=0)
