"""Expected wall time of a sweep, from the model FLOPs its shards need and an achieved FLOP rate
(`python -m benchmarks estimate`).

A shard's FLOPs are counted from the real data: every training text tokenised and truncated as in training,
`training_flops` per example (6 N T + 12 L d T^2), times the encoder passes the method needs per example
(`bench.running.walltime.INHERENT_PASSES`), plus its validation passes (forward only, a third of a training pass)
and one test pass. Dividing by an achieved rate (TFLOP/s measured by `python -m benchmarks throughput`, or a peak
times an assumed MFU) gives seconds; shards are then packed onto N devices longest first (the makespan is the
sweep's wall time there). Against finished runs (`--results-dir`), the estimate is set beside the measured epoch
times to calibrate it.
"""

from __future__ import annotations

import heapq
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.errors import BenchError
from bench.results import runfiles, store
from bench.running.walltime import INHERENT_PASSES, validations_per_epoch
from bench.spec import RunSpec, TrainConfig


@dataclass(frozen=True)
class ShardCost:
    """The model FLOPs one shard needs and where they go."""

    key: str
    method: str
    dataset: str
    seed: int
    epochs: int
    epoch_flops: float      # one training epoch, its validations included
    total_flops: float      # all epochs + the test pass


def training_flops(encoder: torch.nn.Module, lengths: np.ndarray) -> float:
    """Model FLOPs of one forward+backward pass over sequences of the given (unpadded) lengths:
    6 N T for the weights (N = non-embedding parameters) + 12 L d T^2 for attention, per sequence."""
    config = getattr(getattr(encoder, "model", None), "config", None)
    if config is None or not hasattr(config, "num_hidden_layers"):
        raise BenchError("FLOPs are counted for transformer encoders only (this one has no layer configuration); "
                         "use a transformer encoder, e.g. --shape-encoder bert-base-random")
    embedding = sum(p.numel() for n, p in encoder.named_parameters() if "embeddings" in n)
    weights = sum(p.numel() for p in encoder.parameters()) - embedding
    layers, width = config.num_hidden_layers, config.hidden_size
    lengths = lengths.astype(np.float64)
    return float(6 * weights * lengths.sum() + 12 * layers * width * (lengths ** 2).sum())


def shard_cost(spec: RunSpec, flops: dict[str, float], epochs: int | None = None) -> ShardCost:
    """FLOPs of one shard from its dataset's per-split training FLOPs (`flops`: train / validation / test)."""
    if spec.method not in INHERENT_PASSES:
        raise BenchError(f"no pass count for method {spec.method!r}; known: {', '.join(INHERENT_PASSES)}")
    epochs = epochs or spec.train.epochs
    knobs = dict(spec.method_config)
    epoch = INHERENT_PASSES[spec.method] * flops["train"] + validations_per_epoch(knobs) * flops["validation"] / 3
    return ShardCost(spec.key, spec.method, spec.dataset, spec.seed, epochs, epoch,
                     epochs * epoch + flops["test"] / 3)


def step_time_seconds(spec: RunSpec, sizes: dict[str, int], step_seconds: dict[str, float],
                      epochs: int | None = None) -> tuple[float, float]:
    """A shard's (epoch, total) seconds from measured optimiser-step times (`step_seconds[method]`: one batch of
    the shard's batch size at the length they were measured at): its training batches at its method's step
    time, its validation and test batches forward only at a third of ce's. Every batch counts as full-length,
    so for texts shorter than the measured length this is an upper bound. `sizes`: examples per split."""
    if spec.method not in step_seconds:
        raise BenchError(f"no measured step time for method {spec.method!r}: add {spec.method}=MS to --step-ms")
    batches = {split: math.ceil(n / spec.train.batch_size) for split, n in sizes.items()}
    forward = step_seconds.get("ce", step_seconds[spec.method]) / 3
    epoch = (batches["train"] * step_seconds[spec.method]
             + validations_per_epoch(dict(spec.method_config)) * batches["validation"] * forward)
    return epoch, (epochs or spec.train.epochs) * epoch + batches["test"] * forward


def makespan(seconds: list[float], devices: int) -> float:
    """Wall time of running jobs of the given lengths on `devices` workers, longest first onto the least busy."""
    if devices < 1:
        raise BenchError("the number of devices must be >= 1")
    loads = [0.0] * devices
    for length in sorted(seconds, reverse=True):
        heapq.heapreplace(loads, loads[0] + length)
    return max(loads)


def measured_epoch_seconds(run_dir: Path) -> float | None:
    """The median epoch time of a finished run (its train_log.json), None when there is none.

    The median, not the sum, so that epochs slowed by other work on a shared machine do not skew it."""
    log = run_dir / store.TRAIN_LOG
    if not store.is_finished(run_dir) or not log.is_file():
        return None
    history = runfiles.read_json(run_dir, store.TRAIN_LOG).get("history", [])
    seconds = [float(h["seconds"]) for h in history if "seconds" in h]
    return statistics.median(seconds) if seconds else None


def split_flops(data: Any, tokenize: Any, encoder: Any, cfg: TrainConfig) -> dict[str, float]:
    """Training FLOPs of one pass over each split's texts, tokenised and truncated as the trainer does."""
    result = {}
    for split in ("train", "validation", "test"):
        texts = getattr(data, split).texts
        lengths = np.array([min(len(ids), cfg.max_length) for ids in tokenize(texts)], dtype=np.int64)
        result[split] = training_flops(encoder, lengths) if len(lengths) else 0.0
    return result


def format_hours(seconds: float) -> str:
    """Seconds as a short human duration."""
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"
