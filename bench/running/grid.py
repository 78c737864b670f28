"""Sweep dimensions beyond methods x datasets x encoders x seeds: knob grids (`--grid lr=2e-5,5e-5`, tuned and
then selected on validation by `clbench report --select-by validation`) and data regimes (`--train-size 20,100`,
`--label-noise 0,0.2`: every value is run and reported, none is selected). Pure and torch-free: the command line
checks a sweep with it before anything loads, and the runner expands the same sweep into shards."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.spec import REGIME_FIELDS, TrainConfig

MAX_SHARDS = 300  # a run that plans more shards than this needs --yes (a mistyped grid costs days, not minutes)

Axes = tuple[tuple[str, tuple[Any, ...]], ...]  # (setting or method.knob, its values), in a fixed order
Combo = tuple[dict[str, Any], dict[str, Any]]  # (training settings, the method's knobs) of one combination


def method_axes(axes: Axes, method: str) -> Axes:
    """The axes that vary `method`'s runs: every training setting, and its own knobs (`method.knob`)."""
    return tuple((key, values) for key, values in axes if "." not in key or key.split(".", 1)[0] == method)


def combinations(axes: Axes, method: str, sample: int = 0, grid_seed: int = 0) -> list[Combo]:
    """`method`'s knob combinations: the product of its axes (one empty combination without any), or `sample`
    of them drawn at random with `grid_seed` (all when the product is no larger), in product order."""
    mine = method_axes(axes, method)
    product = list(itertools.product(*(values for _, values in mine)))
    if 0 < sample < len(product):
        chosen = np.random.default_rng(grid_seed).choice(len(product), size=sample, replace=False)
        product = [product[i] for i in sorted(int(i) for i in chosen)]
    combos = []
    for values in product:
        train = {key: value for (key, _), value in zip(mine, values) if "." not in key}
        knobs = {key.split(".", 1)[1]: value for (key, _), value in zip(mine, values) if "." in key}
        combos.append((train, knobs))
    return combos


def regimes(lists: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the data-regime values (REGIME_FIELDS -> values), each checked as TrainConfig would;
    [{}] when none is given."""
    keys = [key for key in REGIME_FIELDS if key in lists]
    result = [dict(zip(keys, values)) for values in itertools.product(*(lists[k] for k in keys))]
    for regime in result:
        TrainConfig(**regime)  # e.g. --train-size with --shots, or a noise of 1.5
    return result or [{}]


def check_axes(axes: Axes, methods: Sequence[str], fixed: Mapping[str, Any]) -> None:
    """A BenchError for a grid that cannot mean what it says: a data regime gridded (regimes are run, not tuned),
    a knob of a method that is not in this run, a setting both fixed and gridded, a repeated value or an axis
    without values."""
    for key, values in axes:
        if key in REGIME_FIELDS:
            flag = key.replace("_", "-")
            raise BenchError(f"--grid {key}: {key} is a data regime, not a knob to tune (every value is run and "
                             f"reported, none selected): give --{flag} {','.join(map(str, values))} instead")
        if "." in key and key.split(".", 1)[0] not in methods:
            raise BenchError(f"--grid {key}: {key.split('.', 1)[0]} is not among the methods of this run "
                             f"({', '.join(methods)}); add it to --methods or drop the grid")
        if key in fixed:
            raise BenchError(f"--grid {key}: {key} is also set to {fixed[key]!r} (a flag, --set or the config "
                             "file); give it one way")
        if not values:
            raise BenchError(f"--grid {key}: no values; write --grid {key}=V1,V2")
        if len(set(map(repr, values))) < len(values):
            raise BenchError(f"--grid {key}: a value is repeated ({', '.join(map(repr, values))}); list each once")


def shard_count(axes: Axes, methods: Sequence[str], sample: int, n_regimes: int, n_datasets: int,
                n_encoders: int, n_seeds: int) -> int:
    """How many shards a sweep plans."""
    combos = sum(len(combinations(axes, method, sample)) for method in methods)
    return combos * n_regimes * n_datasets * n_encoders * n_seeds


def check_size(count: int, confirmed: bool, limit: int = MAX_SHARDS) -> None:
    """A BenchError for a sweep of more than `limit` shards that was not confirmed with --yes."""
    if count > limit and not confirmed:
        raise BenchError(f"this run plans {count} shards, more than {limit}: add --yes to run them all, or narrow "
                         "it (--sample N draws N knob combinations; fewer seeds, datasets or grid values)")


def budget_line(axes: Axes, methods: Sequence[str], sample: int, n_seeds: int) -> str:
    """`clbench: tuning budget: ce 1 combination, supcon 4 combinations, x 5 seeds` (which methods get more
    chances to fit validation), or '' without a grid."""
    if not axes:
        return ""
    counts = [f"{m} {n} combination{'s' if n != 1 else ''}"
              for m, n in ((m, len(combinations(axes, m, sample))) for m in methods)]
    return f"clbench: tuning budget: {', '.join(counts)}, x {n_seeds} seed{'s' if n_seeds != 1 else ''} each"
