"""Expected wall time of a sweep, from the model FLOPs its shards need and an achieved FLOP rate.

A shard's FLOPs are counted from the real data: every training text tokenised and truncated as in training,
`training_flops` per example (6 N T + 12 L d T^2), times the encoder passes the method needs per example,
plus its validation passes (forward only, a third of a training pass) and one test pass. Dividing by an
achieved rate (TFLOP/s measured by `python -m bench.perf throughput`, or a peak times an assumed MFU) gives
seconds; shards are then packed onto N devices longest first (the makespan is the sweep's wall time there).
Against finished runs (`--results-dir`), the estimate is set beside the measured epoch times to calibrate it.
"""

from __future__ import annotations

import heapq
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench import store
from bench.errors import BenchError
from bench.spec import RunSpec, TrainConfig

# Encoder passes a method inherently needs per example, counting a forward+backward pass as 1 and a
# forward-only pass (a no-grad target network) as 1/3.
INHERENT_PASSES = {"ce": 1.0, "cl": 2.0, "clld-static": 2.0, "clld-adaptive": 2.0, "supcon": 1.0, "lcl": 4.0,
                   "cline": 3.0, "dcl": 2.0 + 2.0 / 3.0}


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


def validations_per_epoch(method_config: dict[str, Any]) -> int:
    """How often a method validates per epoch: its `evals_per_epoch` knob, else once."""
    return int(method_config.get("evals_per_epoch", 1))


def shard_cost(spec: RunSpec, flops: dict[str, float], epochs: int | None = None) -> ShardCost:
    """FLOPs of one shard from its dataset's per-split training FLOPs (`flops`: train / validation / test)."""
    if spec.method not in INHERENT_PASSES:
        raise BenchError(f"no pass count for method {spec.method!r}; known: {', '.join(INHERENT_PASSES)}")
    epochs = epochs or spec.train.epochs
    knobs = dict(spec.method_config)
    epoch = INHERENT_PASSES[spec.method] * flops["train"] + validations_per_epoch(knobs) * flops["validation"] / 3
    return ShardCost(spec.key, spec.method, spec.dataset, spec.seed, epochs, epoch,
                     epochs * epoch + flops["test"] / 3)


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
    history = store.read_json(log).get("history", [])
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


def estimate(config: str | None, data_dir: str | None, achieved_tflops: float, devices: list[int],
             shape_encoder: str | None = None, epochs: int | None = None, results_dir: str | None = None,
             shard_overhead_s: float = 0.0) -> dict:
    """Expected wall time of the sweep `bench run --config CONFIG` would run, at `achieved_tflops`.

    `shape_encoder` counts tokens and FLOPs with another encoder of the same shape and tokenizer (e.g.
    bert-base-random for bert-base-uncased when the Hub is unreachable); `epochs` replaces the configured
    maximum (e.g. the epoch early stopping is expected at); `results_dir` adds measured epoch times of
    finished runs with the same keys; `shard_overhead_s` is added per shard (loading, evaluation)."""
    from bench.cli import build_parser, run_options
    from bench.encoders import build_encoder
    from bench.data import load_dataset
    from bench.registry import METHODS
    from bench.runner import run_spec, train_config
    from bench.settings import method_config

    if achieved_tflops <= 0:
        raise BenchError("give the achieved rate: --tflops X, or --peak-tflops P with --mfu M (both > 0)")
    args = build_parser().parse_args(["run", *(["--config", config] if config else []),
                                      *(["--data-dir", data_dir] if data_dir else [])])
    opts = run_options(args)
    methods = [METHODS.canonical(m) for m in opts["methods"]]
    configs = {m: method_config(m, opts["knobs"].get(m, {})) for m in methods}
    rate = achieved_tflops * 1e12
    shards, datasets = [], {}
    for dataset in opts["datasets"]:
        cfg = train_config(dataset, opts["overrides"])
        data = load_dataset(dataset, opts["data_dir"], cfg.data_seed, cfg.val_fraction)
        for encoder in opts["encoders"]:
            bundle = build_encoder(shape_encoder or encoder, data.train.texts, cfg)
            flops = split_flops(data, bundle.tokenize, bundle.model, cfg)
            datasets[f"{data.name}/{encoder}"] = {"train_texts": len(data.train), "validation_texts":
                                                  len(data.validation), "test_texts": len(data.test),
                                                  "train_pass_tflop": round(flops["train"] / 1e12, 2)}
            for method in methods:
                for seed in opts["seeds"]:
                    spec = run_spec(method, data, encoder, seed, cfg, configs[method])
                    shards.append(shard_cost(spec, flops, epochs))
    rows = []
    for cost in shards:
        row = {"key": cost.key, "epochs": cost.epochs, "total_pflop": round(cost.total_flops / 1e15, 3),
               "expected_epoch_s": round(cost.epoch_flops / rate, 1),
               "expected_s": round(cost.total_flops / rate + shard_overhead_s, 1)}
        if results_dir:
            measured = measured_epoch_seconds(Path(results_dir) / cost.key)
            row["measured_epoch_s"] = round(measured, 1) if measured is not None else None
            row["measured_over_expected"] = (round(measured / (cost.epoch_flops / rate), 2)
                                             if measured is not None and cost.epoch_flops else None)
        rows.append(row)
    seconds = [c.total_flops / rate + shard_overhead_s for c in shards]
    report: dict[str, Any] = {
        "benchmark": "estimate", "config": config, "achieved_tflops": achieved_tflops,
        "shape_encoder": shape_encoder, "shard_overhead_s": shard_overhead_s, "shards": len(shards),
        "total_pflop": round(sum(c.total_flops for c in shards) / 1e15, 2),
        "datasets": datasets,
        "wall_time": {str(n): format_hours(makespan(seconds, n)) for n in devices},
        "wall_seconds": {str(n): round(makespan(seconds, n)) for n in devices},
        "longest_shard": format_hours(max(seconds)) if seconds else None,
        "per_shard": rows}
    ratios = [r["measured_over_expected"] for r in rows if r.get("measured_over_expected") is not None]
    if ratios:
        report["calibration"] = {"runs_compared": len(ratios), "median_measured_over_expected":
                                 round(statistics.median(ratios), 2), "min": min(ratios), "max": max(ratios)}
    return report
