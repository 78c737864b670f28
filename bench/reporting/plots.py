"""Figures from stored runs (`bench plot`): label-distance and confusion heatmaps, training curves, t-SNE
scatters and a per-method summary over seeds.

Builders are pure functions of run folders (or tidy rows). Each returns a `Plot`: the figure, the data it
drew (a matrix, records or a frame, so tests can check the numbers) and the stem of its file names.
`save_plot` writes PNG and PDF atomically with fixed metadata, so re-running gives identical bytes.
Figures are plain `matplotlib.figure.Figure` objects on the Agg canvas (never registered with pyplot).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from bench.results import store
from bench.errors import BenchError

DPI = 200
FORMATS = ("png", "pdf")
METADATA = {"png": {"Software": None}, "pdf": {"CreationDate": None, "ModDate": None}}  # no timestamps
COLUMN_WIDTH = 3.3  # inches: one paper column
PAGE_WIDTH = 7.0  # inches: two columns (grids)
MAX_PANELS = 12  # LDM evolution: at most this many heatmaps
ANNOTATE_MAX = 12  # heatmaps with more classes than this are not annotated
EVOLUTION_NAMES_MAX = 10  # LDM evolution panels with more classes than this show no class names
EVOLUTION_NAME_CHARS = 10
LABEL_CHARS = 18  # longer class names are shortened with an ellipsis
STYLE = {
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "legend.title_fontsize": 7, "figure.titlesize": 9, "pdf.fonttype": 42,
    "axes.spines.top": False, "axes.spines.right": False, "axes.linewidth": 0.6, "lines.linewidth": 1.2,
    "xtick.major.width": 0.6, "ytick.major.width": 0.6, "legend.frameon": False,
}
SUMMARY_SELECTION = {"evaluator": "clean", "split": "test", "label": ""}
MISSING_TRAINING_FILE = "it is written when training finishes; finish the run with `bench run`"


@dataclass
class Plot:
    """A built figure: `stem` names its files, `data` is what it drew."""

    stem: str
    figure: Figure
    data: Any


@dataclass(frozen=True)
class RunInfo:
    """What a figure needs from a run's spec.json."""

    path: Path
    key: str
    method: str
    dataset: str
    encoder: str
    seed: int
    config_hash: str
    label_names: tuple[str, ...]
    test_ids: str

    @property
    def label(self) -> str:
        """A short legend/title label: `method s<seed>`."""
        return f"{self.method} s{self.seed}"


# ----------------------------------------------------------------------------------------------- style

@contextlib.contextmanager
def style() -> Iterator[None]:
    """The paper style (small fonts, TrueType in PDFs) for building and saving figures."""
    with rc_context(STYLE):
        yield


def styled(builder: Callable[..., Plot]) -> Callable[..., Plot]:
    """Decorator: build the figure under `style()`."""

    @functools.wraps(builder)
    def wrapper(*args: Any, **kwargs: Any) -> Plot:
        with style():
            return builder(*args, **kwargs)

    return wrapper


def new_figure(width: float, height: float) -> Figure:
    """A figure with constrained layout on the Agg canvas (independent of pyplot)."""
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def save_plot(plot: Plot, reports_dir: Path) -> list[Path]:
    """Write `<stem>.png` (dpi 200) and `<stem>.pdf` under `reports_dir` atomically; returns the paths."""
    paths = []
    with style():
        for fmt in FORMATS:
            path = Path(reports_dir) / f"{plot.stem}.{fmt}"
            with store.atomic_path(path) as tmp:
                plot.figure.savefig(tmp, format=fmt, dpi=DPI, metadata=METADATA[fmt])
            paths.append(path)
    return paths


# ----------------------------------------------------------------------------------------------- run files

def run_info(run_dir: Path) -> RunInfo:
    """The identity of a run from its spec.json."""
    spec = store.read_json(Path(run_dir) / store.SPEC)
    data = spec.get("data") or {}
    return RunInfo(Path(run_dir), str(spec.get("key") or Path(run_dir).name), str(spec.get("method", "?")),
                   str(spec.get("dataset", "?")), str(spec.get("encoder", "?")), int(spec.get("seed", 0)),
                   str(spec.get("config_hash", "")), tuple(data.get("label_names") or ()),
                   str((spec.get("split_ids") or {}).get("test", "")))


def read_run_file(run: RunInfo, name: str, fix: str) -> Any:
    """A JSON file of the run, or a BenchError saying it is missing and how to get it."""
    path = run.path / name
    if not path.is_file():
        raise BenchError(f"run {run.key} has no {name}; {fix}")
    return store.read_json(path)


def class_names(run: RunInfo, size: int, stored: Sequence[str] | None = None) -> list[str]:
    """Class names for a size x size matrix: the stored ones, the spec's, or indices."""
    for names in (stored, run.label_names):
        if names and len(names) == size:
            return [str(n) for n in names]
    return [str(i) for i in range(size)]


def short(name: str, limit: int = LABEL_CHARS) -> str:
    """A class name cut to `limit` characters (with an ellipsis)."""
    return name if len(name) <= limit else name[:limit - 1] + "…"


def read_ldm(run: RunInfo) -> np.ndarray:
    """The run's final label-distance matrix (method_state.json of clld methods)."""
    state = read_run_file(run, store.METHOD_STATE, "only clld methods store a label-distance matrix")
    if not state.get("ldm"):
        raise BenchError(f"run {run.key} has no label-distance matrix in method_state.json (only clld methods "
                         "store one)")
    return np.asarray(state["ldm"], dtype=float)


def read_ldm_updates(run: RunInfo) -> list[dict[str, Any]]:
    """The run's stored LDM updates (step, epoch, eps, ldm), oldest first."""
    state = read_run_file(run, store.METHOD_STATE, "only clld methods store a label-distance matrix")
    updates = [u for u in state.get("updates") or [] if u.get("ldm")]
    if not updates:
        raise BenchError(f"run {run.key} stores no label-distance matrix updates (clld-static keeps one fixed "
                         "matrix); drop --evolution to plot it")
    return sorted(updates, key=lambda u: u.get("step", 0))


def read_confusion(run: RunInfo) -> tuple[list[str], np.ndarray]:
    """Class names and the test confusion counts (rows gold, columns predicted)."""
    stored = read_run_file(run, store.CONFUSION, MISSING_TRAINING_FILE)
    matrix = np.asarray(stored["test"], dtype=int)
    return class_names(run, len(matrix), stored.get("labels")), matrix


def read_history(run: RunInfo) -> list[dict[str, Any]]:
    """Per-epoch training records from train_log.json."""
    history = read_run_file(run, store.TRAIN_LOG, MISSING_TRAINING_FILE).get("history") or []
    if not history:
        raise BenchError(f"run {run.key} has an empty training history in train_log.json; re-run it with "
                         "`bench run --overwrite`")
    return history


def read_tsne(run: RunInfo) -> pd.DataFrame:
    """The stored t-SNE sample: columns x, y, label."""
    stored = read_run_file(run, store.TSNE, f"run `bench evaluate {run.key} --evaluators repr --tsne` first")
    return pd.DataFrame({"x": stored["x"], "y": stored["y"], "label": [str(v) for v in stored["labels"]]})


# ----------------------------------------------------------------------------------------------- heatmaps

def heatmap_size(n_classes: int, panels: int = 1) -> tuple[float, float]:
    """Figure size for `panels` side-by-side heatmaps of n classes: column width, growing for many classes."""
    per_panel = min(PAGE_WIDTH / panels, max(COLUMN_WIDTH, 1.3 + 0.3 * n_classes))
    width = min(PAGE_WIDTH, per_panel * panels)
    return width, per_panel * 0.9


def draw_heatmap(ax: Axes, matrix: np.ndarray, names: Sequence[str], *, fmt: str = ".2g",
                 annot: Any = None, cmap: Any = "viridis", vmin: float | None = None, vmax: float | None = None,
                 cbar: bool = True, cbar_label: str = "", integer: bool = False,
                 xlabel: str = "", ylabel: str = "", name_chars: int = LABEL_CHARS) -> None:
    """A square seaborn heatmap with class names on both axes (annotated unless there are many classes)."""
    n = len(matrix)
    if annot is None:
        annot = n <= ANNOTATE_MAX
    labels = [short(name, name_chars) for name in names]
    sns.heatmap(matrix, ax=ax, annot=annot, fmt=fmt, cmap=cmap, vmin=vmin, vmax=vmax,
                square=True, cbar=cbar, cbar_kws=colorbar_options(cbar_label, integer) if cbar else None,
                xticklabels=labels, yticklabels=labels, linewidths=0.4 if n <= ANNOTATE_MAX else 0, linecolor="white",
                annot_kws={"size": 7})
    rotate_class_names(ax, labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def colorbar_options(label: str, integer: bool) -> dict[str, Any]:
    """Colour bar label, with whole-number ticks for counts."""
    return {"label": label, **({"ticks": MaxNLocator(integer=True)} if integer else {})}


def rotate_class_names(ax: Axes, labels: Sequence[str]) -> None:
    """Tilt x class names when they would overlap (upright for many classes); keep y names horizontal."""
    crowded = len(labels) * max((len(label) for label in labels), default=0) > 24
    rotation = 90 if len(labels) > 10 else 45 if crowded else 0
    for text in ax.get_xticklabels():
        text.set(rotation=rotation, ha="center" if rotation == 0 else "right",
                 va="center" if rotation == 90 else "top", rotation_mode="anchor")
    for text in ax.get_yticklabels():
        text.set(rotation=0)
    ax.tick_params(length=0)


@styled
def ldm_plot(run_dir: Path) -> Plot:
    """Heatmap of a clld run's final label-distance matrix (`ldm_<run>`); data: the matrix."""
    run = run_info(run_dir)
    matrix = read_ldm(run)
    names = class_names(run, len(matrix))
    figure = new_figure(*heatmap_size(len(matrix)))
    ax = figure.add_subplot()
    draw_heatmap(ax, matrix, names, fmt=".1f", cmap="rocket_r", cbar_label="label distance")
    ax.set_title(f"{run.label} · {run.dataset}")
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
    vmin, vmax = min(m.min() for m in matrices), max(m.max() for m in matrices)
    columns = min(4, len(chosen))
    rows = math.ceil(len(chosen) / columns)
    panel = min((PAGE_WIDTH - 0.8) / columns, max(1.5, 0.9 + 0.3 * len(names)))  # 0.8 in: the colour bar
    figure = new_figure(max(COLUMN_WIDTH, columns * panel + 0.8), panel * 0.95 * rows + 0.4)
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    annotate = len(names) <= ANNOTATE_MAX and panel / len(names) >= 0.3  # room for "7.2"
    for i, (ax, update, matrix) in enumerate(zip(axes, chosen, matrices)):
        draw_heatmap(ax, matrix, names, fmt=".1f", cmap="rocket_r", vmin=vmin, vmax=vmax, annot=annotate,
                     cbar=False, name_chars=EVOLUTION_NAME_CHARS)
        ax.set_title(update_title(update))
        if i % columns or len(names) > EVOLUTION_NAMES_MAX:  # class names on the left column only
            ax.set_yticks([])
        if i < len(chosen) - columns or len(names) > EVOLUTION_NAMES_MAX:  # and under the bottom panels
            ax.set_xticks([])
    for ax in axes[len(chosen):]:
        ax.set_axis_off()
    figure.colorbar(axes[0].collections[0], ax=axes.tolist(), shrink=0.8, label="label distance")
    figure.suptitle(f"Label-distance matrix during training: {run.label} · {run.dataset}")
    return Plot(f"ldm-evolution_{run.key}", figure, chosen)


def row_normalise(counts: np.ndarray) -> np.ndarray:
    """Each row divided by its total (rows without examples stay 0)."""
    totals = counts.sum(axis=1, keepdims=True)
    return np.divide(counts, totals, out=np.zeros(counts.shape, dtype=float), where=totals > 0)


CONFUSION_PANELS = ("counts", "normalised")


@styled
def confusion_plot(run_dir: Path, panels: Sequence[str] = CONFUSION_PANELS) -> Plot:
    """Test confusion matrix: counts and/or row-normalised panels (`confusion[-<panel>]_<run>`); data: a dict
    panel -> matrix drawn."""
    unknown = [p for p in panels if p not in CONFUSION_PANELS]
    if unknown or not panels:
        raise BenchError(f"confusion panels {list(panels)}: choose from {', '.join(CONFUSION_PANELS)}")
    run = run_info(run_dir)
    names, counts = read_confusion(run)
    drawn = {"counts": counts, "normalised": row_normalise(counts)}
    drawn = {p: drawn[p] for p in panels}
    figure = new_figure(*heatmap_size(len(counts), len(drawn)))
    axes = np.atleast_1d(figure.subplots(1, len(drawn)))
    for ax, (panel, matrix) in zip(axes, drawn.items()):
        normalised = panel == "normalised"
        draw_heatmap(ax, matrix, names, fmt=".2f" if normalised else "d", cmap="Blues",
                     vmin=0, vmax=1 if normalised else None, integer=not normalised, xlabel="predicted",
                     ylabel="gold",
                     cbar_label="share of gold class" if normalised else "examples")
        ax.set_title("row-normalised" if normalised else "counts")
        if ax is not axes[0]:  # the same gold classes as the first panel
            ax.set(yticks=[], ylabel="")
    figure.suptitle(f"Test confusion: {run.label} · {run.dataset}")
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
    label_a, label_b = distinct_labels([a, b])
    ax.set_title(f"Confusion change on {a.dataset}\nB = {label_b} minus A = {label_a}")
    return Plot(f"confusion-diff_{a.key}_vs_{b.key}", figure, diff)


# ----------------------------------------------------------------------------------------------- curves

def distinct_labels(runs: Sequence[RunInfo]) -> list[str]:
    """Legend labels: method and seed, plus dataset/encoder where runs differ, plus the hash if still tied."""
    extra = [field for field in ("dataset", "encoder") if len({getattr(r, field) for r in runs}) > 1]
    labels = [" ".join([r.label, *(getattr(r, f) for f in extra)]) for r in runs]
    return [f"{label} {r.config_hash[:6]}" if labels.count(label) > 1 else label for label, r in zip(labels, runs)]


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


def metric_title(metric: str) -> str:
    """A panel title for a history column."""
    if metric == "val_accuracy":
        return "validation accuracy"
    if metric == "train_loss":
        return "training loss (total)"
    return f"loss part: {metric[len('train_'):]}"


def line_styles(runs: Sequence[RunInfo]) -> list[dict[str, Any]]:
    """One colour per method, one dash pattern per seed within a method."""
    methods = list(dict.fromkeys(r.method for r in runs))
    palette = sns.color_palette("tab10" if len(methods) <= 10 else "husl", len(methods))
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


@styled
def curves_plot(run_dirs: Sequence[Path]) -> Plot:
    """Validation accuracy and each loss part per epoch, one line per run (`curves_<hash>`); data: the long
    frame drawn."""
    runs = [run_info(d) for d in run_dirs]
    frame = curve_records(runs)
    metrics = curve_metrics(frame)
    columns = min(3, len(metrics))
    rows = math.ceil(len(metrics) / columns)
    figure = new_figure(PAGE_WIDTH if columns > 1 else COLUMN_WIDTH, 1.9 * rows + 0.5 + 0.15 * len(runs) / 3)
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    styles = dict(zip(distinct_labels(runs), line_styles(runs)))
    for ax, metric in zip(axes, metrics):
        for label, group in frame[frame["metric"] == metric].groupby("label", sort=False):
            group = group.sort_values("epoch")
            ax.plot(group["epoch"], group["value"], marker="o", markersize=3, **styles[label])
        ax.set_title(metric_title(metric))
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes[len(metrics):]:
        ax.set_axis_off()
    handles = [Line2D([], [], marker="o", markersize=3, **style) for style in styles.values()]
    figure.legend(handles, list(styles), loc="outside lower center", ncol=min(4, len(styles)))
    return Plot(curves_stem([r.key for r in runs]), figure, frame)


# ----------------------------------------------------------------------------------------------- embeddings

@styled
def embeddings_plot(run_dir: Path) -> Plot:
    """2-D t-SNE scatter of test examples coloured by class (`embeddings_<run>`); data: the points."""
    run = run_info(run_dir)
    points = read_tsne(run)
    present = set(points["label"])
    classes = [n for n in run.label_names if n in present] + sorted(present - set(run.label_names))
    palette = sns.color_palette("tab10" if len(classes) <= 10 else "husl", len(classes))
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


# ----------------------------------------------------------------------------------------------- summary

def summary_stem(metric: str, filters: list[str]) -> str:
    """`summary[-<metric>][_<filter slug>]` (the metric is left out for accuracy)."""
    from bench.reporting.render import filters_slug

    stem = "summary" if metric == "accuracy" else f"summary-{metric}"
    slug = filters_slug(filters)
    return f"{stem}_{slug}" if slug else stem


def select_rows(rows: Sequence[dict[str, Any]], metric: str, filters: list[str]) -> pd.DataFrame:
    """Rows of one metric: evaluator clean, split test, overall label, unless a filter names those columns
    (filters as in `bench results`: `column=value[,value]`, all must hold)."""
    from bench.reporting.resultsview import apply_filters, parse_filter

    frame = pd.DataFrame(list(rows))
    if frame.empty:
        raise BenchError("no finished runs to summarise; run `bench run` first or give --results-dir")
    named = {parse_filter(text)[0] for text in filters}
    keep = frame["metric"] == metric
    for column, value in SUMMARY_SELECTION.items():
        if column not in named and column in frame:
            keep &= frame[column].fillna("").astype(str) == value
    if not keep.any():
        raise BenchError(f"no {SUMMARY_SELECTION} rows for metric {metric!r}; change --metric (e.g. accuracy, "
                         "macro_f1) or --filter")
    selected = apply_filters(frame[keep], filters)
    repeated = selected["run_key"].value_counts()
    if repeated.max() > 1:
        raise BenchError(f"run {repeated.index[0]} has {repeated.max()} rows of {metric} (several evaluator "
                         "settings or labels); narrow them with --filter, e.g. eval_hash=... or label=...")
    return selected


def summary_frame(selected: pd.DataFrame) -> pd.DataFrame:
    """Per dataset x encoder x method: seeds, mean and std over seeds (ddof=1; NaN for one seed)."""
    grouped = selected.groupby(["dataset", "encoder", "method"], sort=True)["value"]
    frame = grouped.agg(seeds="count", mean="mean", std=lambda v: v.std(ddof=1)).reset_index()
    from bench.reporting.tables import method_key

    return frame.sort_values(["dataset", "encoder", "method"], kind="stable",
                             key=lambda c: c.map(method_key) if c.name == "method" else c).reset_index(drop=True)


@styled
def summary_plot(rows: Sequence[dict[str, Any]], metric: str = "accuracy",
                 filters: list[str] | None = None) -> Plot:
    """Mean ± std over seeds of a test metric per method, one facet per dataset
    (`summary[-<metric>][_<filters>]`); dots are single seeds; data: the aggregated frame."""
    filters = list(filters or [])
    selected = select_rows(rows, metric, filters)
    frame = summary_frame(selected)
    datasets = list(dict.fromkeys(frame["dataset"]))
    several_encoders = frame["encoder"].nunique() > 1
    methods = list(dict.fromkeys(frame["method"]))
    palette = dict(zip(methods, sns.color_palette("tab10" if len(methods) <= 10 else "husl", len(methods))))
    columns = min(3, len(datasets))
    rows_n = math.ceil(len(datasets) / columns)
    width = COLUMN_WIDTH if columns == 1 else PAGE_WIDTH
    figure = new_figure(width, 2.4 * rows_n)
    axes = np.atleast_1d(figure.subplots(rows_n, columns, squeeze=False)).ravel()
    for ax, dataset in zip(axes, datasets):
        draw_summary_facet(ax, frame[frame["dataset"] == dataset], selected[selected["dataset"] == dataset],
                           palette, several_encoders)
        ax.set_title(dataset)
    for ax in axes[len(datasets):]:
        ax.set_axis_off()
    axes[0].set_ylabel(f"test {metric}" if selected["split"].eq("test").all() else metric)
    figure.suptitle("mean ± std over seeds (dots: single seeds)", fontsize=7)
    return Plot(summary_stem(metric, filters), figure, frame)


def draw_summary_facet(ax: Axes, frame: pd.DataFrame, selected: pd.DataFrame, palette: dict[str, Any],
                       several_encoders: bool) -> None:
    """One dataset: a point with a std error bar per method (and encoder), seeds as small dots."""
    for x, entry in enumerate(frame.itertuples(index=False)):
        values = selected[(selected["method"] == entry.method) & (selected["encoder"] == entry.encoder)]["value"]
        offsets = np.linspace(-0.06, 0.06, len(values)) if len(values) > 1 else np.zeros(1)
        ax.scatter(x + offsets + 0.22, values, s=5, color="0.55", linewidths=0, zorder=2)
        ax.errorbar(x, entry.mean, yerr=0 if math.isnan(entry.std) else entry.std, fmt="o", markersize=4,
                    capsize=2.5, elinewidth=1, color=palette[entry.method], zorder=3)
    labels = [f"{m}\n{e}" if several_encoders else m for m, e in zip(frame["method"], frame["encoder"])]
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
