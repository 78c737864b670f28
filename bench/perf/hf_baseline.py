"""`hf-trainer`: our Trainer's training throughput against a plain Hugging Face `Trainer` fine-tuning the same
encoder weights (AutoModelForSequenceClassification, default arguments, its own dynamic padding) on the same
examples and device, one epoch of each per round, interleaved; the HF baseline needs `accelerate`
(`pip install clbench[perf]`). With --compile only ours is compiled."""

from __future__ import annotations

import argparse
import copy
import tempfile

import torch

from bench.data.batching import Encoded
from bench.errors import BenchError
from bench.perf.common import constant_schedule, prepare, rotated, round_line, say, summarise, timed, trainer_epoch
from bench.training.trainer import Trainer


def hf_trainer_epoch(trainer: Trainer, data: Encoded, args: argparse.Namespace, folder: str) -> float:
    """Samples/s of one epoch of a plain Hugging Face `Trainer` fine-tune of the same encoder weights
    (AutoModelForSequenceClassification, default arguments, its own dynamic padding); needs `accelerate`."""
    from transformers import AutoModelForSequenceClassification, Trainer as HFTrainer, TrainingArguments

    encoder = trainer.method.encoder.model
    config = copy.deepcopy(encoder.config)
    config.num_labels = trainer.method.num_labels
    model = AutoModelForSequenceClassification.from_config(config)
    model.base_model.load_state_dict(encoder.state_dict(), strict=False)
    rows = [{"input_ids": ids, "labels": int(label)} for ids, label in zip(data.token_ids, data.labels)]

    def collate_rows(batch: list[dict]) -> dict[str, torch.Tensor]:
        width = max(len(r["input_ids"]) for r in batch)
        ids = torch.full((len(batch), width), trainer.pad_id, dtype=torch.long)
        for i, r in enumerate(batch):
            ids[i, :len(r["input_ids"])] = torch.tensor(r["input_ids"])
        return {"input_ids": ids, "attention_mask": (ids != trainer.pad_id).long(),
                "labels": torch.tensor([r["labels"] for r in batch])}

    cuda = trainer.device.type == "cuda"
    arguments = TrainingArguments(output_dir=folder, per_device_train_batch_size=args.batch_size, num_train_epochs=1,
                                  learning_rate=5e-5, bf16=cuda and args.precision != "fp32", use_cpu=not cuda,
                                  report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
                                  dataloader_pin_memory=cuda)
    metrics = HFTrainer(model=model, args=arguments, train_dataset=rows, data_collator=collate_rows).train().metrics
    return float(metrics["train_samples_per_second"])


def require_accelerate() -> None:
    """A one-line BenchError when `accelerate` (which the HF Trainer needs) is missing."""
    import importlib.util

    if importlib.util.find_spec("accelerate") is None:
        raise BenchError("the Hugging Face Trainer baseline needs accelerate: pip install 'clbench[perf]'")


def hf_trainer(args: argparse.Namespace) -> dict:
    """Our Trainer's training throughput / a plain Hugging Face Trainer's on the same model, data and device
    (with --compile only ours is compiled)."""
    require_accelerate()
    trainer, data, cfg, compiled = prepare(args)
    optimizer = trainer.optimizer()
    scheduler = constant_schedule(optimizer)
    results: dict[str, list[float]] = {"ours": [], "hf_trainer": []}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds + 1):
            speeds = {}
            for name in rotated(["ours", "hf_trainer"], round_):
                speeds[name] = (timed(lambda: trainer_epoch(trainer, data, round_, optimizer, scheduler))
                                if name == "ours" else hf_trainer_epoch(trainer, data, args, folder))
            say(args, f"batch {args.batch_size} " + round_line(round_, args.rounds, speeds))
            if round_:
                for name, value in speeds.items():
                    results[name].append(value)
    report = summarise(results, baseline="hf_trainer", args=args, name="hf-trainer")
    report.update(length_bucket=trainer.bucket, compiled=compiled)
    return report
