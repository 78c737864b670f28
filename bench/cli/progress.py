"""Where a local sweep stands: shards done of total and the time left, estimated from the shards' relative
costs (bench.running.walltime.shard_weight) and the time the finished ones took. Shown as a bar above the
per-epoch bars on a terminal; in logs, the ETA is part of each shard's line.

The first shard that trains is not extrapolated: its time holds what the sweep pays once (the start-up before it,
the first read of the encoder, the evaluators' resources built, a worker's start with --jobs), which the weights
do not count, so its time per unit of weight made the first ETA up to several times the time left. The speed is
measured from that shard's end, over the shards that end after it, and only once at least half as long as the
first shard took has passed: with --jobs the shards that ran beside the first end just after it, and the few
seconds between their ends would make the sweep look nearly done."""

from __future__ import annotations

import sys
import time
from typing import Any


def duration(seconds: float) -> str:
    """`45s`, `3m05s`, `1h02m`."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class SweepProgress:
    """Shards done / total and an ETA; `bar` only when asked for and stderr is a terminal."""

    def __init__(self, shards: list[Any], bar: bool = True, clock: Any = time.monotonic) -> None:
        from bench.running.walltime import shard_weight

        self.left = {s.spec.key: shard_weight(s.spec, {"train": len(s.data.train), "test": len(s.data.test),
                                                      "validation": len(s.data.validation)})
                     for s in shards}  # the weights of the shards not ended yet
        self.clock = clock
        self.started = clock()
        self.first_end: float | None = None  # when the first shard that trained here ended
        self.measured = 0.0  # the weight of the shards that trained here and ended after it (skipped ones: none)
        self.bar = None
        if bar and shards and sys.stderr.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=len(shards), desc="sweep", unit="shard", position=0, leave=False,
                            dynamic_ncols=True, bar_format="{desc}: {n}/{total} shards |{bar}| {elapsed} {postfix}")

    def eta(self) -> float | None:
        """Seconds left: the time since the first trained shard ended per unit of weight ended since, times the
        weight left; None until then, and while less than half the first shard's time has passed since."""
        if self.first_end is None or self.measured <= 0:
            return None
        since = self.clock() - self.first_end
        if since < (self.first_end - self.started) / 2:
            return None
        return since / self.measured * sum(self.left.values())

    def shard_ended(self, key: str, trained: bool) -> str:
        """Record an ended shard (`trained`: it ran here, not skipped as finished); returns `ETA ...` (or "")."""
        weight = self.left.pop(key, 0.0)
        if trained and self.first_end is None:
            self.first_end = self.clock()
        elif trained:
            self.measured += weight
        eta = self.eta()
        text = f"ETA {duration(eta)}" if eta is not None and self.left else ""
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(1)
        return text

    def write(self, line: str) -> None:
        """A line on stderr, above the bar when there is one."""
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr)

    def close(self) -> None:
        """Remove the bar."""
        if self.bar is not None:
            self.bar.close()
