"""`throughput` and `report`: absolute training speed. `throughput` measures the sequences/s, achieved TFLOP/s
(the model FLOPs of `benchmarks.costs.training_flops`) and MFU of ce and clld-adaptive with the Trainer's real epoch
loop, against the device's vendor bf16 peak (a GPU of the table, or --peak-tflops) and against the rate of a large
matrix product on the same device (`gemm_tflops`, the reference where no vendor peak applies, a CPU); for ce also
the host synchronisations per step. `report` runs `throughput` and `hf-trainer` at each of --batch-sizes and says
whether each GPU target (MFU thresholds, ours / HF Trainer) is met."""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time
from typing import Any

import torch

from bench.data.batching import Encoded
from benchmarks.common import (constant_schedule, device_name, one_line, peak_tflops, prepare, round_line, say,
                               sync, trainer_epoch)
from benchmarks.hf_baseline import hf_trainer
from bench.training.trainer import Trainer
from bench.training.setup import autocast_dtype
from benchmarks.costs import training_flops


def throughput(args: argparse.Namespace) -> dict:
    """Training sequences/s, achieved TFLOP/s, MFU and GPU utilisation of `ce` and `clld` (two dropout views
    per example, so twice the model FLOPs) with the Trainer's real epoch loop; for ce also the host
    synchronisations per step."""
    report: dict = {"benchmark": "throughput", "encoder": args.encoder, "dataset": args.dataset,
                    "batch_size": args.batch_size, "max_length": args.max_length, "device": args.device,
                    "precision": args.precision, "torch_threads": torch.get_num_threads(), "methods": {}}
    rates: dict[str, float] = {}
    for name, views in (("ce", 1), ("clld-adaptive", 2)):
        trainer, data, cfg, compiled = prepare(args, method=name)
        flops = views * training_flops(trainer.method.encoder, data.lengths)
        optimizer = trainer.optimizer()
        scheduler = constant_schedule(optimizer)
        speeds, utilisation = [], []
        for round_ in range(args.rounds + 1):
            start = time.perf_counter()
            trainer_epoch(trainer, data, round_, optimizer, scheduler)
            sync(trainer.device)
            seconds = time.perf_counter() - start
            if trainer.device.type == "cuda":
                utilisation.append(gpu_utilisation(trainer.device))
            say(args, f"batch {args.batch_size} " + round_line(round_, args.rounds, {name: len(data) / seconds}))
            if round_:
                speeds.append(seconds)
        seconds = statistics.median(speeds)
        achieved = flops / seconds / 1e12
        peak = peak_tflops(trainer.device, getattr(args, "peak_tflops", None))
        utilisation = [u for u in utilisation if u is not None]
        report["methods"][name] = {
            "seq_per_s": round(len(data) / seconds, 2), "tokens_per_s": round(float(data.lengths.sum()) / seconds),
            "tflops": significant(achieved), "mfu": round(achieved / peak, 4) if peak else None,
            "peak_tflops": peak, "gpu_utilisation_pct": statistics.median(utilisation) if utilisation else None}
        if name == "ce":
            report["methods"][name].update(host_syncs(trainer, data, args.rounds + 1))
        rates[name] = achieved
        report["length_bucket"], report["compiled"] = trainer.bucket, compiled
    gemm = gemm_tflops(trainer.device, trainer.amp_dtype or torch.float32)
    report["gemm_tflops"] = significant(gemm)
    for name, entry in report["methods"].items():
        entry["fraction_of_gemm"] = round(rates[name] / gemm, 3)
    report["params"] = sum(p.numel() for p in trainer.method.encoder.parameters())
    report["mean_tokens"] = float(data.lengths.mean())
    return report


def host_syncs(trainer: Trainer, data: Encoded, epoch: int) -> dict:
    """Host synchronisations per step of one more (untimed) epoch of the real Trainer, counted by
    benchmarks.syncs.HostSyncCounter, with the fused AdamW a GPU uses (the CPU's default AdamW reads its step
    counts on the host). Short epochs count the end-of-epoch loss reads over few steps."""
    from benchmarks.syncs import HostSyncCounter

    steps = math.ceil(len(data) / trainer.cfg.batch_size)
    try:
        with HostSyncCounter() as counter:
            trainer_epoch(trainer, data, epoch, trainer.optimizer(fused=True))
    except Exception as exc:  # e.g. a compiled graph that does not run under the counting mode
        return {"host_syncs_per_step": None, "host_syncs_error": one_line(exc)}
    return {"host_syncs_per_step": round(counter.total / steps, 3), "host_syncs_steps": steps,
            "host_syncs_by_kind": dict(counter.counts)}


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


def gpu_utilisation(device: torch.device) -> float | None:
    """GPU utilisation in % as NVML reports it (None without pynvml)."""
    try:
        return float(torch.cuda.utilization(device))
    except Exception:  # pynvml missing or NVML unavailable
        return None


MFU_TARGETS = {32: 0.15, 128: 0.30}  # batch size -> MFU that ce and clld should reach (GPU, bf16, length 128)
HF_RATIO_TARGET = 1.5                # our Trainer / HF Trainer at both batch sizes (GPU, bf16)


def report(args: argparse.Namespace) -> dict:
    """One run of everything the GPU throughput targets are about, at each of --batch-sizes: ce / clld
    sequences/s, TFLOP/s, MFU, GPU utilisation and ce's host synchronisations per step, then our Trainer vs a
    plain Hugging Face Trainer; each target with whether it is met (or why it does not apply here)."""
    per_size: dict[str, dict] = {}
    for size in args.batch_size_list:
        sized = copy.copy(args)
        sized.batch_size = size
        say(args, f"batch size {size}: ce and clld throughput")
        entry: dict[str, Any] = {"throughput": throughput(sized)}
        say(args, f"batch size {size}: ours vs the Hugging Face Trainer")
        try:
            entry["hf_trainer"] = hf_trainer(sized)
        except Exception as exc:  # `accelerate` missing, or a transformers version that differs
            entry["hf_trainer"] = {"error": one_line(exc)}
            say(args, f"batch size {size}: the Hugging Face Trainer did not run: {one_line(exc)}")
        per_size[str(size)] = entry
    device = torch.device(args.device)
    return {"benchmark": "report", "device": args.device, "device_name": device_name(device),
            "encoder": args.encoder, "dataset": args.dataset, "max_length": args.max_length,
            "precision": args.precision, "batch_sizes": args.batch_size_list, "compiled": bool(args.compile),
            "per_batch_size": per_size, "targets": targets(per_size, args)}


def targets(per_size: dict[str, dict], args: argparse.Namespace) -> dict[str, dict]:
    """Each target (at batch 32 and 128): the measured value and `met` (true / false), or a string saying why the
    run cannot tell ("not applicable: ..." without a GPU, with an unknown peak, in fp32, at another length;
    "not measured: ..." for a batch size not in --batch-sizes)."""
    device = torch.device(args.device)
    reason = None
    if device.type != "cuda":
        reason = "not applicable: a GPU target (this ran on a CPU)"
    elif autocast_dtype(args.precision, device) != torch.bfloat16:
        reason = "not applicable: the target is for bf16 (this ran in fp32)"
    elif args.max_length != 128:
        reason = f"not applicable: the target is at --max-length 128 (this ran at {args.max_length})"
    result = {}
    for size, threshold in MFU_TARGETS.items():
        entry = per_size.get(str(size))
        absent = None if entry else f"not measured: batch {size} is not in --batch-sizes"
        for name, label in (("ce", "ce"), ("clld-adaptive", "clld")):
            mfu = entry["throughput"]["methods"][name]["mfu"] if entry else None
            unknown = "not applicable: unknown peak of this GPU (give --peak-tflops)"
            met: bool | str = absent or reason or (unknown if mfu is None else bool(mfu >= threshold))
            result[f"{label} MFU >= {threshold:.2f} at batch {size}"] = {"measured": mfu, "met": met}
        versus = entry["hf_trainer"] if entry else {}
        ratio = versus.get("ratio_vs_hf_trainer", {}).get("ours")
        met = absent or reason or (f"not applicable: the HF Trainer did not run ({versus['error']})" if ratio is None
                                   else bool(ratio >= HF_RATIO_TARGET))
        result[f"ours / HF Trainer >= {HF_RATIO_TARGET} at batch {size}"] = {"measured": ratio, "met": met}
    return result
