"""`clbench plot`: figures from stored runs, written as PNG and PDF under --reports-dir.

Kept free of heavy imports: matplotlib/seaborn (bench.reporting.plots) and torch are
loaded only when a plot is made.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.cli.common import StrictParser, check_output_folder, seed_list
from bench.cli.selecting import add_selection_options, selected
from bench.results import store
from bench.errors import BenchError
from bench.results.store import DEFAULT_RESULTS

RUN_HELP = "run keys, glob patterns such as 'ce_trec_*', or run folders"


def add_plot_parser(sub: Any, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add `clbench plot <figure>` and its figure subcommands to the `bench` subparsers."""
    paths = StrictParser(add_help=False)
    paths.add_argument("--results-dir", default=None,
                       help=f"where runs are stored (default: $BENCH_RESULTS_DIR or ./{DEFAULT_RESULTS})")
    paths.add_argument("--reports-dir", default=None,
                       help="where figures are written (default: beside the results folder: ./reports for ./results, "
                            "reports-NAME for a results folder NAME)")
    parents = [common, paths]  # --debug after the figure name too (`common` leaves it unset when absent)
    plot = sub.add_parser("plot", parents=[common], help="heatmaps, curves and summaries from stored results",
                          description="Draw figures from stored runs; each is written as PNG (dpi 200) and PDF "
                                      "with a deterministic name under --reports-dir, and the paths are printed.")
    figures = plot.add_subparsers(dest="figure", metavar="FIGURE", required=True)

    ldm = figures.add_parser("ldm", parents=parents, help="label-distance matrix heatmap of clld runs",
                             description="Heatmap of the final label-distance matrix (ldm_<run>), or with "
                                         "--evolution a grid of the matrix at its stored updates "
                                         "(ldm-evolution_<run>).")
    ldm.add_argument("runs", nargs="+", metavar="RUN", help=RUN_HELP)
    ldm.add_argument("--evolution", action="store_true", help="the matrix at its stored updates, one colour scale")
    ldm.add_argument("--max-panels", type=int, default=12,
                     help="--evolution: most heatmaps, evenly spaced, first and last kept (default: 12)")

    confusion = figures.add_parser("confusion", parents=parents, help="test confusion matrix heatmap",
                                   description="Test confusion matrix: counts and row-normalised panels "
                                               "(confusion_<run>), or one of them (confusion-<panel>_<run>).")
    confusion.add_argument("runs", nargs="+", metavar="RUN", help=RUN_HELP)
    only = confusion.add_mutually_exclusive_group()
    only.add_argument("--normalise", "--normalize", dest="panels", action="store_const", const=("normalised",),
                      help="only the row-normalised panel")
    only.add_argument("--counts", dest="panels", action="store_const", const=("counts",),
                      help="only the counts panel")

    diff = figures.add_parser("confusion-diff", parents=parents, help="confusion counts of run B minus run A",
                              description="B minus A test confusion counts (confusion-diff_<A>_vs_<B>); "
                                          "positive off-diagonal cells are confusions B adds, negative ones "
                                          "confusions it removes. Both runs must share dataset and labels.")
    diff.add_argument("run_a", metavar="RUN_A", help="the reference run")
    diff.add_argument("run_b", metavar="RUN_B", help="the run compared with it")

    curves = figures.add_parser("curves", parents=parents, help="validation accuracy and losses per epoch",
                                description="Validation accuracy and each loss part per epoch, one line per run "
                                            "(curves_<hash of the run keys>).")
    curves.add_argument("runs", nargs="+", metavar="RUN", help=RUN_HELP)

    embeddings = figures.add_parser("embeddings", parents=parents, help="t-SNE scatter of test embeddings",
                                    description="2-D t-SNE scatter coloured by class (embeddings_<run>) from "
                                                "tsne.json (`clbench evaluate RUN --evaluators repr --tsne`).")
    embeddings.add_argument("runs", nargs="+", metavar="RUN", help=RUN_HELP)

    summary = figures.add_parser("summary", parents=parents, help="a test metric per method, mean ± std over seeds",
                                 description="Mean ± std over seeds of a metric per method, one panel per dataset "
                                             "(summary[-<metric>][_<filters>]); rows: evaluator clean, split "
                                             "test, overall label, unless --filter says otherwise.")
    summary.add_argument("--filter", dest="filters", action="append", default=[], metavar="COLUMN=VALUE[,VALUE]",
                         help="keep rows whose COLUMN has one of the values, e.g. method=ce,clld-adaptive or "
                              "encoder=minilm,dataset=trec; repeatable (all must hold)")
    summary.add_argument("--metric", default="accuracy", help="metric column value (default: accuracy)")
    curve = figures.add_parser("curve", parents=parents, help="a test metric against training size or label noise",
                               description="Mean test accuracy over seeds against a data-regime dimension, one "
                                           "line per method with a 95%% t-interval, one panel per dataset x "
                                           "encoder x other regime settings (curve-<x>[-<metric>][_<filters>]).")
    curve.add_argument("--x", default="train_size", choices=("train_size", "shots", "label_noise"),
                       help="the regime dimension on the x axis (default: train_size)")
    curve.add_argument("--metric", default="accuracy", help="metric column value (default: accuracy)")
    curve.add_argument("--filter", dest="filters", action="append", default=[], metavar="COLUMN=VALUE[,VALUE]",
                       help="keep rows whose COLUMN has one of the values, e.g. method=ce,supcon; repeatable")
    add_selection_options(curve)
    budget = figures.add_parser("budget", parents=parents,
                                help="expected best validation accuracy against knob combinations tried",
                                description="Tuning budgets as curves (Dodge et al. 2019): per method, the expected "
                                            "maximum validation accuracy of n knob combinations drawn at random "
                                            "from those it ran, n = 1 .. its combinations, ± 1 std of that "
                                            "maximum; one panel per dataset x encoder "
                                            "(budget[-seeds-<seeds>][_<filters>]). Validation scores only.")
    budget.add_argument("--filter", dest="filters", action="append", default=[], metavar="COLUMN=VALUE[,VALUE]",
                        help="keep rows whose COLUMN has one of the values, e.g. method=ce,supcon; repeatable")
    budget.add_argument("--selection-seeds", type=seed_list, default=None, metavar="SEEDS",
                        help="score each combination's validation accuracy on these seeds only (e.g. 1,2, the "
                             "seeds --select-by validation chooses on; default: every seed)")
    return plot


def results_dir(args: argparse.Namespace) -> Path:
    """--results-dir, else $BENCH_RESULTS_DIR, else ./results."""
    return store.results_dir(args.results_dir)


def resolve_runs(args: argparse.Namespace, patterns: list[str]) -> list[Path]:
    """Run folders for keys, patterns or folders (an unknown one is a BenchError)."""
    return store.find_runs(results_dir(args), patterns)


def resolve_one(args: argparse.Namespace, pattern: str, role: str) -> Path:
    """Exactly one run folder for `pattern`."""
    runs = resolve_runs(args, [pattern])
    if len(runs) != 1:
        names = ", ".join(r.name for r in runs[:4]) + (", ..." if len(runs) > 4 else "")
        raise BenchError(f"{role} {pattern!r} matches {len(runs)} runs ({names}); give one run key")
    return runs[0]


def per_run_builder(args: argparse.Namespace) -> Callable[[Path], Any] | None:
    """The builder for figures drawn once per run (ldm, confusion, embeddings); None for the others."""
    from bench.reporting import plots

    if args.figure == "ldm" and args.evolution:
        plots.evolution_indices(1, args.max_panels)  # check --max-panels before reading any run
        return lambda run: plots.ldm_evolution_plot(run, args.max_panels)
    if args.figure == "confusion":
        return lambda run: plots.confusion_plot(run, args.panels or plots.CONFUSION_PANELS)
    return {"ldm": plots.ldm_plot, "embeddings": plots.embeddings_plot}.get(args.figure)


def build_plots(args: argparse.Namespace) -> Iterator[Any]:
    """The Plot objects the parsed command asks for, one at a time (runs are resolved first)."""
    from bench.reporting import plots

    builder = per_run_builder(args)
    if builder is not None:
        for run in resolve_runs(args, args.runs):
            yield builder(run)
    elif args.figure == "confusion-diff":
        run_a, run_b = resolve_one(args, args.run_a, "RUN_A"), resolve_one(args, args.run_b, "RUN_B")
        yield plots.confusion_diff_plot(run_a, run_b)
    elif args.figure == "curves":
        yield plots.curves_plot(resolve_runs(args, args.runs))
    elif args.figure == "summary":
        folder = results_dir(args)
        if not folder.is_dir():
            raise BenchError(f"no results folder {folder}; give --results-dir or set $BENCH_RESULTS_DIR")
        left_out: dict[str, str] = {}
        rows = store.finished_rows(folder, left_out)
        if left_out:
            print(f"warning: {store.left_out_line(left_out, folder, 'this figure')}", file=sys.stderr)
        yield plots.summary_plot(rows, args.metric, args.filters)
    elif args.figure == "curve":
        from bench.reporting.curveplot import curve_plot
        from bench.reporting.resultsview import load_results

        frame, _ = selected(load_results(results_dir(args)), args)
        yield curve_plot(frame, args.x, args.metric, args.filters)
    elif args.figure == "budget":
        from bench.reporting.budgetplot import budget_plot
        from bench.reporting.resultsview import load_results

        yield budget_plot(load_results(results_dir(args)), args.filters, args.selection_seeds)
    else:
        raise BenchError(f"unknown figure {args.figure!r}; see `clbench plot --help`")


def cmd_plot(args: argparse.Namespace) -> int:
    """Build the requested figures, save each as PNG and PDF, and print the written paths."""
    reports = Path(args.reports_dir) if args.reports_dir else store.reports_dir(results_dir(args))
    check_output_folder(reports, "reports folder", "--reports-dir")  # before matplotlib is imported
    from bench.reporting.figures import save_plot

    for plot in build_plots(args):
        for path in save_plot(plot, reports):
            print(path)
    return 0
