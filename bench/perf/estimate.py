"""`estimate`: no measurement of its own; the expected wall time of `bench run --config CONFIG` on 1..N devices
(`estimate`, from the model FLOPs of the sweep's real data) at a training rate that is either
measured (--tflops, from `throughput`) or a peak of the bf16 table (--gpu) or --peak-tflops times an assumed
--mfu. With --results-dir the measured epoch times of finished runs are set beside each estimate as its check."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.perf.common import PEAK_BF16_TFLOPS
from bench.running.walltime import format_hours, makespan, measured_epoch_seconds, shard_cost, split_flops


def run_estimate(args: argparse.Namespace) -> dict:
    """`estimate`: the achieved rate from --tflops or peak × MFU, then `estimate`."""
    if args.gpu and args.gpu not in PEAK_BF16_TFLOPS:
        raise BenchError(f"unknown --gpu {args.gpu!r}; known: {', '.join(PEAK_BF16_TFLOPS)} (or give --peak-tflops)")
    peak = args.peak_tflops or (PEAK_BF16_TFLOPS[args.gpu] if args.gpu else None)
    rate = args.tflops or (peak * args.mfu if peak else 0.0)
    try:
        devices = [int(n) for n in args.devices.split(",")]
    except ValueError:
        raise BenchError(f"--devices takes whole numbers separated by commas, got {args.devices!r}") from None
    result = estimate(args.config, args.data_dir, rate, devices, args.shape_encoder, args.expected_epochs,
                      args.results_dir, args.shard_overhead_s)
    result["rate_from"] = (f"--tflops {args.tflops}" if args.tflops else
                           f"peak {peak} TFLOP/s × MFU {args.mfu}" if peak else None)
    return result


def estimate(config: str | None, data_dir: str | None, achieved_tflops: float, devices: list[int],
             shape_encoder: str | None = None, epochs: int | None = None, results_dir: str | None = None,
             shard_overhead_s: float = 0.0) -> dict:
    """Expected wall time of the sweep `bench run --config CONFIG` would run, at `achieved_tflops`.

    `shape_encoder` counts tokens and FLOPs with another encoder of the same shape and tokenizer (e.g.
    bert-base-random for bert-base-uncased when the Hub is unreachable); `epochs` replaces the configured
    maximum (e.g. the epoch early stopping is expected at); `results_dir` adds measured epoch times of
    finished runs with the same keys; `shard_overhead_s` is added per shard (loading, evaluation)."""
    from bench.cli.main import build_parser
    from bench.cli.run_options import run_options
    from bench.encoders.models import build_encoder
    from bench.data.loading import load_dataset
    from bench.registry import METHODS
    from bench.running.runner import run_spec, train_config
    from bench.spec import method_config

    if achieved_tflops <= 0:
        raise BenchError("give the achieved rate: --tflops X, or --peak-tflops P with --mfu M (both > 0)")
    args = build_parser().parse_args(["run", *(["--config", config] if config else []),
                                      *(["--data-dir", data_dir] if data_dir else [])])
    opts = run_options(args)
    methods = [METHODS.canonical(m) for m in opts.methods]
    configs = {m: method_config(m, opts.knobs.get(m, {})) for m in methods}
    rate = achieved_tflops * 1e12
    shards, datasets = [], {}
    for dataset in opts.datasets:
        cfg = train_config(dataset, opts.overrides)
        data = load_dataset(dataset, opts.data_dir, cfg.data_seed, cfg.val_fraction)
        for encoder in opts.encoders:
            bundle = build_encoder(shape_encoder or encoder, data.train.texts, cfg)
            flops = split_flops(data, bundle.tokenize, bundle.model, cfg)
            datasets[f"{data.name}/{encoder}"] = {"train_texts": len(data.train), "validation_texts":
                                                  len(data.validation), "test_texts": len(data.test),
                                                  "train_pass_tflop": round(flops["train"] / 1e12, 2)}
            for method in methods:
                for seed in opts.seeds:
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
