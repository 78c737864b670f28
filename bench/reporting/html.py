"""`clbench report --html`: one self-contained HTML page of a results folder, to send to a colleague.

The page holds a header (when, which folder, which filters, mix warnings), the paper-style tables
(`bench.reporting.tables`: paper-ii, ablation, compare with bootstrap CIs and BH q-values, vs-paper,
robustness) and the evaluator summaries as HTML tables, the figures of `bench.reporting.htmlfigures` as
inline PNGs, and each run's provenance. A section that does not apply to the selection (one method, no
evaluator rows, no clld run, no published numbers) is replaced by a one-line note saying why. Nothing is
fetched when the page is opened: no scripts, no external style sheets, fonts or images.

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
from bench.reporting import stats, tables
from bench.reporting.htmlfigures import first_seed_runs, method_figures, summary_figure
from bench.reporting.collapsed import BRING_BACK, MARK, WHAT, asked_for, flag_runs, split_runs, warning_lines
from bench.reporting.htmlparts import badge, cells_table, esc, frame_table, note, notes_list, page
from bench.reporting.render import filters_slug
from bench.reporting.resultsview import apply_filters, as_text, canonical_method, load_results, mix_warnings
from bench.reporting.summary import evaluation_table
from bench.results import store

TITLE = "clbench results report"
PROVENANCE = ("run_key", "method", "dataset", "encoder", "seed", "config_hash", "method_version",
              "data_fingerprint", "clbench_version", "git_commit", "torch_version", "transformers_version",
              "python_version", "device", "deterministic", "host", "slurm_job", "finished_at", "best_epoch", "epochs_run",
              "wall_seconds", "collapsed")
AT_A_GLANCE = (("clbench_version", "clbench"), ("git_commit", "commits"), ("device", "devices"))


@dataclass
class Report:
    """A built page: its HTML text, the mix warnings shown in its header and the lines about its collapsed runs."""

    text: str
    warnings: list[str] = field(default_factory=list)
    collapsed: list[str] = field(default_factory=list)  # `bench.reporting.collapsed.warning_lines`


def html_path(reports_dir: Path | str, filters: list[str] | None = None) -> Path:
    """`<reports_dir>/report[-<filters slug>].html` (the naming of the other report files)."""
    slug = filters_slug(filters)
    return Path(reports_dir) / f"report{'-' + slug if slug else ''}.html"


def table_or_note(build: Callable[[], pd.DataFrame], table_id: str, left_out: str) -> str:
    """The cell frame `build` returns as a table, or a one-line note `left_out: <why>`."""
    try:
        return cells_table(build(), table_id)
    except BenchError as exc:
        return note(f"{left_out}: {exc}")


# ----------------------------------------------------------------------------------------------- sections

def accuracy_section(frame: pd.DataFrame, filters: list[str], include: bool = False) -> str:
    """The paper-ii table and the accuracy-by-method figure (without collapsed runs unless `include`)."""
    kept = split_runs(frame, include=include).kept
    return table_or_note(lambda: tables.paper_ii(frame, include_collapsed=include), "table-paper-ii",
                         "No accuracy table") + summary_figure(kept, filters)


def ablation_section(frame: pd.DataFrame, include: bool = False) -> str:
    """The ablation table when at least two of its methods ran (collapsed runs aside unless `include`), else a
    note."""
    ran = set(tables.clean_accuracy(split_runs(frame, include=include).kept)["method"])
    present = [m for m in tables.ABLATION_METHODS if m in ran]
    if len(present) < 2:
        return note(f"No ablation table: it needs runs of at least two of {', '.join(tables.ABLATION_METHODS)} "
                    f"(the selection has {', '.join(present) or 'none of them'}).")
    return table_or_note(lambda: tables.ablation(frame, include_collapsed=include), "table-ablation",
                         "No ablation table")


def compare_section(frame: pd.DataFrame, source: Path, baseline: str, resamples: int, include: bool = False) -> str:
    """Every other method against the baseline: Δ accuracy, 95% bootstrap CI, p, BH q, McNemar."""
    def build() -> pd.DataFrame:
        name = canonical_method(baseline, set(frame["method"]))
        keys = tables.clean_accuracy(split_runs(frame, include=include).kept)["run_key"].unique()
        return tables.compare(frame, stats.load_run_predictions(source, keys), name, resamples,
                              include_collapsed=include)

    return table_or_note(build, "table-compare", f"No comparison with {baseline}")


def vs_paper_section(frame: pd.DataFrame, include: bool = False) -> str:
    """Our accuracy beside the dataset cards' published numbers (where the cards have any)."""
    return table_or_note(lambda: tables.vs_paper(frame, include_collapsed=include), "table-vs-paper",
                         "No published numbers")


def robustness_section(frame: pd.DataFrame, include: bool = False) -> str:
    """The robustness table and every evaluator's overall metrics (mean ± std over seeds), or a note."""
    rows = tables.evaluator_rows(frame)
    if rows.empty:
        skipped = tables.skipped_notes(frame)
        return note("No evaluator rows in the selection: score runs with `clbench evaluate RUN` "
                    "(contrast, textfooler, checklist).") + "".join(note(n) for n in skipped)
    body = table_or_note(lambda: tables.robustness(frame, include_collapsed=include), "table-robustness",
                         "No robustness table")
    summary = evaluation_table(frame.to_dict("records"), include_collapsed=include)
    if summary.empty:
        return body + notes_list(summary.attrs.get("notes", []))
    evaluators = ", ".join(dict.fromkeys(summary["evaluator"]))
    return body + (f"<details><summary>Evaluator summaries: {len(summary)} metrics of {esc(evaluators)}</summary>\n"
                   + frame_table(summary, "table-evaluators", "Every evaluator metric (overall rows): mean ± std "
                                 "over seeds, one line per evaluator setting (eval_hash)")
                   + notes_list(summary.attrs.get("notes", [])) + "</details>\n")


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
    return (f"<details><summary>{esc(' · '.join(glance))}</summary>\n"
            + frame_table(shown.assign(run_key=keys), "table-provenance", "Provenance of each run (from its result "
                          "rows)", html_columns=("run_key",))
            + "</details>\n")


# ----------------------------------------------------------------------------------------------- page

def collapsed_html(keys: list[str], included: bool) -> str:
    """The header's block naming the collapsed runs, each with a badge ('' when there are none)."""
    if not keys:
        return ""
    fate = (f"kept by the filter: cells whose mean includes one are marked {MARK} and never best" if included else
            f"left out of every table, summary and figure below (show them with {BRING_BACK})")
    items = "".join(f"<li>{badge('collapsed', WHAT)} {esc(key)}</li>" for key in keys)
    return (f'<div class="warnings" id="collapsed" role="alert"><strong>Collapsed runs ({len(keys)})</strong> — '
            f"{esc(WHAT)}; {esc(fate)}:<ul>{items}</ul></div>\n")


def header_html(source: Path, filters: list[str], baseline: str, frame: pd.DataFrame, warnings: list[str],
                generated: datetime, collapsed: str = "") -> str:
    """When and from what the page was built, the collapsed runs (`collapsed_html`) and the mix warnings
    (prominent) or a line saying there are none."""
    distinct = {c: len(set(as_text(frame[c])) - {""}) for c in ("run_key", "method", "dataset", "encoder")}
    counts = " · ".join(f"{distinct[c]} {name}" for c, name in (("run_key", "runs"), ("method", "methods"),
                                                                ("dataset", "datasets"), ("encoder", "encoders")))
    meta = [("Generated", generated.strftime("%Y-%m-%d %H:%M:%S %Z").strip()),
            ("Results folder", str(source.resolve())),
            ("Filters", ", ".join(filters) if filters else "none (every finished run)"),
            ("Baseline", baseline), ("Selection", counts), ("clbench", __version__)]
    items = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in meta)
    if warnings:
        lines = "".join(f"<li>{esc(w)}</li>" for w in warnings)
        alert = (f'<div class="warnings" id="warnings" role="alert"><strong>Warning: mixed results '
                 f"({len(warnings)})</strong> — some numbers below average runs that may not belong together:"
                 f"<ul>{lines}</ul></div>\n")
    else:
        alert = '<p class="ok" id="warnings">No mixed code versions, configs, data or evaluator settings.</p>\n'
    return f'<dl class="meta">{items}</dl>\n{collapsed}{alert}'


def build_report(source: Path | str, filters: list[str] | None = None, baseline: str = "ce",
                 resamples: int = stats.N_RESAMPLES, generated: datetime | None = None) -> Report:
    """The HTML page for the (filtered) finished runs under `source`; BenchError when there are none."""
    source = Path(source)
    filters = list(filters or [])
    frame = apply_filters(flag_runs(load_results(source)), filters)  # flags first: filters keep runs whole
    include = asked_for(filters)
    split = split_runs(frame, include=include)
    kept = split.kept.drop(columns="collapsed", errors="ignore")  # the collapsed runs have their own block
    warnings = list(dict.fromkeys(w for name in ("paper-ii", "robustness")
                                  for w in mix_warnings(tables.table_rows(name, kept))))
    generated = generated or datetime.now(timezone.utc).replace(microsecond=0)
    sections = [
        ("accuracy", "Test accuracy", accuracy_section(frame, filters, include)),
        ("ablation", "Ablation", ablation_section(frame, include)),
        ("compare", f"Comparison with {baseline}", compare_section(frame, source, baseline, resamples, include)),
        ("vs-paper", "Published numbers", vs_paper_section(frame, include)),
        ("robustness", "Robustness", robustness_section(frame, include)),
        ("figures", "Per-method figures", method_figures(source, first_seed_runs(split.kept))),
        ("provenance", "Provenance", provenance_section(frame)),
    ]
    footer = (f"Generated by clbench {__version__} with clbench report --html from stored results only; "
              "self-contained: figures are inline PNG images, nothing is loaded from the network.")
    header = header_html(source, filters, baseline, frame, warnings, generated, collapsed_html(split.keys, include))
    return Report(page(TITLE, header, sections, footer), warnings, warning_lines(split.keys, include))


def write_html_report(source: Path | str, filters: list[str] | None, reports_dir: Path | str,
                      path: Path | str | None = None, baseline: str = "ce",
                      resamples: int = stats.N_RESAMPLES) -> tuple[Path, list[str]]:
    """Build the page and write it atomically to `path` (a folder gets the default name; default
    `html_path(reports_dir, filters)`); returns the path and the warnings: the collapsed runs, then the mix
    warnings."""
    report = build_report(source, filters, baseline, resamples)
    target = html_path(reports_dir, filters) if not path else Path(path)
    if target.is_dir():
        target = html_path(target, filters)
    with store.atomic_path(target) as tmp:
        tmp.write_text(report.text, encoding="utf-8")
    return target, report.collapsed + report.warnings
