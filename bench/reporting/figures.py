"""Shared machinery of the figures (`bench.reporting.plots`): the paper style, saving, reading run files and
drawing heatmaps.

`Plot` is what every builder returns: the figure, the data it drew and the stem of its file names.
`save_plot` writes PNG and PDF atomically with fixed metadata, so re-running gives identical bytes.
Figures are plain `matplotlib.figure.Figure` objects on the Agg canvas (never registered with pyplot).
matplotlib and seaborn are imported by the functions that draw, not with this module: the page and the tables read
run files through it without paying for the plotting libraries (seaborn alone costs 1 s of imports).
"""

from __future__ import annotations

import contextlib
import functools
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bench.results import runfiles, store
from bench.errors import BenchError
from bench.spec import regime_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 200
FORMATS = ("png", "pdf")
METADATA = {"png": {"Software": None}, "pdf": {"CreationDate": None, "ModDate": None}}  # no timestamps
COLUMN_WIDTH = 3.3  # inches: one paper column
PAGE_WIDTH = 7.0  # inches: two columns (grids)
ANNOTATE_MAX = 12  # heatmaps with more classes than this are not annotated
CAPTION_CHARS_PER_INCH = 18  # characters of a 7 pt caption line per inch of figure width
CAPTION_LINE_INCHES = 0.12  # the height of one 7 pt caption line
LABEL_CHARS = 18  # longer class names are shortened with an ellipsis
STYLE = {
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "legend.title_fontsize": 7, "figure.titlesize": 9, "pdf.fonttype": 42,
    "axes.spines.top": False, "axes.spines.right": False, "axes.linewidth": 0.6, "lines.linewidth": 1.2,
    "xtick.major.width": 0.6, "ytick.major.width": 0.6, "legend.frameon": False,
}
MISSING_TRAINING_FILE = "it is written when training finishes; finish the run with `clbench run`"


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
    regime: str = ""  # the data regime (bench.spec.regime_label: `n=100+noise=0.2`; '' for the whole set)

    @property
    def label(self) -> str:
        """A short legend/title label: `method s<seed>`."""
        return f"{self.method} s{self.seed}"

    @property
    def where(self) -> str:
        """The dataset with its regime, as the tables name it (`sst2[n=100]`)."""
        return f"{self.dataset}[{self.regime}]" if self.regime else self.dataset


# ----------------------------------------------------------------------------------------------- style

@contextlib.contextmanager
def style() -> Iterator[None]:
    """The paper style (small fonts, TrueType in PDFs) for building and saving figures."""
    from matplotlib import rc_context

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
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def add_caption(figure: Figure, lines: Sequence[str]) -> None:
    """The figure's details (what is drawn, how to read it, what was left out) in small grey type under its
    panels, wrapped to its width, so that its title stays one line; the figure grows by the caption's height, so
    the panels keep theirs."""
    width = round(figure.get_figwidth() * CAPTION_CHARS_PER_INCH)
    text = "\n".join(textwrap.fill(line, width) for line in lines if line)
    figure.set_figheight(figure.get_figheight() + CAPTION_LINE_INCHES * (text.count("\n") + 1))
    figure.supxlabel(text, fontsize=7, color="0.3")


def method_legend(ax: Axes, handles: Sequence[Any], methods: Sequence[str]) -> None:
    """One legend of every method's colour, in the first panel (where the data leave room): clear of the title
    and the caption."""
    ax.legend(handles, methods, loc="best", fontsize="small", framealpha=0.8)


def caption_of(figure: Figure) -> str:
    """A figure's caption as one line ('' when it has none)."""
    label = getattr(figure, "_supxlabel", None)
    return " ".join(label.get_text().split()) if label is not None else ""


def facet_grid(facets: int, methods: Sequence[str], extra_height: float) -> tuple[Figure, np.ndarray, dict[str, Any]]:
    """A grid of `facets` panels, three a row (the page width; one column wide for one panel), its axes flattened,
    and one colour per method (in the order given) for every panel; `extra_height`: inches for titles, legend."""
    palette = dict(zip(methods, colours(len(methods))))
    columns = min(3, facets)
    rows = -(-facets // columns)
    figure = new_figure(COLUMN_WIDTH if columns == 1 else PAGE_WIDTH, 2.3 * rows + extra_height)
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    return figure, axes, palette


TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
         "#17becf")  # matplotlib's tab10, without importing it (tests/test_plots.py holds them equal)


def colours(n: int) -> list[tuple[float, float, float]]:
    """n distinguishable colours (RGB in 0-1): matplotlib's tab10 up to 10 (seaborn's "tab10" palette is these), else
    seaborn's husl (imported only then: seaborn costs 1 s of imports)."""
    if n <= 10:
        return [tuple(int(code[i:i + 2], 16) / 255 for i in (1, 3, 5)) for code in TAB10[:n]]
    import seaborn as sns

    return sns.color_palette("husl", n)


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
    spec = runfiles.read_json(Path(run_dir), store.SPEC)
    data = spec.get("data") or {}
    train = spec.get("train") if isinstance(spec.get("train"), dict) else {}
    return RunInfo(Path(run_dir), str(spec.get("key") or Path(run_dir).name), str(spec.get("method", "?")),
                   str(spec.get("dataset", "?")), str(spec.get("encoder", "?")), int(spec.get("seed", 0)),
                   str(spec.get("config_hash", "")), tuple(data.get("label_names") or ()),
                   str((spec.get("split_ids") or {}).get("test", "")), regime_label(train))


def run_outcome(run: RunInfo) -> tuple[float | None, bool]:
    """The run's clean test accuracy (a fraction; None when its rows.json has none) and its collapsed flag, from
    rows.json (a run without one, unfinished, is not flagged)."""
    if not (run.path / store.ROWS).is_file():
        return None, False
    rows = [r for r in runfiles.read_json(run.path, store.ROWS) if isinstance(r, dict)]
    clean = [r for r in rows if r.get("evaluator", "clean") == "clean" and r.get("split") == "test"
             and r.get("metric") == "accuracy" and not r.get("label")]
    accuracy = next((float(r["value"]) for r in clean if isinstance(r.get("value"), (int, float))), None)
    return accuracy, any(store.is_collapsed_flag(r.get("collapsed")) for r in rows)


def read_run_file(run: RunInfo, name: str, fix: str) -> Any:
    """A JSON file of the run, or a BenchError saying it is missing and how to get it."""
    path = run.path / name
    if not path.is_file():
        raise BenchError(f"run {run.key} has no {name}; {fix}")
    return runfiles.read_json(run.path, name)


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


def ldm_start(run: RunInfo) -> float:
    """The value every label-distance entry starts at: the clld methods fill the matrix with their `tau` knob
    (`torch.full(..., tau)` in methods/clld.py); the run's own tau from spec.json, else the method's default."""
    config = runfiles.read_json(run.path, store.SPEC).get("method_config") or {}
    if isinstance(config.get("tau"), (int, float)):
        return float(config["tau"])
    from bench.catalog import registry  # the knob defaults, read from the method sources without importing them

    base = run.method.split(":")[0]
    methods = registry("method")
    if base not in methods or "tau" not in methods.get(base).config_fields():
        raise BenchError(f"run {run.key}: method {run.method!r} has no tau knob, so no label-distance start value")
    return float(methods.get(base).config_fields()["tau"])


def ldm_start_note(run: RunInfo) -> str:
    """One line on the LDM's starting value and why its diagonal is masked (for captions and figure notes)."""
    tau = ldm_start(run)
    return (f"start: every entry = tau = {tau:g} (methods/clld.py fills the matrix with tau); "
            f"diagonal (a class with itself, stays tau) masked")


def ldm_update_note(run: RunInfo) -> str:
    """`N label-distance updates` for a clld-adaptive run (with a warning when fewer than FEW_LDM_UPDATES: it
    trained nearly as cl), "" for a run that stores no updates (clld-static, cl)."""
    path = run.path / store.METHOD_STATE
    count = store.ldm_update_count(runfiles.read_json(run.path, store.METHOD_STATE)) if path.is_file() else None
    if count is None:
        return ""
    note = f"{count} label-distance update{'' if count == 1 else 's'}"
    if count < store.FEW_LDM_UPDATES:
        note += f" (fewer than {store.FEW_LDM_UPDATES}: it trained nearly as cl)"
    return note


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
                         "`clbench run --overwrite`")
    return history


def read_tsne(run: RunInfo) -> pd.DataFrame:
    """The stored t-SNE sample: columns x, y, label."""
    stored = read_run_file(run, store.TSNE, f"run `clbench evaluate {run.key} --evaluators repr --tsne` first")
    return pd.DataFrame({"x": stored["x"], "y": stored["y"], "label": [str(v) for v in stored["labels"]]})


def distinct_labels(runs: Sequence[RunInfo]) -> list[str]:
    """Legend labels: method and seed, plus dataset/encoder where runs differ, plus the hash if still tied."""
    extra = [field for field in ("dataset", "encoder") if len({getattr(r, field) for r in runs}) > 1]
    labels = [" ".join([r.label, *(getattr(r, f) for f in extra)]) for r in runs]
    return [f"{label} {r.config_hash[:6]}" if labels.count(label) > 1 else label for label, r in zip(labels, runs)]


# ----------------------------------------------------------------------------------------------- heatmaps

def heatmap_size(n_classes: int, panels: int = 1) -> tuple[float, float]:
    """Figure size for `panels` side-by-side heatmaps of n classes: column width, growing for many classes."""
    per_panel = min(PAGE_WIDTH / panels, max(COLUMN_WIDTH, 1.3 + 0.3 * n_classes))
    width = min(PAGE_WIDTH, per_panel * panels)
    return width, per_panel * 0.9


def draw_heatmap(ax: Axes, matrix: np.ndarray, names: Sequence[str], *, fmt: str = ".2g",
                 annot: Any = None, cmap: Any = "viridis", vmin: float | None = None, vmax: float | None = None,
                 cbar: bool = True, cbar_label: str = "", integer: bool = False,
                 xlabel: str = "", ylabel: str = "", name_chars: int = LABEL_CHARS,
                 mask: np.ndarray | None = None) -> None:
    """A square heatmap with class names on both axes (annotated unless there are many classes); cells where
    `mask` is True are left blank. Drawn as seaborn's `heatmap` draws it (a mesh, dark or light annotations by the
    cell's luminance, white cell borders) but with matplotlib alone: seaborn draws the whole figure once more per
    heatmap to test its tick labels for overlap, which was half of a page's drawing time."""
    from matplotlib import colormaps

    values = np.ma.masked_where(np.zeros(np.shape(matrix), bool) if mask is None else np.asarray(mask, bool),
                                np.asarray(matrix, dtype=float))
    n = len(values)
    if annot is None:
        annot = n <= ANNOTATE_MAX
    if isinstance(cmap, str) and cmap not in colormaps:
        import seaborn  # noqa: F401  (registers its colour maps: rocket, mako, ...)
    colour_map = colormaps[cmap] if isinstance(cmap, str) else cmap
    low = float(values.min()) if vmin is None and values.count() else vmin
    high = float(values.max()) if vmax is None and values.count() else vmax
    if low is not None and high is not None:
        if high - low <= 1e-15 * max(abs(low), abs(high), 1e-300):  # one value everywhere: ±10% (as matplotlib's
            low, high = (low - 0.1 * abs(low), high + 0.1 * abs(high)) if low or high else (-0.1, 0.1)  # nonsingular)
    mesh = ax.pcolormesh(values, cmap=colour_map, vmin=low, vmax=high, edgecolors="white",
                         linewidth=0.4 if n <= ANNOTATE_MAX else 0)
    labels = [short(name, name_chars) for name in names]
    ax.set(xlim=(0, values.shape[1]), ylim=(values.shape[0], 0), aspect="equal")
    ax.set_xticks(np.arange(values.shape[1]) + 0.5, labels)
    ax.set_yticks(np.arange(n) + 0.5, labels)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if annot is not False:
        texts = annot if not isinstance(annot, bool) else None
        for (i, j), value in np.ndenumerate(values.filled(np.nan)):
            if np.ma.is_masked(values[i, j]):
                continue
            text = str(texts[i][j]) if texts is not None else format(int(value) if fmt == "d" else value, fmt)
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", size=7,
                    color="0.15" if luminance(mesh.cmap(mesh.norm(value))) > 0.408 else "w")
    if cbar:
        ax.figure.colorbar(mesh, ax=ax, **colorbar_options(cbar_label, integer))
    rotate_class_names(ax, labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def luminance(rgba: Sequence[float]) -> float:
    """Relative luminance of an RGB(A) colour (WCAG), by which a cell's annotation is dark or light."""
    rgb = np.asarray(rgba[:3], dtype=float)
    linear = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return float(linear @ [0.2126, 0.7152, 0.0722])


def colorbar_options(label: str, integer: bool) -> dict[str, Any]:
    """Colour bar label, with whole-number ticks for counts."""
    from matplotlib.ticker import MaxNLocator

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
