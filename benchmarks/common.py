"""Shared helpers of the benchmarks; they measure nothing themselves. A model set up as a real shard sets it up
(`prepare` -> `Prepared`: the method prepared as a shard prepares it, deterministic kernels on a CPU only, the
device's length bucket, the encoder compiled with --compile), one epoch of the real Trainer at a constant
learning rate (`trainer_epoch`), timing (`timed`, `sync`, `unique_graphs`), variants interleaved over rounds
(`rotated`) and their medians and ratios to the baseline (`summarise`), progress lines on stderr (`say`,
`round_line`), stdout sent to stderr while a benchmark runs (`stdout_to_stderr`), the device's readable name
(`device_name`) and the vendor bf16 peaks (`PEAK_BF16_TFLOPS`, `peak_tflops`)."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import torch

import bench.methods  # noqa: F401  (registers the methods in bench.registry.METHODS)
from bench.data.batching import Encoded, auto_bucket
from bench.training.compile import compile_encoder
from bench.data.loading import TextData, load_dataset
from bench.encoders.models import EncoderBundle, build_encoder
from bench.registry import METHODS
from bench.spec import TrainConfig
from bench.training.trainer import Trainer
from bench.training.setup import deterministic_kernels, seed_everything
from bench.methods.base import Method, PrepareContext


def say(args: argparse.Namespace, text: str) -> None:
    """One progress line on stderr (none with --quiet): stdout carries the JSON report only."""
    if not getattr(args, "quiet", False):
        print(f"[perf {getattr(args, 'command', '')}] {text}", file=sys.stderr, flush=True)


def one_line(exc: BaseException) -> str:
    """An exception as one short line: its class and the first line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {lines[0][:300] if lines else ''}"


_CACHE: list[Path] = []


def cache_folder() -> Path:
    """A scratch folder for method caches (augmented views), removed when the process ends."""
    if not _CACHE:
        _CACHE.append(Path(tempfile.mkdtemp(prefix="bench-perf-")))
        atexit.register(remove_cache_folder)
    return _CACHE[0]


def remove_cache_folder() -> None:
    """Remove the scratch folder (at exit; a worker process, which ends without exit handlers, calls it)."""
    while _CACHE:
        shutil.rmtree(_CACHE.pop(), ignore_errors=True)


def build_method(name: str, bundle: EncoderBundle, data: TextData, texts: list[str], bucket: int,
                 max_width: int) -> Method:
    """Method `name` with its default knobs (clld-static: the first two labels as its confusable pair) on the
    encoder, prepared as a shard prepares it (augmented views padded like the Trainer's batches) and at the start
    of its first epoch."""
    from bench.spec import method_config

    knobs = {"clld-static": {"pairs": ((data.label_names[0], data.label_names[1]),)}}
    cls = METHODS.get(name)
    method = cls(bundle.model, data.num_labels, cls.Config(**dict(method_config(name, knobs.get(name, {})))))
    folder = cache_folder()
    method.prepare(PrepareContext(texts, data.label_names, bundle, 0, folder, folder, bucket=bucket,
                                  max_width=max_width))
    method.on_epoch_start(0)  # as the Trainer does before an epoch's batches (mirror-bert draws its views here)
    return method


class Prepared(NamedTuple):
    """A model in a Trainer and the training examples a benchmark feeds it."""

    trainer: Trainer
    data: Encoded        # the first --steps x --batch-size training examples, tokenised
    cfg: TrainConfig
    compiled: str        # how the encoder was compiled ("" when it was not)


def prepare(args: argparse.Namespace, method: str = "ce", bucket: int | None = None, compile: bool | None = None,
            seed: int = 0, graph_step: bool = False) -> Prepared:
    """A `method` model (default CE) on the encoder and a training subset of the dataset (--steps batches),
    in a Trainer set up as a real shard's: deterministic kernels on a CPU only (slow kernels on a GPU are not
    what shards run), length bucket `bucket` (default: --length-bucket, else `auto_bucket` for the device),
    the encoder compiled when `compile` (default: --compile; backend --compile-backend). `seed` orders batches;
    `graph_step`: the Trainer's graph-ready step (CUDA graphs on a GPU)."""
    device = torch.device(args.device)
    compile = bool(getattr(args, "compile", False)) if compile is None else compile
    if bucket is None:
        bucket = getattr(args, "length_bucket", None)
    if bucket is None:
        bucket = auto_bucket(device.type, compile)
    cfg = TrainConfig(batch_size=args.batch_size, max_length=args.max_length, lr=5e-5, precision=args.precision)
    data = load_dataset(args.dataset, args.data_dir)
    seed_everything(0)
    deterministic_kernels(device)
    bundle = build_encoder(args.encoder, data.train.texts, cfg)
    n = min(len(data.train), args.steps * args.batch_size)
    encoded = Encoded(bundle.tokenize(data.train.texts[:n]), data.train.labels[:n])
    model = build_method(method, bundle, data, data.train.texts[:n], bucket, cfg.max_length)
    compiled = compile_encoder(model.encoder, getattr(args, "compile_backend", "inductor")) if compile else ""
    trainer = Trainer(model, cfg, device, bundle.pad_id, seed, bundle.min_length, progress=False, bucket=bucket,
                      graph_step=graph_step)
    return Prepared(trainer, encoded, cfg, compiled)


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (a GPU's; a CPU has none)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], int]) -> float:
    """Sequences per second of one call of `fn` (which returns the number of sequences it processed)."""
    start = time.perf_counter()
    seen = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return seen / (time.perf_counter() - start)


def constant_schedule(optimizer: torch.optim.Optimizer) -> Any:
    """A learning-rate schedule that keeps the rate (benchmarks time steps, not convergence)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)


def trainer_epoch(trainer: Trainer, data: Encoded, epoch: int, optimizer: torch.optim.Optimizer | None = None,
                  scheduler: Any = None) -> int:
    """One epoch of the real Trainer (schedule, clipping, hooks, logging included); returns the number of
    sequences it trained on. Pass the optimizer (and schedule) to keep their state across epochs."""
    optimizer = optimizer or trainer.optimizer()
    scheduler = scheduler or constant_schedule(optimizer)
    record = trainer.train_epoch(data, epoch, optimizer, scheduler, {"step": 0}, total_steps=10**9)
    return round(record["train_seq_per_s"] * record["seconds"])


def rotated(names: list, round_: int) -> list:
    """`names` starting at a different one each round (no variant always runs first)."""
    shift = round_ % len(names)
    return names[shift:] + names[:shift]


def round_line(round_: int, rounds: int, speeds: dict[str, float], unit: str = "seq/s") -> str:
    """A progress line for one round of interleaved variants."""
    label = "warm-up" if round_ == 0 else f"round {round_}/{rounds}"
    return f"{label}: " + ", ".join(f"{k} {v:.4g} {unit}" for k, v in speeds.items())


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


def device_name(device: torch.device | str) -> str:
    """A readable name of the device the benchmark ran on."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), None)
    return f"CPU {model or platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}  # dense


def peak_tflops(device: torch.device, override: float | None) -> float | None:
    """The device's dense bf16 peak (TFLOP/s) from a small table, `--peak-tflops`, or None (CPU / unknown)."""
    if override:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_BF16_TFLOPS.items() if key in name), None)


def unique_graphs() -> int:
    """Graphs torch.compile has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


@contextlib.contextmanager
def stdout_to_stderr():
    """Send everything written to stdout meanwhile to stderr: Python prints (sys.stdout), native libraries and
    child processes (file descriptor 1), so that stdout carries nothing but the JSON report."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no usable descriptors (an embedded interpreter): Python-level only
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            with contextlib.suppress(Exception):  # C stdio buffers written meanwhile belong to stderr too
                import ctypes

                ctypes.CDLL(None).fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
