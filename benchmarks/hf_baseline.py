"""`hf-trainer`: our Trainer's training throughput against a plain Hugging Face `Trainer` fine-tuning the same
encoder weights (AutoModelForSequenceClassification, default arguments) on the same examples and device, one epoch
of each per round, interleaved; the HF baseline needs `accelerate` (the extra `perf`: `pip install -e ".[perf]"`
in the checkout). With --compile only ours is compiled.

Two HF rows by default (`--hf-sampler both`), so that the batching and the loop are told apart:

- `hf_trainer_group_by_length`: the HF Trainer with its `LengthGroupedSampler` (`group_by_length=True`, called
  `train_sampling_strategy="group_by_length"` since transformers 5), which sorts shuffled megabatches of
  min(50, n // (4 x batch)) batches by length as our Trainer sorts chunks of 50 batches: ours / this row is our
  loop against theirs at similar padding (`padding_share` says how similar);
- `hf_trainer`: its default random sampler, ours / this row is length grouping and the loop together.

Both HF rows pad a batch as ours does (to its longest example, rounded up to the device's `--length-bucket`), run
the same examples (--steps x --batch-size, so the same number of optimiser steps), maximum length, precision
(bf16 autocast exactly where ours uses it) and torch threads (checked: `torch_threads_per_variant`). What stays
each loop's own: the optimiser (HF's default `optim`, ours the device's default AdamW), the classification head
(HF's pooler + dropout + linear), per-step bookkeeping. `padding_share` is 1 - real tokens / padded cells of the
batches each variant actually trained on, summed over the measured rounds; `padded_tokens_per_s` (real + pad
tokens per second, median) gives a third comparison with the padding difference taken out."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import inspect
import statistics
import tempfile
from typing import Any

import torch

from bench.data.batching import Encoded, bucket_width, length_grouped_batches
from bench.errors import BenchError, install_extra
from benchmarks.common import constant_schedule, prepare, rotated, round_line, say, summarise, timed, trainer_epoch
from bench.training.trainer import Trainer

OURS, HF_RANDOM, HF_GROUPED = "ours", "hf_trainer", "hf_trainer_group_by_length"
SAMPLERS = {"both": (HF_GROUPED, HF_RANDOM), "random": (HF_RANDOM,), "group_by_length": (HF_GROUPED,)}


def sampler_arguments(group_by_length: bool) -> dict[str, Any]:
    """TrainingArguments keywords for the HF sampler: `group_by_length=True` (transformers 4) or
    `train_sampling_strategy="group_by_length"` (transformers 5, which dropped the flag); {} for the default."""
    from transformers import TrainingArguments

    if not group_by_length:
        return {}
    fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    if "train_sampling_strategy" in fields:
        return {"train_sampling_strategy": "group_by_length"}
    if "group_by_length" in fields:
        return {"group_by_length": True}
    raise BenchError("this transformers version's TrainingArguments has neither group_by_length nor "
                     "train_sampling_strategy")


def hf_trainer_epoch(trainer: Trainer, data: Encoded, args: argparse.Namespace, folder: str,
                     group_by_length: bool = False, counts: dict[str, int] | None = None) -> float:
    """Samples/s of one epoch of a plain Hugging Face `Trainer` fine-tune of the same encoder weights
    (AutoModelForSequenceClassification, default arguments; with `group_by_length` its length-grouped sampler),
    batches padded as ours are; needs `accelerate`. `counts` (if given) gets the real tokens and padded cells of
    the batches it trained on added to its "tokens" and "cells"."""
    from transformers import AutoModelForSequenceClassification, Trainer as HFTrainer, TrainingArguments

    encoder = trainer.method.encoder.model
    config = copy.deepcopy(encoder.config)
    config.num_labels = trainer.method.num_labels
    model = AutoModelForSequenceClassification.from_config(config)
    model.base_model.load_state_dict(encoder.state_dict(), strict=False)
    rows = [{"input_ids": ids, "labels": int(label)} for ids, label in zip(data.token_ids, data.labels)]
    tally = counts if counts is not None else {}

    def collate_rows(batch: list[dict]) -> dict[str, torch.Tensor]:
        longest = max(max(len(r["input_ids"]) for r in batch), trainer.min_length)
        width = bucket_width(longest, trainer.bucket, trainer.cfg.max_length)  # as our Trainer pads a batch
        ids = torch.full((len(batch), width), trainer.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, r in enumerate(batch):
            ids[i, :len(r["input_ids"])] = torch.tensor(r["input_ids"])
            mask[i, :len(r["input_ids"])] = 1
        tally["tokens"] = tally.get("tokens", 0) + sum(len(r["input_ids"]) for r in batch)
        tally["cells"] = tally.get("cells", 0) + ids.numel()
        return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([r["labels"] for r in batch])}

    cuda = trainer.device.type == "cuda"
    arguments = TrainingArguments(output_dir=folder, per_device_train_batch_size=args.batch_size, num_train_epochs=1,
                                  learning_rate=5e-5, bf16=trainer.amp_dtype == torch.bfloat16, use_cpu=not cuda,
                                  report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
                                  dataloader_pin_memory=cuda, **sampler_arguments(group_by_length))
    metrics = HFTrainer(model=model, args=arguments, train_dataset=rows, data_collator=collate_rows).train().metrics
    return float(metrics["train_samples_per_second"])


def megabatches(examples: int, batch_size: int, hf_rows: tuple[str, ...]) -> dict[str, int]:
    """Batches per length-sorted chunk: ours 50 (`length_grouped_batches`), HF's LengthGroupedSampler
    min(50, examples // (4 x batch)), at least 1: below 200 batches an epoch HF sorts smaller chunks and pads more."""
    ours = inspect.signature(length_grouped_batches).parameters["group"].default
    out = {OURS: ours}
    if HF_GROUPED in hf_rows:
        out[HF_GROUPED] = max(1, min(50, examples // (4 * batch_size)))
    return out


def hf_default_optimizer() -> str:
    """The HF Trainer's default `optim` in this transformers version (e.g. adamw_torch_fused from torch 2.8)."""
    from transformers import TrainingArguments

    default = {f.name: f.default for f in dataclasses.fields(TrainingArguments)}.get("optim")
    return str(getattr(default, "value", default))


def counted_batches(trainer: Trainer, counts: dict[str, int]) -> Any:
    """A stand-in for `trainer.batch` that adds each batch's real tokens and padded cells to `counts` (read from
    the host-side lengths and the batch's shape: nothing waits for the device)."""
    batch = trainer.batch

    def counting(data: Encoded, index: Any, *more: Any, **options: Any) -> dict[str, torch.Tensor]:
        out = batch(data, index, *more, **options)
        counts["tokens"] = counts.get("tokens", 0) + int(data.lengths[index].sum())
        counts["cells"] = counts.get("cells", 0) + out["input_ids"].numel()
        return out

    return counting


def require_accelerate() -> None:
    """A one-line BenchError when `accelerate` (which the HF Trainer needs) is missing."""
    import importlib.util

    if importlib.util.find_spec("accelerate") is None:
        raise BenchError(f"the Hugging Face Trainer baseline needs accelerate: {install_extra('perf')}")


def hf_trainer(args: argparse.Namespace) -> dict:
    """Our Trainer's training throughput / a plain Hugging Face Trainer's on the same model, data and device,
    with its length-grouped sampler (loop vs loop) and its default random one (batching and loop); with
    --compile only ours is compiled."""
    require_accelerate()
    hf_rows = SAMPLERS[getattr(args, "hf_sampler", None) or "both"]
    trainer, data, cfg, compiled = prepare(args)
    optimizer = trainer.optimizer()
    scheduler = constant_schedule(optimizer)
    names = [OURS, *hf_rows]
    results: dict[str, list[float]] = {name: [] for name in names}
    cells_per_s: dict[str, list[float]] = {name: [] for name in names}  # padded tokens (real + pad) per second
    padding = {name: {"tokens": 0, "cells": 0} for name in names}
    threads: dict[str, set[int]] = {name: set() for name in names}
    counts: dict[str, int] = {}  # the real tokens and padded cells of the epoch just run
    trainer.batch = counted_batches(trainer, counts)  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as folder:
            for round_ in range(args.rounds + 1):
                speeds = {}
                for name in rotated(names, round_):
                    counts.clear()
                    threads[name].add(torch.get_num_threads())
                    speeds[name] = (timed(lambda: trainer_epoch(trainer, data, round_, optimizer, scheduler))
                                    if name == OURS else
                                    hf_trainer_epoch(trainer, data, args, folder, name == HF_GROUPED, counts))
                    threads[name].add(torch.get_num_threads())
                    if round_:
                        results[name].append(speeds[name])
                        cells_per_s[name].append(speeds[name] * counts.get("cells", 0) / len(data))
                        for key in ("tokens", "cells"):
                            padding[name][key] += counts.get(key, 0)
                say(args, f"batch {args.batch_size} " + round_line(round_, args.rounds, speeds))
    finally:
        del trainer.batch  # the Trainer's own method again
    report = summarise(results, baseline=hf_rows[-1], args=args, name="hf-trainer")
    if len(hf_rows) > 1:
        medians = {k: statistics.median(v) for k, v in results.items()}
        report["ratio_vs_" + HF_GROUPED] = {k: round(v / medians[HF_GROUPED], 3) for k, v in medians.items()}
    per_round = {f"ours / {name}": [round(a / b, 3) for a, b in zip(results[OURS], results[name])]
                 for name in hf_rows}
    cells = {name: statistics.median(v) for name, v in cells_per_s.items()}
    summary = {HF_GROUPED: "loop vs loop (ours / HF group_by_length)",
               HF_RANDOM: "batching and loop (ours / HF default random sampler)"}
    comparisons = {summary[name]: report["ratio_vs_" + name][OURS] for name in hf_rows}
    comparisons[summary[hf_rows[0]] + ", per padded token"] = (  # the rest of the padding difference taken out
        round(cells[OURS] / cells[hf_rows[0]], 3) if cells[hf_rows[0]] else None)
    report.update(
        comparisons=comparisons, ratio_per_round=per_round,
        ratio_range={k: [min(v), max(v)] for k, v in per_round.items()},
        padding_share={name: round(1 - c["tokens"] / c["cells"], 4) if c["cells"] else None
                       for name, c in padding.items()},
        padded_tokens_per_s={name: round(v, 1) for name, v in cells.items()},
        torch_threads_per_variant={name: sorted(t) for name, t in threads.items()},
        megabatch_batches=megabatches(len(data), args.batch_size, hf_rows),
        mean_tokens=round(float(data.lengths.mean()), 2), train_examples=len(data),
        optimizer_steps_per_round=-(-len(data) // args.batch_size), hf_sampler=list(hf_rows),
        hf_optimizer=hf_default_optimizer(), length_bucket=trainer.bucket, compiled=compiled)
    return report
