"""The per-method summary figure (`clbench plot summary`, the HTML page's accuracy figure, the demo's summary.png):
mean ± std over seeds of a test metric, one panel per dataset.

Legible at a glance: a one-line title, one marker per method point (its mean, with its error bar), the seeds as
small dots in the method's colour in a short row just right of their point (clear of its marker and error
bar, so no seed hides behind the mean; only when there are two or more: a single seed is the point itself), and the details (what the bars are, open markers, collapsed runs) as a caption in small type
under the panels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bench.reporting.collapsed import MARK, Split
from bench.reporting.figures import COLUMN_WIDTH, PAGE_WIDTH, Plot, add_caption, colours, new_figure, styled
from bench.reporting.plotdata import (FEW_SEEDS, FEW_SEEDS_WHY, PERCENT, is_fraction, metric_unit, select_rows,
                                      summary_frame)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

SEED_GAP = (0.1, 0.24)  # seed dots lie this far right of their point's x: clear of its marker and caps
SUMMARY_BARS = "mean ± 1 sample std over seeds (ddof 1; no bar for one seed); small dots: single seeds"


def summary_stem(metric: str, filters: list[str]) -> str:
    """`summary[-<metric>][_<filter slug>]` (the metric is left out for accuracy)."""
    from bench.reporting.render import filters_slug

    stem = "summary" if metric == "accuracy" else f"summary-{metric}"
    slug = filters_slug(filters)
    return f"{stem}_{slug}" if slug else stem


def summary_title(metric: str, test_only: bool) -> str:
    """The one-line title, e.g. `Test accuracy by method`."""
    name = f"test {metric}" if test_only else metric
    return f"{name[0].upper()}{name[1:].replace('_', '-')} by method"


def collapsed_caption(split: Split) -> list[str]:
    """The caption's short line about collapsed runs ([] when there are none; the tables name them)."""
    if not split.keys:
        return []
    if split.included:
        return [f"{MARK} = the mean includes one of {len(split.keys)} collapsed run(s) (one class predicted): "
                "never best"]
    return [f"left out of every mean: {len(split.keys)} collapsed run(s) (one class predicted; `clbench report` "
            "names them)"]


def summary_caption(frame: pd.DataFrame, split: Split) -> list[str]:
    """The caption lines under the panels: the bars and dots, open markers, collapsed runs."""
    lines = [SUMMARY_BARS]
    if (frame["seeds"] < FEW_SEEDS).any():
        lines.append(f"open markers: < {FEW_SEEDS} seeds ({FEW_SEEDS_WHY})")
    return [*lines, *collapsed_caption(split)]


@styled
def summary_plot(rows: Sequence[dict[str, Any]], metric: str = "accuracy",
                 filters: list[str] | None = None) -> Plot:
    """Mean ± std over seeds of a test metric per method, one facet per dataset
    (`summary[-<metric>][_<filters>]`): a one-line title, error bars ± one sample std (ddof 1; none for one seed),
    seed dots for cells of two or more seeds, open markers for cells of fewer than FEW_SEEDS seeds, a small
    caption; fractions drawn in %. Data: the aggregated frame (`plotdata.summary_frame`, in the rows' unit)."""
    filters = list(filters or [])
    split = select_rows(rows, metric, filters)
    selected, marked = split.kept, split.cells(["dataset", "encoder", "method"])
    frame = summary_frame(selected)
    scale = PERCENT if is_fraction(metric) else 1.0
    datasets = list(dict.fromkeys(frame["dataset"]))
    several_encoders = frame["encoder"].nunique() > 1
    methods = list(dict.fromkeys(frame["method"]))
    palette = dict(zip(methods, colours(len(methods))))
    columns = min(3, len(datasets))
    rows_n = math.ceil(len(datasets) / columns)
    width = COLUMN_WIDTH if columns == 1 else PAGE_WIDTH
    figure = new_figure(width, 2.2 * rows_n + 0.45)  # add_caption adds the caption's height
    axes = np.atleast_1d(figure.subplots(rows_n, columns, squeeze=False)).ravel()
    for ax, dataset in zip(axes, datasets):
        draw_summary_facet(ax, frame[frame["dataset"] == dataset], selected[selected["dataset"] == dataset],
                           palette, several_encoders, {(e, m) for d, e, m in marked if d == dataset}, scale)
        ax.set_title(dataset)
    for ax in axes[len(datasets):]:
        ax.set_axis_off()
    test_only = bool(selected["split"].eq("test").all())
    axes[0].set_ylabel((f"test {metric}" if test_only else metric) + metric_unit(metric))
    figure.suptitle(summary_title(metric, test_only))
    add_caption(figure, summary_caption(frame, split))
    return Plot(summary_stem(metric, filters), figure, frame)


def draw_summary_facet(ax: Axes, frame: pd.DataFrame, selected: pd.DataFrame, palette: dict[str, Any],
                       several_encoders: bool, marked: set[tuple[str, str]] = frozenset(), scale: float = 1.0) -> None:
    """One dataset: per method (and encoder) one marker at its mean with a std error bar, and, for two or more
    seeds, the seeds as small dots of its colour just right of it (SEED_GAP); values times `scale`; a cell of fewer than
    FEW_SEEDS seeds has an open marker; the labels of marked (encoder, method) pairs, whose mean includes a
    collapsed run, end in † (collapsed.MARK)."""
    for x, entry in enumerate(frame.itertuples(index=False)):
        values = selected[(selected["method"] == entry.method) & (selected["encoder"] == entry.encoder)]["value"]
        colour = palette[entry.method]
        if len(values) > 1:
            offsets = np.linspace(*SEED_GAP, len(values))
            ax.scatter(x + offsets, scale * values.to_numpy(dtype=float), s=5, color=colour, alpha=0.45,
                       linewidths=0, zorder=2)
        ax.errorbar(x, scale * entry.mean, yerr=None if math.isnan(entry.std) else scale * entry.std, fmt="o",
                    markersize=4, capsize=2.5, elinewidth=1, color=colour, zorder=3,
                    markerfacecolor="white" if entry.seeds < FEW_SEEDS else colour)
    labels = [(f"{m}\n{e}" if several_encoders else m) + (MARK if (e, m) in marked else "")
              for m, e in zip(frame["method"], frame["encoder"])]
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
