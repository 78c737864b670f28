"""The figures of the HTML report (`bench.reporting.html`): drawn with the builders of `bench.reporting.plots` and
inlined as PNG, the accuracy summary by method, training curves per dataset x encoder, each method's first-seed
run's t-SNE scatter (when stored) and, when some method ran several knob combinations, the tuning-budget curves of
`bench.reporting.budgetplot`; as HTML tables (bench.reporting.htmlheatmap), that run's confusion and, for clld
runs, its label-distance matrix. A figure that cannot be drawn (a file the run lacks) becomes a one-line note.
Each PNG is drawn once per content (bench.reporting.figurecache): a rebuilt page reuses the figures it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bench.errors import BenchError
from bench.reporting.figurecache import attempt, drawn
from bench.reporting.figures import ldm_start, run_info
from bench.reporting.htmlparts import anchor, figures_row, note
from bench.reporting.htmltemplate import render
from bench.reporting.plotdata import FEW_SEEDS, FEW_SEEDS_WHY
from bench.reporting.tables import clean_accuracy, method_key
from bench.results import store

MAX_RUN_FIGURES = 40  # runs whose heatmaps are drawn; beyond this the page names how many were left out


@dataclass(frozen=True)
class ChosenRun:
    """The first-seed run of one dataset x encoder x method."""

    dataset: str
    encoder: str
    method: str
    seed: int
    key: str

    @property
    def title(self) -> str:
        """`method · dataset · encoder · seed S`."""
        return f"{self.method} · {self.dataset} · {self.encoder} · seed {self.seed}"


def first_seed_runs(frame: pd.DataFrame) -> list[ChosenRun]:
    """Per dataset x encoder x method, the run with the lowest seed (then the first run key), in table order."""
    rows = clean_accuracy(frame)
    if rows.empty:
        rows = frame
    rows = rows[rows["run_key"] != ""].drop_duplicates("run_key")
    chosen: dict[tuple[str, str, str], ChosenRun] = {}
    for row in rows.sort_values(["seed", "run_key"], kind="stable").itertuples(index=False):
        seed = -1 if pd.isna(row.seed) else int(row.seed)
        group = (str(row.dataset), str(row.encoder), str(row.method))
        chosen.setdefault(group, ChosenRun(*group, seed, str(row.run_key)))
    return sorted(chosen.values(), key=lambda r: (r.dataset, r.encoder, method_key(r.method)))


def summary_figure(frame: pd.DataFrame, filters: list[str]) -> str:
    """Test accuracy (%) by method, mean ± std over seeds, one panel per dataset (or a note)."""
    caption = ("Test accuracy (%) by method, one panel per dataset: mean over seeds with error bars of ± 1 sample "
               f"standard deviation over seeds (none for a single seed); dots: single seeds; open markers: fewer "
               f"than {FEW_SEEDS} seeds ({FEW_SEEDS_WHY})")
    figure, reason = drawn("plots:summary_plot", (frame.to_dict("records"), "accuracy", filters), caption)
    if not figure:
        return note(f"No accuracy summary figure: {reason}")
    return figures_row([figure])


def budget_figure(frame: pd.DataFrame, filters: list[str]) -> str:
    """The tuning-budget curves (expected maximum validation accuracy against knob combinations tried, per
    method), or a note when they cannot be drawn; '' when no method ran more than one knob combination."""
    from bench.reporting.budgetplot import has_budgets

    if not has_budgets(frame):
        return ""
    caption = ("Tuning budgets: per method, the expected maximum validation accuracy (%) of n knob combinations "
               "drawn at random from those it ran, against n, with a band of ± 1 standard deviation of that "
               "maximum (Dodge et al. 2019); one panel per dataset · encoder. Validation scores, not test: methods "
               "compared at the same n had the same tuning budget; a curve ends at the combinations its method ran.")
    figure, reason = drawn("budgetplot:budget_plot", (frame, filters), caption)
    if not figure:
        return note(f"No tuning-budget figure: {reason}")
    return figures_row([figure])


def ldm_caption(run_dir: Path, title: str) -> str:
    """The caption of a run's label-distance heatmap: what it shows and the value every entry starts at."""
    try:
        start = f"τ = {ldm_start(run_info(run_dir)):g}"
    except (BenchError, OSError, ValueError):
        start = "τ (the run's tau knob)"
    return (f"Final label-distance matrix of {title}; rows and columns: classes i and j, colour: the distance "
            f"d(i, j) after training. Start: every entry is {start}, the tau knob (methods/clld.py fills the matrix "
            "with tau); clld-static then sets its chosen confusing pairs to τ · boost, clld-adaptive moves each "
            "entry towards τ (1 + r_ij / max r) from the validation confusion rates r at each update. The diagonal "
            "(a class with itself) stays τ and is masked.")


def curves_figures(source: Path, runs: list[ChosenRun]) -> str:
    """Validation accuracy and loss parts per epoch of each method's first-seed run, per dataset x encoder (SVG
    charts: bench.reporting.htmlcurves)."""
    from bench.reporting.htmlcurves import curves_html

    groups: dict[tuple[str, str], list[ChosenRun]] = {}
    for run in runs:
        groups.setdefault((run.dataset, run.encoder), []).append(run)
    parts, reasons = [], []
    for (dataset, encoder), chosen in groups.items():
        figure, reason = attempt(curves_html, [source / run.key for run in chosen],
                                 f"Training curves on {dataset} ({encoder}): each method's first seed")
        if not figure:
            reasons.append(f"{dataset} · {encoder}: {reason}")
        else:
            parts.append(figure)
    return figures_row(parts) + "".join(note(f"No training curves for {r}") for r in reasons)


def run_figures(source: Path, run: ChosenRun) -> tuple[list[str], list[str]]:
    """A run's figures (confusion and, for clld runs, the LDM as HTML tables; t-SNE as a PNG when stored) and
    notes for those it lacks."""
    from bench.reporting.htmlheatmap import confusion_html, ldm_html

    run_dir = source / run.key
    tables: list[tuple[str, Any, str]] = [
        ("confusion heatmap", confusion_html, f"Test confusion of {run.title}: counts and row-normalised (%)")]
    if run.method.startswith("clld"):
        tables.append(("label-distance heatmap", ldm_html, ldm_caption(run_dir, run.title)))
    figures, notes = [], []
    for what, builder, caption in tables:
        table, reason = attempt(builder, run_dir, caption)
        if table is None:
            notes.append(f"No {what} for {run.key}: {reason}")
        else:
            figures.append(table)
    if (run_dir / store.TSNE).is_file():
        figure, reason = drawn("plots:embeddings_plot", (run_dir,), f"t-SNE of test embeddings of {run.title}")
        if not figure:
            notes.append(f"No t-SNE scatter for {run.key}: {reason}")
        else:
            figures.append(figure)
    return figures, notes


def method_figures(source: Path, runs: list[ChosenRun]) -> str:
    """Curves, then per first-seed run a heading with its heatmaps; notes for what is missing."""
    body = (render("paragraph", "For each dataset · encoder · method, its run with the lowest seed: training "
                   "curves, the test confusion, and for clld runs the learnt label-distance matrix.")
            + render("subheading", "Training curves") + curves_figures(source, runs))
    if not any(run.method.startswith("clld") for run in runs):
        body += note("No clld run in the selection, so no label-distance heatmaps.")
    for run in runs[:MAX_RUN_FIGURES]:
        figures, notes = run_figures(source, run)
        body += render("run_heading", anchor("run-" + run.key), run.title, run.key)
        body += figures_row(figures)
        body += "".join(note(n) for n in notes)
    if len(runs) > MAX_RUN_FIGURES:
        body += note(f"{len(runs) - MAX_RUN_FIGURES} more dataset/encoder/method groups left out (at most "
                     f"{MAX_RUN_FIGURES} drawn); narrow the page with --filter.")
    return body
