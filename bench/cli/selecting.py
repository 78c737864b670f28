"""`--select-by validation` for `clbench report` and `clbench plot curve`: the options, and the results frame
narrowed to each method's knob combination chosen on validation (bench.reporting.selection), its warnings
printed; for `clbench evaluate --selected`, the folders of the runs that choice reports."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.cli.common import seed_list
from bench.errors import BenchError

if TYPE_CHECKING:
    import pandas as pd


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    """--select-by, --selection-seeds and --eval-seeds."""
    parser.add_argument("--select-by", choices=["validation"], default=None,
                        help="per method x dataset x encoder (x data regime), keep the knob combination with the "
                             "best mean validation accuracy over seeds and report its test scores (test is never "
                             "read to choose); the chosen knobs and each method's tuning budget are printed too")
    add_seed_options(parser, "--select-by", "report")


def add_seed_options(parser: argparse.ArgumentParser, option: str, verb: str) -> None:
    """--selection-seeds and --eval-seeds, their help naming the `option` they serve and what it does (`verb`)
    with the evaluation seeds."""
    parser.add_argument("--selection-seeds", type=seed_list, default=None, metavar="SEEDS",
                        help=f"{option}: choose on these seeds only (e.g. 1,2) and {verb} the others, or "
                             "--eval-seeds")
    parser.add_argument("--eval-seeds", type=seed_list, default=None, metavar="SEEDS",
                        help=f"{option}: {verb} these seeds only (e.g. 3-7), fresh runs the choice never saw")


def selected(frame: pd.DataFrame, args: argparse.Namespace) -> tuple[pd.DataFrame, Any]:
    """The frame narrowed to the combinations chosen on validation and the Selection (its warnings and notes
    printed on stderr), or the frame as it is and None without --select-by."""
    if args.select_by is None:
        if args.selection_seeds is not None or args.eval_seeds is not None:
            raise BenchError("--selection-seeds and --eval-seeds pick the seeds of --select-by validation: add "
                             "--select-by validation (or drop them)")
        return frame, None
    selection = choose(frame, args.selection_seeds, args.eval_seeds)
    return selection.frame, selection


def choose(frame: pd.DataFrame, selection_seeds: list[int] | None, eval_seeds: list[int] | None) -> Any:
    """The Selection of `select_by_validation`, its warnings and notes printed on stderr."""
    from bench.reporting.selection import select_by_validation

    selection = select_by_validation(frame, selection_seeds, eval_seeds)
    for line in selection.warnings:
        print(f"warning: {line}", file=sys.stderr)
    for line in selection.notes:
        print(f"note: {line}", file=sys.stderr)
    return selection


def selected_runs(results_dir: Path, selection_seeds: list[int] | None, eval_seeds: list[int] | None) -> list[Path]:
    """The folders of the runs `--select-by validation` reports: the chosen knob combinations' runs on the
    evaluation seeds among the finished runs under `results_dir` (outside models' runs, which have no knobs, left
    out); how many of how many printed on stderr."""
    from bench.reporting.resultsview import load_results
    from bench.running.external import EXTERNAL

    frame = load_results(results_dir)
    trained = frame[frame["method"] != EXTERNAL]
    if trained.empty:
        raise BenchError(f"no trained runs under {results_dir} (--selected leaves outside models' runs out): run "
                         "`clbench run` first, or give --results-dir")
    selection = choose(trained, selection_seeds, eval_seeds)
    runs = [results_dir / key for key in dict.fromkeys(selection.frame["run_key"])]
    print(f"clbench: --selected: {len(runs)} of {frame['run_key'].nunique()} finished run(s), those of the knob "
          f"combination chosen on validation in each of {len(selection.table)} method x dataset x encoder group(s)",
          file=sys.stderr)
    return runs
