"""`clbench evaluate`: score finished runs with evaluators from their saved models (no retraining)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bench.cli.common import RESULTS_HELP, add_evaluator_options, print_evaluations, report_failed_evaluations, \
    shard_request
from bench.errors import BenchError
from bench.results.store import results_dir as resolve_results_dir


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The `clbench evaluate` subcommand and its arguments."""
    evaluate = sub.add_parser("evaluate", parents=[common], help="run evaluators on finished runs (no retraining)",
                              description="Score finished runs with evaluators from their saved models; stored "
                                          "evaluations with the same settings are skipped unless --overwrite.")
    evaluate.add_argument("runs", nargs="+", metavar="RUN",
                          help="run keys, glob patterns such as 'ce_mr_*', or run folders")
    evaluate.add_argument("--results-dir", default=None, help=RESULTS_HELP)
    evaluate.add_argument("--data-dir", default=None, help="where the runs' datasets are (default: as recorded)")
    evaluate.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    evaluate.add_argument("--overwrite", action="store_true", help="recompute stored evaluations")
    add_evaluator_options(evaluate)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Run evaluators on finished runs from their saved models and refresh the results table."""
    from bench.reporting.summary import evaluation_table
    from bench.results import store
    from bench.results.store import find_runs
    from bench.running.evaluation import build_evaluators
    from bench.running.rescoring import check_scorable, rescore
    from bench.training.trainer import resolve_device

    results_dir = resolve_results_dir(args.results_dir)
    request = shard_request(args, {}, args.data_dir)
    evaluators = build_evaluators(list(request.evaluators))
    if not evaluators:
        raise BenchError("no evaluators chosen; see `clbench list evaluators`")
    runs = find_runs(results_dir, args.runs)
    check_scorable(runs)
    device = resolve_device(args.device)
    print(f"clbench: {len(evaluators)} evaluator(s) x {len(runs)} run(s)", file=sys.stderr)
    outcomes: list[Any] = []
    for i, (spec, done) in enumerate(rescore(runs, evaluators, request, device, args.data_dir, args.overwrite),
                                     start=1):
        print(f"[{i}/{len(runs)}] {spec.key}", file=sys.stderr)
        print_evaluations(done)
        outcomes.extend(done)
    rows = [row for o in outcomes for row in o.rows if row.get("metric") != "skipped"]
    if rows:  # the runs' clean rows tell which of them collapsed: the runs asked for are shown, those marked †
        clean = [row for run in runs if (run / store.ROWS).is_file() for row in store.read_json(run / store.ROWS)]
        table = evaluation_table(clean + rows, include_collapsed=True)
        print(table.to_string(index=False))
        for note in table.attrs.get("notes", []):
            print(f"note: {note}")
    failed = [o for o in outcomes if o.status == "failed"]
    report_failed_evaluations(failed)
    return 1 if failed else 0
