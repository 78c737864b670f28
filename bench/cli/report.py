"""`bench results` (the tidy results table: print, filter, export) and `bench report` (paper-style tables).

`bench.cli.main` adds both subcommands with `add_results_parser` / `add_report_parser` and dispatches to
`cmd_results` / `cmd_report`; a BenchError raised here becomes a one-line error and exit code 2 there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench.errors import BenchError

if TYPE_CHECKING:
    import pandas as pd

TABLES = ("paper-ii", "ablation", "robustness", "compare", "vs-paper")
DEFAULT_TABLE = "paper-ii"
DEFAULT_REPORTS = "reports"
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
    """The `bench results` subcommand."""
    parser = sub.add_parser("results", parents=[common], help="the tidy results table with filters and export",
                            description="Print every result row of the finished runs (one per run x evaluator x "
                                        "split x metric), or export all columns to CSV or Parquet.")
    add_filter_option(parser)
    parser.add_argument("--export", choices=["csv", "parquet"], default=None,
                        help="write the table (all columns) instead of printing it")
    parser.add_argument("--output", default=None, metavar="PATH",
                        help=f"export file (default: {DEFAULT_REPORTS}/results[-FILTERS].csv|parquet; "
                             "the format follows the suffix when --export is not given)")
    return parser


def add_report_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The `bench report` subcommand."""
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
    parser.add_argument("--reports-dir", default=DEFAULT_REPORTS,
                        help=f"where report files are written (default: ./{DEFAULT_REPORTS})")
    parser.add_argument("--bootstrap", type=int, default=None, metavar="N",
                        help="compare: paired bootstrap resamples (default: 10000)")
    parser.add_argument("--html", nargs="?", const="", default=None, metavar="PATH",
                        help="instead of text tables, write one self-contained HTML page (tables, comparison, "
                             "figures, robustness, provenance) to PATH (default: REPORTS_DIR/report[-FILTERS].html)")
    return parser


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


def cmd_results(args: argparse.Namespace) -> int:
    """Print the (filtered) tidy results table, or export it with every column."""
    from bench.results import store
    from bench.reporting.render import filters_slug
    from bench.reporting.resultsview import apply_filters, load_results

    frame = apply_filters(load_results(results_dir(args)), args.filters)
    fmt = args.export
    if fmt is None and args.output:
        fmt = {".csv": "csv", ".parquet": "parquet"}.get(Path(args.output).suffix.lower())
        if fmt is None:
            raise BenchError(f"--output {args.output}: cannot tell the format from the suffix; add --export csv "
                             "or --export parquet")
    if fmt is None:
        print(readable(frame).to_string(index=False))
        return 0
    slug = filters_slug(args.filters)
    path = Path(args.output) if args.output else Path(DEFAULT_REPORTS) / f"results{'-' + slug if slug else ''}.{fmt}"
    with store.atomic_path(path) as tmp:
        if fmt == "csv":
            frame.to_csv(tmp, index=False, lineterminator="\n")
        else:
            frame.to_parquet(tmp, index=False)
    print(f"bench: wrote {len(frame)} rows to {path}", file=sys.stderr)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Build the requested tables, print them and write them under --reports-dir (mix warnings first)."""
    from bench.reporting import render, stats, tables
    from bench.reporting.resultsview import apply_filters, canonical_method, load_results, mix_warnings

    names = [args.table] if args.table else ([] if args.vs_paper else [DEFAULT_TABLE])
    if args.vs_paper and "vs-paper" not in names:
        names.append("vs-paper")
    resamples = stats.N_RESAMPLES if args.bootstrap is None else args.bootstrap
    if resamples < 1:
        raise BenchError("--bootstrap must be >= 1")
    source = results_dir(args)
    if args.html is not None:
        from bench.reporting.html import write_html_report

        path, warnings = write_html_report(source, args.filters, args.reports_dir, args.html, args.baseline, resamples)
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        print(path)
        return 0
    frame = apply_filters(load_results(source), args.filters)
    warnings = [w for name in names for w in mix_warnings(tables.table_rows(name, frame))]
    for warning in dict.fromkeys(warnings):
        print(f"warning: {warning}", file=sys.stderr)
    outputs = []
    for name in names:
        file_name = name
        if name == "compare":
            baseline = canonical_method(args.baseline, set(frame["method"]))
            keys = tables.clean_accuracy(frame)["run_key"].unique()
            cells = tables.compare(frame, stats.load_run_predictions(source, keys), baseline, resamples)
            if baseline != "ce":
                file_name = f"compare-vs-{baseline}"
        else:
            cells = {"paper-ii": tables.paper_ii, "ablation": tables.ablation, "robustness": tables.robustness,
                     "vs-paper": tables.vs_paper}[name](frame)
        outputs.append((render.render(cells, args.fmt), render.write_report(cells, file_name, args.fmt,
                                                                            args.reports_dir, args.filters)))
    for i, (text, path) in enumerate(outputs):
        print(("\n" if i else "") + text, end="")
        print(f"bench: wrote {path}", file=sys.stderr)
    return 0
