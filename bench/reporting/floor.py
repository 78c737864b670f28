"""The classical reference as a floor in the tables: the rows of the `tfidf` evaluator (TF-IDF + logistic
regression trained on each run's own training draw, `bench.evaluators.tfidf`) become one line per dataset (a data
regime is a dataset of its own), the mean over its distinct draws. Every run on a draw holds the same value, so
each draw counts once, however many methods, encoders and seeds trained on it. A reference, not a method: never
ranked, never compared with a baseline, never marked best.

Light imports only (pandas): the run summary, `clbench report` and the HTML page use it alike.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from bench.reporting.resultsview import as_text

EVALUATOR = "tfidf"  # bench.evaluators.tfidf.TfidfReference.name
LABEL = "tf-idf + LR (floor)"
METRICS = ("accuracy", "macro_f1")
WHAT = (f"{LABEL}: a classical reference, not a method (never ranked, compared or bold): TF-IDF word uni+bigrams "
        "+ logistic regression (scikit-learn; C chosen on validation), trained in seconds on a CPU on the same "
        "training draws as the methods")
NOTE = f"{WHAT}; mean ± std over its distinct draws (n draws), each draw counted once"
SHORT = (f"{LABEL}: a classical reference, not a method (never ranked or compared): TF-IDF uni+bigrams + logistic "
         "regression on the same training draws; seeds = its draws (each counted once), wall_s = its fit's seconds")


def settings_version(text: object) -> int:
    """The evaluator version in a row's `eval_settings` JSON (0 where there is none)."""
    try:
        return int(json.loads(text).get("version", 0)) if isinstance(text, str) and text else 0
    except (ValueError, TypeError, AttributeError):
        return 0


def reference_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The reference's overall test rows that carry a number (skips left out), of its newest version only."""
    if frame.empty or "evaluator" not in frame:
        return frame.iloc[:0]
    rows = frame[(frame["evaluator"] == EVALUATOR) & (frame["split"] == "test") & frame["metric"].isin(METRICS)]
    if "label" in rows:
        rows = rows[as_text(rows["label"]) == ""]
    rows = rows[pd.to_numeric(rows["value"], errors="coerce").notna()]
    if rows.empty or "eval_settings" not in rows:
        return rows
    versions = rows["eval_settings"].map(settings_version)
    return rows[versions == versions.max()]


def per_draw(frame: pd.DataFrame, by: Sequence[str] = ("dataset",)) -> pd.DataFrame:
    """One line per group of `by`, draw and metric: the reference's value (the mean over the runs of the draw,
    which hold the same one) and the seconds its fit took. A row without a draw id counts as a draw of its own."""
    rows = reference_rows(frame)
    columns = [*by, "draw", "metric", "value", "fit_seconds"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    draw = as_text(rows["draw"]) if "draw" in rows else pd.Series("", index=rows.index)
    draw = draw.where(draw != "", "run:" + as_text(rows["run_key"]))
    seconds = pd.to_numeric(rows["fit_seconds"], errors="coerce") if "fit_seconds" in rows else math.nan
    rows = rows.assign(draw=draw, value=pd.to_numeric(rows["value"], errors="coerce"), fit_seconds=seconds)
    return rows.groupby([*by, "draw", "metric"], sort=True, dropna=False).agg(
        value=("value", "mean"), fit_seconds=("fit_seconds", "mean")).reset_index()[columns]


def values(frame: pd.DataFrame, by: Sequence[str] = ("dataset",)) -> dict[tuple, dict[str, list[float]]]:
    """Per group of `by` (a tuple of its values): each metric's values, one per distinct draw, and `seconds`."""
    found: dict[tuple, dict[str, list[float]]] = {}
    for keys, group in per_draw(frame, by).groupby(list(by), sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        entry = found.setdefault(keys, {})
        for metric, part in group.groupby("metric"):
            entry[metric] = part["value"].astype(float).tolist()
        entry["seconds"] = group.drop_duplicates("draw")["fit_seconds"].astype(float).tolist()
    return found


def cell(row: str, column: str, draws: Iterable[float], digits: int = 2) -> dict[str, Any]:
    """A table cell (`bench.reporting.cellframes`) of the reference: mean ± std in % over draws, "(n draws)";
    `n` is 0 (it counts no seeds) and it is never best."""
    array = np.asarray([v for v in draws if not math.isnan(v)], dtype=float) * 100
    if array.size == 0:
        return {"row": row, "column": column, "mean": math.nan, "std": math.nan, "n": 0, "text": "—",
                "best": False, "note": "", "draws": 0}
    std = float(array.std(ddof=1)) if array.size > 1 else math.nan
    spread = f" ± {std:.{digits}f}" if array.size > 1 else ""
    return {"row": row, "column": column, "mean": float(array.mean()), "std": std, "n": 0,
            "text": f"{array.mean():.{digits}f}{spread} ({array.size} draw{'s' if array.size > 1 else ''})",
            "best": False, "note": "the classical reference (floor), not a method", "draws": int(array.size)}
