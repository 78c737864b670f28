"""The leaderboard of the HTML report (`bench.reporting.html`): methods ranked across datasets, as MTEB and
HELM rank models, and what each run cost.

Ranking. A cell is one dataset x encoder x method: the mean clean test accuracy over its seeds (collapsed runs
follow `bench.reporting.collapsed`: left out, and a cell whose mean includes one, kept by a filter, is not
ranked). An entry is one encoder x method. On each dataset the entries with a cell are ranked by their mean,
1 = best; means equal at the tables' displayed precision (0.01 points) tie and share the average of the ranks
they span. An entry's mean rank is the mean over the datasets it has a cell on; a missing cell is left out,
not counted as last, so `datasets` says how many of the page's datasets a mean rank covers. The win rate is
HELM's: of every head-to-head meeting with another entry on a dataset both have a cell on, the share won, a
tie counting one half; a pair that never meets does not count.

Cost. Per run: training time (`train_seconds`: every epoch, across resumes) and wall time of the finishing
process (`wall_seconds`) from the rows; the encoder's parameter count and the training speed (sequences/s over
all epochs: sequences seen / training seconds) from the run's train_log.json, where `clbench run` records
them (`encoder.params`: the encoder only, the classification and projection heads are not counted).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.reporting.cellframes import DIGITS
from bench.reporting import nearchance
from bench.reporting.collapsed import split_runs
from bench.reporting.tables import CELL, clean_accuracy, method_key
from bench.errors import BenchError
from bench.results import runfiles, store

ENTRY = ["encoder", "method"]


def accuracy_cells(frame: pd.DataFrame, include: bool = False, digits: int = DIGITS) -> tuple[pd.DataFrame, list[str]]:
    """Per dataset x encoder x method: seeds, mean accuracy and the mean in % rounded as the tables show it
    (`shown`); cells whose mean includes a collapsed run are left out. Returns the cells and their notes."""
    split = split_runs(clean_accuracy(frame), frame, include)
    rows = split.kept[split.kept["value"].notna()]
    cells = rows.groupby(CELL, sort=True)["value"].agg(seeds="count", mean="mean").reset_index()
    flagged = split.cells(CELL)
    notes = split.notes()
    if flagged:
        cells = cells[[tuple(c) not in flagged for c in cells[CELL].itertuples(index=False, name=None)]]
        notes.append(f"not ranked: {len(flagged)} cell(s) whose mean includes a collapsed run")
    near = nearchance.cells(rows, CELL)
    if near:  # a result, ranked as measured, but said
        notes.append(f"{len(near)} cell(s) include a run near chance ({nearchance.WHAT}): "
                     f"{', '.join('/'.join(c) for c in sorted(near))}; ranked as measured, never a verdict")
    cells = cells.assign(shown=(100 * cells["mean"]).round(digits))
    return cells.reset_index(drop=True), notes


def dataset_ranks(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with their rank on their dataset (1 = best; ties share the average rank)."""
    return cells.assign(rank=cells.groupby("dataset")["shown"].rank(ascending=False, method="average"))


def head_to_head(cells: pd.DataFrame) -> pd.DataFrame:
    """Per entry: meetings with other entries on shared datasets and the points won (a win 1, a tie 1/2)."""
    pairs = cells.merge(cells, on="dataset", suffixes=("", "_other"))
    pairs = pairs[(pairs["encoder"] != pairs["encoder_other"]) | (pairs["method"] != pairs["method_other"])]
    points = np.where(pairs["shown"] > pairs["shown_other"], 1.0,
                      np.where(pairs["shown"] == pairs["shown_other"], 0.5, 0.0))
    pairs = pairs.assign(points=points)
    return pairs.groupby(ENTRY)["points"].agg(meetings="count", won="sum").reset_index()


def ranking(frame: pd.DataFrame, include: bool = False) -> pd.DataFrame:
    """One row per encoder x method: mean rank, win rate (%), datasets ranked on (of the page's), fewest seeds
    of its cells and its mean accuracy per dataset; sorted by mean rank, then win rate. Empty when no dataset
    has two entries (nothing to rank). `attrs["notes"]`: how ties and missing cells are handled."""
    cells, notes = accuracy_cells(frame, include)
    contested = cells.groupby("dataset")["method"].transform("size") > 1
    if not contested.any():
        return pd.DataFrame(columns=[*ENTRY, "mean_rank", "win_rate", "datasets", "of", "fewest_seeds"])
    ranked = dataset_ranks(cells)
    table = ranked.groupby(ENTRY).agg(mean_rank=("rank", "mean"), datasets=("dataset", "nunique"),
                                      fewest_seeds=("seeds", "min")).reset_index()
    table = table.merge(head_to_head(cells), on=ENTRY, how="left")
    table["win_rate"] = 100 * table["won"] / table["meetings"].where(table["meetings"] > 0)
    table["of"] = cells["dataset"].nunique()
    wide = ranked.pivot_table(index=ENTRY, columns="dataset", values="shown", aggfunc="first")
    table = table.merge(wide.reset_index(), on=ENTRY, how="left")
    table = table.sort_values(["mean_rank", "win_rate"], ascending=[True, False], kind="stable",
                              na_position="last").reset_index(drop=True)
    table.attrs["datasets"] = sorted(cells["dataset"].unique())
    table.attrs["notes"] = RANKING_NOTES + notes
    return table.drop(columns=["won"])


RANKING_NOTES = [
    "rank: per dataset by mean test accuracy over seeds, 1 = best; means equal at 0.01 points tie and share "
    "the average rank",
    "mean rank: over the datasets the method has a cell on (a missing cell is left out, not counted as last: "
    "compare mean ranks only between methods with the same `datasets`)",
    "win rate: share of head-to-head meetings won against other methods on the datasets both ran on "
    "(a tie counts 1/2; pairs that never meet do not count)",
]


# ----------------------------------------------------------------------------------------------- cost

def run_speed(history: list[dict[str, Any]]) -> float:
    """Training sequences per second over all epochs: sequences seen / training seconds (NaN if unrecorded)."""
    timed = [(h["train_seq_per_s"], h["seconds"]) for h in history
             if isinstance(h.get("train_seq_per_s"), (int, float)) and isinstance(h.get("seconds"), (int, float))]
    seconds = sum(s for _, s in timed)
    return sum(r * s for r, s in timed) / seconds if seconds > 0 else math.nan


def run_log(run_dir: Path) -> tuple[float, float]:
    """The encoder's parameter count and the training speed recorded in a run's train_log.json (NaN each when
    the file or the entry is missing)."""
    path = run_dir / store.TRAIN_LOG
    try:
        log = runfiles.read_json(run_dir, store.TRAIN_LOG) if path.is_file() else {}
    except (ValueError, BenchError):  # a damaged log: its numbers are unknown, the rest of the page stands
        log = {}
    params = (log.get("encoder") or {}).get("params")
    return (float(params) if isinstance(params, (int, float)) else math.nan,
            run_speed(log.get("history") or []))


def run_costs(frame: pd.DataFrame, source: Path, include: bool = False) -> pd.DataFrame:
    """One row per run (clean test-accuracy rows, collapsed runs as in the tables): dataset, encoder, method,
    seed, train and wall seconds, encoder parameters and training sequences/s."""
    runs = split_runs(clean_accuracy(frame), frame, include).kept.drop_duplicates("run_key")
    columns = [*CELL, "run_key", "seed"]
    costs = runs[columns].copy()
    for column in ("train_seconds", "wall_seconds"):
        costs[column] = pd.to_numeric(runs[column], errors="coerce") if column in runs else math.nan
    logged = [run_log(Path(source) / str(key)) for key in costs["run_key"]]
    costs["params"] = [p for p, _ in logged]
    costs["seq_per_s"] = [s for _, s in logged]
    return costs.reset_index(drop=True)


def cost_table(costs: pd.DataFrame) -> pd.DataFrame:
    """Per dataset x encoder x method: runs, mean train and wall seconds per run, mean training sequences/s and
    the encoder's parameters (NaN where nothing was recorded), in the tables' method order."""
    table = costs.groupby(CELL).agg(runs=("run_key", "count"), train_seconds=("train_seconds", "mean"),
                                    wall_seconds=("wall_seconds", "mean"), seq_per_s=("seq_per_s", "mean"),
                                    params=("params", "max")).reset_index()
    order = table.assign(_m=table["method"].map(method_key)).sort_values(["dataset", "encoder", "_m"])
    return order.drop(columns="_m").reset_index(drop=True)


def entry_costs(costs: pd.DataFrame) -> pd.DataFrame:
    """Per encoder x method over all its runs: median train seconds per run, median sequences/s, parameters."""
    return costs.groupby(ENTRY).agg(train_seconds=("train_seconds", "median"), seq_per_s=("seq_per_s", "median"),
                                    params=("params", "max")).reset_index()


def cost_notes(costs: pd.DataFrame) -> list[str]:
    """What the cost columns are, and which of them no run recorded."""
    notes = ["train s: training time of a run over all its epochs (rows: train_seconds); wall s: the finishing "
             "process from start to test predictions (rows: wall_seconds); both means over runs",
             "seq/s: training sequences per second over all epochs (train_log.json); params: the encoder's "
             "parameters as recorded when it was built (train_log.json encoder.params; the heads are not counted)"]
    missing = [name for column, name in (("train_seconds", "train s"), ("wall_seconds", "wall s"),
                                         ("seq_per_s", "seq/s"), ("params", "params")) if costs[column].isna().all()]
    if missing:
        notes.append(f"not recorded by any of these runs: {', '.join(missing)} (older runs lack them; shown as —)")
    return notes
