"""Where a local sweep stands: shards done of total and the time left, estimated from the shards' relative
costs (bench.running.walltime.shard_weight) and the time the finished ones took. Shown as a bar above the
per-epoch bars on a terminal; in logs, the ETA is part of each shard's line."""

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
        self.done_weight = 0.0  # of shards that trained here (finished ones skipped at once do not count)
        self.bar = None
        if bar and shards and sys.stderr.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=len(shards), desc="sweep", unit="shard", position=0, leave=False,
                            dynamic_ncols=True, bar_format="{desc}: {n}/{total} shards |{bar}| {elapsed} {postfix}")

    def eta(self) -> float | None:
        """Seconds left, from the time per unit of cost of the shards that trained here; None before any."""
        if self.done_weight <= 0:
            return None
        rate = (self.clock() - self.started) / self.done_weight
        return rate * sum(self.left.values())

    def shard_ended(self, key: str, trained: bool) -> str:
        """Record an ended shard (`trained`: it ran here, not skipped as finished); returns `ETA ...` (or "")."""
        weight = self.left.pop(key, 0.0)
        if trained:
            self.done_weight += weight
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
