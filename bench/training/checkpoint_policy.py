"""How often a shard writes its resume checkpoint (no torch here: the CLI reads it before torch is imported)."""

from __future__ import annotations

import math
import os
from typing import Any

from bench.errors import BenchError

CHECKPOINT_EVERY_S = 30.0  # default seconds of training between resume checkpoints ($BENCH_CHECKPOINT_EVERY_S)
ENV = "BENCH_CHECKPOINT_EVERY_S"


def checked_every_s(value: Any, where: str) -> float:
    """`value` as seconds >= 0, or a BenchError naming `where` (the flag, config key or variable)."""
    try:
        seconds = float(value) if not isinstance(value, bool) else -1.0
    except (TypeError, ValueError):
        seconds = -1.0
    if not math.isfinite(seconds) or seconds < 0:
        raise BenchError(f"{where} must be a number of seconds >= 0 (0: a checkpoint after every epoch), "
                         f"got {value!r}")
    return seconds


def default_checkpoint_every_s() -> float:
    """Seconds of training a resume checkpoint may leave unsaved: $BENCH_CHECKPOINT_EVERY_S, else 30 (0: one
    after every epoch). A shard whose epochs end sooner writes none until that much training is at risk."""
    text = os.environ.get(ENV, "").strip()
    return checked_every_s(text, ENV) if text else CHECKPOINT_EVERY_S
