"""Test accuracy against a data-regime dimension (`clbench plot curve --x train_size|shots|label_noise`): one line
per method, the mean over seeds with a 95% Student-t interval over seeds, one facet per base dataset x encoder x
the values of the other regime settings (e.g. each label-noise level of a train-size sweep).

Rows are chosen as in the summary figure (`plotdata.select_rows`: clean, test, overall label, filters, collapsed
runs left out and named in a note). Several knob combinations of one method at one point are refused: averaging
them as seeds would be wrong.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator
from scipy import stats

from bench.errors import BenchError
from bench.reporting.collapsed import MARK
from bench.reporting.figures import Plot, add_caption, facet_grid, method_legend, styled
from bench.reporting.provenance_notes import fixed_draw_runs
from bench.reporting.plotdata import select_rows
from bench.reporting.render import filters_slug
from bench.reporting.resultsview import with_regimes
from bench.spec import REGIME_DEFAULTS as REGIME
from bench.reporting.tables import method_key

X_DIMENSIONS = ("train_size", "shots", "label_noise")
SWEEP = {"train_size": "--train-size 20,100,1000", "shots": "--shots 5,10,50",
         "label_noise": "--label-noise 0,0.1,0.2,0.4"}
TITLE_X = {"train_size": "training-set size", "shots": "shots per class", "label_noise": "label noise"}
AXIS = {"train_size": "training examples (log scale)", "shots": "training examples per class (log scale)",
        "label_noise": "training labels flipped (%)"}
DATA_COLUMNS = ["base_dataset", "encoder", "facet", "method", "x", "n", "mean", "low", "high"]
LEVEL = 0.95


def curve_stem(x: str, metric: str = "accuracy", filters: list[str] | None = None) -> str:
    """`curve-<x>[-<metric>][_<filters slug>]` (the metric is left out for accuracy)."""
    stem = f"curve-{x}" + ("" if metric == "accuracy" else f"-{metric}")
    slug = filters_slug(filters)
    return f"{stem}_{slug}" if slug else stem


def t_interval(values: pd.Series) -> tuple[int, float, float, float]:
    """Seeds, mean and the 95% Student-t interval of the mean (NaN bounds for one seed)."""
    n, mean = len(values), float(values.mean())
    if n < 2:
        return n, mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + LEVEL / 2, n - 1)) * float(values.std(ddof=1)) / math.sqrt(n)
    return n, mean, mean - half, mean + half


def regime_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with every regime column present (missing values at their defaults: `with_regimes`),
    `base_dataset`, and a number in `value`."""
    rows = with_regimes(rows)
    rows["value"] = pd.to_numeric(rows["value"], errors="coerce")
    return rows[rows["value"].notna()]


def place(rows: pd.DataFrame, x: str) -> tuple[pd.DataFrame, list[str]]:
    """The rows that have a position on the x axis (column `x`: the drawn value), and notes on those left out."""
    notes = []
    if x == "label_noise":
        return rows.assign(x=rows["label_noise"].astype(float) * 100), notes
    if x == "shots":
        keep = rows["shots"] > 0
        if not keep.all():
            notes.append(f"left out: {rows.loc[~keep, 'run_key'].nunique()} run(s) without --shots")
        return rows[keep].assign(x=rows.loc[keep, "shots"].astype(float)), notes
    sized = rows["shots"] > 0
    if sized.any():
        notes.append(f"left out: {rows.loc[sized, 'run_key'].nunique()} k-shot run(s) (plot them with --x shots)")
    rows = rows[~sized].assign(x=rows.loc[~sized, "train_size"].astype(float))
    whole = rows["x"] == 0
    if "train_examples" in rows:
        rows.loc[whole, "x"] = pd.to_numeric(rows.loc[whole, "train_examples"], errors="coerce")
    unplaced = rows["x"].isna() | (rows["x"] <= 0)
    if unplaced.any():
        notes.append(f"left out: {rows.loc[unplaced, 'run_key'].nunique()} run(s) on the whole training set "
                     "(no train_examples value to place them at)")
    return rows[~unplaced], notes


def facet_rows(rows: pd.DataFrame, x: str) -> pd.DataFrame:
    """The rows with a `facet` title: base dataset · encoder · the other regime settings that vary or are set."""
    noisy = rows["label_noise"] > 0
    if x == "label_noise":  # the clean runs are the 0% point of every noise kind's curve
        kinds = sorted(set(rows.loc[noisy, "noise_kind"])) or [REGIME["noise_kind"]]
        rows = pd.concat([rows[noisy], *(rows[~noisy].assign(noise_kind=k) for k in kinds)], ignore_index=True)
    else:  # the noise kind of a clean run means nothing
        rows = rows.assign(noise_kind=rows["noise_kind"].where(noisy, REGIME["noise_kind"]))
    others = [c for c in REGIME if c not in (x, "val_size")]  # the validation size is a note (`validation_note`)
    shown = [c for c in others if rows[c].nunique() > 1 or (rows[c] != REGIME[c]).any()]

    def title(values: Any) -> str:
        parts = [setting_text(c, getattr(values, c)) for c in shown
                 if not (c == "noise_kind" and x != "label_noise" and values.label_noise == 0)]
        return " · ".join([str(values.base_dataset), str(values.encoder), *parts])

    keys = ["base_dataset", "encoder", *others]
    facets = rows[keys].drop_duplicates().sort_values(keys, kind="stable")
    titles = {tuple(v): title(t) for v, t in zip(facets.itertuples(index=False, name=None),
                                                facets.itertuples(index=False))}
    rows = rows.sort_values(keys, kind="stable")  # facets drawn in this order: e.g. noise 0 before 0.3
    return rows.assign(facet=[titles[k] for k in rows[keys].itertuples(index=False, name=None)])


def validation_note(rows: pd.DataFrame, x: str) -> list[str]:
    """A line naming the points whose validation size was set (--val-size), which a curve does not split into
    panels: e.g. a learning curve whose largest training size selects on 500 validation examples."""
    sized = rows[rows["val_size"] != 0]
    if sized.empty:
        return []
    points = sorted(set(zip(sized[x], sized["val_size"])))
    listed = ", ".join(f"{setting_text(x, at)}: {'all' if size < 0 else int(size)}" for at, size in points)
    return [f"validation examples set at {listed}; elsewhere as many as the training sample"]


def setting_text(column: str, value: Any) -> str:
    """A regime setting in a facet title (`n=100`, `5 shots`, `val all`, `noise 0.2`, `asymmetric`)."""
    if column == "noise_kind":
        return str(value)
    if column == "label_noise":
        return f"noise {float(value):g}"
    number = int(value)
    if column == "train_size":
        return f"n={number or 'all'}"
    if column == "shots":
        return f"{number} shots"
    return f"val {'all' if number < 0 else number or 'auto'}"


def check_points(rows: pd.DataFrame, x: str) -> None:
    """BenchError when a method has several knob combinations, or one seed twice, at one point."""
    for (facet, method, at), group in rows.groupby(["facet", "method", "x"], sort=False):
        where = f"{method} at {x}={group[x].iloc[0]:g} ({facet})"
        if "combo" in group and group["combo"].nunique() > 1:
            raise BenchError(f"{where} has {group['combo'].nunique()} knob combinations; averaging them as seeds "
                             "would be wrong: pick one per method first with --select-by validation, or --filter")
        repeated = group["seed"][group["seed"].duplicated()]
        if len(repeated):
            raise BenchError(f"{where} has seed {repeated.iloc[0]} more than once (runs with other settings); "
                             "narrow them with --filter")


def draw_line(rows: pd.DataFrame) -> list[str]:
    """The figure's line about runs trained on one fixed draw of their data (none when every run drew its own)."""
    fixed, total = fixed_draw_runs(rows)
    return [f"one draw: {len(fixed)} of {total} runs trained on one fixed draw of their data: the curve is of that "
            f"sample, not of the regime"] if fixed else []


def curve_frame(rows: pd.DataFrame, scale: float, clip: bool = True) -> pd.DataFrame:
    """Per facet x method x point: seeds, mean and 95% t-interval over seeds (values times `scale`; with `clip`,
    the interval clipped to [0, scale], what a rate can be)."""
    records = []
    for (facet, method, at), group in rows.groupby(["facet", "method", "x"], sort=False):
        first = group.iloc[0]
        n, mean, low, high = t_interval(group["value"].astype(float) * scale)
        if clip:  # NaN stays NaN
            low, high = (float(np.clip(v, 0.0, scale)) for v in (low, high))
        records.append([first["base_dataset"], first["encoder"], facet, method, float(at), n, mean, low, high])
    frame = pd.DataFrame(records, columns=DATA_COLUMNS)
    order = {f: i for i, f in enumerate(dict.fromkeys(rows["facet"]))}
    frame["order"] = frame["facet"].map(order)
    frame["rank"] = frame["method"].map(method_key)
    return frame.sort_values(["order", "rank", "x"], kind="stable")[DATA_COLUMNS].reset_index(drop=True)


@styled
def curve_plot(frame: pd.DataFrame, x: str = "train_size", metric: str = "accuracy",
               filters: list[str] | None = None) -> Plot:
    """Test metric against a regime dimension, one line per method with a 95% t-interval over seeds, one facet
    per dataset x encoder x other regime settings (`curve-<x>[-<metric>][_<filters>]`); data: the points drawn."""
    if x not in X_DIMENSIONS:
        raise BenchError(f"unknown --x {x!r}; choose from {', '.join(X_DIMENSIONS)}")
    filters = list(filters or [])
    split = select_rows(frame.to_dict("records"), metric, filters)
    rows, notes = place(regime_columns(split.kept), x)
    if rows.empty:
        raise BenchError(f"no runs left to place on the {x} axis ({'; '.join(notes)}); change --filter or --x")
    if rows["x"].nunique() < 2:
        raise BenchError(f"only one {x} ({rows[x].iloc[0]:g}) among the selected runs: nothing to draw a curve "
                         f"over; sweep it, e.g. `clbench run ... {SWEEP[x]}`")
    rows = facet_rows(rows, x)
    check_points(rows, x)  # two validation sizes at one point would repeat a seed: refused there
    notes += validation_note(rows, x)
    percent = bool(rows["value"].astype(float).between(0, 1).all())
    data = curve_frame(rows, 100.0 if percent else 1.0, clip=percent)
    marked = split.cells(["facet", "method", "x"], rows)
    figure = draw(data, x, marked)
    what = f"test {metric}" if rows["split"].eq("test").all() else metric
    for ax in figure.axes[::min(3, data["facet"].nunique())]:
        ax.set_ylabel(what + (" (%)" if percent else ""))
    single = data["n"] < 2
    seeds = ("one seed: no interval" if single.all() else
             "points with one seed have no interval" if single.any() else "")
    lines = [f"{what}: mean over runs (seed x draw), {LEVEL:.0%} t-interval over runs" + (", clipped to [0, 100]"
                                                                                       if percent else ""),
             *([seeds] if seeds else []), *draw_line(rows), *notes, *split.notes()]
    figure.suptitle(f"{what[0].upper()}{what[1:]} by {TITLE_X[x]}", fontsize="medium")
    add_caption(figure, lines)
    return Plot(curve_stem(x, metric, filters), figure, data)


def draw(data: pd.DataFrame, x: str, marked: set[tuple]) -> Any:
    """The facet grid: a line, markers and interval per method, a legend once."""
    facets = list(dict.fromkeys(data["facet"]))
    methods = sorted(set(data["method"]), key=method_key)
    figure, axes, palette = facet_grid(len(facets), methods, 0.6)
    for ax, facet in zip(axes, facets):
        draw_facet(ax, data[data["facet"] == facet], x, palette, marked)
        ax.set_title(facet)
    for ax in axes[len(facets):]:
        ax.remove()
    handles = [Line2D([], [], color=palette[m], marker="o", markersize=3.5) for m in methods]
    method_legend(axes[0], handles, methods)
    return figure


def draw_facet(ax: Axes, points: pd.DataFrame, x: str, palette: dict[str, Any], marked: set[tuple]) -> None:
    """One facet: per method a line with markers and a shaded interval (error bars at a lone point)."""
    for method, line in points.groupby("method", sort=False):
        colour = palette[method]
        ax.plot(line["x"], line["mean"], marker="o", markersize=3.5, color=colour, label=method)
        if len(line) > 1:
            ax.fill_between(line["x"], line["low"], line["high"], color=colour, alpha=0.18, linewidth=0)
        elif line["n"].iloc[0] > 1:
            ax.errorbar(line["x"], line["mean"], yerr=[line["mean"] - line["low"], line["high"] - line["mean"]],
                        fmt="none", ecolor=colour, capsize=2.5, elinewidth=1)
        for point in line.itertuples(index=False):
            if (point.facet, method, point.x) in marked:
                ax.annotate(MARK, (point.x, point.mean), xytext=(3, 3), textcoords="offset points", fontsize=6)
    ticks = sorted(set(points["x"]))
    if x == "label_noise":
        ax.set_xticks(ticks, [f"{t:g}%" for t in ticks])
    else:
        ax.set_xscale("log")
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(AXIS[x])
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
