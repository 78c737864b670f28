"""`--select-by validation` for `clbench report` and `clbench plot curve`: the options, and the results frame
narrowed to each method's knob combination chosen on validation (bench.reporting.selection), its warnings
printed."""

from __future__ import annotations

import argparse
import sys
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
    parser.add_argument("--selection-seeds", type=seed_list, default=None, metavar="SEEDS",
                        help="--select-by: choose on these seeds only (e.g. 1,2) and report the others, or "
                             "--eval-seeds")
    parser.add_argument("--eval-seeds", type=seed_list, default=None, metavar="SEEDS",
                        help="--select-by: report these seeds only (e.g. 3-7), fresh runs the choice never saw")


def selected(frame: pd.DataFrame, args: argparse.Namespace) -> tuple[pd.DataFrame, Any]:
    """The frame narrowed to the combinations chosen on validation and the Selection (its warnings and notes
    printed on stderr), or the frame as it is and None without --select-by."""
    if args.select_by is None:
        if args.selection_seeds is not None or args.eval_seeds is not None:
            raise BenchError("--selection-seeds and --eval-seeds pick the seeds of --select-by validation: add "
                             "--select-by validation (or drop them)")
        return frame, None
    from bench.reporting.selection import select_by_validation

    selection = select_by_validation(frame, args.selection_seeds, args.eval_seeds)
    for line in selection.warnings:
        print(f"warning: {line}", file=sys.stderr)
    for line in selection.notes:
        print(f"note: {line}", file=sys.stderr)
    return selection.frame, selection
