"""`clbench status`: the state of every shard under a results folder, and following them with --wait."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bench.cli.common import RESULTS_HELP
from bench.results.store import results_dir as resolve_results_dir, table_warning


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The `clbench status` subcommand and its arguments."""
    status = sub.add_parser("status", parents=[common], help="state of every shard: done, damaged, running, pending, "
                                                              "failed, cancelled, interrupted",
                            description="List the shards under a results folder with their state and reason; "
                                        "shards submitted to SLURM are looked up with sacct.")
    status.add_argument("runs", nargs="*", metavar="RUN", help="run keys or glob patterns such as 'ce_mr_*' "
                                                               "(default: all)")
    status.add_argument("--results-dir", default=None, help=RESULTS_HELP)
    status.add_argument("--wait", action="store_true",
                        help="follow the shards until every one has ended (exit 1 if any did not finish)")
    status.add_argument("--no-progress", action="store_true", help="with --wait: one line per change, no bar")


def cmd_status(args: argparse.Namespace) -> int:
    """Print every shard's state (done, damaged, running, pending, failed, cancelled, interrupted, unknown) and the
    counts, then a warning naming the done shards that collapsed; with --wait, first follow them until each has
    ended."""
    from bench.running.status import format_table, shard_states, summary_line

    results_dir = resolve_results_dir(args.results_dir)
    statuses = shard_states(results_dir, args.runs)
    if not statuses:
        print(f"clbench: no shards under {results_dir} yet (start some with `clbench run`)", file=sys.stderr)
        return 0
    if args.wait:
        from bench.running.follow import follow

        statuses = follow(results_dir, [s.key for s in statuses],
                          progress=not args.no_progress and sys.stderr.isatty())
    print(format_table(statuses))
    print(summary_line(statuses))
    table = table_warning(results_dir)  # the shards are fine; the table gathered from them is not
    if table:
        print(table, file=sys.stderr)
    collapsed = [s.key for s in statuses if s.collapsed]
    if collapsed:  # done, but not results: the reports leave them out of their means
        print(f"warning: {len(collapsed)} shard(s) collapsed (one class predicted whatever the input; not a result, "
              f"left out of the reports' means): {', '.join(collapsed)}", file=sys.stderr)
    return 1 if args.wait and any(s.state != "done" for s in statuses) else 0
