"""Follow shards until each has ended: `clbench run --executor slurm --wait` and `clbench status --wait`.

A shard has ended when no runner will touch it again by itself (bench.running.status.ENDED: done, failed, cancelled,
interrupted). A shard the scheduler does not know (accounting lags behind a fresh submission) or cannot be asked
about is waited for up to UNKNOWN_GRACE_SECONDS, then counted as ended. Light imports only (no torch).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

from bench.running.status import ENDED, ShardStatus, StateQuery, states_of

POLL_SECONDS = 15.0  # between two looks at the shards (one sacct call each)
UNKNOWN_GRACE_SECONDS = 300.0
COUNTED = ("running", "pending", "failed", "cancelled", "interrupted", "unknown")


def progress_line(statuses: list[ShardStatus], elapsed: float) -> str:
    """`7/30 done, 2 running, 21 pending (3 min)`: the states with a count, done first."""
    done = sum(s.state == "done" for s in statuses)
    parts = [f"{done}/{len(statuses)} done"]
    parts += [f"{n} {state}" for state in COUNTED if (n := sum(s.state == state for s in statuses))]
    return f"{', '.join(parts)} ({format_elapsed(elapsed)})"


def format_elapsed(seconds: float) -> str:
    """`45 s`, `12 min`, `2.5 h`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def follow(results_dir: Path, keys: list[str], poll_seconds: float = POLL_SECONDS, progress: bool = True,
           query: StateQuery | None = None, clock: Callable[[], float] = time.monotonic,
           sleep: Callable[[float], None] = time.sleep) -> list[ShardStatus]:
    """Poll the states of the shards `keys` until every one has ended; show a bar of shards done (or, with
    `progress` False, one line on stderr whenever the counts change); returns their last states."""
    from tqdm.auto import tqdm

    start = clock()
    unknown_since: dict[str, float] = {}
    last_line = ""
    with tqdm(total=len(keys), desc="shards", unit="shard", file=sys.stderr, disable=not progress,
              dynamic_ncols=True) as bar:
        while True:
            statuses = states_of(results_dir, keys, query)
            now = clock()
            for s in statuses:
                if s.state == "unknown":
                    unknown_since.setdefault(s.key, now)
                else:
                    unknown_since.pop(s.key, None)
            line = progress_line(statuses, now - start)
            if progress:
                bar.n = sum(s.state == "done" for s in statuses)
                bar.set_postfix_str(line.split(", ", 1)[1] if ", " in line else "", refresh=True)
            elif line.split(" (")[0] != last_line.split(" (")[0]:
                print(f"clbench: {line}", file=sys.stderr, flush=True)
            last_line = line
            if all(s.state in ENDED or (s.state == "unknown" and now - unknown_since[s.key] >= UNKNOWN_GRACE_SECONDS)
                   for s in statuses):
                return statuses
            sleep(poll_seconds)
