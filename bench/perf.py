"""Benchmarks of the harness itself, each reported as a ratio against a baseline measured in the same run.

    python -m bench.perf overhead --dataset mr --data-dir ../shared/data   # Trainer vs a minimal loop
    python -m bench.perf padding  --dataset mr --data-dir ../shared/data   # length grouping + dynamic padding
    python -m bench.perf methods  --dataset mr --data-dir ../shared/data   # step time of every method vs ce
    python -m bench.perf hf-trainer --dataset mr --data-dir ../shared/data # our Trainer vs Hugging Face Trainer
    python -m bench.perf throughput --encoder bert-base-random ...         # ce / clld seq/s, TFLOP/s, MFU, GPU use
    python -m bench.perf report --dataset 20ng --data-dir ../shared/data   # throughput + hf-trainer in one run
    python -m bench.perf estimate --config configs/clld-table2.yaml ...    # expected wall time of a sweep

Rounds alternate between the variants so that machine noise hits both alike; the medians are compared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

import methods  # noqa: F401
from bench.batching import Encoded, collate, length_grouped_batches, random_batches
from bench.data import load_dataset
from bench.encoders import build_encoder
from bench.errors import BenchError
from bench.registry import METHODS
from bench.spec import TrainConfig
from bench.trainer import Trainer, seed_everything
from bench.walltime import INHERENT_PASSES, training_flops


def prepare(args: argparse.Namespace, method: str = "ce") -> tuple[Trainer, Encoded, TrainConfig]:
    """A `method` model (default CE) on the encoder and a training subset of the dataset, wrapped in a Trainer."""
    cfg = TrainConfig(batch_size=args.batch_size, max_length=args.max_length, lr=5e-5, precision=args.precision)
    data = load_dataset(args.dataset, args.data_dir)
    seed_everything(0)
    bundle = build_encoder(args.encoder, data.train.texts, cfg)
    n = min(len(data.train), args.steps * args.batch_size)
    encoded = Encoded(bundle.tokenize(data.train.texts[:n]), data.train.labels[:n])
    model = METHODS.get(method)(bundle.model, data.num_labels)
    trainer = Trainer(model, cfg, torch.device(args.device), bundle.pad_id, 0, bundle.min_length, progress=False)
    return trainer, encoded, cfg


def timed(fn: Callable[[], int]) -> float:
    """Sequences per second of one call of `fn` (which returns the number of sequences it processed)."""
    start = time.perf_counter()
    seen = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return seen / (time.perf_counter() - start)


def minimal_loop(trainer: Trainer, data: Encoded, batches: list[np.ndarray], optimizer: torch.optim.Optimizer,
                 pad_to: int | None = None) -> int:
    """The shortest correct training loop: forward, cross-entropy, backward, AdamW step."""
    model = trainer.method
    model.train()
    for index in batches:
        batch = {k: v.to(trainer.device) for k, v in collate(data, index, trainer.pad_id, pad_to=pad_to).items()}
        with trainer.autocast():
            loss = F.cross_entropy(model.logits(batch).float(), batch["labels"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return sum(len(b) for b in batches)


def trainer_epoch(trainer: Trainer, data: Encoded, epoch: int) -> int:
    """One epoch of the real Trainer (schedule, clipping, hooks, logging included)."""
    optimizer = trainer.optimizer()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    state = {"step": 0}
    trainer.train_epoch(data, epoch, optimizer, scheduler, state, total_steps=10**9)
    return len(data)


def overhead(args: argparse.Namespace) -> dict:
    """Trainer throughput / minimal-loop throughput on identical batches."""
    trainer, data, cfg = prepare(args)
    results: dict[str, list[float]] = {"trainer": [], "minimal": []}
    optimizer = trainer.optimizer()
    for round_ in range(args.rounds + 1):  # round 0 warms up both paths and is discarded
        batches = length_grouped_batches(data.lengths, cfg.batch_size, np.random.default_rng([0, round_]))
        if round_ % 2:  # alternate which variant goes first
            minimal = timed(lambda: minimal_loop(trainer, data, batches, optimizer))
            full = timed(lambda: trainer_epoch(trainer, data, round_))
        else:
            full = timed(lambda: trainer_epoch(trainer, data, round_))
            minimal = timed(lambda: minimal_loop(trainer, data, batches, optimizer))
        if round_:
            results["minimal"].append(minimal)
            results["trainer"].append(full)
    return summarise(results, baseline="minimal", args=args)


def padding(args: argparse.Namespace) -> dict:
    """Length-grouped dynamic padding vs random batches padded to --max-length."""
    trainer, data, cfg = prepare(args)
    optimizer = trainer.optimizer()
    results: dict[str, list[float]] = {"grouped_dynamic": [], "random_dynamic": [], "random_pad_to_max": []}
    for round_ in range(args.rounds + 1):
        rng = np.random.default_rng([1, round_])
        grouped = length_grouped_batches(data.lengths, cfg.batch_size, rng)
        plain = random_batches(len(data), cfg.batch_size, rng)
        speeds = {
            "grouped_dynamic": timed(lambda: minimal_loop(trainer, data, grouped, optimizer)),
            "random_dynamic": timed(lambda: minimal_loop(trainer, data, plain, optimizer)),
            "random_pad_to_max": timed(lambda: minimal_loop(trainer, data, plain, optimizer, pad_to=cfg.max_length)),
        }
        if round_:
            for name, value in speeds.items():
                results[name].append(value)
    report = summarise(results, baseline="random_pad_to_max", args=args)
    report["mean_tokens"] = float(data.lengths.mean())
    return report


def methods_step(args: argparse.Namespace) -> dict:
    """Median optimiser-step time of every method on one identical batch, as a ratio to ce's."""
    import tempfile
    from pathlib import Path

    from bench.settings import method_config
    from methods.base import PrepareContext

    cfg = TrainConfig(batch_size=args.batch_size, max_length=args.max_length, precision=args.precision)
    data = load_dataset(args.dataset, args.data_dir)
    names = args.methods.split(",")
    knobs = {"clld-static": {"pairs": ((data.label_names[0], data.label_names[1]),)}}
    index = np.arange(args.batch_size)
    cache = Path(tempfile.mkdtemp(prefix="bench-perf-"))
    trainers, batches = {}, {}
    for name in names:
        seed_everything(0)
        bundle = build_encoder(args.encoder, data.train.texts, cfg)
        cls = METHODS.get(name)
        method = cls(bundle.model, data.num_labels, cls.Config(**dict(method_config(name, knobs.get(name, {})))))
        method.prepare(PrepareContext(data.train.texts, data.label_names, bundle, 0, cache, cache))
        trainer = Trainer(method, cfg, torch.device(args.device), bundle.pad_id, 0, bundle.min_length,
                          progress=False)
        train = Encoded(bundle.tokenize(data.train.texts), data.train.labels)
        batches[name] = trainer.batch(train, index)
        trainers[name] = (trainer, trainer.optimizer())
        trainer.method.train()
    work = {name: encoder_work(trainers[name][0], batches[name]) for name in names}
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(args.rounds + 1):  # interleaved: every round times each method once
        for name in names:
            trainer, optimizer = trainers[name]
            start = time.perf_counter()
            for _ in range(args.steps):
                trainer.step(batches[name], optimizer)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            if round_:
                times[name].append((time.perf_counter() - start) / args.steps)
    step = {name: statistics.median(v) for name, v in times.items()}
    base_name = "ce" if "ce" in step else names[0]
    base, base_work = step[base_name], work[base_name]
    return {"benchmark": "methods", "encoder": args.encoder, "dataset": args.dataset, "batch_size": args.batch_size,
            "padded_width": int(batches[names[0]]["input_ids"].shape[1]),
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
    from bench.encoders import TextEncoder

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


# ----------------------------------------------------------------------------------------------- vs HF Trainer

def hf_trainer_epoch(trainer: Trainer, data: Encoded, args: argparse.Namespace, folder: str) -> float:
    """Samples/s of one epoch of a plain Hugging Face `Trainer` fine-tune of the same encoder weights
    (AutoModelForSequenceClassification, default arguments, its own dynamic padding); needs `accelerate`."""
    from transformers import AutoModelForSequenceClassification, Trainer as HFTrainer, TrainingArguments

    import copy

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


def hf_trainer(args: argparse.Namespace) -> dict:
    """Our Trainer's training throughput / a plain Hugging Face Trainer's on the same model, data and device."""
    import tempfile

    trainer, data, cfg = prepare(args)
    results: dict[str, list[float]] = {"ours": [], "hf_trainer": []}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds + 1):
            order = ["ours", "hf_trainer"] if round_ % 2 == 0 else ["hf_trainer", "ours"]
            speeds = {}
            for name in order:
                speeds[name] = (timed(lambda: trainer_epoch(trainer, data, round_)) if name == "ours"
                                else hf_trainer_epoch(trainer, data, args, folder))
            if round_:
                for name, value in speeds.items():
                    results[name].append(value)
    return summarise(results, baseline="hf_trainer", args=args, name="hf-trainer")


# ----------------------------------------------------------------------------------------------- MFU

PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}  # dense


def peak_tflops(device: torch.device, override: float | None) -> float | None:
    """The device's dense bf16 peak (TFLOP/s) from a small table, `--peak-tflops`, or None (CPU / unknown)."""
    if override:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_BF16_TFLOPS.items() if key in name), None)


def throughput(args: argparse.Namespace) -> dict:
    """Training sequences/s, achieved TFLOP/s, MFU and GPU utilisation of `ce` and `clld` (two dropout views
    per example, so twice the model FLOPs) with the Trainer's real epoch loop."""
    report: dict = {"benchmark": "throughput", "encoder": args.encoder, "dataset": args.dataset,
                    "batch_size": args.batch_size, "max_length": args.max_length, "device": args.device,
                    "precision": args.precision, "torch_threads": torch.get_num_threads(), "methods": {}}
    rates: dict[str, float] = {}
    for name, views in (("ce", 1), ("clld-adaptive", 2)):
        trainer, data, cfg = prepare(args, method=name)
        flops = views * training_flops(trainer.method.encoder, data.lengths)
        speeds, utilisation = [], []
        for round_ in range(args.rounds + 1):
            start = time.perf_counter()
            trainer_epoch(trainer, data, round_)
            if trainer.device.type == "cuda":
                torch.cuda.synchronize()
                utilisation.append(gpu_utilisation(trainer.device))
            if round_:
                speeds.append(time.perf_counter() - start)
        seconds = statistics.median(speeds)
        achieved = flops / seconds / 1e12
        peak = peak_tflops(trainer.device, args.peak_tflops)
        report["methods"][name] = {
            "seq_per_s": round(len(data) / seconds, 2), "tokens_per_s": round(float(data.lengths.sum()) / seconds),
            "tflops": significant(achieved), "mfu": round(achieved / peak, 4) if peak else None,
            "peak_tflops": peak, "gpu_utilisation_pct": statistics.median(utilisation) if utilisation else None}
        rates[name] = achieved
    gemm = gemm_tflops(trainer.device, trainer.amp_dtype or torch.float32)
    report["gemm_tflops"] = significant(gemm)
    for name, entry in report["methods"].items():
        entry["fraction_of_gemm"] = round(rates[name] / gemm, 3)
    report["params"] = sum(p.numel() for p in trainer.method.encoder.parameters())
    report["mean_tokens"] = float(data.lengths.mean())
    return report


def significant(value: float, digits: int = 4) -> float:
    """`value` rounded to `digits` significant digits (TFLOP/s of tiny and of large models alike)."""
    return float(f"{value:.{digits}g}")


def gemm_tflops(device: torch.device, dtype: torch.dtype, size: int | None = None, repeats: int = 5) -> float:
    """The TFLOP/s of a large square matrix product in `dtype` on `device`: the practical peak that a
    training step's FLOP rate can be compared with where no vendor peak applies (a CPU)."""
    size = size or (8192 if device.type == "cuda" else 1536)
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    times = []
    for _ in range(repeats + 1):  # the first product warms up and is discarded
        start = time.perf_counter()
        torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return 2 * size ** 3 / min(times[1:]) / 1e12


def report(args: argparse.Namespace) -> dict:
    """One run of everything the throughput targets are about: ce / clld sequences/s, TFLOP/s, MFU and GPU
    utilisation, then our Trainer vs a plain Hugging Face Trainer, with each target and whether it is met."""
    speed = throughput(args)
    versus = hf_trainer(args)
    gpu = args.device.startswith("cuda")
    mfu = speed["methods"]["ce"]["mfu"]
    ratio = versus["ratio_vs_hf_trainer"]["ours"]
    return {"benchmark": "report", "device_name": device_name(torch.device(args.device)),
            "throughput": speed, "hf_trainer": versus,
            "targets": {
                "mfu_ce >= 0.40 (bf16, H100/H200, length 128)": (mfu >= 0.40) if gpu and mfu is not None
                else "not applicable: needs a GPU with a known peak (or --peak-tflops)",
                "ours / hf_trainer >= 1.5 (GPU)": (ratio >= 1.5) if gpu else f"CPU: {ratio:.2f} (GPU target)"}}


def device_name(device: torch.device) -> str:
    """A readable name of the device the benchmark ran on."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform
    from pathlib import Path

    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), None)
    return f"CPU {model or platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


def gpu_utilisation(device: torch.device) -> float | None:
    """GPU utilisation in % as NVML reports it (None without pynvml)."""
    try:
        return float(torch.cuda.utilization(device))
    except Exception:  # pynvml missing or NVML unavailable
        return None


def summarise(results: dict[str, list[float]], baseline: str, args: argparse.Namespace,
              name: str | None = None) -> dict:
    """Median sequences/s per variant and each variant's ratio to the baseline."""
    medians = {k: statistics.median(v) for k, v in results.items()}
    return {"benchmark": name or args.command, "encoder": args.encoder, "dataset": args.dataset,
            "batch_size": args.batch_size, "max_length": args.max_length, "steps": args.steps,
            "rounds": args.rounds, "device": args.device, "precision": args.precision,
            "torch_threads": torch.get_num_threads(),
            "seq_per_s": {k: round(v, 2) for k, v in medians.items()},
            "all_rounds": {k: [round(x, 2) for x in v] for k, v in results.items()},
            "ratio_vs_" + baseline: {k: round(v / medians[baseline], 3) for k, v in medians.items()}}


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


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark and print its JSON report."""
    parser = argparse.ArgumentParser(prog="python -m bench.perf", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["overhead", "padding", "methods", "hf-trainer", "throughput", "report",
                                            "estimate"])
    parser.add_argument("--methods", default=",".join(INHERENT_PASSES), help="for `methods`: which to time")
    parser.add_argument("--dataset", default="demo")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--encoder", default="minilm")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20, help="batches per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per variant (after one warm-up)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="the device's dense peak TFLOP/s (throughput/report: for MFU; estimate: with --mfu)")
    estimating = parser.add_argument_group("estimate (expected wall time of `bench run --config CONFIG`)")
    estimating.add_argument("--config", default=None, help="the sweep's YAML config")
    estimating.add_argument("--tflops", type=float, default=None,
                            help="achieved training TFLOP/s (from `throughput`); or give --peak-tflops and --mfu")
    estimating.add_argument("--gpu", default=None, help=f"take --peak-tflops from the bf16 table: "
                                                        f"{', '.join(PEAK_BF16_TFLOPS)}")
    estimating.add_argument("--mfu", type=float, default=0.4, help="assumed MFU with --peak-tflops / --gpu")
    estimating.add_argument("--devices", default="1,4,8", help="device counts to report the wall time for")
    estimating.add_argument("--shape-encoder", default=None,
                            help="count tokens and FLOPs with this encoder (same shape and tokenizer), "
                                 "e.g. bert-base-random for bert-base-uncased offline")
    estimating.add_argument("--expected-epochs", type=int, default=None,
                            help="epochs each shard is expected to run (default: the configured maximum)")
    estimating.add_argument("--shard-overhead-s", type=float, default=0.0,
                            help="seconds added per shard for loading and evaluation (default 0: FLOPs only)")
    estimating.add_argument("--results-dir", default=None, help="set measured epoch times of finished runs beside")
    args = parser.parse_args(argv)
    try:
        if args.command == "estimate":
            result = run_estimate(args)
        else:
            result = {"overhead": overhead, "padding": padding, "methods": methods_step, "hf-trainer": hf_trainer,
                      "throughput": throughput, "report": report}[args.command](args)
    except BenchError as exc:
        print(f"python -m bench.perf: error: {exc}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
