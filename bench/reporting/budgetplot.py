"""Tuning budgets as curves (`clbench plot budget`, and the HTML page's "Tuning budgets" section): per dataset x
encoder x method, the expected maximum validation accuracy of n knob combinations drawn at random from those the
method ran, against n = 1 .. N (Dodge et al. 2019, "Show Your Work: Improved Reporting of Experimental Results"),
with a band of ± 1 standard deviation of that maximum. Methods compared at the same n had the same tuning budget.

Each combination (one `combo` value; rows without one count as one combination, as in
`bench.reporting.selection`) is scored by its clean validation accuracy (evaluator "clean", split "validation",
metric "accuracy", no label), averaged per seed and then over the seeds given (default: every seed). Test rows
never take part. Collapsed runs follow `bench.reporting.collapsed`: left out and named unless a --filter names
`collapsed`.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bench.errors import BenchError
from bench.reporting.collapsed import MARK, asked_for, flag_runs, split_runs
from bench.reporting.figures import Plot, add_caption, facet_grid, method_legend, styled
from bench.reporting.plotdata import PERCENT
from bench.reporting.render import filters_slug
from bench.reporting.resultsview import apply_filters, with_regimes
from bench.reporting.selection import GROUP, VALIDATION, prepared, seeds_text, validation_mask
from bench.reporting.tables import method_key

if TYPE_CHECKING:  # matplotlib is imported when a figure is drawn (the page asks `has_budgets` first)
    from matplotlib.axes import Axes

COLUMNS = ["dataset", "encoder", "method", "combinations", "seeds", "n", "expected_max", "std", "low", "high"]
SCORE_COLUMNS = [*GROUP, "combo", "score", "seeds"]
CITATION = "Dodge et al. 2019"
GRID_HINT = "e.g. `clbench run ... --grid supcon.tau=0.1,0.3 --grid lr=2e-5,5e-5`"
TITLE = "Expected best validation accuracy by budget"
WHAT = (f"Expected maximum validation accuracy of n knob combinations drawn at random (with replacement) from "
        f"those each method ran, ± 1 std of that maximum ({CITATION})")
READ = ("validation scores, not test: methods at the same n had the same tuning budget; a curve ends at the "
        "combinations its method ran")


def expected_max(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """For n = 1 .. N, the expected maximum of n draws with replacement from the N values (their empirical
    distribution) and the standard deviation of that maximum (Dodge et al. 2019)."""
    ordered = np.sort(np.asarray(values, dtype=float).ravel())
    if ordered.size == 0 or not np.isfinite(ordered).all():
        raise ValueError(f"expected_max needs one or more finite values, not {ordered.tolist()}")
    size = ordered.size
    draws = np.arange(1, size + 1, dtype=float)[:, None]
    cdf = np.arange(size + 1, dtype=float) / size  # P(X <= v_(i)), i = 0 .. N
    chance = np.diff(cdf[None, :] ** draws, axis=1)  # [n - 1, i - 1]: P(max of n = v_(i))
    mean = chance @ ordered
    variance = (chance * (ordered[None, :] - mean[:, None]) ** 2).sum(axis=1)
    return mean, np.sqrt(np.maximum(variance, 0.0))


def budget_stem(filters: list[str] | None = None, seeds: list[int] | None = None) -> str:
    """`budget[-seeds-<seeds>][_<filters slug>]`."""
    stem = "budget" + (f"-seeds-{seeds_text(seeds).replace(',', '+')}" if seeds else "")
    slug = filters_slug(filters)
    return f"{stem}_{slug}" if slug else stem


def validation_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The clean validation accuracy rows (one per run) with a seed, regimes named in `dataset`, text columns
    filled (`selection.prepared`) and a number in `value`."""
    if frame.empty:
        return frame
    rows = prepared(with_regimes(frame))
    rows["value"] = pd.to_numeric(rows["value"], errors="coerce")
    return rows[validation_mask(rows) & rows["seed"].notna() & rows["value"].notna()]


def has_budgets(frame: pd.DataFrame) -> bool:
    """Whether some dataset x encoder x method of the frame ran more than one knob combination (with validation
    accuracy)."""
    rows = validation_rows(frame)
    return not rows.empty and bool((rows.groupby(GROUP)["combo"].nunique() > 1).any())


def combination_scores(rows: pd.DataFrame, seeds: list[int] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Per dataset x encoder x method x combination, its validation accuracy (the mean over seeds of each seed's
    mean) and how many seeds it rests on (SCORE_COLUMNS), from `validation_rows`; notes on seeds. BenchError when
    no row is on the seeds given."""
    present, notes = seeds_text(rows["seed"]), []
    if seeds is not None:
        groups = set(rows[GROUP].itertuples(index=False, name=None))
        rows = rows[rows["seed"].isin({int(s) for s in seeds})]
        if rows.empty:
            raise BenchError(f"no validation accuracy on --selection-seeds {seeds_text(seeds)}; seeds with "
                             f"validation accuracy: {present}; give some of those")
        missing = sorted(groups - set(rows[GROUP].itertuples(index=False, name=None)))
        if missing:
            named = ", ".join(f"{m} on {d} ({e})" for d, e, m in missing[:4]) + (" ..." if len(missing) > 4 else "")
            notes.append(f"left out, no validation accuracy on seeds {seeds_text(seeds)}: {named}")
    per_seed = rows.groupby([*GROUP, "combo", "seed"], sort=False)["value"].mean().reset_index()
    scores = per_seed.groupby([*GROUP, "combo"], sort=False)["value"].agg(score="mean", seeds="count").reset_index()
    used = seeds_text(rows["seed"])
    notes.insert(0, f"each combination's validation accuracy: mean over seeds {used}" if "," in used else
                 f"each combination's validation accuracy: seed {used} only")
    uneven = [key for key, part in scores.groupby(GROUP, sort=True)["seeds"] if part.nunique() > 1]
    if uneven:
        named = ", ".join(f"{m} on {d} ({e})" for d, e, m in uneven[:4]) + (" ..." if len(uneven) > 4 else "")
        notes.append(f"combinations scored on unequal numbers of seeds in {named}: means over fewer seeds are noisier")
    return scores[SCORE_COLUMNS], notes


def budget_frame(scores: pd.DataFrame) -> pd.DataFrame:
    """Per dataset x encoder x method and n = 1 .. N combinations tried: the expected maximum validation
    accuracy (%), its std, and the band ± 1 std clipped to [0, 100] (COLUMNS)."""
    records = []
    for (dataset, encoder, method), part in scores.groupby(GROUP, sort=False):
        values = part["score"].to_numpy(dtype=float) * PERCENT
        mean, std = expected_max(values)
        seeds = f"{part['seeds'].min()}" + ("" if part["seeds"].nunique() == 1 else f"–{part['seeds'].max()}")
        for n, (m, s) in enumerate(zip(mean, std), start=1):
            records.append([dataset, encoder, method, len(values), seeds, n, m, s,
                            max(0.0, m - s), min(PERCENT, m + s)])
    frame = pd.DataFrame(records, columns=COLUMNS)
    frame["rank"] = frame["method"].map(method_key)
    frame = frame.sort_values(["dataset", "encoder", "rank", "n"], kind="stable")
    return frame[COLUMNS].reset_index(drop=True)


def check_scores(rows: pd.DataFrame, scores: pd.DataFrame) -> None:
    """BenchError when there is nothing to draw a budget over: no `combo` on any run, or one combination for
    every method."""
    if (rows["combo"] == "").all():
        raise BenchError("no knob combination in the selection: no run has a `combo` value (rows written before "
                         "clbench had grids), so there is no tuning budget to draw; run a grid, " + GRID_HINT)
    counts = scores.groupby(GROUP, sort=True).size()
    if (counts <= 1).all():
        methods = ", ".join(sorted({m for _, _, m in counts.index}, key=method_key))
        raise BenchError(f"every method here ran one knob combination ({methods}): nothing to draw a budget curve "
                         f"over; tune them with --grid, {GRID_HINT}, or change --filter")


@styled
def budget_plot(frame: pd.DataFrame, filters: list[str] | None = None, seeds: list[int] | None = None) -> Plot:
    """Expected maximum validation accuracy (%) against the knob combinations tried, one line per method with
    its ± 1 std band, one panel per dataset x encoder (`budget[-seeds-...][_<filters>]`); data: the points drawn
    (COLUMNS). BenchError when the selection has no validation rows or no method with several combinations."""
    filters = list(filters or [])
    if frame.empty:
        raise BenchError("no finished runs to plot; run `clbench run` first or give --results-dir")
    split = split_runs(apply_filters(flag_runs(frame), filters), include=asked_for(filters))
    split.need("runs", "change --filter")
    rows = validation_rows(split.kept)
    if rows.empty:
        wanted = ", ".join(f"{k}={v or '(none)'}" for k, v in VALIDATION.items())
        raise BenchError(f"no clean validation accuracy rows ({wanted}) in the selection: the budget curves score "
                         "each knob combination on validation; plot runs trained by `clbench run` (an outside "
                         "model's runs have none), or change --filter")
    scores, notes = combination_scores(rows, seeds)
    check_scores(rows, scores)
    data = budget_frame(scores)
    marked = split.cells(["dataset", "encoder", "method"], rows)
    figure = draw(data, marked)
    lines = [WHAT, READ, *notes]
    single = data[data["combinations"] == 1]
    if not single.empty:
        panels = data[["dataset", "encoder"]].drop_duplicates()
        everywhere = [m for m, n in single.groupby("method", sort=False).size().items() if n == len(panels)]
        named = [*everywhere, *(m if len(panels) == 1 else f"{m} on {d} ({e})"
                                for d, e, m in zip(single["dataset"], single["encoder"], single["method"])
                                if m not in everywhere)]
        lines.append(f"one combination (one point, its validation accuracy): {', '.join(named)}")
    figure.suptitle(TITLE, fontsize="medium")
    add_caption(figure, [*lines, *split.notes()])
    return Plot(budget_stem(filters, seeds), figure, data)


def draw(data: pd.DataFrame, marked: set[tuple]) -> Any:
    """The panels (one per dataset x encoder, three a row), each method in one colour throughout, one legend."""
    facets = list(dict.fromkeys(zip(data["dataset"], data["encoder"])))
    methods = sorted(set(data["method"]), key=method_key)
    figure, axes, palette = facet_grid(len(facets), methods, 0.9)
    columns = min(3, len(facets))
    for index, (ax, (dataset, encoder)) in enumerate(zip(axes, facets)):
        part = data[(data["dataset"] == dataset) & (data["encoder"] == encoder)]
        draw_facet(ax, part, palette, {m for d, e, m in marked if (d, e) == (dataset, encoder)})
        ax.set_title(textwrap.fill(f"{dataset} · {encoder}", 34), fontsize="small")
        if index % columns == 0:
            ax.set_ylabel("expected max val. accuracy (%)")
    for ax in axes[len(facets):]:
        ax.remove()
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=palette[m], marker="o", markersize=3) for m in methods]
    method_legend(axes[0], handles, methods)
    return figure


def draw_facet(ax: Axes, points: pd.DataFrame, palette: dict[str, Any], marked: set[str]) -> None:
    """One panel: per method its curve with markers and shaded ± 1 std band (a lone point for one combination);
    a method whose scores include a collapsed run (kept by --filter collapsed=...) marked at its last point."""
    for method, line in points.groupby("method", sort=False):
        colour = palette[method]
        ax.plot(line["n"], line["expected_max"], marker="o", markersize=3 if len(line) > 1 else 4,
                color=colour, label=method)
        if len(line) > 1:
            ax.fill_between(line["n"], line["low"], line["high"], color=colour, alpha=0.18, linewidth=0)
        if method in marked:
            last = line.iloc[-1]
            ax.annotate(MARK, (last["n"], last["expected_max"]), xytext=(3, 3), textcoords="offset points",
                        fontsize=6)
    ax.set_xlim(0.5, max(int(points["n"].max()), 1) + 0.5)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.set_xlabel("knob combinations tried (n)")
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
