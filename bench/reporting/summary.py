"""A compact mean ± std table over seeds, printed after `bench run`."""

from __future__ import annotations

from typing import Any

import pandas as pd

KEYS = ["dataset", "encoder", "method"]


def summary_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Per dataset x encoder x method: seeds, test accuracy and macro-F1 (mean ± std, in %), wall time."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame[(frame["evaluator"] == "clean") & (frame["split"] == "test") & (frame["label"] == "")]
    wide = frame.pivot_table(index=[*KEYS, "seed"], columns="metric", values="value").reset_index()
    wall = frame.groupby([*KEYS, "seed"])["wall_seconds"].first().reset_index()
    wide = wide.merge(wall, on=[*KEYS, "seed"])
    out = []
    for keys, group in wide.groupby(KEYS, sort=True):
        out.append({**dict(zip(KEYS, keys)), "seeds": len(group),
                    "accuracy": mean_std(group["accuracy"]), "macro_f1": mean_std(group["macro_f1"]),
                    "wall_s": f"{group['wall_seconds'].mean():.0f}"})
    return pd.DataFrame(out)


def mean_std(values: pd.Series) -> str:
    """`mean ± std` in percent (std over seeds, ddof=1; just the mean for one seed)."""
    mean = 100 * values.mean()
    if len(values) < 2:
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {100 * values.std(ddof=1):.2f}"


DETAIL_COLUMNS = ("test", "capability")  # per-test / per-capability evaluator rows; the summary shows overall rows


def evaluation_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Per dataset x encoder x method x evaluator settings x metric: seeds and value (mean ± std over seeds).

    Only overall rows are shown (not per-label, per-test or per-capability ones) and no skip markers."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    keep = (frame["evaluator"] != "clean") & (frame["metric"] != "skipped") & (frame["label"].fillna("") == "")
    for column in DETAIL_COLUMNS:
        if column in frame:
            keep &= frame[column].fillna("") == ""
    frame = frame[keep]
    out = []
    group_keys = [*KEYS, "evaluator", "eval_hash", "split", "metric"]  # never average different settings
    for keys, group in frame.groupby(group_keys, sort=True):
        values = group["value"].astype(float)
        text = f"{values.mean():.4g}" if len(values) < 2 else f"{values.mean():.4g} ± {values.std(ddof=1):.2g}"
        out.append({**dict(zip(group_keys, keys)), "seeds": len(group), "value": text})
    return pd.DataFrame(out)
