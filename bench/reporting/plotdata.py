"""The tidy data behind the curve and summary figures (`bench.reporting.plots`): per-epoch training records
of runs, and result rows selected and aggregated over seeds per method."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from bench.errors import BenchError
from bench.reporting.collapsed import Split, asked_for, flag_runs, split_runs
from bench.reporting.figures import RunInfo, distinct_labels, read_history

SUMMARY_SELECTION = {"evaluator": "clean", "split": "test", "label": ""}
FEW_SEEDS = 3  # a method x dataset cell over fewer seeds than this is flagged in figures and on the HTML page
FEW_SEEDS_WHY = "one seed cannot separate methods"
PERCENT = 100.0  # fractions (accuracy, F1, rates) are drawn in %, as the tables show them
FRACTION_METRICS = ("precision", "recall", "consistency")  # besides *accuracy, *f1 and *_rate


def is_fraction(metric: str) -> bool:
    """Whether a stored metric is a fraction in [0, 1] (accuracy, F1, precision, recall, a rate), drawn in %."""
    return metric.endswith(("accuracy", "f1", "_rate")) or metric in FRACTION_METRICS


def metric_unit(metric: str) -> str:
    """` (%)` for a fraction metric (drawn in %), else ''."""
    return " (%)" if is_fraction(metric) else ""


# ----------------------------------------------------------------------------------------------- curves

def is_loss(column: str) -> bool:
    """Whether a train_log history column is a loss (`train_<part>`, not a throughput)."""
    return column.startswith("train_") and not column.endswith("_per_s")


def curve_records(runs: Sequence[RunInfo]) -> pd.DataFrame:
    """Long frame (run, label, epoch, metric, value) of validation accuracy and loss parts per epoch."""
    records = []
    for run, label in zip(runs, distinct_labels(runs)):
        for entry in read_history(run):
            for column, value in entry.items():
                if (column == "val_accuracy" or is_loss(column)) and isinstance(value, (int, float)):
                    records.append({"run": run.key, "label": label, "epoch": int(entry["epoch"]),
                                    "metric": column, "value": float(value)})
    return pd.DataFrame(records, columns=["run", "label", "epoch", "metric", "value"])


def curve_metrics(frame: pd.DataFrame) -> list[str]:
    """Panel order: validation accuracy, total loss, then the loss parts in order of appearance."""
    first = [m for m in ("val_accuracy", "train_loss") if m in set(frame["metric"])]
    return first + [m for m in dict.fromkeys(frame["metric"]) if m not in first]


# ----------------------------------------------------------------------------------------------- summary

def select_rows(rows: Sequence[dict[str, Any]], metric: str, filters: list[str]) -> Split:
    """Rows of one metric: evaluator clean, split test, overall label, unless a filter names those columns
    (filters as in `clbench results`: `column=value[,value]`, all must hold), split by the collapsed-run policy
    (bench.reporting.collapsed: collapsed runs left out unless a filter names `collapsed`)."""
    from bench.reporting.resultsview import apply_filters, parse_filter

    frame = flag_runs(pd.DataFrame(list(rows)))
    if frame.empty:
        raise BenchError("no finished runs to summarise; run `clbench run` first or give --results-dir")
    named = {parse_filter(text)[0] for text in filters}
    keep = frame["metric"] == metric
    for column, value in SUMMARY_SELECTION.items():
        if column not in named and column in frame:
            keep &= frame[column].fillna("").astype(str) == value
    if not keep.any():
        raise BenchError(f"no {SUMMARY_SELECTION} rows for metric {metric!r}; change --metric (e.g. accuracy, "
                         "macro_f1) or --filter")
    split = split_runs(apply_filters(frame[keep], filters), include=asked_for(filters))
    split.need(f"{metric} rows", "change --filter")
    repeated = split.kept["run_key"].value_counts()
    if repeated.max() > 1:
        raise BenchError(f"run {repeated.index[0]} has {repeated.max()} rows of {metric} (several evaluator "
                         "settings or labels); narrow them with --filter, e.g. eval_hash=... or label=...")
    return split


def summary_frame(selected: pd.DataFrame) -> pd.DataFrame:
    """Per dataset x encoder x method: seeds, mean and std over seeds (ddof=1; NaN for one seed)."""
    grouped = selected.groupby(["dataset", "encoder", "method"], sort=True)["value"]
    frame = grouped.agg(seeds="count", mean="mean", std=lambda v: v.std(ddof=1)).reset_index()
    from bench.reporting.tables import method_key

    return frame.sort_values(["dataset", "encoder", "method"], kind="stable",
                             key=lambda c: c.map(method_key) if c.name == "method" else c).reset_index(drop=True)
