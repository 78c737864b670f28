"""Which runs are paired: a method's run and the baseline's run trained on the same draw, i.e. the same training
and validation sample (data seed, validation carve, draw kind, and the seed, which also draws the sample in a
per-seed regime) within one dataset x regime x encoder. Never the seed alone: two draw sets in one results folder
(data seed 0 seeds 1-10 and data seed 1 seeds 1-5) are 15 pairs, not 10 with 5 collisions.

Rows written before the draw columns existed (issue 52) are read with their defaults (data seed 0, validation
fraction 0.1, a fixed draw), which is what those runs had unless a `--data-seed` was given.
Light imports only (pandas).
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass, field

import pandas as pd

DRAW_COLUMNS = {"data_seed": 0, "val_fraction": 0.1, "data_draw": "fixed"}  # with their defaults for older rows
PairKey = tuple[Hashable, ...]  # (data_seed, val_fraction, data_draw, seed)


def filled(frame: pd.DataFrame, defaults: dict[str, object]) -> pd.DataFrame:
    """A copy of `frame` with the columns of `defaults` present and filled with them where missing (rows written
    before those columns existed)."""
    frame = frame.copy()
    for name, default in defaults.items():
        if name not in frame:
            frame[name] = default
        elif isinstance(default, str):
            frame[name] = frame[name].where(frame[name].notna() & (frame[name] != ""), default)
        else:
            frame[name] = pd.to_numeric(frame[name], errors="coerce").fillna(default)
    return frame


def with_draws(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with the draw columns present and filled (older rows: the defaults)."""
    frame = filled(frame, DRAW_COLUMNS)
    frame["data_seed"] = frame["data_seed"].astype(int)
    return frame


def pair_key(row: pd.Series | dict) -> PairKey:
    """The draw a run was trained on, as the key that pairs it: (data_seed, val_fraction, data_draw, seed)."""
    return (int(row["data_seed"]), round(float(row["val_fraction"]), 6), str(row["data_draw"]), int(row["seed"]))


def draw_set(key: PairKey) -> PairKey:
    """The draw set of a pair (its key without the seed)."""
    return key[:-1]


Varying = tuple[bool, bool, bool]  # whether the data seed, validation fraction and draw kind vary among some pairs


def varying(keys: list[PairKey]) -> Varying:
    """Which parts of the draw vary among the pairs `keys` (what their names must show)."""
    return tuple(len({k[i] for k in keys}) > 1 for i in range(3))  # type: ignore[return-value]


def label(key: PairKey, vary: Varying = (False, False, False)) -> str:
    """A pair as table cells name it, showing the parts of the draw that vary: `s3`, `d1 s3` (data seed 1),
    `d1 val0.2 per-seed s3`."""
    data_seed, fraction, draw, seed = key
    parts = [f"d{data_seed}"] * vary[0] + [f"val{fraction:g}"] * vary[1] + [str(draw)] * vary[2]
    return " ".join([*parts, f"s{seed}"])


def described(key: PairKey, vary: Varying = (False, False, False)) -> str:
    """A pair as notes name it: `seed 3`, `data seed 1 seed 3`, `data seed 1, validation fraction 0.2, per-seed
    draw, seed 3`."""
    data_seed, fraction, draw, seed = key
    parts = [f"data seed {data_seed}"] * vary[0] + [f"validation fraction {fraction:g}"] * vary[1] + \
        [f"{draw} draw"] * vary[2]
    return ", ".join([*parts, f"seed {seed}"]) if parts else f"seed {seed}"


def namer(keys: list[PairKey]):
    """`described` for the pairs `keys`."""
    vary = varying(keys)
    return lambda key: described(key, vary)


DRAW_KNOBS = ("data_seed",)  # recorded among a run's changed settings (`knobs`), yet a draw, not a knob


def draw_free(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with `knobs` without the data seed, and the `combo` of a run on another data seed made that of the
    same method and knobs on the default draw (or, with none, one of its own draw sets'): draw sets of one
    combination are one combination to the page, selection and figures, as the seeds of one draw set are."""
    if frame.empty or "knobs" not in frame or "combo" not in frame:
        return frame
    stripped, moved = [], []
    for text in frame["knobs"]:
        try:
            knobs = json.loads(text) if isinstance(text, str) and text else None
        except ValueError:
            knobs = None
        if not isinstance(knobs, dict) or not any(k in knobs for k in DRAW_KNOBS):
            stripped.append(text)
            moved.append(False)
            continue
        stripped.append(json.dumps({k: v for k, v in knobs.items() if k not in DRAW_KNOBS}, sort_keys=True,
                                   separators=(",", ":")))
        moved.append(True)
    frame = frame.assign(knobs=stripped)
    if not any(moved):
        return frame
    moved_rows = pd.Series(moved, index=frame.index)
    version = frame["method_version"] if "method_version" in frame else pd.Series(1, index=frame.index)
    keys = list(zip(frame["dataset"], frame["encoder"], frame["method"], version.astype(str), frame["knobs"]))
    home: dict[tuple, str] = {}
    for key, combo, away in zip(keys, frame["combo"].astype(str), moved_rows):
        if not away and combo:
            home.setdefault(key, combo)
    for key, combo, away in sorted(zip(keys, frame["combo"].astype(str), moved_rows)):
        if away:
            home.setdefault(key, combo)  # no run on the default draw: the smallest of its own combos
    return frame.assign(combo=[home.get(key, combo) for key, combo in zip(keys, frame["combo"].astype(str))])


def runs_by_pair(accuracy: pd.DataFrame) -> dict[tuple[str, str, str, PairKey], list[str]]:
    """(dataset, encoder, method, pair key) -> the run keys (sorted) of clean accuracy rows `accuracy`; more than
    one key means several configurations (e.g. knob settings) on one draw."""
    frame = with_draws(accuracy)
    found: dict[tuple[str, str, str, PairKey], list[str]] = {}
    for row in frame.to_dict("records"):
        found.setdefault((row["dataset"], row["encoder"], row["method"], pair_key(row)), []).append(str(row["run_key"]))
    return {key: sorted(set(keys)) for key, keys in found.items()}


@dataclass(frozen=True)
class Pairing:
    """How one comparison's runs were paired, for its cells: the draw sets of its pairs, the runs left out for
    sharing a draw with another configuration (`crowded`), the paired runs near chance (`near`), which parts of
    the draw vary among the group's pairs (`vary`, what their names show), and whether half or more of a side's
    runs are near chance (`no_verdict`: bench.reporting.nearchance)."""

    draw_sets: int = 1
    crowded: int = 0
    near: list[str] = field(default_factory=list)
    vary: Varying = (False, False, False)
    no_verdict: bool = False


def draw_sets(keys: list[PairKey]) -> int:
    """How many draw sets the pairs `keys` come from."""
    return len({draw_set(k) for k in keys})
