"""`clbench evaluate`: score finished runs with evaluators from their saved models (no retraining)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bench.cli.common import RESULTS_HELP, add_evaluator_options, comma_list, print_evaluations, \
    report_failed_evaluations, shard_request
from bench.cli.selecting import add_seed_options, selected_runs
from bench.errors import BenchError
from bench.results.store import check_results_dir, results_dir as resolve_results_dir


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The `clbench evaluate` subcommand and its arguments."""
    evaluate = sub.add_parser("evaluate", parents=[common], help="run evaluators on finished runs (no retraining)",
                              description="Score finished runs with evaluators from their saved models, or a model "
                                          "trained elsewhere (--model); stored evaluations with the same settings "
                                          "are skipped unless --overwrite.")
    evaluate.add_argument("runs", nargs="*", metavar="RUN",
                          help="run keys, glob patterns such as 'ce_mr_*', or run folders")
    evaluate.add_argument("--selected", action="store_true",
                          help="instead of runs: the runs `clbench report --select-by validation` reports, i.e. per "
                               "method x dataset x encoder (x data regime) the knob combination with the best "
                               "validation accuracy, on its evaluation seeds (after a `clbench run --grid`)")
    add_seed_options(evaluate, "--selected", "evaluate")
    evaluate.add_argument("--model", default=None, metavar="PATH_OR_HUB_ID",
                          help="instead of runs: a sequence-classification model trained elsewhere (a local Hugging "
                               "Face folder, e.g. one `clbench export` wrote, or a Hub id), scored on --datasets and "
                               "stored as method 'external'")
    evaluate.add_argument("--datasets", type=comma_list, default=None,
                          help="with --model: card names or folders to score it on")
    evaluate.add_argument("--label-map", default=None, metavar="MAP",
                          help="with --model, when its label names are not the dataset's: 'positional' (model "
                               "label i = dataset label i) or DATASET_LABEL=MODEL_LABEL,...")
    evaluate.add_argument("--results-dir", default=None, help=RESULTS_HELP)
    evaluate.add_argument("--data-dir", default=None, help="where the runs' datasets are (default: as recorded); with "
                                                        "--model: the data folder, as for `clbench run`")
    evaluate.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    evaluate.add_argument("--overwrite", action="store_true", help="recompute stored evaluations")
    add_evaluator_options(evaluate)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Run evaluators on finished runs from their saved models and refresh the results table."""
    results_dir = resolve_results_dir(args.results_dir)
    check_targets(args)
    if args.model:  # its runs are written there: checked before torch is imported
        check_results_dir(results_dir)
    from bench.reporting.summary import evaluation_table
    from bench.results import runfiles, store
    from bench.results.store import find_runs
    from bench.running.evaluation import build_evaluators
    from bench.running.rescoring import check_scorable, rescore
    from bench.training.setup import resolve_device

    request = shard_request(args, {}, args.data_dir)
    evaluators = build_evaluators(list(request.evaluators))
    if args.model:
        return evaluate_model(args, request, results_dir)
    if not evaluators:
        raise BenchError("no evaluators chosen; see `clbench list evaluators`")
    runs = selected_runs(results_dir, args.selection_seeds, args.eval_seeds) if args.selected \
        else find_runs(results_dir, args.runs)
    for folder in dict.fromkeys(run.parent for run in runs):  # evaluations and the table are written there
        check_results_dir(folder)
    check_external(runs)
    check_scorable(runs)
    device = resolve_device(args.device)
    print(f"clbench: {len(evaluators)} evaluator(s) x {len(runs)} run(s)", file=sys.stderr)
    outcomes: list[Any] = []
    said: set[tuple[str, str]] = set()  # skip reasons printed: said once
    for i, (spec, done) in enumerate(rescore(runs, evaluators, request, device, args.data_dir, args.overwrite),
                                     start=1):
        print(f"[{i}/{len(runs)}] {spec.key}", file=sys.stderr)
        print_evaluations(done, said)
        outcomes.extend(done)
    rows = [row for o in outcomes for row in o.rows if row.get("metric") != "skipped"]
    if rows:  # the runs' clean rows tell which of them collapsed: the runs asked for are shown, those marked †
        clean = [row for run in runs if (run / store.ROWS).is_file() for row in runfiles.read_json(run, store.ROWS)]
        table = evaluation_table(clean + rows, include_collapsed=True)
        print(table.to_string(index=False))
        for note in table.attrs.get("notes", []):
            print(f"note: {note}")
    failed = [o for o in outcomes if o.status == "failed"]
    report_failed_evaluations(failed)
    return 1 if failed else 0


def check_targets(args: argparse.Namespace) -> None:
    """Runs, --selected, or --model with --datasets: a BenchError for any other combination."""
    if args.selected and (args.runs or args.model):
        raise BenchError(f"--selected chooses the runs itself: drop {'--model' if args.model else 'the RUN arguments'}"
                         " (or drop --selected)")
    if not args.selected and (args.selection_seeds is not None or args.eval_seeds is not None):
        raise BenchError("--selection-seeds and --eval-seeds pick the seeds of --selected: add --selected (or drop "
                         "them)")
    if args.model and args.runs:
        raise BenchError("give run keys or --model, not both: --model scores a model trained elsewhere")
    if args.model and not args.datasets:
        raise BenchError("--model needs --datasets NAME[,NAME...]: the data to score it on")
    if not args.model and (args.datasets or args.label_map):
        raise BenchError(f"{'--datasets' if args.datasets else '--label-map'} applies to --model only; runs are "
                         "scored on their own data")
    if not args.model and not args.runs and not args.selected:
        raise BenchError("nothing to evaluate: give run keys (e.g. 'ce_mr_*'), --selected, or --model PATH "
                         "--datasets NAME")


def check_external(runs: list[Any]) -> None:
    """A BenchError for runs of outside models given as RUN: they have no saved model; --model scores them."""
    from bench.results import runfiles, store
    from bench.running.external import EXTERNAL

    for run in runs:
        spec = runfiles.read_json(run, store.SPEC) if (run / store.SPEC).is_file() else {}
        if spec.get("method") == EXTERNAL:
            source = spec.get("external", {}).get("model", spec.get("encoder", "PATH"))
            raise BenchError(f"{run.name} scored an outside model: score it again with `clbench evaluate --model "
                             f"{source} --datasets {spec.get('dataset', 'NAME')}`")


def evaluate_model(args: argparse.Namespace, request: Any, results_dir: Any) -> int:
    """`--model`: score an outside model on each dataset (clean rows, then the evaluators) and print the results."""
    from bench.reporting.summary import evaluation_table
    from bench.running.external import evaluate_external, shown_rows
    from bench.training.setup import resolve_device

    device = resolve_device(args.device)
    outcomes: list[Any] = []
    rows: list[dict[str, Any]] = []
    for result in evaluate_external(args.model, args.datasets, request, device, results_dir, args.data_dir,
                                    args.label_map, args.overwrite):
        accuracy = next((r["value"] for r in result.rows if r["metric"] == "accuracy" and r["split"] == "test"), None)
        print(f"{result.spec.key}  test accuracy {accuracy:.4f}  -> {result.run_dir}", file=sys.stderr)
        print_evaluations(result.evaluations)
        outcomes.extend(result.evaluations)
        rows.extend(result.rows)
    scored = [r for o in outcomes for r in o.rows if r.get("metric") != "skipped"]
    if scored:  # the model's folder name as its encoder; † (a collapsed model) explained once, under the table
        table = evaluation_table(shown_rows(rows + scored), include_collapsed=True)
        print(table.to_string(index=False))
        for note in table.attrs.get("notes", []):
            print(f"note: {note}")
    failed = [o for o in outcomes if o.status == "failed"]
    report_failed_evaluations(failed)
    return 1 if failed else 0
