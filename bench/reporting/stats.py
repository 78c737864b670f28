"""Paired significance tests of two methods on the same test items (same dataset, encoder and seed).

* McNemar, per seed: on the 2x2 table of (baseline right?, method right?) over the items both runs scored.
  Rule: the exact binomial test when the discordant count b + c is below `EXACT_BELOW` (25), else the
  chi-square statistic with continuity correction (as statsmodels' `mcnemar` computes them).
* Paired bootstrap, pooled over seeds: the statistic is the accuracy difference (method - baseline) averaged
  over seeds; test items are the resampling unit (an item carries its outcomes in every paired seed), drawn
  with replacement `n_resamples` times (default 10,000) from a fixed RNG seed, in scipy `bootstrap`'s order
  and batches; the 95% interval is its linear percentile interval. The p-value is the two-sided bootstrap
  proportion p = min(1, 2 * min(share of resampled differences <= 0, share >= 0)), the p-value whose inversion gives
  the percentile interval (0 outside the 95% interval <=> p < 0.05, up to ties). The -1 / 0 / 1 differences of
  two runs are summed as integers, so a resample whose wins and losses cancel is exactly 0, a tie counted on
  both sides (float means put about one such resample in six a rounding error above or below 0).
* Benjamini-Hochberg (as statsmodels' `multipletests(method="fdr_bh")`) across all comparisons of one table.

The three are written out with numpy and scipy.special: scipy.stats and statsmodels cost a report 0.9 s of
imports; tests/test_stats_reference.py holds them equal to those libraries.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from bench.results import runfiles, store
from bench.errors import BenchError

log = logging.getLogger(__name__)

PREDICTIONS = store.PREDICTIONS
EXACT_BELOW = 25         # discordant pairs below which McNemar uses the exact binomial test
N_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95
BATCH = 500              # resamples evaluated at once (bounds memory on large test sets)
KEPT_COUNTS = 20_000_000  # resample x item counts kept between comparisons (float32: 80 MB at most)


def load_predictions(run_dir: Path | str) -> pd.DataFrame:
    """A run's test predictions: one row per example with `id`, `gold`, `predicted` and `correct`; a BenchError
    naming the fix when the file is missing or damaged."""
    try:
        return predictions_frame(run_dir)
    except runfiles.Damaged as exc:  # its stat may be the one written: only `clbench verify` finds it again
        raise BenchError(f"{exc}; {store.LEFT_OUT_FIX}") from exc


def predictions_frame(run_dir: Path | str) -> pd.DataFrame:
    """`load_predictions`, a damaged file raised as `runfiles.Damaged`."""
    path = Path(run_dir) / PREDICTIONS
    if not path.is_file():
        raise BenchError(f"{path} is missing, so the run cannot be compared item by item; "
                         f"re-run it with `clbench run ... --overwrite`")
    records = runfiles.read_jsonl_gz(Path(run_dir), PREDICTIONS)
    columns = {name: [record.get(name) for record in records] for name in ("id", "gold", "predicted")}
    if any(value is None or value != value for values in columns.values() for value in values):  # missing or NaN
        raise BenchError(f"{path} has records without id, gold or predicted; re-run the run with --overwrite")
    ids = [str(value) for value in columns["id"]]
    if len(set(ids)) < len(ids):
        raise BenchError(f"{path} repeats example ids, so items cannot be paired; re-run the run with --overwrite")
    correct = [g == p for g, p in zip(columns["gold"], columns["predicted"])]
    return pd.DataFrame({"id": ids, "gold": columns["gold"], "predicted": columns["predicted"], "correct": correct})


def load_run_predictions(results_dir: Path | str, run_keys: Iterable[str]) -> dict[str, pd.DataFrame]:
    """`load_predictions` for each run key under `results_dir`."""
    return {key: load_predictions(Path(results_dir) / key) for key in dict.fromkeys(run_keys)}


def readable_predictions(frame: pd.DataFrame, results_dir: Path | str, run_keys: Iterable[str]
                         ) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The test predictions of `run_keys`, and `frame` without the runs whose predictions file is damaged: those
    are left out of the comparison, named in `frame.attrs["left_out"]` (a note on the table and the page) and in
    one warning line; the others are compared."""
    predictions, damaged = {}, {}
    for key in dict.fromkeys(run_keys):
        try:
            predictions[key] = predictions_frame(Path(results_dir) / key)
        except runfiles.Damaged as exc:
            damaged[key] = str(exc)
    if not damaged:
        return frame, predictions
    log.warning(store.left_out_line(damaged, Path(results_dir), "the comparison"))
    kept = frame[~frame["run_key"].isin(damaged)].reset_index(drop=True)
    kept.attrs[store.LEFT_OUT] = {**(frame.attrs.get(store.LEFT_OUT) or {}), **damaged}
    return kept, predictions


@dataclass(frozen=True)
class McNemarResult:
    """McNemar's test on paired outcomes: the 2x2 counts, statistic, p-value and which variant ran."""

    both: int            # both right
    only_a: int          # a right, b wrong
    only_b: int          # a wrong, b right
    neither: int
    statistic: float
    pvalue: float
    exact: bool


def mcnemar_test(correct_a: np.ndarray, correct_b: np.ndarray, exact_below: int = EXACT_BELOW) -> McNemarResult:
    """McNemar's test of a vs b on the same items (exact binomial when discordant pairs < `exact_below`)."""
    a, b = np.asarray(correct_a, dtype=bool), np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError("paired outcomes must have the same length")
    table = [[int(np.sum(a & b)), int(np.sum(a & ~b))], [int(np.sum(~a & b)), int(np.sum(~a & ~b))]]
    discordant = table[0][1] + table[1][0]
    exact = discordant < exact_below
    if discordant == 0:
        statistic, pvalue = 0.0, 1.0
    elif exact:  # two-sided binomial test of the smaller discordant count at p = 1/2
        statistic = float(min(table[0][1], table[1][0]))
        pvalue = min(1.0, 2 * float(special.bdtr(statistic, discordant, 0.5)))
    else:  # chi-square with 1 df, continuity-corrected
        statistic = (abs(table[0][1] - table[1][0]) - 1) ** 2 / discordant
        pvalue = float(special.chdtrc(1, statistic))
    return McNemarResult(table[0][0], table[0][1], table[1][0], table[1][1], statistic, pvalue, exact)


@dataclass(frozen=True)
class BootstrapResult:
    """Paired bootstrap of a mean difference: observed value, percentile interval, two-sided p-value."""

    delta: float
    low: float
    high: float
    pvalue: float
    n_items: int
    n_resamples: int


def resample_indices(n_items: int, n_resamples: int, seed: int) -> Iterable[np.ndarray]:
    """The bootstrap's item indices, batch by batch (`BATCH` resamples x `n_items`), as scipy `bootstrap` draws
    them from `default_rng(seed)`. Drawn as int32: the same numbers as numpy's default int64 (items below 2**32
    are drawn 32 bits at a time either way; tests/test_stats_reference.py checks it), in half the memory."""
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, BATCH):
        yield rng.integers(0, n_items, (min(BATCH, n_resamples - start), n_items), dtype=np.int32)


@functools.lru_cache(maxsize=2)
def resample_counts(n_items: int, n_resamples: int, seed: int) -> np.ndarray:
    """How often each resample (row) draws each item (column), from resample_indices: float32, read-only, drawn
    once per (items, resamples, seed), so that a page's comparisons on one test set share one draw and each
    costs one matrix-vector product."""
    counts = np.empty((n_resamples, n_items), dtype=np.float32)
    done = 0
    for batch in resample_indices(n_items, n_resamples, seed):
        for drawn in batch:
            counts[done] = np.bincount(drawn, minlength=n_items)
            done += 1
    counts.flags.writeable = False
    return counts


def resampled_means(matrix: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The mean over items (and rows) of each bootstrap resample of `matrix`'s columns. Whole-number differences
    (the -1 / 0 / 1 of two runs' outcomes) are summed as integers and divided once: exact, so a resample whose
    wins and losses cancel is 0, not a rounding error beside it (float32 sums of integers below 2**24 are exact);
    other values are averaged as floats."""
    rows, n_items = matrix.shape
    totals = np.rint(matrix.sum(axis=0))
    if np.array_equal(matrix, np.rint(matrix)) and np.abs(totals).sum() < 2 ** 24:
        if n_items * n_resamples <= KEPT_COUNTS:
            sums = resample_counts(n_items, n_resamples, seed) @ totals.astype(np.float32)
        else:
            whole = totals.astype(np.int32)
            sums = np.concatenate([whole[batch].sum(axis=-1, dtype=np.int64)
                                   for batch in resample_indices(n_items, n_resamples, seed)])
        return sums.astype(np.float64) / (rows * n_items)
    per_item = matrix.mean(axis=0)
    return np.concatenate([per_item[batch].mean(axis=-1) for batch in resample_indices(n_items, n_resamples, seed)])


def paired_bootstrap(differences: np.ndarray, n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                     confidence: float = CONFIDENCE) -> BootstrapResult:
    """Bootstrap over items of the mean of `differences` (shape seeds x items, or items): each resample
    draws items with replacement and keeps every seed's outcome of a drawn item."""
    matrix = np.atleast_2d(np.asarray(differences, dtype=float))
    per_item = matrix.mean(axis=0)
    n_items = per_item.size
    if n_items < 2:
        return BootstrapResult(float(per_item.mean()) if n_items else float("nan"), float("nan"), float("nan"),
                               float("nan"), n_items, 0)
    if n_resamples < 1:
        raise BenchError("the bootstrap needs at least 1 resample (--bootstrap N)")
    resampled = resampled_means(matrix, n_resamples, seed)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(resampled, [alpha, 1 - alpha])
    pvalue = min(1.0, 2 * min(float(np.mean(resampled <= 0)), float(np.mean(resampled >= 0))))
    return BootstrapResult(float(per_item.mean()), float(low), float(high), pvalue, n_items, n_resamples)


def bh_adjust(pvalues: Iterable[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values); missing (NaN) p-values stay NaN and are not counted."""
    p = np.asarray(list(pvalues), dtype=float)
    q = np.full(p.shape, np.nan)
    finite = np.isfinite(p)
    if finite.any():
        order = np.argsort(p[finite], kind="mergesort")
        ranked = p[finite][order] * finite.sum() / np.arange(1, finite.sum() + 1)
        adjusted = np.empty(order.size)
        adjusted[order] = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
        q[finite] = adjusted
    return q


@dataclass
class PairedComparison:
    """A method against a baseline on one dataset x encoder, over the paired runs both have (keyed by draw:
    bench.reporting.pairs, or by seed)."""

    pairs: list                             # the pair keys, sorted
    deltas: list[float]                     # per pair: method accuracy - baseline accuracy (fractions)
    mcnemar: list[McNemarResult]
    bootstrap: BootstrapResult | None
    notes: list[str] = field(default_factory=list)
    unpaired: list = field(default_factory=list)   # pair keys only one of the two methods has
    items: np.ndarray | None = None         # pairs x items (scored in every pair): method - baseline, -1 / 0 / 1
    labels: list[str] = field(default_factory=list)  # the pairs as notes name them (`label`)

    @property
    def delta(self) -> float:
        """Mean over paired runs of the accuracy difference."""
        return float(np.mean(self.deltas)) if self.deltas else float("nan")


def compare_predictions(baseline: Mapping[Any, pd.DataFrame], method: Mapping[Any, pd.DataFrame],
                        n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                        names: tuple[str, str] = ("baseline", "method"),
                        label: Callable[[Any], str] = lambda s: f"seed {s}") -> PairedComparison:
    """Compare per-run predictions of a method with a baseline's (pair key, e.g. seed or draw -> `load_predictions`
    frame): McNemar per pair and one bootstrap pooled over pairs; pairs one side lacks are left out and noted
    (`label` names a pair in notes)."""
    unpaired = sorted(set(baseline) ^ set(method))
    notes = [f"{paired_list([label(k) for k in only])}: {side} only, left out" for side, only in
             ((names[0], sorted(set(baseline) - set(method))), (names[1], sorted(set(method) - set(baseline))))
             if only]
    pairs, deltas, tests, columns = [], [], [], {}
    for s in sorted(set(baseline) & set(method)):
        joined = baseline[s].merge(method[s], on="id", suffixes=("_a", "_b"))
        if joined.empty:
            notes.append(f"{label(s)}: no test items in common, left out")
            continue
        if (joined["gold_a"] != joined["gold_b"]).any():
            notes.append(f"{label(s)}: the runs disagree on gold labels of the same item ids (different data?), "
                         f"left out")
            continue
        lost = max(len(baseline[s]), len(method[s])) - len(joined)
        if lost:
            notes.append(f"{label(s)}: {lost} test items not in both runs, left out")
        a, b = joined["correct_a"].to_numpy(bool), joined["correct_b"].to_numpy(bool)
        pairs.append(s)
        deltas.append(float(b.mean() - a.mean()))
        tests.append(mcnemar_test(a, b))
        columns[len(pairs) - 1] = pd.Series(b.astype(np.int8) - a.astype(np.int8), index=joined["id"].to_numpy())
    if not pairs:
        return PairedComparison([], [], [], None, notes, unpaired)
    items = pd.DataFrame(columns)
    complete = items.dropna()
    if len(complete) < len(items):
        notes.append(f"{len(items) - len(complete)} items not scored in every paired run, left out of the item "
                     f"terms")
    matrix = complete.to_numpy(dtype=float).T
    result = paired_bootstrap(matrix, n_resamples, seed)
    return PairedComparison(pairs, deltas, tests, result, notes, unpaired, matrix, [label(k) for k in pairs])


def paired_list(labels: list[str]) -> str:
    """`seed 3`, `seeds 2, 3` (labels `seed N`) or the labels joined."""
    if labels and all(text.startswith("seed ") and text[5:].isdigit() for text in labels):
        return seed_list([int(text.removeprefix("seed ")) for text in labels])
    return ", ".join(labels)


def seed_list(seeds: list[int]) -> str:
    """`seed 3` or `seeds 2, 3`."""
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
