"""The reports a finished sweep writes at once (the demo, `clbench run` with no arguments): the accuracy table as
Markdown, the accuracy-by-method figure, and the label-distance and confusion heatmaps of one run, with the
baseline's confusion heatmap of the same seed and the difference between the two. A figure whose runs did not
change since the folder's last reports is not drawn again (bench.reporting.figurecache.saved)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from bench.results import store


def heatmap_run(rows: list[dict[str, Any]]) -> str | None:
    """The run whose heatmaps are drawn: the first seed of a clld run (its label distances), else of the most
    accurate method."""
    from bench.reporting.collapsed import split_runs
    from bench.reporting.tables import clean_accuracy

    clean = split_runs(clean_accuracy(pd.DataFrame(rows))).kept  # never a collapsed run's heatmaps
    if clean.empty:
        return None
    clld = clean[clean["method"].str.startswith("clld")].sort_values(["method", "seed"])
    if not clld.empty:
        return str(clld["run_key"].iloc[0])
    best = clean.groupby("method")["value"].mean().idxmax()
    return str(clean[clean["method"] == best].sort_values("seed")["run_key"].iloc[0])


def baseline_run(rows: list[dict[str, Any]], key: str, baseline: str = "ce") -> str | None:
    """The baseline's run paired with run `key` (same dataset, encoder, regime and seed), None when there is none
    or `key` is the baseline's own."""
    frame = pd.DataFrame(rows)
    frame = frame[frame["evaluator"] == "clean"] if "evaluator" in frame else frame
    first = frame[frame["run_key"] == key]
    if first.empty or first["method"].iloc[0] == baseline:
        return None
    same = frame["method"] == baseline
    for column in ("dataset", "encoder", "seed", "train_size", "label_noise"):
        if column in frame:
            same &= frame[column].astype(str) == str(first[column].iloc[0])
    found = sorted(set(frame.loc[same, "run_key"]))
    return found[0] if found else None


def write_sweep_reports(results_dir: Path, rows: list[dict[str, Any]], reports_dir: Path) -> list[Path]:
    """Write the sweep's table and figures under `reports_dir` (PNG figures, PDFs beside them); returns the
    paths of the Markdown table and the PNGs. A figure that cannot be drawn (e.g. a run without label
    distances) is left out."""
    from bench.reporting import figurecache, render, tables

    frame = pd.DataFrame(rows)
    written = [render.write_report(tables.paper_ii(frame), "paper-ii", "md", reports_dir)]
    figures: list[tuple[str, tuple]] = [("plots:summary_plot", (rows, "accuracy"))]
    key = heatmap_run(rows)
    if key is not None:
        run_dir = Path(results_dir) / key
        if (run_dir / store.METHOD_STATE).is_file():
            figures.append(("plots:ldm_plot", (run_dir,)))
        figures.append(("plots:confusion_plot", (run_dir, ("normalised",))))
        baseline = baseline_run(rows, key)
        if baseline is not None:  # a difference needs both: the baseline's heatmap, and the change
            base_dir = Path(results_dir) / baseline
            figures.append(("plots:confusion_plot", (base_dir, ("normalised",))))
            figures.append(("plots:confusion_diff_plot", (base_dir, run_dir)))  # the method minus the baseline
    for builder, args in figures:  # each drawn once per content (bench.reporting.figurecache.saved)
        written += [p for p in figurecache.saved(builder, args, reports_dir) if p.suffix == ".png"]
    return written
