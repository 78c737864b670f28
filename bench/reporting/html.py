"""`clbench report --html`: one self-contained HTML page of a results folder, to send to a colleague.

The page holds a header (when, which folder, which filters, which runs it shows, mix warnings, cells over fewer
than 3 seeds), with `--select-by validation` the knobs chosen on validation and each method's tuning budget
(`bench.reporting.htmlgrid`; every other section then shows the chosen combinations' runs only), the main table
(test accuracy and macro-F1 per method, named with its knobs, and dataset), the paper-style tables
(`bench.reporting.tables`: ablation, compare with run-level verdicts, intervals and BH q-values, vs-paper,
robustness), opening with one line per comparison (its verdict, interval and runs), the leaderboard
(`bench.reporting.htmlboard`: the Friedman + Nemenyi ranking, then mean rank and win rate, cost per run, the
datasets and links to each method's definition), the confusion change of each method against the baseline, the
evaluator summaries, the figures of `bench.reporting.htmlfigures` (inline PNGs, reused from the page written
before when unchanged: bench.reporting.figurecache; heatmaps as HTML tables), and each run's provenance. A
section with nothing to show (one dataset to rank, one method, no evaluator rows, no published numbers) is left
out and named, with why, in one line under the contents (`Absent`). The page's structure is one template
(`bench.reporting.htmltemplate`: templates/page.html.j2), filled from the plain data this module computes. Every
table sorts by a click on a header and saves its rows as shown as CSV (the template's inline script, page.js).
Nothing is fetched when the page is opened: no external scripts, style sheets, fonts or images; links are
relative; no absolute local path is shown.

Collapsed runs follow `bench.reporting.collapsed`: the header lists them, each with a "collapsed" badge (as in
the provenance table), and the tables, summaries and figures leave them out unless a --filter names them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from bench import __version__
from bench.errors import BenchError
from bench.reporting import figurecache, floor, pagememo, stats, tables
from bench.reporting.htmlboard import cost_section, datasets_section, ranking_section
from bench.reporting.htmlfigures import budget_figure, first_seed_runs, method_figures, summary_figure
from bench.reporting.htmlgrid import (combinations_apart, confusion_diff_section, main_table, one_combination,
                                      selection_meta, selection_section)
from bench.reporting.collapsed import BRING_BACK, MARK, WHAT, asked_for, flag_runs, split_runs, warning_lines
from bench.reporting.htmlparts import (Absent, badge, cells_table, details, esc, frame_table, note, notes_list, page,
                                      without_paths)
from bench.reporting.leaderboard import accuracy_cells
from bench.reporting.plotdata import FEW_SEEDS, FEW_SEEDS_WHY, PERCENT, is_fraction
from bench.reporting.provenance_notes import provenance_notes, table_runs, with_provenance
from bench.reporting.render import filters_slug
from bench.reporting.resultsview import (apply_filters, as_text, canonical_method, load_results, mix_warnings,
                                         parse_filter)
from bench.reporting.selection import Selection, select_by_validation
from bench.reporting.summary import evaluation_table
from bench.reporting.verdicts import VerdictSettings

TITLE = "clbench results report"
PROVENANCE = ("run_key", "method", "dataset", "encoder", "seed", "config_hash", "method_version",
              "data_fingerprint", "clbench_version", "git_commit", "torch_version", "transformers_version",
              "python_version", "device", "deterministic", "host", "slurm_job", "finished_at", "best_epoch",
              "epochs_run", "wall_seconds", "collapsed")
FEW_NAMED = 12  # cells of fewer than FEW_SEEDS seeds named in the header before "and N more"
AT_A_GLANCE = (("clbench_version", "clbench"), ("git_commit", "commits"), ("device", "devices"))


@dataclass
class Report:
    """A built page: its HTML text, the warnings to print (the selection's warnings and notes, then the mix warnings
    shown in its header) and the lines about its collapsed runs."""

    text: str
    warnings: list[str] = field(default_factory=list)
    collapsed: list[str] = field(default_factory=list)  # `bench.reporting.collapsed.warning_lines`


def html_path(reports_dir: Path | str, filters: list[str] | None = None) -> Path:
    """`<reports_dir>/report[-<filters slug>].html` (the naming of the other report files)."""
    slug = filters_slug(filters)
    return Path(reports_dir) / f"report{'-' + slug if slug else ''}.html"


def table_or_note(build: Callable[[], pd.DataFrame], table_id: str, left_out: str,
                  seed_columns: tuple[str, ...] | None = None) -> str:
    """The cell frame `build` returns as a table (warning badges on cells of `seed_columns`, default all, over
    fewer than FEW_SEEDS seeds), or a one-line note `left_out: <why>`."""
    try:
        return cells_table(build(), table_id, seed_columns)
    except BenchError as exc:
        return note(f"{left_out}: {exc}")


# ----------------------------------------------------------------------------------------------- sections

def accuracy_section(frame: pd.DataFrame, filters: list[str], include: bool = False) -> str:
    """The main table (test accuracy and macro-F1 per method, with its knobs, and dataset) and the accuracy-by-method
    figure (without collapsed runs unless `include`; a method's knob combinations apart, named as in the table)."""
    kept = combinations_apart(split_runs(frame, include=include).kept)
    unnamed = [f for f in filters if parse_filter(f)[0] != "method"]  # applied already; the names now carry knobs
    return table_or_note(lambda: with_provenance("paper-ii", main_table(frame, include), frame, include),
                         "table-main", "No accuracy table") + summary_figure(kept, unnamed)


def ran_only(cells: pd.DataFrame) -> pd.DataFrame:
    """A cell frame without its rows that have no cell with a number (methods never run), saying so in a note."""
    ran = set(cells.loc[cells["n"] > 0, "row"])
    kept = cells[cells["row"].isin(ran)].reset_index(drop=True)
    kept.attrs = {**cells.attrs}
    absent = list(dict.fromkeys(r for r in cells["row"] if r not in ran))
    if absent:
        kept.attrs["notes"] = [*cells.attrs.get("notes", []), f"not run, left out: {', '.join(absent)}"]
    return kept


def ablation_section(frame: pd.DataFrame, include: bool = False) -> str | Absent:
    """The ablation table, rows only for the methods that ran, when at least two of its methods ran (collapsed
    runs aside unless `include`), else a note."""
    ran = set(tables.clean_accuracy(split_runs(frame, include=include).kept)["method"])
    present = [m for m in tables.ABLATION_METHODS if m in ran]
    if len(present) < 2:
        return Absent(f"it needs runs of at least two of {', '.join(tables.ABLATION_METHODS)}; the selection has "
                      f"{', '.join(present) or 'none of them'}")
    def build() -> pd.DataFrame:
        return with_provenance("ablation", ran_only(tables.ablation(frame, include_collapsed=include)), frame, include)

    return table_or_note(build, "table-ablation", "No ablation table")


def comparison(frame: pd.DataFrame, source: Path, baseline: str, resamples: int, include: bool = False,
               settings: VerdictSettings = VerdictSettings()) -> pd.DataFrame | BenchError:
    """The compare table's cells (run-level verdicts first, item-level statistics secondary), or the BenchError
    saying why there is none."""
    try:
        name = canonical_method(baseline, set(frame["method"]))
        keys = tables.clean_accuracy(split_runs(frame, include=include).kept)["run_key"].unique()
        frame, predictions = stats.readable_predictions(frame, source, keys)
        cells = tables.compare(frame, predictions, name, resamples, include_collapsed=include, settings=settings)
        return with_provenance("compare", cells, frame, include)
    except BenchError as exc:
        return exc


def compare_section(cells: pd.DataFrame | BenchError, baseline: str) -> str | Absent:
    """Every other method against the baseline: the verdict, Δ accuracy and its interval over runs, BH q, ASO,
    runs needed, then the item-level statistics of these trained models; absent, with why, when there is none."""
    if isinstance(cells, BenchError):
        return Absent(str(cells))
    return cells_table(cells, "table-compare", ("runs",))


def verdict_lines(cells: pd.DataFrame | BenchError) -> list[dict[str, str]]:
    """The page's opening lines: one per comparison, its verdict, its interval over runs and test items and the runs
    behind it (the data of the template's header)."""
    if isinstance(cells, BenchError) or cells.empty:
        return []
    lines = []
    for _, group in cells.groupby("row", sort=False):
        cell = dict(zip(group["column"], group["text"]))
        lines.append({"verdict": cell["verdict"], "delta": cell["Δ acc"], "ci": cell["95% CI"], "runs": cell["runs"],
                      "where": " ".join(str(group.iloc[0][k]) for k in ("method", "dataset", "encoder")),
                      "needed": f"; runs needed {cell['runs needed']}" if cell.get("runs needed") else ""})
    return lines


def vs_paper_section(frame: pd.DataFrame, include: bool = False) -> str | Absent:
    """Our accuracy beside the dataset cards' published numbers (absent when no card of these datasets has any)."""
    try:
        cells = with_provenance("vs-paper", tables.vs_paper(frame, include_collapsed=include), frame, include)
    except BenchError as exc:  # no card of these datasets has a published number
        return Absent(str(exc))
    return cells_table(cells, "table-vs-paper", ("ours acc",))


def robustness_section(frame: pd.DataFrame, include: bool = False) -> str | Absent:
    """The robustness table and every evaluator's overall metrics (mean ± std over seeds), or a note; the classical
    reference is left to the main table (its floor), not summarised per method."""
    frame = frame[frame["evaluator"] != floor.EVALUATOR]
    rows = tables.evaluator_rows(frame)
    if rows.empty:
        return Absent("; ".join(["no evaluator rows in the selection: score runs with `clbench evaluate RUN` "
                                 "(contrast, textfooler, checklist)", *tables.skipped_notes(frame)]))
    body = table_or_note(lambda: with_provenance("robustness", tables.robustness(frame, include_collapsed=include),
                                                 frame, include), "table-robustness",
                         "No robustness table")
    summary = evaluation_table(in_percent(frame).to_dict("records"), include_collapsed=include)
    if summary.empty:
        return body + notes_list(summary.attrs.get("notes", []))
    evaluators = ", ".join(dict.fromkeys(summary["evaluator"]))
    built = provenance_notes(tables.evaluator_rows(split_runs(frame, include=include).kept), frame)
    return body + details(f"Evaluator summaries: {len(summary)} metrics of {evaluators}",
                          frame_table(summary, "table-evaluators", "Every evaluator metric (overall rows): mean ± "
                                      "std over seeds, fractions in %, one line per evaluator setting (eval_hash)")
                          + notes_list([*summary.attrs.get("notes", []), *built]))


def in_percent(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with every fraction metric of an evaluator (accuracy, F1, rates: `plotdata.is_fraction`) in % and
    named `<metric> (%)`, as a person reads them (the stored rows are unchanged)."""
    fraction = (frame["evaluator"] != "clean") & frame["metric"].map(lambda m: isinstance(m, str) and is_fraction(m))
    shown = frame.copy()
    shown.loc[fraction, "value"] = PERCENT * pd.to_numeric(shown.loc[fraction, "value"], errors="coerce")
    shown.loc[fraction, "metric"] = shown.loc[fraction, "metric"] + " (%)"
    return shown


def provenance_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One line per run with the provenance columns the rows carry (clean rows preferred), as text."""
    runs = frame[as_text(frame["run_key"]) != ""]
    runs = runs.assign(_clean=runs["evaluator"] != "clean").sort_values("_clean", kind="stable")
    runs = runs.drop_duplicates("run_key")
    columns = [c for c in PROVENANCE if c in runs and (as_text(runs[c]) != "").any()]
    order = runs.assign(_method=runs["method"].map(tables.method_key)).sort_values(
        ["dataset", "encoder", "_method", "seed", "run_key"], kind="stable")
    shown = order[columns].copy()
    for column in columns:
        if column == "wall_seconds":
            shown[column] = [f"{v:.1f}" if isinstance(v, float) and v == v else as_text(pd.Series([v]))[0]
                             for v in shown[column]]
        else:
            shown[column] = as_text(shown[column])
    return shown.reset_index(drop=True)


def provenance_section(frame: pd.DataFrame) -> str:
    """Each run's provenance in a <details> element, with the versions and devices at a glance; a collapsed run
    has a badge beside its key."""
    shown = provenance_frame(frame)
    marks = shown["collapsed"] if "collapsed" in shown else pd.Series("", index=shown.index)
    keys = [esc(k) + (badge("collapsed", WHAT) if m == "1" else "") for k, m in zip(shown["run_key"], marks)]
    glance = [f"{len(shown)} runs"]
    for column, name in AT_A_GLANCE:
        if column in shown:
            values = sorted(set(shown[column]) - {""})
            glance.append(f"{name}: {', '.join(v[:10] if column == 'git_commit' else v for v in values[:4])}"
                          + (f" and {len(values) - 4} more" if len(values) > 4 else ""))
    return details(" · ".join(glance), frame_table(shown.assign(run_key=keys), "table-provenance", "Provenance of "
                                                   "each run (from its result rows)", html_columns=("run_key",)))


# ----------------------------------------------------------------------------------------------- page

def collapsed_data(keys: list[str], included: bool) -> dict[str, object] | None:
    """The header's block naming the collapsed runs (None when there are none)."""
    if not keys:
        return None
    fate = (f"kept by the filter: cells whose mean includes one are marked {MARK} and never best" if included else
            f"left out of every table, summary and figure below (show them with {BRING_BACK})")
    return {"runs": keys, "what": WHAT, "fate": fate}


def few_seeds_data(frame: pd.DataFrame, include: bool) -> dict[str, object] | None:
    """The header's warning when some method x dataset accuracy cells rest on fewer than FEW_SEEDS seeds (None when
    none do)."""
    cells, _ = accuracy_cells(frame, include)
    few = cells[cells["seeds"] < FEW_SEEDS]
    if few.empty:
        return None
    several = cells["encoder"].nunique() > 1
    names = [f"{m}{f' {e}' if several else ''} on {d} ({n})"
             for d, e, m, n in zip(few["dataset"], few["encoder"], few["method"], few["seeds"])]
    named = ", ".join(names[:FEW_NAMED]) + (f" and {len(names) - FEW_NAMED} more" if len(names) > FEW_NAMED else "")
    return {"seeds": FEW_SEEDS, "count": len(few), "cells": len(cells), "why": FEW_SEEDS_WHY, "named": named}


def header_meta(source: Path, filters: list[str], baseline: str, frame: pd.DataFrame, generated: datetime,
                selection: Selection | None = None) -> list[tuple[str, str]]:
    """When and from what the page was built (the results folder by its name: no absolute path)."""
    distinct = {c: len(set(as_text(frame[c])) - {""}) for c in ("run_key", "method", "dataset", "encoder")}
    counts = " · ".join(f"{distinct[c]} {name}" for c, name in (("run_key", "runs"), ("method", "methods"),
                                                                ("dataset", "datasets"), ("encoder", "encoders")))
    return [("Generated", pagememo.generated_text(generated)),
            ("Results folder", source.resolve().name),
            ("Filters", ", ".join(filters) if filters else "none (every finished run)"),
            ("Baseline", baseline), ("Selection", counts), ("Runs shown", selection_meta(selection)),
            ("clbench", __version__)]


def build_report(source: Path | str, filters: list[str] | None = None, baseline: str = "ce",
                 resamples: int = stats.N_RESAMPLES, generated: datetime | None = None,
                 page_dir: Path | str | None = None, settings: VerdictSettings = VerdictSettings(),
                 select_by: str | None = None, selection_seeds: list[int] | None = None,
                 eval_seeds: list[int] | None = None) -> Report:
    """The HTML page for the (filtered) finished runs under `source`; BenchError when there are none.
    `page_dir`: where the page will be written (for the relative links to docs/METHODS.md; None: no links).
    `select_by="validation"`: per method the knob combination chosen on validation (`bench.reporting.selection`,
    on `selection_seeds`, reported on `eval_seeds`) and only its runs, with a section on the choice."""
    source = Path(source)
    filters = list(filters or [])
    every = apply_filters(flag_runs(load_results(source)), filters)  # flags first: filters keep runs whole
    selection = chosen_runs(every, select_by, selection_seeds, eval_seeds)
    frame = every if selection is None else selection.frame
    include = asked_for(filters)
    split = split_runs(frame, include=include)
    kept = split.kept.drop(columns="collapsed", errors="ignore")  # the collapsed runs have their own block
    warnings = list(dict.fromkeys(w for name in ("paper-ii", "robustness")
                                  for w in mix_warnings(tables.table_rows(name, kept))))
    generated = generated or datetime.now(timezone.utc).replace(microsecond=0)
    page_dir = Path(page_dir) if page_dir is not None else None
    pooled, left_out = (frame, "") if selection is not None else one_combination(frame)  # a grid: never pooled
    compared = comparison(pooled, source, baseline, resamples, include, settings)
    budgets = budget_figure(every, filters)  # every combination tried: '' when no method ran several
    left_note = note(left_out) if left_out else ""
    built = left_note + notes_list(provenance_notes(table_runs("paper-ii", pooled, include), pooled))  # their runs
    sections = [
        *([("selection", "Knobs chosen by validation", selection_section(selection))] if selection else []),
        ("accuracy", "Test accuracy", accuracy_section(frame, filters, include)),
        ("ranking", "Ranking across datasets", joined(ranking_section(pooled, source, page_dir, include), built,
                                                      left_out)),
        ("cost", "Cost", cost_section(pooled, source, page_dir, include) + built),
        *([("budgets", "Tuning budgets", budgets)] if budgets else []),
        ("datasets", "Datasets and methods", datasets_section(kept, source, page_dir)),
        ("ablation", "Ablation", ablation_section(frame, include)),
        ("compare", f"Comparison with {baseline}", joined(compare_section(compared, baseline), left_note, left_out)),
        ("confusion-diff", f"Confusion change vs {baseline}", confusion_diff_section(source, frame, baseline, include)),
        ("vs-paper", "Published numbers", vs_paper_section(frame, include)),
        ("robustness", "Robustness", robustness_section(frame, include)),
        ("figures", "Per-method figures", method_figures(source, first_seed_runs(split.kept))),
        ("provenance", "Provenance", provenance_section(frame)),
    ]
    footer = (f"Generated by clbench {__version__} with clbench report --html from stored results only; "
              "self-contained: figures are inline PNG images or HTML tables, sorting and CSV downloads run in the "
              "page, nothing is loaded from the network.")
    header = {"baseline": baseline, "verdicts": verdict_lines(compared),
              "meta": header_meta(source, filters, baseline, frame, generated, selection),
              "collapsed": collapsed_data(split.keys, include), "few": few_seeds_data(frame, include),
              "built": provenance_notes(kept, frame), "warnings": warnings}
    shown, absent = present_sections(sections)
    text = without_paths(page(TITLE, header, shown, footer, absent), {
        str(source.resolve()): source.resolve().name, str(source.absolute()): source.resolve().name,
        str(Path.cwd()): ".", str(Path.home()): "~"})
    lines = [] if selection is None else [*selection.warnings, *selection.notes]
    return Report(text, [*lines, *warnings], warning_lines(split.keys, include))


def joined(body: str | Absent, more: str, why: str = "") -> str | Absent:
    """A section's body with `more` HTML after it; an absent section stays absent, with `why` (the same note as
    text) added to its reason."""
    if isinstance(body, Absent):
        return Absent(f"{body.why}; {why}") if why else body
    return body + more


def present_sections(sections: list[tuple[str, str, str | Absent]]) -> tuple[list[tuple[str, str, str]],
                                                                           list[tuple[str, str]]]:
    """The sections with something to show (id, title, body), and the others' titles with why not."""
    shown = [(sid, title, body) for sid, title, body in sections if not isinstance(body, Absent)]
    return shown, [(title, body.why) for _, title, body in sections if isinstance(body, Absent)]


def chosen_runs(frame: pd.DataFrame, select_by: str | None, selection_seeds: list[int] | None,
                eval_seeds: list[int] | None) -> Selection | None:
    """The choice `--select-by validation` makes on `frame` (None without it); BenchError for another criterion or
    for seeds given without it."""
    if select_by is None:
        if selection_seeds is not None or eval_seeds is not None:
            raise BenchError("--selection-seeds and --eval-seeds pick the seeds of --select-by validation: add "
                             "--select-by validation (or drop them)")
        return None
    if select_by != "validation":
        raise BenchError(f"--select-by {select_by}: the page chooses knobs by validation only (--select-by "
                         "validation)")
    return select_by_validation(frame, selection_seeds, eval_seeds)


def write_html_report(source: Path | str, filters: list[str] | None, reports_dir: Path | str,
                      path: Path | str | None = None, baseline: str = "ce",
                      resamples: int = stats.N_RESAMPLES, settings: VerdictSettings = VerdictSettings(),
                      select_by: str | None = None, selection_seeds: list[int] | None = None,
                      eval_seeds: list[int] | None = None) -> tuple[Path, list[str]]:
    """Build the page and write it atomically to `path` (a folder gets the default name; default
    `html_path(reports_dir, filters)`); returns the path and the warnings: the collapsed runs, then the
    selection's warnings and notes, then the mix warnings."""
    target = html_path(reports_dir, filters) if not path else Path(path)
    if target.is_dir():
        target = html_path(target, filters)
    now = datetime.now(timezone.utc).replace(microsecond=0)
    key = pagememo.page_key(Path(source), target, {"filters": filters, "baseline": baseline, "resamples": resamples,
                                                   "settings": settings, "select_by": select_by,
                                                   "selection_seeds": selection_seeds, "eval_seeds": eval_seeds})
    warnings = pagememo.reused(target, key, now)  # nothing changed since that page was built
    if warnings is not None:
        return target, warnings
    with figurecache.reusing(target):  # the figures of the page it replaces, where what they show is unchanged
        report = build_report(source, filters, baseline, resamples, now, target.parent, settings, select_by,
                              selection_seeds, eval_seeds)
    pagememo.remember(target, key, report.text, now, report.collapsed + report.warnings)
    return target, report.collapsed + report.warnings
