"""Almost Stochastic Order (Dror, Shlomov and Reichart 2019, "Deep Dominance"; del Barrio et al. 2018), the test of
deepsig's `aso` with all bootstrap iterations as array operations.

deepsig (1.2.8) draws each bootstrap iteration from `np.random.seed(seed + i)`, resamples both score sets through
their empirical quantile functions and evaluates the violation ratio with one Python call per quantile (through
`numpy.vectorize`): about 7 ms per iteration. Here the same draws (one legacy RandomState per iteration, seeded as
deepsig seeds it, uniforms for A then B) feed one sort and one gather over the iterations x scores matrix, so the
result equals deepsig's to rounding (tests/test_aso.py checks 60 cases against deepsig itself) at a small fraction
of the cost, and a report imports neither deepsig nor the torch it imports.

The violation ratio of quantile functions F⁻¹ (A) and G⁻¹ (B) on the grid t = dt, 2dt, ..., < 1:
ε_W2 = Σ_{t > dt, F⁻¹(t) < G⁻¹(t)} (G⁻¹ - F⁻¹)² dt / Σ_t (G⁻¹ - F⁻¹)² dt (0.5 when the denominator is 0; as in
deepsig, the first grid point counts in the denominator only). ε_min = clip(ε - σ̂ Φ⁻¹(1 - confidence) / c, 0, 1)
with c = √(nm / (n + m)) and σ̂ the standard deviation of c (ε* - ε) over the bootstrap ratios ε*.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

DT = 0.005  # deepsig's aso default


def grid(dt: float = DT) -> np.ndarray:
    """The points t in (0, 1) at which the quantile functions are compared (deepsig's np.arange(dt, 1, dt))."""
    return np.arange(dt, 1, dt)


def quantile_indices(n: int, t: np.ndarray) -> np.ndarray:
    """Indices into n sorted scores of the empirical quantile function at t: ⌈n t⌉ - 1, clipped to [0, n - 1]."""
    return np.clip(np.ceil(n * t).astype(int) - 1, 0, n - 1)


def violation_ratios(sorted_a: np.ndarray, sorted_b: np.ndarray, dt: float = DT) -> np.ndarray:
    """ε_W2 of each row pair of sorted score sets (rows: bootstrap iterations; a 1-D pair gives a 0-d array)."""
    t = grid(dt)
    f = np.take(sorted_a, quantile_indices(sorted_a.shape[-1], t), axis=-1)
    g = np.take(sorted_b, quantile_indices(sorted_b.shape[-1], t), axis=-1)
    diff = g - f
    whole = np.sum(diff ** 2 * dt, axis=-1)
    violated = np.where(f >= g, 0.0, diff)[..., 1:]
    part = np.sum(violated ** 2 * dt, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(whole == 0, 0.5, part / np.where(whole == 0, 1.0, whole))


def bootstrap_uniforms(n_a: int, n_b: int, iterations: int, seed: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The uniforms of each bootstrap iteration, drawn as deepsig draws them (iteration i: a RandomState seeded
    seed + 1 + i, n_a uniforms for A, then n_b for B); unseeded: one fresh generator."""
    if seed is None:
        draws = np.random.default_rng().uniform(0, 1, (iterations, n_a + n_b))
    else:
        state = np.random.RandomState()  # re-seeded per iteration: a new RandomState each would cost 30x more
        draws = np.empty((iterations, n_a + n_b))
        for i in range(iterations):
            state.seed(seed + 1 + i)
            draws[i] = state.uniform(0, 1, n_a + n_b)
    return draws[:, :n_a], draws[:, n_a:]


def epsilon_min(scores_a, scores_b, iterations: int = 1000, seed: int | None = None, dt: float = DT,
                confidence: float = 0.95) -> float:
    """ASO's ε_min of A's scores over B's (higher = better; < 0.5: A almost stochastically dominates B), as
    deepsig's `aso(scores_a, scores_b, confidence_level=confidence, num_bootstrap_iterations=iterations, dt=dt,
    seed=seed)` computes it."""
    a = np.sort(np.asarray(scores_a, dtype=float))
    b = np.sort(np.asarray(scores_b, dtype=float))
    if a.size == 0 or b.size == 0 or iterations < 1:
        raise ValueError("ASO needs scores on both sides and at least one bootstrap iteration")
    ratio = float(violation_ratios(a, b, dt))
    u_a, u_b = bootstrap_uniforms(a.size, b.size, iterations, seed)
    resampled_a = np.sort(a[quantile_indices(a.size, u_a)], axis=1)
    resampled_b = np.sort(b[quantile_indices(b.size, u_b)], axis=1)
    samples = violation_ratios(resampled_a, resampled_b, dt)
    const = np.sqrt(a.size * b.size / (a.size + b.size))
    sigma = np.std(const * (samples - ratio))
    return float(np.clip(ratio - (1 / const) * sigma * NormalDist().inv_cdf(1 - confidence), 0, 1))
