"""`clbench verify`: check every file of a results folder against what was written, and repair what it finds."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bench.cli.common import RESULTS_HELP
from bench.errors import BenchError
from bench.results.store import results_dir as resolve_results_dir


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The `clbench verify` subcommand and its arguments."""
    verify = sub.add_parser("verify", parents=[common], help="check every stored file against its manifest, the "
                                                              "gathered table, leftovers; --repair fixes them",
                            description="Check a results folder: every run's files against the sizes and "
                                        "SHA-256 hashes its manifest recorded, the gathered table against the run "
                                        "folders, temporary files of interrupted writes, stale or damaged leases. "
                                        "One line per problem, then a summary; exit 1 when a problem remains.")
    verify.add_argument("--results-dir", default=None, help=RESULTS_HELP)
    verify.add_argument("--repair", action="store_true",
                        help="do what a run would do about each problem, without training: move damaged files "
                             "aside into the run's damaged/ folder (a run whose results are damaged is left "
                             "unfinished, for the next `clbench run` to retrain), remove leftovers, gather the "
                             "table again")


def cmd_verify(args: argparse.Namespace) -> int:
    """Print one line per problem and a summary; 0 when none remains, else 1."""
    from bench.results.verify import verify

    results_dir = resolve_results_dir(args.results_dir)
    if not results_dir.is_dir():
        raise BenchError(f"results folder {results_dir} does not exist; give the folder with --results-dir")
    report = verify(results_dir, fix=args.repair)
    for problem in report.problems:
        print(problem.line())
    print(f"clbench: {report.summary()}", file=sys.stderr)
    return 1 if any(not p.repaired for p in report.problems) else 0
