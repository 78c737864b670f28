"""`estimate`: no measurement of its own; the expected wall time of `bench run --config CONFIG` on 1..N devices
(`bench.walltime.estimate`, from the model FLOPs of the sweep's real data) at a training rate that is either
measured (--tflops, from `throughput`) or a peak of the bf16 table (--gpu) or --peak-tflops times an assumed
--mfu. With --results-dir the measured epoch times of finished runs are set beside each estimate as its check."""

from __future__ import annotations

import argparse

from bench.errors import BenchError
from bench.perf.common import PEAK_BF16_TFLOPS


def run_estimate(args: argparse.Namespace) -> dict:
    """`estimate`: the achieved rate from --tflops or peak × MFU, then `walltime.estimate`."""
    from bench.walltime import estimate

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
