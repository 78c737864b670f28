"""`overhead`, `padding` and `methods`: what the loop around the model costs. `overhead` times the real Trainer's
epoch (schedule, clipping, hooks, logging) against the shortest correct loop (forward, cross-entropy, backward,
AdamW) on identical length-grouped batches. `padding` times length-grouped and random batches, both dynamically
padded, against random batches padded to --max-length. `methods` times one optimiser step of every method on one
identical batch against ce's step, and sets each ratio beside the encoder passes the method inherently needs
(`bench.running.walltime.INHERENT_PASSES`) and the padded tokens its encoders see."""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

from bench.data.batching import Encoded, auto_bucket, collate, length_grouped_batches
from bench.training.compile import compile_encoder
from bench.data.loading import load_dataset
from bench.encoders.models import build_encoder
from benchmarks.common import (build_method, constant_schedule, prepare, rotated, round_line, say, summarise, sync,
                               timed, trainer_epoch)
from bench.registry import METHODS
from bench.spec import TrainConfig
from bench.training.trainer import Trainer
from bench.training.setup import deterministic_kernels, seed_everything
from bench.running.walltime import INHERENT_PASSES


def random_batches(n: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Plain shuffled batches (no length grouping): the baseline the padding benchmark compares against."""
    order = rng.permutation(n)
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]


def minimal_loop(trainer: Trainer, data: Encoded, batches: list[np.ndarray], optimizer: torch.optim.Optimizer,
                 pad_to: int | None = None, bucket: int = 0) -> int:
    """The shortest correct training loop: forward, cross-entropy, backward, AdamW step."""
    model = trainer.method
    model.train()
    for index in batches:
        batch = {k: v.to(trainer.device) for k, v in collate(data, index, trainer.pad_id, pad_to=pad_to, bucket=bucket,
                                                             max_width=trainer.cfg.max_length).items()}
        with trainer.autocast():
            loss = F.cross_entropy(model.logits(batch).float(), batch["labels"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return sum(len(b) for b in batches)


def overhead(args: argparse.Namespace) -> dict:
    """Trainer throughput / minimal-loop throughput on identical batches."""
    trainer, data, cfg, compiled = prepare(args)
    results: dict[str, list[float]] = {"trainer": [], "minimal": []}
    optimizer = trainer.optimizer()
    trainer_optimizer = trainer.optimizer()
    scheduler = constant_schedule(trainer_optimizer)
    for round_ in range(args.rounds + 1):  # round 0 warms up both paths and is discarded
        batches = length_grouped_batches(data.lengths, cfg.batch_size, np.random.default_rng([0, round_]))
        speeds = {}
        for name in rotated(["trainer", "minimal"], round_):
            speeds[name] = (timed(lambda: minimal_loop(trainer, data, batches, optimizer, bucket=trainer.bucket))
                            if name == "minimal" else
                            timed(lambda: trainer_epoch(trainer, data, round_, trainer_optimizer, scheduler)))
        say(args, round_line(round_, args.rounds, speeds))
        if round_:
            for name, value in speeds.items():
                results[name].append(value)
    report = summarise(results, baseline="minimal", args=args)
    report.update(length_bucket=trainer.bucket, compiled=compiled)
    return report


def padding(args: argparse.Namespace) -> dict:
    """Length-grouped dynamic padding vs random batches padded to --max-length."""
    trainer, data, cfg, compiled = prepare(args)
    optimizer = trainer.optimizer()
    results: dict[str, list[float]] = {"grouped_dynamic": [], "random_dynamic": [], "random_pad_to_max": []}
    for round_ in range(args.rounds + 1):
        rng = np.random.default_rng([1, round_])
        grouped = length_grouped_batches(data.lengths, cfg.batch_size, rng)
        plain = random_batches(len(data), cfg.batch_size, rng)
        runs = {"grouped_dynamic": lambda: minimal_loop(trainer, data, grouped, optimizer),
                "random_dynamic": lambda: minimal_loop(trainer, data, plain, optimizer),
                "random_pad_to_max": lambda: minimal_loop(trainer, data, plain, optimizer, pad_to=cfg.max_length)}
        speeds = {name: timed(runs[name]) for name in rotated(list(runs), round_)}
        say(args, round_line(round_, args.rounds, speeds))
        if round_:
            for name, value in speeds.items():
                results[name].append(value)
    report = summarise(results, baseline="random_pad_to_max", args=args)
    report["mean_tokens"] = float(data.lengths.mean())
    report["compiled"] = compiled
    return report


def methods_step(args: argparse.Namespace) -> dict:
    """Median optimiser-step time of every method on one identical batch, as a ratio to ce's."""
    cfg = TrainConfig(batch_size=args.batch_size, max_length=args.max_length, precision=args.precision)
    data = load_dataset(args.dataset, args.data_dir)
    names = [METHODS.canonical(m) for m in args.methods.split(",")]
    device = torch.device(args.device)
    bucket = args.length_bucket if args.length_bucket is not None else auto_bucket(device.type, args.compile)
    index = np.arange(min(args.batch_size, len(data.train)))
    trainers, batches = {}, {}
    for name in names:
        seed_everything(0)
        deterministic_kernels(device)
        bundle = build_encoder(args.encoder, data.train.texts, cfg)
        method = build_method(name, bundle, data, data.train.texts, bucket, cfg.max_length)
        if args.compile:
            compile_encoder(method.encoder, args.compile_backend)
        trainer = Trainer(method, cfg, device, bundle.pad_id, 0, bundle.min_length, progress=False, bucket=bucket)
        train = Encoded(bundle.tokenize(data.train.texts), data.train.labels)
        batches[name] = trainer.batch(train, index, training=True)
        trainers[name] = (trainer, trainer.optimizer())
        trainer.method.train()
    work = {name: encoder_work(trainers[name][0], batches[name]) for name in names}
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(args.rounds + 1):  # interleaved: every round times each method once
        step_times = {}
        for name in rotated(names, round_):
            trainer, optimizer = trainers[name]
            start = time.perf_counter()
            for _ in range(args.steps):
                trainer.step(batches[name], optimizer)
            sync(device)
            step_times[name] = (time.perf_counter() - start) / args.steps
        say(args, round_line(round_, args.rounds, step_times, "s/step"))
        if round_:
            for name, value in step_times.items():
                times[name].append(value)
    step = {name: statistics.median(times[name]) for name in names}
    base_name = "ce" if "ce" in step else names[0]
    base, base_work = step[base_name], work[base_name]
    return {"benchmark": "methods", "encoder": args.encoder, "dataset": args.dataset, "batch_size": args.batch_size,
            "padded_width": int(batches[names[0]]["input_ids"].shape[1]), "length_bucket": bucket,
            "device": args.device, "precision": args.precision, "steps_per_round": args.steps,
            "rounds": args.rounds, "step_seconds": {k: round(v, 4) for k, v in step.items()},
            "ratio_vs_ce": {k: round(v / base, 3) for k, v in step.items()},
            "inherent_passes": {k: round(INHERENT_PASSES.get(k, float("nan")), 3) for k in step},
            "ratio_over_inherent": {k: round(v / base / INHERENT_PASSES[k], 3) for k, v in step.items()
                                    if k in INHERENT_PASSES},
            "encoder_tokens_vs_ce": {k: round(work[k] / base_work, 3) for k in step},
            "ratio_over_encoder_tokens": {k: round(v / base / (work[k] / base_work), 3) for k, v in step.items()}}


def encoder_work(trainer: Trainer, batch: dict[str, torch.Tensor]) -> float:
    """Padded tokens one training step feeds through encoders: with-gradient passes count 1, no-gradient
    passes (a momentum target) 1/3 (a forward is about a third of forward + backward)."""
    from bench.encoders.models import TextEncoder

    seen: list[float] = []

    def record(module: torch.nn.Module, inputs: tuple) -> None:
        seen.append(inputs[0].numel() * (1.0 if torch.is_grad_enabled() else 1.0 / 3.0))

    hooks = [m.register_forward_pre_hook(record) for m in trainer.method.modules() if isinstance(m, TextEncoder)]
    try:
        with trainer.autocast():
            trainer.method.loss(batch)
    finally:
        for hook in hooks:
            hook.remove()
    return sum(seen)
