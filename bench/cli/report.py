"""`clbench results` (the results: compact or long, filtered, exported) and `clbench report` (paper-style tables).

`bench.cli.main` adds both subcommands with `add_results_parser` / `add_report_parser` and dispatches to
`cmd_results` / `cmd_report`; a BenchError raised here becomes a one-line error and exit code 2 there.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench.cli.common import check_output_folder, comma_list
from bench.cli.selecting import add_selection_options, selected
from bench.errors import BenchError

if TYPE_CHECKING:
    import pandas as pd
    from bench.reporting.verdicts import VerdictSettings

TABLES = ("paper-ii", "accuracy", "ablation", "robustness", "compare", "vs-paper", "ranking")
DEFAULT_TABLE = "paper-ii"
SHOWN_COLUMNS = ("dataset", "encoder", "method", "seed", "evaluator", "eval_hash", "split", "metric", "label",
                 "test", "capability", "value", "n", "note")
FILTER_HELP = ("keep rows whose COLUMN has one of the values, e.g. method=ce,clld or dataset=mr; repeatable "
               "(all must hold)")


def add_filter_option(parser: argparse.ArgumentParser) -> None:
    """`--filter COLUMN=VALUE[,VALUE]` (repeatable) and `--results-dir`."""
    parser.add_argument("--filter", dest="filters", action="append", default=[], metavar="COLUMN=VALUE[,VALUE]",
                        help=FILTER_HELP)
    parser.add_argument("--results-dir", default=None,
                        help="where runs are stored (default: $BENCH_RESULTS_DIR or ./results)")


def add_results_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The `clbench results` subcommand."""
    parser = sub.add_parser("results", parents=[common], help="the results: compact, long, filtered or exported",
                            description="Print the finished runs' results: by default one line per run and "
                                        "evaluator with its main metrics, fitted to the terminal (collapsed runs "
                                        "marked !); with --long every result row (one per run x evaluator x split "
                                        "x metric); or export every row and column to CSV or Parquet.")
    add_filter_option(parser)
    parser.add_argument("--long", action="store_true",
                        help="every result row (the tidy long table: per class, per test, ...) instead of the "
                             "compact view")
    parser.add_argument("--columns", type=comma_list, default=None, metavar="NAME,...",
                        help="compact view: only these metric columns, by short or full name (e.g. acc,f1 or "
                             "accuracy,att_acc)")
    parser.add_argument("--export", choices=["csv", "parquet"], default=None,
                        help="write the table (all columns) instead of printing it")
    parser.add_argument("--output", default=None, metavar="PATH",
                        help="export file (default: REPORTS/results[-FILTERS].csv|parquet, REPORTS the results "
                             "folder's "
                             "reports folder: ./reports for ./results, reports-NAME for NAME; "
                             "the format follows the suffix when --export is not given)")
    parser.add_argument("--archive", default=None, metavar="OUT.tar.xz",
                        help="pack the (filtered) finished runs into one archive to share: no models, checkpoints "
                             "or leases; unpacked, it verifies clean and every table reads it")
    return parser


def add_report_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The `clbench report` subcommand."""
    parser = sub.add_parser("report", parents=[common], help="paper-style tables from stored results",
                            description="Print a table built from the finished runs and write it to "
                                        "REPORTS_DIR/<table>[-<filters>].<md|tex|csv>. Mixed code versions, "
                                        "configs or evaluator settings are reported on stderr first.")
    parser.add_argument("--table", choices=TABLES, default=None,
                        help=f"which table (default: {DEFAULT_TABLE}, or only vs-paper with --vs-paper)")
    parser.add_argument("--baseline", default="ce", help="compare: the method every other one is tested against")
    parser.add_argument("--vs-paper", action="store_true",
                        help="also the vs-paper table: our accuracy next to the dataset cards' published numbers")
    parser.add_argument("--format", dest="fmt", choices=["md", "latex", "csv"], default="md",
                        help="output format (default: md)")
    add_filter_option(parser)
    parser.add_argument("--reports-dir", default=None,
                        help="where report files are written (default: beside the results folder: ./reports for "
                             "./results, reports-NAME for a results folder NAME)")
    parser.add_argument("--bootstrap", type=int, default=None, metavar="N",
                        help="compare: paired bootstrap resamples (default: 10000)")
    parser.add_argument("--rope", type=float, default=None, metavar="POINTS",
                        help="compare: the region of practical equivalence, ±POINTS of accuracy (default: 0.5): a "
                             "run-level 95%% interval inside it is the verdict 'equivalent'")
    parser.add_argument("--aso-iterations", type=int, default=None, metavar="N",
                        help="compare: bootstrap iterations of the Almost Stochastic Order test (default: 500; "
                             "0: no ASO)")
    add_selection_options(parser)
    parser.add_argument("--html", nargs="?", const="", default=None, metavar="PATH",
                        help="instead of text tables, write one self-contained HTML page (tables, comparison, "
                             "figures, robustness, provenance) to PATH (default: REPORTS_DIR/report[-FILTERS].html); "
                             "with --select-by validation, only each method's knob combination chosen on validation")
    return parser


def reports_folder(args: argparse.Namespace) -> Path:
    """--reports-dir, else the results folder's own (bench.results.store.reports_dir)."""
    from bench.results.store import reports_dir

    given = getattr(args, "reports_dir", None)
    return Path(given) if given else reports_dir(results_dir(args))


def results_dir(args: argparse.Namespace) -> Path:
    """--results-dir, else $BENCH_RESULTS_DIR, else ./results."""
    from bench.results.store import results_dir as resolve

    return resolve(args.results_dir)


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns worth reading on a terminal, sorted by dataset, encoder, method and seed; skip markers
    carry no number."""
    import pandas as pd

    columns = [c for c in SHOWN_COLUMNS if c in frame and (c in ("label", "note") or
                                                           (frame[c].astype(str) != "").any())]
    view = frame.sort_values(["dataset", "encoder", "method", "seed"], kind="stable")[columns].copy()
    skipped = view["metric"] == "skipped"
    view["value"] = ["" if skip or pd.isna(v) else f"{v:.6g}" for skip, v in zip(skipped, view["value"])]
    return view


def say_table(results: Path) -> None:
    """The one line for a damaged gathered table (reports read the run folders: their numbers stand)."""
    from bench.results.store import table_warning

    warning = table_warning(results)
    if warning:
        print(warning, file=sys.stderr)


def cmd_results(args: argparse.Namespace) -> int:
    """Print the (filtered) results compactly (one line per run and evaluator, fitted to the terminal) or in
    the tidy long form (--long), or export the long form with every column."""
    from bench.results import store
    from bench.reporting.render import filters_slug
    from bench.reporting.collapsed import asked_for, flag_runs
    from bench.reporting.compactview import collapsed_note, compact_table
    from bench.reporting.resultsview import apply_filters, load_results

    frame = load_results(results_dir(args))
    say_table(results_dir(args))
    if asked_for(args.filters):  # a filter on `collapsed` keeps or drops each run whole (evaluator rows lack it)
        frame = flag_runs(frame)
    frame = apply_filters(frame, args.filters)
    if args.archive:
        return archive_runs(args, frame)
    fmt = args.export
    if fmt is None and args.output:
        fmt = {".csv": "csv", ".parquet": "parquet"}.get(Path(args.output).suffix.lower())
        if fmt is None:
            raise BenchError(f"--output {args.output}: cannot tell the format from the suffix; add --export csv "
                             "or --export parquet")
    if fmt is not None and (args.long or args.columns):
        raise BenchError(f"--{'long' if args.long else 'columns'} changes the printed table; --export writes every "
                         "row and column: drop one of them")
    if args.long and args.columns:
        raise BenchError("--columns picks the compact view's columns; --long prints every column: drop one")
    if fmt is None and args.long:
        print(readable(frame).to_string(index=False))
        note = collapsed_note(frame)
        if note:  # the long form has no marker: say it here
            print(f"warning: {note}", file=sys.stderr)
        return 0
    if fmt is None:
        print(compact_table(frame, shutil.get_terminal_size().columns, args.columns))
        return 0
    slug = filters_slug(args.filters)
    path = Path(args.output) if args.output else reports_folder(args) / f"results{'-' + slug if slug else ''}.{fmt}"
    check_output_folder(path.parent, "export folder", "--output")
    with store.atomic_path(path) as tmp:
        if fmt == "csv":
            frame.to_csv(tmp, index=False, lineterminator="\n")
        else:
            frame.to_parquet(tmp, index=False)
    print(f"clbench: wrote {len(frame)} rows to {path}", file=sys.stderr)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Build the requested tables, print them and write them under --reports-dir (the collapsed runs, then mix
    warnings first). Collapsed runs follow bench.reporting.collapsed: left out unless a --filter names them."""
    html = Path(args.html) if args.html else None  # --html PATH: a file, or a folder that gets the default name
    args.reports_dir = reports_folder(args)
    folder = args.reports_dir if html is None else html if html.is_dir() else html.parent
    check_output_folder(folder, "reports folder", "--html" if html else "--reports-dir")  # before pandas
    from bench.reporting import render
    from bench.reporting.collapsed import asked_for

    names = [args.table] if args.table else ([] if args.vs_paper else [DEFAULT_TABLE])
    if args.vs_paper and "vs-paper" not in names:
        names.append("vs-paper")
    resamples = bootstrap_resamples(args.bootstrap)
    source = results_dir(args)
    say_table(source)
    if args.html is not None:
        from bench.reporting.html import write_html_report

        path, warnings = write_html_report(source, args.filters, args.reports_dir, args.html, args.baseline, resamples,
                                           verdict_settings(args), args.select_by, args.selection_seeds,
                                           args.eval_seeds)
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        print(path)
        return 0
    frame = report_rows(source, args.filters)
    frame, selection = selected(frame, args)  # --select-by validation: the chosen combinations' runs only
    include = asked_for(args.filters)
    for warning in report_warnings(names, frame, include):  # at the top, before anything else
        print(f"warning: {warning}", file=sys.stderr)
    outputs, figures = [], []
    settings = verdict_settings(args)
    for name in names:
        cells = table_cells(name, frame, source, args.baseline, resamples, include, settings)
        file_name = name
        if name == "compare" and cells.attrs["baseline"] != "ce":
            file_name = f"compare-vs-{cells.attrs['baseline']}"
        outputs.append((render.render(cells, args.fmt), render.write_report(cells, file_name, args.fmt,
                                                                            args.reports_dir, args.filters)))
        if name == "ranking":  # its critical-difference diagram beside it
            figures += ranking_figure(frame, include, args.reports_dir, args.filters)
    if selection is not None:  # the chosen knobs and each method's tuning budget, beside the tables
        from bench.reporting.selection import selection_cells

        cells = selection_cells(selection)
        outputs.append((render.render(cells, args.fmt), render.write_report(cells, "selection", args.fmt,
                                                                            args.reports_dir, args.filters)))
    for i, (text, path) in enumerate(outputs):
        print(("\n" if i else "") + text, end="")
        print(f"clbench: wrote {path}", file=sys.stderr)
    for path in figures:
        print(f"clbench: wrote {path}", file=sys.stderr)
    return 0


def archive_runs(args: argparse.Namespace, frame: pd.DataFrame) -> int:
    """`clbench results --archive OUT.tar.xz`: the runs of `frame` (filtered rows) packed by bench.results.archive."""
    from bench.results.archive import pack

    path = Path(args.archive)
    if not path.name.endswith(".tar.xz") or args.export or args.output or args.long:
        raise BenchError(f"--archive {args.archive}: give a file name ending in .tar.xz, without --export, --output "
                         "or --long")
    check_output_folder(path.parent, "archive folder", "--archive")
    keys = sorted(set(frame["run_key"].astype(str))) if "run_key" in frame else []
    if not keys:
        raise BenchError("no finished run to archive in the selection; loosen --filter")
    skipped = pack([results_dir(args) / key for key in keys], path)
    for line in skipped:
        print(f"warning: {line}", file=sys.stderr)
    print(f"clbench: wrote {len(keys) - len(skipped)} run(s) to {path} ({path.stat().st_size:,} bytes)",
          file=sys.stderr)
    return 0


# The steps of `clbench report`, shared with the Python API (bench.api): the rows, the warnings, one table's cells.

def report_rows(source: Path, filters: list[str] | None = None) -> pd.DataFrame:
    """Every row of the finished runs under `source` with each run's `collapsed` flag on all its rows, then
    `column=value` filters applied (flags first: a filter keeps or drops a run whole)."""
    from bench.reporting.collapsed import flag_runs
    from bench.reporting.resultsview import apply_filters, load_results

    return apply_filters(flag_runs(load_results(source)), filters)


def bootstrap_resamples(given: int | None) -> int:
    """The paired bootstrap's resamples: `given`, checked, else the default."""
    from bench.reporting import stats

    resamples = stats.N_RESAMPLES if given is None else given
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise BenchError("--bootstrap must be >= 1")
    return resamples


def verdict_settings(args: argparse.Namespace) -> VerdictSettings:
    """The verdict's settings from --rope and --aso-iterations, checked."""
    from bench.reporting.verdicts import VerdictSettings

    defaults = VerdictSettings()
    rope = defaults.rope if getattr(args, "rope", None) is None else args.rope
    iterations = defaults.aso_iterations if getattr(args, "aso_iterations", None) is None else args.aso_iterations
    if not 0 <= rope < 100:
        raise BenchError(f"--rope must be in [0, 100) points (got {rope:g}); e.g. --rope 0.5")
    if iterations < 0:
        raise BenchError(f"--aso-iterations must be >= 0 (got {iterations}; 0: no ASO)")
    return VerdictSettings(rope=rope, aso_iterations=iterations)


def report_warnings(names: list[str], frame: pd.DataFrame, include: bool) -> list[str]:
    """What to say before the tables `names` of `frame`: the collapsed runs (kept when `include`), then each mix
    of code versions, configs or evaluator settings among the rows the tables average."""
    from bench.reporting import tables
    from bench.reporting.collapsed import split_runs, warning_lines
    from bench.reporting.resultsview import mix_warnings

    split = split_runs(frame, include=include)
    kept = split.kept.drop(columns="collapsed", errors="ignore")
    mixed = [w for name in names for w in mix_warnings(tables.table_rows(name, kept))]
    return [*warning_lines(split.keys, include), *dict.fromkeys(mixed)]


def ranking_figure(frame: pd.DataFrame, include: bool, reports_dir: Path | str, filters: list[str]) -> list[Path]:
    """Write the ranking's critical-difference diagram (PNG and PDF) under `reports_dir`; returns the paths."""
    from bench.reporting.figures import save_plot
    from bench.reporting.ranking import cd_plot, rank_blocks

    return save_plot(cd_plot(rank_blocks(frame, include), filters), Path(reports_dir))


def table_cells(name: str, frame: pd.DataFrame, source: Path, baseline: str = "ce", resamples: int | None = None,
                include: bool = False, settings: VerdictSettings | None = None) -> pd.DataFrame:
    """The cell frame of table `name` (one of TABLES) over `frame` (flagged as `report_rows` does), its notes
    ending with where its runs were built (`bench.reporting.provenance_notes`); compare reads the runs' test
    predictions under `source` and notes its canonical baseline in `attrs["baseline"]`."""
    from bench.reporting import stats, tables
    from bench.reporting.collapsed import split_runs
    from bench.reporting.provenance_notes import with_provenance
    from bench.reporting.resultsview import canonical_method
    from bench.reporting.verdicts import VerdictSettings

    if name == "ranking":
        from bench.reporting.ranking import ranking_table

        return with_provenance(name, ranking_table(frame, include), frame, include)
    if name in ("compare", "accuracy"):
        keys = tables.clean_accuracy(split_runs(frame, include=include).kept)["run_key"].unique()
        frame, predictions = stats.readable_predictions(frame, source, keys)
    if name == "accuracy":
        from bench.reporting.accuracytable import accuracy_table

        cells = accuracy_table(frame, predictions, bootstrap_resamples(resamples), include_collapsed=include,
                               settings=settings or VerdictSettings())
        return with_provenance(name, cells, frame, include)
    if name == "compare":
        baseline = canonical_method(baseline, set(frame["method"]))
        cells = tables.compare(frame, predictions, baseline, bootstrap_resamples(resamples),
                               include_collapsed=include, settings=settings or VerdictSettings())
        cells.attrs["baseline"] = baseline
        return with_provenance(name, cells, frame, include)
    builders = {"paper-ii": tables.paper_ii, "ablation": tables.ablation, "robustness": tables.robustness,
                "vs-paper": tables.vs_paper}
    if name not in builders:
        raise BenchError(f"unknown table {name!r}; use one of {', '.join(TABLES)}")
    return with_provenance(name, builders[name](frame, include_collapsed=include), frame, include)
