"""Figures from stored runs (`clbench plot`): label-distance and confusion heatmaps, training curves, t-SNE
scatters, and (re-exported from `bench.reporting.summaryplot`) a per-method summary over seeds.

Builders are pure functions of run folders (or tidy rows); matplotlib and seaborn are imported by the functions
that draw, so the page's HTML heatmaps (bench.reporting.htmlheatmap) use the helpers here without them.
Each returns a `Plot` (`bench.reporting.figures`):
the figure, the data it drew (a matrix, records or a frame, so tests can check the numbers) and the stem of
its file names; `figures.save_plot` writes it. The data behind curves and summaries is in
`bench.reporting.plotdata`.
"""

from __future__ import annotations

import hashlib
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.reporting.figures import (ANNOTATE_MAX, COLUMN_WIDTH, PAGE_WIDTH, Plot, RunInfo, class_names, colours,
                                     distinct_labels, draw_heatmap, heatmap_size, ldm_start_note, ldm_update_note,
                                     new_figure, read_confusion, read_ldm, read_ldm_updates, read_tsne, run_info,
                                     run_outcome, short, styled)
from bench.reporting.lossweights import is_plain, part_weights, weights_text
from bench.reporting.plotdata import PERCENT, curve_metrics, curve_records
from bench.reporting.summaryplot import draw_summary_facet, summary_plot, summary_stem  # noqa: F401  (re-exported)

NOTE_CHARS = 58  # a 7 pt note line across one paper column
MAX_PANELS = 12  # LDM evolution: at most this many heatmaps
EVOLUTION_NAMES_MAX = 10  # LDM evolution panels with more classes than this show no class names
EVOLUTION_NAME_CHARS = 10


# ----------------------------------------------------------------------------------------------- heatmaps

LDM_AXES = {"xlabel": "class j", "ylabel": "class i", "cbar_label": "label distance d(i, j)"}


def off_diagonal_limits(matrices: Sequence[np.ndarray]) -> tuple[float, float]:
    """The smallest and largest off-diagonal entry over label-distance matrices (the colour scale: the masked
    diagonal does not stretch it)."""
    values = np.concatenate([m[~np.eye(len(m), dtype=bool)] for m in matrices])
    return (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)


@styled
def ldm_plot(run_dir: Path) -> Plot:
    """Heatmap of a clld run's final label-distance matrix (`ldm_<run>`), diagonal masked, with a note of the
    value every entry starts at; data: the matrix (diagonal included)."""
    run = run_info(run_dir)
    matrix = read_ldm(run)
    names = class_names(run, len(matrix))
    width, height = heatmap_size(len(matrix))
    figure = new_figure(width, height + 0.35)
    ax = figure.add_subplot()
    vmin, vmax = off_diagonal_limits([matrix])
    draw_heatmap(ax, matrix, names, fmt=".1f", cmap="rocket_r", vmin=vmin, vmax=vmax,
                 mask=np.eye(len(matrix), dtype=bool), **LDM_AXES)
    ax.set_title(" · ".join(filter(None, [run.label, run.dataset, ldm_update_note(run)])))
    figure.supxlabel(textwrap.fill(ldm_start_note(run), NOTE_CHARS), fontsize=7)  # constrained layout makes room
    return Plot(f"ldm_{run.key}", figure, matrix)


def evolution_indices(n_updates: int, max_panels: int = MAX_PANELS) -> list[int]:
    """At most `max_panels` evenly spaced indices into n updates, always the first and the last."""
    if max_panels < 2:
        raise BenchError("--max-panels must be at least 2 (the first and the last update)")
    if n_updates <= max_panels:
        return list(range(n_updates))
    return sorted({round(i * (n_updates - 1) / (max_panels - 1)) for i in range(max_panels)})


def update_title(update: dict[str, Any]) -> str:
    """`step S (epoch E)` for one LDM update."""
    epoch = update.get("epoch")
    return f"step {update.get('step', '?')}" + (f" (ep {float(epoch):.1f})" if epoch is not None else "")


@styled
def ldm_evolution_plot(run_dir: Path, max_panels: int = MAX_PANELS) -> Plot:
    """Grid of the LDM at its stored updates on one colour scale (`ldm-evolution_<run>`); data: the updates
    drawn (dicts with step, epoch, ldm)."""
    run = run_info(run_dir)
    updates = read_ldm_updates(run)
    chosen = [updates[i] for i in evolution_indices(len(updates), max_panels)]
    matrices = [np.asarray(u["ldm"], dtype=float) for u in chosen]
    names = class_names(run, len(matrices[0]))
    vmin, vmax = off_diagonal_limits(matrices)
    columns = min(4, len(chosen))
    rows = math.ceil(len(chosen) / columns)
    panel = min((PAGE_WIDTH - 0.8) / columns, max(1.5, 0.9 + 0.3 * len(names)))  # 0.8 in: the colour bar
    figure = new_figure(max(COLUMN_WIDTH, columns * panel + 0.8), panel * 0.95 * rows + 0.4)
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    annotate = len(names) <= ANNOTATE_MAX and panel / len(names) >= 0.3  # room for "7.2"
    for i, (ax, update, matrix) in enumerate(zip(axes, chosen, matrices)):
        draw_heatmap(ax, matrix, names, fmt=".1f", cmap="rocket_r", vmin=vmin, vmax=vmax, annot=annotate,
                     cbar=False, name_chars=EVOLUTION_NAME_CHARS, mask=np.eye(len(matrix), dtype=bool))
        ax.set_title(update_title(update))
        if i % columns or len(names) > EVOLUTION_NAMES_MAX:  # class names on the left column only
            ax.set_yticks([])
        if i < len(chosen) - columns or len(names) > EVOLUTION_NAMES_MAX:  # and under the bottom panels
            ax.set_xticks([])
    for ax in axes[len(chosen):]:
        ax.set_axis_off()
    figure.colorbar(axes[0].collections[0], ax=axes.tolist(), shrink=0.8, label=LDM_AXES["cbar_label"])
    figure.suptitle(f"Label-distance matrix during training: {run.label} · {run.dataset} · {ldm_update_note(run)}\n"
                    f"{ldm_start_note(run)}")
    return Plot(f"ldm-evolution_{run.key}", figure, chosen)


def row_normalise(counts: np.ndarray) -> np.ndarray:
    """Each row divided by its total (rows without examples stay 0)."""
    totals = counts.sum(axis=1, keepdims=True)
    return np.divide(counts, totals, out=np.zeros(counts.shape, dtype=float), where=totals > 0)



CONFUSION_PANELS = ("counts", "normalised")
COLLAPSED_MARK = "collapsed: one class predicted"
TITLE_CHARS_PER_INCH = 17  # characters of an 8 pt title per inch of figure width


def outcome_text(run: RunInfo, counts: np.ndarray) -> str:
    """`test accuracy 85.00%` (the stored accuracy, else the matrix's), `· collapsed: one class predicted` after it
    for a collapsed run."""
    accuracy, collapsed = run_outcome(run)
    if accuracy is None and counts.sum():
        accuracy = float(np.trace(counts) / counts.sum())
    parts = [f"test accuracy {PERCENT * accuracy:.2f}%" if accuracy is not None else "test accuracy —"]
    return " · ".join(parts + ([COLLAPSED_MARK] if collapsed else []))


def confusion_title(run: RunInfo, counts: np.ndarray, width: float) -> str:
    """Which run (method and seed, dataset with its regime, encoder), its test accuracy in % and the collapsed
    mark, wrapped to the figure's `width` (inches)."""
    lines = [f"Test confusion: {run.label} · {run.where} · {run.encoder}", outcome_text(run, counts)]
    return "\n".join(textwrap.fill(line, int(width * TITLE_CHARS_PER_INCH)) for line in lines)


@styled
def confusion_plot(run_dir: Path, panels: Sequence[str] = CONFUSION_PANELS) -> Plot:
    """Test confusion matrix: counts and/or row-normalised panels in % (`confusion[-<panel>]_<run>`); data: a
    dict panel -> matrix drawn."""
    unknown = [p for p in panels if p not in CONFUSION_PANELS]
    if unknown or not panels:
        raise BenchError(f"confusion panels {list(panels)}: choose from {', '.join(CONFUSION_PANELS)}")
    run = run_info(run_dir)
    names, counts = read_confusion(run)
    drawn = {"counts": counts, "normalised": PERCENT * row_normalise(counts)}
    drawn = {p: drawn[p] for p in panels}
    figure = new_figure(*heatmap_size(len(counts), len(drawn)))
    axes = np.atleast_1d(figure.subplots(1, len(drawn)))
    for ax, (panel, matrix) in zip(axes, drawn.items()):
        normalised = panel == "normalised"
        draw_heatmap(ax, matrix, names, fmt=".0f" if normalised else "d", cmap="Blues",
                     vmin=0, vmax=PERCENT if normalised else None, integer=not normalised, xlabel="predicted",
                     ylabel="gold",
                     cbar_label="% of gold class" if normalised else "examples")
        ax.set_title("row-normalised" if normalised else "counts")
        if ax is not axes[0]:  # the same gold classes as the first panel
            ax.set(yticks=[], ylabel="")
    figure.suptitle(confusion_title(run, counts, figure.get_figwidth()), fontsize=8)
    stem = "confusion" if len(drawn) == len(CONFUSION_PANELS) else f"confusion-{panels[0]}"
    return Plot(f"{stem}_{run.key}", figure, drawn)


def check_comparable(a: RunInfo, b: RunInfo, names_a: list[str], names_b: list[str]) -> None:
    """Two runs can be compared class by class: same dataset, labels and test examples."""
    if a.dataset != b.dataset:
        raise BenchError(f"runs {a.key} and {b.key} are on different datasets ({a.dataset} vs {b.dataset}); "
                         "compare runs of one dataset")
    if names_a != names_b:
        raise BenchError(f"runs {a.key} and {b.key} have different labels ({', '.join(names_a)} vs "
                         f"{', '.join(names_b)}); compare runs trained on the same data")
    if a.test_ids and b.test_ids and a.test_ids != b.test_ids:
        raise BenchError(f"runs {a.key} and {b.key} were tested on different examples (test ids "
                         f"{a.test_ids} vs {b.test_ids}); compare runs trained on the same data")


def signed(value: int) -> str:
    """`+3`, `−2` (a true minus sign), or blank for 0 (annotation of a difference cell)."""
    return f"{value:+d}".replace("-", "\u2212") if value else ""


def diff_title_lines(a: RunInfo, b: RunInfo, counts_a: np.ndarray, counts_b: np.ndarray) -> list[str]:
    """The title of a confusion change B − A: where, then B and A each with its test accuracy (the figure's and
    the page's table's)."""
    label_a, label_b = distinct_labels([a, b])
    shown = [f"{label} ({outcome_text(run, counts).replace('test accuracy ', '')})"
             for label, run, counts in ((label_b, b, counts_b), (label_a, a, counts_a))]
    return [f"Confusion change on {a.where} · {a.encoder}", f"B = {shown[0]}", f"minus A = {shown[1]}"]


@styled
def confusion_diff_plot(run_a: Path, run_b: Path) -> Plot:
    """Confusion counts of B minus A, diverging around 0 (`confusion-diff_<A>_vs_<B>`); off-diagonal cells
    are confusions B adds (positive) or removes (negative); data: the difference matrix."""
    a, b = run_info(run_a), run_info(run_b)
    (names_a, counts_a), (names_b, counts_b) = read_confusion(a), read_confusion(b)
    check_comparable(a, b, names_a, names_b)
    diff = counts_b - counts_a
    limit = max(1, int(np.abs(diff).max()))  # symmetric limits: white is 0
    figure = new_figure(*heatmap_size(len(diff)))
    ax = figure.add_subplot()
    annot = np.vectorize(signed)(diff) if len(diff) <= ANNOTATE_MAX else False
    draw_heatmap(ax, diff, names_a, annot=annot, fmt="", cmap="RdBu_r", vmin=-limit, vmax=limit,
                 integer=True, xlabel="predicted", ylabel="gold", cbar_label="examples (B − A)")
    lines = diff_title_lines(a, b, counts_a, counts_b)
    ax.set_title("\n".join(textwrap.fill(line, int(figure.get_figwidth() * TITLE_CHARS_PER_INCH)) for line in lines))
    return Plot(f"confusion-diff_{a.key}_vs_{b.key}", figure, diff)


# ----------------------------------------------------------------------------------------------- curves

def metric_title(metric: str, weighted: bool = False) -> str:
    """A panel title for a history column; a loss part some drawn run weighs (weight not 1) says so."""
    if metric == "val_accuracy":
        return "validation accuracy (%)"
    if metric == "train_loss":
        return "training loss (total)"
    part = metric[len("train_"):]
    return f"{part} ({WEIGHTED})" if weighted else f"loss part: {part}"


WEIGHTED = "weighted by λ"
WEIGHTED_NOTE = ("loss parts as logged: each method's term × its weight λ, e.g. supcon's ce is (1 − λ)·CE; compare "
                 "a part across methods only at equal weights (legend: each run's weights)")


def loss_part(metric: str) -> str:
    """`ce` for `train_ce`; '' for validation accuracy and the total loss."""
    return metric[len("train_"):] if metric.startswith("train_") and metric != "train_loss" else ""


def line_styles(runs: Sequence[RunInfo]) -> list[dict[str, Any]]:
    """One colour per method, one dash pattern per seed within a method."""
    methods = list(dict.fromkeys(r.method for r in runs))
    palette = colours(len(methods))
    dashes = ["-", "--", ":", "-."]
    seen: dict[str, int] = {}
    styles = []
    for run in runs:
        index = seen.get(run.method, 0)
        seen[run.method] = index + 1
        styles.append({"color": palette[methods.index(run.method)], "linestyle": dashes[index % len(dashes)]})
    return styles


def curves_stem(keys: Sequence[str]) -> str:
    """`curves_<hash of the sorted run keys>` (the same runs in any order give the same name)."""
    digest = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:10]
    return f"curves_{digest}"


@dataclass(frozen=True)
class CurvesContent:
    """What the training-curves figure shows, whoever draws it (`curves_plot`: matplotlib; bench.reporting.htmlcurves:
    the page's SVG): the long frame, the panels (metrics) and their titles, each label's line style and legend
    text, and the note on weighted loss parts (None when no panel is weighted)."""

    runs: list[RunInfo]
    frame: Any
    metrics: list[str]
    titles: list[str]
    styles: dict[str, dict[str, Any]]  # legend label -> {"color": rgb, "linestyle": "-" | "--" | ":" | "-."}
    legend: list[str]                  # in `styles` order
    note: str | None


def curves_content(run_dirs: Sequence[Path]) -> CurvesContent:
    """The content of the training curves of `run_dirs` (see curves_plot)."""
    runs = [run_info(d) for d in run_dirs]
    frame = curve_records(runs)
    metrics = curve_metrics(frame)
    labels = distinct_labels(runs)
    styles = dict(zip(labels, line_styles(runs)))
    weights = {label: part_weights(run) for label, run in zip(labels, runs)}
    titles = []
    for metric in metrics:
        part = loss_part(metric)
        drawn = set(frame.loc[frame["metric"] == metric, "label"])
        titles.append(metric_title(metric, bool(part) and not all(is_plain(weights[label], part) for label in drawn)))
    parts = {label: [loss_part(m) for m in dict.fromkeys(frame.loc[frame["label"] == label, "metric"]) if loss_part(m)]
             for label in labels}
    legend = [label + (f" ({shown})" if (shown := weights_text(weights[label], parts[label])) else "")
              for label in styles]
    weighted = any(title.endswith(f"({WEIGHTED})") for title in titles)
    return CurvesContent(runs, frame, metrics, titles, styles, legend, WEIGHTED_NOTE if weighted else None)


@styled
def curves_plot(run_dirs: Sequence[Path]) -> Plot:
    """Validation accuracy (in %) and each loss part per epoch, one line per run (`curves_<hash>`). Loss parts
    are drawn as logged, weighted by the method's λ (`bench.reporting.lossweights`): a panel some run weighs is
    titled "weighted by λ" and the legend gives each run's weights. Data: the long frame (values as stored:
    accuracy as a fraction)."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    content = curves_content(run_dirs)
    frame, metrics = content.frame, content.metrics
    columns = min(3, len(metrics))
    rows = math.ceil(len(metrics) / columns)
    figure = new_figure(PAGE_WIDTH if columns > 1 else COLUMN_WIDTH, 1.9 * rows + 0.8 + 0.15 * len(content.runs) / 3)
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    for ax, metric, title in zip(axes, metrics, content.titles):
        for label, group in frame[frame["metric"] == metric].groupby("label", sort=False):
            group = group.sort_values("epoch")
            scale = PERCENT if metric == "val_accuracy" else 1.0
            ax.plot(group["epoch"], scale * group["value"], marker="o", markersize=3, **content.styles[label])
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes[len(metrics):]:
        ax.set_axis_off()
    handles = [Line2D([], [], marker="o", markersize=3, **style) for style in content.styles.values()]
    title = textwrap.fill(content.note, NOTE_CHARS * (2 if columns > 1 else 1)) if content.note else None
    figure.legend(handles, content.legend, loc="outside lower center", ncol=min(4, len(content.styles)), title=title)
    return Plot(curves_stem([r.key for r in content.runs]), figure, frame)


# ----------------------------------------------------------------------------------------------- embeddings

@styled
def embeddings_plot(run_dir: Path) -> Plot:
    """2-D t-SNE scatter of test examples coloured by class (`embeddings_<run>`); data: the points."""
    run = run_info(run_dir)
    points = read_tsne(run)
    present = set(points["label"])
    classes = [n for n in run.label_names if n in present] + sorted(present - set(run.label_names))
    palette = colours(len(classes))
    legend_rows = math.ceil(len(classes) / 3)
    figure = new_figure(COLUMN_WIDTH, COLUMN_WIDTH * 0.85 + 0.14 * legend_rows)
    ax = figure.add_subplot()
    for name, colour in zip(classes, palette):
        chosen = points[points["label"] == name]
        ax.scatter(chosen["x"], chosen["y"], s=4, color=colour, linewidths=0, alpha=0.8, label=short(name))
    ax.set(xticks=[], yticks=[])
    ax.spines[["left", "bottom"]].set_visible(False)
    ax.set_title(f"t-SNE of test embeddings: {run.label} · {run.dataset}")
    figure.legend(loc="outside lower center", ncol=min(3, len(classes)), markerscale=2.5, handletextpad=0.2,
                  columnspacing=0.8)
    return Plot(f"embeddings_{run.key}", figure, points)
