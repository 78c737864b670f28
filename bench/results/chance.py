"""Near chance: a run whose test accuracy is not clearly above what guessing gets.

Chance is the larger of the majority class's share of the test set (always answering it) and 1/K (K classes).
A run is near chance when its number of correct test items k out of n is not significantly above chance at 5%,
one-sided: the exact binomial P(X >= k | n, chance) > 0.05, i.e. the Clopper-Pearson 95% one-sided lower bound of
its accuracy does not clear chance. Such a run is flagged `near_chance` = 1 in its rows (beside `chance`), is
never marked best, and a comparison with one on either side says "near chance" instead of a verdict
(bench.reporting.nearchance). Rows written before issue 52 get the flag from their per-class recall rows (whose
`n` is each class's test support).
"""

from __future__ import annotations

from collections.abc import Iterable

ALPHA = 0.05


def chance_level(class_counts: Iterable[int], classes: int | None = None) -> float:
    """max(majority share, 1/K) of a test set with these per-class counts (K: `classes`, default the counts')."""
    counts = [int(c) for c in class_counts]
    total = sum(counts)
    k = max(classes or 0, len(counts), 1)
    return max(max(counts) / total if total else 0.0, 1.0 / k)


def near_chance(accuracy: float, n: int, chance: float, alpha: float = ALPHA) -> bool:
    """Whether `accuracy` on `n` test items is not clearly above `chance` (one-sided exact binomial test at
    `alpha`); False without items."""
    if not n or accuracy != accuracy or chance != chance:
        return False
    from scipy.special import bdtrc  # P(X > k) of Binomial(n, p): scipy.stats's binom.sf, without its 0.9 s import

    correct = int(round(accuracy * n))
    return bool(bdtrc(correct - 1, int(n), min(max(chance, 0.0), 1.0)) > alpha)


def describe(accuracy: float, chance: float) -> str:
    """The shard line's warning: `test accuracy 38.0% is not clearly above chance (40.0%: ...)`."""
    return (f"test accuracy {100 * accuracy:.1f}% is not clearly above chance ({100 * chance:.1f}%: the majority "
            f"class's share or 1/K, exact binomial test at 5%): near chance, not a result to rank")
