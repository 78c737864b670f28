"""Near-chance runs in reports (the rule: bench.results.chance): flagged wherever a collapsed run is, marked °,
never best, and never given a verdict (a comparison with one says "near chance").

Unlike a collapsed run, a near-chance run stays in the means: it is a result, just not one to rank best. A
comparison where half or more of either side's paired runs are near chance says "near chance" instead of a
verdict; fewer are named in a note and counted as measured. Light imports only (pandas; scipy when rows must be
flagged here).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COLUMN = "near_chance"
MARK = "°"
WHAT = "test accuracy not clearly above chance: the majority class's share or 1/K, exact binomial test at 5%"
VERDICT = "near chance"


def fill(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with `near_chance` (0/1) and `chance` on every row of a run: as stored, or for runs stored without
    them (before issue 52) from their clean test accuracy and per-class recall supports."""
    if frame.empty or "run_key" not in frame or "evaluator" not in frame:
        return frame
    stored = frame[COLUMN] if COLUMN in frame else pd.Series(np.nan, index=frame.index)
    stored = pd.to_numeric(stored, errors="coerce")
    clean = frame[(frame["evaluator"] == "clean") & (frame.get("split", "") == "test")]
    known = clean.loc[stored.loc[clean.index].notna()]
    flag = known.groupby("run_key")[COLUMN].max().astype(float).to_dict() if not known.empty else {}
    level = pd.to_numeric(known["chance"], errors="coerce").groupby(known["run_key"]).max().to_dict() \
        if "chance" in known and not known.empty else {}
    missing = clean[~clean["run_key"].isin(flag)]
    if not missing.empty:
        computed = from_rows(missing)
        flag.update({k: float(v) for k, (v, _) in computed.items()})
        level.update({k: c for k, (_, c) in computed.items()})
    keys = frame["run_key"]
    return frame.assign(**{COLUMN: keys.map(flag).fillna(0).astype(int), "chance": keys.map(level)})


def from_rows(clean: pd.DataFrame) -> dict[str, tuple[int, float]]:
    """run key -> (near chance 0/1, chance) from clean test rows: the accuracy row and the per-class recall rows."""
    from bench.results.chance import chance_level, near_chance

    label = clean["label"].astype(str) if "label" in clean else pd.Series("", index=clean.index)
    overall = clean[(clean["metric"] == "accuracy") & (label == "")].drop_duplicates("run_key")
    recall = clean[(clean["metric"] == "recall") & (label != "")]
    if overall.empty or recall.empty or "n" not in clean:
        return {}
    supports = pd.to_numeric(recall["n"], errors="coerce").fillna(0).astype(int).groupby(recall["run_key"]).agg(list)
    found = {}
    for key, accuracy, n in zip(overall["run_key"], overall["value"], pd.to_numeric(overall["n"])):
        if key not in supports.index:
            continue
        level = chance_level(supports[key], len(supports[key]))
        found[str(key)] = (int(near_chance(float(accuracy), int(n), level)), level)
    return found


def keys(frame: pd.DataFrame) -> list[str]:
    """The run keys (sorted) flagged near chance."""
    if frame.empty or COLUMN not in frame or "run_key" not in frame:
        return []
    flagged = pd.to_numeric(frame[COLUMN], errors="coerce").fillna(0) > 0
    return sorted({str(k) for k in frame.loc[flagged, "run_key"]})


def cells(rows: pd.DataFrame, columns: list[str], frame: pd.DataFrame | None = None) -> set[tuple]:
    """The groups of `rows` by `columns` that hold a near-chance run (flags read from `frame`, default `rows`)."""
    flagged = set(keys(rows if frame is None else frame))
    if not flagged or rows.empty:
        return set()
    mine = rows[rows["run_key"].isin(flagged)]
    return {tuple(values) for values in mine[columns].itertuples(index=False, name=None)}


def no_verdict(sides: list[list[str]], flagged: set[str]) -> bool:
    """Whether a comparison gets "near chance" instead of a verdict: half or more of either side's runs (`sides`:
    the run keys of the baseline's and the method's paired runs) are among the `flagged` near-chance runs."""
    return any(side and 2 * len(flagged.intersection(side)) >= len(side) for side in sides)


def note(run_keys: list[str]) -> list[str]:
    """The table note about near-chance runs ([] when none)."""
    if not run_keys:
        return []
    return [f"{MARK} = the mean includes {len(run_keys)} run(s) near chance ({WHAT}): {', '.join(run_keys)}; "
            f"such a cell is never marked best, and a comparison where half or more of a side's runs are near chance "
            f"gets no verdict"]
