"""`shards`: K training processes sharing one device. For each K of --concurrency it launches K identical
processes (each its own model training the real Trainer's epochs, started together at a barrier after a warm-up
epoch; on a CPU each gets cores / K threads, as `clbench run --shards-per-gpu K` gives its workers) and measures
their aggregate sequences/s over the common wall-time span, against K = 1; launches are interleaved over
--rounds."""

from __future__ import annotations

import argparse
import contextlib
import copy
import multiprocessing
import os
import queue
import statistics
import time
from typing import Any

import torch

from bench.errors import BenchError
from benchmarks.common import (constant_schedule, device_name, one_line, prepare, remove_cache_folder, rotated, say,
                               sync, trainer_epoch)


def shard_worker(args: argparse.Namespace, rank: int, threads: int, barrier: Any, results: Any) -> None:
    """One of K concurrent training processes of `shards` (spawned): its own model, a warm-up epoch, then at a
    common start (the barrier) --epochs epochs of the real Trainer, each with its start and end time."""
    try:
        torch.set_num_threads(threads)
        trainer, data, cfg, _ = prepare(args, seed=rank)
        optimizer = trainer.optimizer()
        scheduler = constant_schedule(optimizer)
        trainer_epoch(trainer, data, 0, optimizer, scheduler)  # warm-up (and compilation with --compile)
        sync(trainer.device)
        barrier.wait(timeout=3600)
        spans = []
        for epoch in range(1, args.epochs + 1):
            start = time.monotonic()  # one clock for all processes (Linux: CLOCK_MONOTONIC)
            seen = trainer_epoch(trainer, data, epoch, optimizer, scheduler)
            sync(trainer.device)
            spans.append((start, time.monotonic(), seen))
        results.put({"rank": rank, "pid": os.getpid(), "threads": threads, "spans": spans})
    except BaseException as exc:  # reported by the parent as a one-line error
        results.put({"rank": rank, "pid": os.getpid(), "error": one_line(exc)})
        with contextlib.suppress(Exception):
            barrier.abort()
    finally:
        remove_cache_folder()


def launch_shards(args: argparse.Namespace, k: int) -> list[dict]:
    """Run K `shard_worker` processes at once; their reports (BenchError if one fails or dies)."""
    from bench.running.runner import cpu_count

    if "forkserver" in multiprocessing.get_all_start_methods():
        # a fresh server process imports the libraries once and forks each worker from there (no CUDA state to
        # inherit); each worker imports this module itself (cheap once those are loaded) to find `shard_worker`
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["bench.methods", "bench.data.batching", "bench.training.compile", "bench.data.loading", "bench.encoders.models",
                                        "bench.training.trainer", "benchmarks.costs"])
    else:
        context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(k), context.Queue()
    threads = max(1, cpu_count() // k)
    worker_args = copy.copy(args)
    worker_args.quiet = True
    processes = [context.Process(target=shard_worker, args=(worker_args, rank, threads, barrier, results))
                 for rank in range(k)]
    reports: list[dict] = []
    try:
        for process in processes:
            process.start()
        while len(reports) < k:
            try:
                reports.append(results.get(timeout=1.0))
            except queue.Empty:
                dead = [p for p in processes if p.exitcode not in (None, 0)]
                if dead:
                    with contextlib.suppress(Exception):
                        barrier.abort()
                if all(p.exitcode is not None for p in processes):
                    with contextlib.suppress(queue.Empty):
                        while len(reports) < k:
                            reports.append(results.get(timeout=1.0))
                    if len(reports) < k:
                        raise BenchError(f"a shards worker died (exit codes {[p.exitcode for p in processes]})")
        for process in processes:
            process.join(timeout=60)
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join(timeout=10)
    errors = [r["error"] for r in reports if "error" in r]
    if errors:  # the cause, not the others' broken barrier
        cause = [e for e in errors if not e.startswith("BrokenBarrierError")] or errors
        raise BenchError(f"a shards worker failed: {cause[0]}")
    return sorted(reports, key=lambda r: r["rank"])


def shards(args: argparse.Namespace) -> dict:
    """Aggregate training throughput of K identical training processes sharing one device, for each K of
    --concurrency, as a ratio to K = 1 (launches interleaved over --rounds; on a CPU each process gets
    cores / K threads, as `clbench run --shards-per-gpu K` gives its workers)."""
    aggregate: dict[int, list[float]] = {k: [] for k in args.concurrency_list}
    detail: dict[int, list[dict]] = {k: [] for k in args.concurrency_list}
    for round_ in range(1, args.rounds + 1):
        for k in rotated(args.concurrency_list, round_ - 1):
            reports = launch_shards(args, k)
            starts = [r["spans"][0][0] for r in reports]
            ends = [r["spans"][-1][1] for r in reports]
            span = max(ends) - min(starts)
            seen = sum(s[2] for r in reports for s in r["spans"])
            aggregate[k].append(seen / span)
            detail[k].append({
                "pids": [r["pid"] for r in reports], "threads_per_process": reports[0]["threads"],
                "sequences": seen, "span_seconds": round(span, 3),
                "overlap": round(max(0.0, min(ends) - max(starts)) / span, 3),
                "per_process_seq_per_s": [
                    round(sum(s[2] for s in r["spans"]) / (r["spans"][-1][1] - r["spans"][0][0]), 2) for r in reports]})
            say(args, f"round {round_}/{args.rounds}: K={k}: {seen / span:.4g} seq/s in all "
                      f"({k} processes, overlap {detail[k][-1]['overlap']:.2f})")
    medians = {k: statistics.median(v) for k, v in aggregate.items()}
    return {"benchmark": "shards", "device": args.device, "device_name": device_name(args.device),
            "encoder": args.encoder, "dataset": args.dataset, "batch_size": args.batch_size,
            "max_length": args.max_length, "steps": args.steps, "epochs_per_process": args.epochs,
            "rounds": args.rounds, "precision": args.precision, "compiled": bool(args.compile),
            "measured_by": "wall time: the sequences all K processes trained (real Trainer epochs, each process "
                           "its own model) from their common start (a barrier after each one's warm-up epoch) "
                           "to the last one's end, divided by that span",
            "concurrency": {str(k): {"processes": k, "aggregate_seq_per_s": round(medians[k], 2),
                                     "all_rounds": [round(x, 2) for x in aggregate[k]], "launches": detail[k]}
                            for k in args.concurrency_list},
            "ratio_vs_1": {str(k): round(v / medians[1], 3) for k, v in medians.items()}}
