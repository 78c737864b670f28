"""`profile`: where the time of one method's training step goes, from the PyTorch profiler (torch.profiler). After a
warm-up epoch of the real Trainer it profiles one more epoch over the same --steps batches and reports the wall time
per optimiser step, the operators with the most self time (self device time on a GPU, self CPU time on a CPU), the
host-side operator calls per step and, on a GPU, the kernel launches per step and the share of the wall time in which
at least one kernel ran (`gpu_busy_share`). The profiler slows the host: the step time here is an upper bound of
the unprofiled one (`throughput` and `methods` time it without the profiler)."""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import torch
import torch.profiler
from torch.autograd import DeviceType

from benchmarks.common import constant_schedule, prepare, say, sync, trainer_epoch

TOP_OPS = 10


def profile(args: argparse.Namespace) -> dict:
    """The profiler summary of one epoch (--steps batches of --batch-size) of the first method of --methods (default
    ce) on --device, after one warm-up epoch: wall time per step, the top operators by self time, host operator
    calls per step and, on a GPU, kernel launches per step and the GPU busy share of the wall time."""
    name = args.method_list[0]
    trainer, data, cfg, compiled = prepare(args, method=name)
    device = trainer.device
    optimizer = trainer.optimizer()
    scheduler = constant_schedule(optimizer)
    trainer_epoch(trainer, data, 0, optimizer, scheduler)
    sync(device)
    say(args, f"{name}: warmed up; profiling one epoch of {len(data)} sequences")
    on_gpu = device.type == "cuda"
    activities = [torch.profiler.ProfilerActivity.CPU]
    if on_gpu:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        start = time.perf_counter()
        trainer_epoch(trainer, data, 1, optimizer, scheduler)
        sync(device)
        wall = time.perf_counter() - start
    steps = math.ceil(len(data) / cfg.batch_size)
    events = prof.events()
    kernels = device_kernels(events)
    report: dict[str, Any] = {
        "benchmark": "profile", "method": name, "encoder": args.encoder, "dataset": args.dataset,
        "batch_size": args.batch_size, "max_length": args.max_length, "steps": steps, "device": args.device,
        "precision": args.precision, "torch_threads": torch.get_num_threads(), "length_bucket": trainer.bucket,
        "compiled": compiled, "wall_seconds": round(wall, 4), "step_ms": round(1000 * wall / steps, 3)}
    if on_gpu:
        report["gpu_busy_share"] = round(min(1.0, busy_seconds(kernels) / wall), 4)
        report["gpu_busy_share_note"] = ("union of the kernels' intervals / wall time of the profiled epoch "
                                          "(copies and memsets not counted; the profiler slows the host)")
        report["kernel_launches_per_step"] = round(len(kernels) / steps, 2)
    else:
        report["gpu_busy_share"] = None
        report["gpu_busy_share_note"] = f"no GPU: this ran on {args.device}, which runs no kernels to measure"
        report["kernel_launches_per_step"] = None
    report["top_ops"] = top_ops(prof.key_averages(), steps, on_gpu)
    report["host_ops_per_step"] = round(host_ops(events) / steps, 2)
    say(args, f"{name}: {report['step_ms']} ms per step under the profiler")
    return report


def device_kernels(events: Any) -> list:
    """The GPU kernels among the profiler's events (DeviceType.CUDA events, copies and memsets left out)."""
    return [evt for evt in events if getattr(evt, "device_type", DeviceType.CPU) == DeviceType.CUDA
            and not evt.name.startswith(("Memcpy", "Memset"))]


def busy_seconds(kernels: list) -> float:
    """Seconds in which at least one of `kernels` ran: the union of their time intervals (overlaps counted once)."""
    busy_us, end = 0.0, -math.inf
    for start, stop in sorted((k.time_range.start, k.time_range.end) for k in kernels):
        if stop > end:
            busy_us += stop - max(start, end)
            end = stop
    return busy_us / 1e6


def self_time_us(entry: Any, on_gpu: bool) -> float:
    """An operator's self time in microseconds: on the GPU (kernels it launched itself) or on the CPU."""
    if not on_gpu:
        return float(entry.self_cpu_time_total)
    value = getattr(entry, "self_device_time_total", None)  # older torch: self_cuda_time_total only
    return float(value if value is not None else getattr(entry, "self_cuda_time_total", 0.0))


def top_ops(averages: Any, steps: int, on_gpu: bool, count: int = TOP_OPS) -> list[dict]:
    """The `count` host-side operators with the most self time (GPU or CPU), each with its calls over the profiled
    epoch, its self milliseconds per step and its share of the self time of all host-side operators."""
    ops = [(entry, self_time_us(entry, on_gpu)) for entry in averages
           if getattr(entry, "device_type", DeviceType.CPU) == DeviceType.CPU]
    total = sum(us for _, us in ops)
    ranked = sorted((item for item in ops if item[1] > 0), key=lambda item: item[1], reverse=True)[:count]
    return [{"name": entry.key, "calls": int(entry.count), "self_ms_per_step": float(f"{us / 1000 / steps:.4g}"),
             "share": float(f"{us / total:.4g}")} for entry, us in ranked]


def host_ops(events: Any) -> int:
    """The number of ATen operator calls on the host (CPU-side `aten::` events) among the profiler's events."""
    return sum(1 for evt in events if getattr(evt, "device_type", DeviceType.CPU) == DeviceType.CPU
               and evt.name.startswith("aten::"))
