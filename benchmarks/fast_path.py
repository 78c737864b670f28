"""`short-texts`: the GPU fast path on short-text datasets. Per dataset of --datasets it times the real
Trainer.train_epoch (`new`, the device's default length bucket) and, with --compile, the same on a compiled
encoder (`new+compile`, its compile time reported apart) against the loop before the fast path (`old`, the
baseline: per-example collation at the exact longest width, pageable memory, the running loss read on the host
every 10 steps), with the same batches, the same step and the same AdamW (the device default: fused on a GPU)."""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Any, Callable

import numpy as np
import torch

from bench.data.batching import Encoded, length_grouped_batches
from benchmarks.common import (constant_schedule, device_name, prepare, rotated, round_line, say, sync,
                               trainer_epoch, unique_graphs)
from bench.training.trainer import Trainer
from bench.methods.base import Progress


def old_collate(data: Encoded, index: np.ndarray, pad_id: int, min_length: int = 1) -> dict[str, torch.Tensor]:
    """Batch making before the fast path: a Python loop over the examples into a pad-filled array, padded to
    exactly the longest example, in ordinary (pageable) memory."""
    lengths = data.lengths[index]
    width = max(int(lengths.max()), min_length)
    input_ids = np.full((len(index), width), pad_id, dtype=np.int64)
    for row, i in enumerate(index):
        ids = data.token_ids[i][:width]
        input_ids[row, :len(ids)] = ids
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    return {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask),
            "labels": torch.from_numpy(data.labels[index]),
            "index": torch.from_numpy(np.asarray(index, dtype=np.int64))}


OLD_LOG_EVERY = 10  # the old loop read the running loss on the host every 10 steps


def old_epoch(trainer: Trainer, data: Encoded, epoch: int, optimizer: torch.optim.Optimizer, scheduler: Any) -> int:
    """The loop before the fast path, the baseline of `short-texts`: the same batches and the same step
    (Trainer.step) as Trainer.train_epoch, but per-example collation, no pinned memory, and the running loss read
    to the host (`float`) every 10 steps; run with the AdamW the old loop had, the device default (fused on a GPU),
    so that the fast path is not credited with a fused optimiser it did not bring. (`index` stays on the host, as
    Trainer.batch leaves it; the old loop copied it to the device too. Plain collation: `ce` only, no views.)"""
    trainer.method.train()
    batches = length_grouped_batches(data.lengths, trainer.cfg.batch_size, np.random.default_rng([trainer.seed, epoch]))
    sums: dict[str, torch.Tensor] = {}
    for number, index in enumerate(batches, start=1):
        batch = {k: v if k == "index" else v.to(trainer.device, non_blocking=True)
                 for k, v in old_collate(data, index, trainer.pad_id, trainer.min_length).items()}
        losses, total = trainer.step(batch, optimizer)
        scheduler.step()
        trainer.method.on_step_end(Progress(epoch + 1, trainer.cfg.epochs, number, 10**9))
        for name, value in {"loss": total, **losses}.items():
            sums[name] = sums.get(name, 0.0) + value.detach().float()
        if number % OLD_LOG_EVERY == 0 or number == len(batches):
            float(sums["loss"] / number)
    for value in sums.values():  # the old epoch record: one read per loss part
        float(value / len(batches))
    return sum(len(b) for b in batches)


def short_texts(args: argparse.Namespace) -> dict:
    """Per dataset of --datasets: training throughput of the loop before the fast path (`old`, see
    `old_epoch`) vs the real Trainer.train_epoch (`new`, the device's default length bucket) and, with
    --compile, the new loop on a compiled encoder (`new+compile`; its compile time reported apart)."""
    device = torch.device(args.device)
    result: dict[str, Any] = {
        "benchmark": "short-texts", "device": args.device, "device_name": device_name(device),
        "encoder": args.encoder, "batch_size": args.batch_size, "max_length": args.max_length,
        "steps": args.steps, "rounds": args.rounds, "precision": args.precision,
        "torch_threads": torch.get_num_threads(),
        "old": "the loop before the fast path: per-example collate at the exact longest width, pageable memory, "
               f"loss read to the host every {OLD_LOG_EVERY} steps, the device's default AdamW as the old loop had "
               "it (fused on a GPU)",
        "new": "Trainer.train_epoch: vectorised collate with the device's length bucket, pinned memory on a GPU, "
               "loss read every log_every steps, the Trainer's AdamW (fused on a GPU)",
        "datasets": {}}
    for name in args.dataset_list:
        one = copy.copy(args)
        one.dataset = name
        result["datasets"][name] = short_texts_one(one)
    return result


def short_texts_one(args: argparse.Namespace) -> dict:
    """`short-texts` on one dataset: every variant trains one epoch per round on the same examples."""
    trainer, data, cfg, _ = prepare(args, compile=False)
    old_optimizer = trainer.optimizer(fused=None)  # the device default, as the old loop had it: fused on a GPU
    new_optimizer = trainer.optimizer()
    old_schedule, new_schedule = constant_schedule(old_optimizer), constant_schedule(new_optimizer)
    variants: dict[str, Callable[[int], int]] = {
        "old": lambda epoch: old_epoch(trainer, data, epoch, old_optimizer, old_schedule),
        "new": lambda epoch: trainer_epoch(trainer, data, epoch, new_optimizer, new_schedule)}
    buckets = {"old": 0, "new": trainer.bucket}
    compiled, graphs = "", 0
    if args.compile:
        graphs = unique_graphs()
        fast, fast_data, _, compiled = prepare(args, compile=True)
        fast_optimizer = fast.optimizer()
        fast_schedule = constant_schedule(fast_optimizer)
        variants["new+compile"] = lambda epoch: trainer_epoch(fast, fast_data, epoch, fast_optimizer, fast_schedule)
        buckets["new+compile"] = fast.bucket
    speeds: dict[str, list[float]] = {name: [] for name in variants}
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    first: dict[str, float] = {}
    sequences: dict[str, set[int]] = {name: set() for name in variants}
    for round_ in range(args.rounds + 1):  # round 0 warms every variant up (and compiles) and is discarded
        rates = {}
        for name in rotated(list(variants), round_):
            start = time.perf_counter()
            seen = variants[name](round_)
            sync(trainer.device)
            elapsed = time.perf_counter() - start
            rates[name] = seen / elapsed
            sequences[name].add(seen)
            if round_:
                speeds[name].append(rates[name])
                seconds[name].append(elapsed)
            else:
                first[name] = elapsed
        say(args, f"{args.dataset} " + round_line(round_, args.rounds, rates))
    medians = {name: statistics.median(v) for name, v in speeds.items()}
    entry = {"train_examples": len(data), "mean_tokens": round(float(data.lengths.mean()), 2),
             "length_bucket": buckets,
             "sequences_per_round": {k: sorted(v)[0] if len(v) == 1 else sorted(v) for k, v in sequences.items()},
             "seq_per_s": {k: round(v, 2) for k, v in medians.items()},
             "ratio_vs_old": {k: round(v / medians["old"], 3) for k, v in medians.items()},
             "all_rounds": {k: [round(x, 2) for x in v] for k, v in speeds.items()}}
    if args.compile:
        entry["compiled"] = compiled
        entry["compile_seconds"] = round(first["new+compile"] - statistics.median(seconds["new+compile"]), 2)
        entry["compilations"] = unique_graphs() - graphs
    return entry
