"""`estimate`: no measurement of its own; the expected wall time of `clbench run --config CONFIG` on 1..N devices
(`estimate`), either from the model FLOPs of the sweep's real data at a training rate that is measured
(--tflops, from `throughput`) or a peak of the bf16 table (--gpu) or --peak-tflops times an assumed --mfu; or
from measured optimiser-step times per method (--step-ms, from `report`: an upper bound where texts are shorter
than the length they were measured at). With --results-dir the measured epoch times of finished runs are set
beside each estimate as its check."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from benchmarks.common import PEAK_BF16_TFLOPS
from benchmarks.costs import (format_hours, makespan, measured_epoch_seconds, shard_cost, split_flops,
                              step_time_seconds)


def run_estimate(args: argparse.Namespace) -> dict:
    """`estimate`: the achieved rate from --tflops or peak × MFU (or the step times of --step-ms), then
    `estimate`."""
    step_seconds = parse_step_ms(args.step_ms) if args.step_ms else None
    if args.gpu and args.gpu not in PEAK_BF16_TFLOPS:
        raise BenchError(f"unknown --gpu {args.gpu!r}; known: {', '.join(PEAK_BF16_TFLOPS)} (or give --peak-tflops)")
    peak = args.peak_tflops or (PEAK_BF16_TFLOPS[args.gpu] if args.gpu else None)
    rate = args.tflops or (peak * args.mfu if peak and not step_seconds else 0.0)
    try:
        devices = [int(n) for n in args.devices.split(",")]
    except ValueError:
        raise BenchError(f"--devices takes whole numbers separated by commas, got {args.devices!r}") from None
    result = estimate(args.config, args.data_dir, rate, devices, args.shape_encoder, args.expected_epochs,
                      args.results_dir, args.shard_overhead_s, step_seconds)
    result["rate_from"] = (f"--step-ms {args.step_ms} (every batch as long as the measured ones: an upper bound)"
                           if step_seconds else f"--tflops {args.tflops}" if args.tflops else
                           f"peak {peak} TFLOP/s × MFU {args.mfu}" if peak else None)
    return result


def parse_step_ms(text: str) -> dict[str, float]:
    """`ce=89,clld=102` -> seconds per optimiser step by canonical method name (checked: known methods, > 0)."""
    from bench.catalog import registry

    methods = registry("method")
    step_seconds = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        try:
            milliseconds = float(value)
        except ValueError:
            milliseconds = -1.0
        if not name.strip() or milliseconds <= 0:
            raise BenchError(f"--step-ms takes METHOD=MILLISECONDS pairs separated by commas (ce=89,clld=102), "
                             f"got {item!r}")
        step_seconds[methods.canonical(name.strip())] = milliseconds / 1000
    return step_seconds


def estimate(config: str | None, data_dir: str | None, achieved_tflops: float, devices: list[int],
             shape_encoder: str | None = None, epochs: int | None = None, results_dir: str | None = None,
             shard_overhead_s: float = 0.0, step_seconds: dict[str, float] | None = None) -> dict:
    """Expected wall time of the sweep `clbench run --config CONFIG` would run, at `achieved_tflops`, or from
    measured optimiser-step times per method (`step_seconds`, see `step_time_seconds`) when given.

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

    if achieved_tflops <= 0 and not step_seconds:
        raise BenchError("give the achieved rate: --tflops X, or --peak-tflops P with --mfu M (both > 0), or "
                         "measured step times: --step-ms ce=89,clld=102")
    args = build_parser().parse_args(["run", *(["--config", config] if config else []),
                                      *(["--data-dir", data_dir] if data_dir else [])])
    opts = run_options(args, check_encoders=shape_encoder is None)
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
            sizes = {s: len(getattr(data, s)) for s in ("train", "validation", "test")}
            for method in methods:
                for seed in opts.seeds:
                    spec = run_spec(method, data, encoder, seed, cfg, configs[method])
                    cost = shard_cost(spec, flops, epochs)
                    timing = (step_time_seconds(spec, sizes, step_seconds, epochs) if step_seconds else
                              (cost.epoch_flops / rate, cost.total_flops / rate))
                    shards.append((cost, *timing))
    rows = []
    for cost, epoch_s, total_s in shards:
        row = {"key": cost.key, "epochs": cost.epochs, "total_pflop": round(cost.total_flops / 1e15, 3),
               "expected_epoch_s": round(epoch_s, 1), "expected_s": round(total_s + shard_overhead_s, 1)}
        if results_dir:
            measured = measured_epoch_seconds(Path(results_dir) / cost.key)
            row["measured_epoch_s"] = round(measured, 1) if measured is not None else None
            row["measured_over_expected"] = (round(measured / epoch_s, 2) if measured is not None and epoch_s
                                             else None)
        rows.append(row)
    seconds = [total_s + shard_overhead_s for _, _, total_s in shards]
    report: dict[str, Any] = {
        "benchmark": "estimate", "config": config, "achieved_tflops": achieved_tflops or None,
        "step_seconds": step_seconds,
        "shape_encoder": shape_encoder, "shard_overhead_s": shard_overhead_s, "shards": len(shards),
        "total_pflop": round(sum(cost.total_flops for cost, _, _ in shards) / 1e15, 2),
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
