"""A shard's relative cost for a sweep's ETA (`shard_weight`): the encoder passes its method needs per example
(`INHERENT_PASSES`), its epochs, validations and test pass. The FLOP counts and wall-time estimates built on it
live with the benchmarks (`benchmarks/costs.py`, `python -m benchmarks estimate`)."""

from __future__ import annotations

from typing import Any

from bench.spec import RunSpec

# Encoder passes a method inherently needs per example, counting a forward+backward pass as 1 and a
# forward-only pass (a no-grad target network) as 1/3.
INHERENT_PASSES = {"ce": 1.0, "cl": 2.0, "clld-static": 2.0, "clld-adaptive": 2.0, "supcon": 1.0, "lcl": 4.0,
                   "cline": 3.0, "dcl": 2.0 + 2.0 / 3.0, "simcse": 2.0, "mirror-bert": 2.0}


def validations_per_epoch(method_config: dict[str, Any]) -> int:
    """How often a method validates per epoch: its `evals_per_epoch` knob, else once."""
    return int(method_config.get("evals_per_epoch", 1))


def shard_weight(spec: RunSpec, sizes: dict[str, int]) -> float:
    """A shard's relative cost in examples through the encoder (`benchmarks.costs.shard_cost` without the FLOPs of a token, for a
    sweep's ETA): training passes of its method x train size per epoch, its validations (forward only, a third
    of a training pass) and the test split; `sizes`: examples per split. An unknown method counts one pass."""
    passes = INHERENT_PASSES.get(spec.method, 1.0)
    epoch = passes * sizes["train"] + validations_per_epoch(dict(spec.method_config)) * sizes["validation"] / 3
    return spec.train.epochs * epoch + sizes["test"] / 3
