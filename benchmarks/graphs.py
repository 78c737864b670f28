"""`graphs`: the training step eager against whole-step CUDA graphs (bench.training.graphs), per method of
--methods and batch size of --batch-sizes, on the same full batches, rounds interleaved after a warm-up round that
also captures: ms per step, sequences/s and the speed-up; the losses of both over the same steps with dropout off
(their largest difference); capture seconds per batch width; the GPU memory the graphs add; the GPU busy share of
each (the profiler's kernel intervals over one round); with --shards 1, one real shard (`clbench run`) end to end
with --cuda-graphs off and auto. On a CPU the "graphed" variant is the graph-ready step run eagerly (no capture):
the dry run of the same code path; its speed-up is no GPU figure."""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time
from typing import Any

import numpy as np
import torch

from bench.data.batching import length_grouped_batches, to_device
from benchmarks.common import device_name, prepare, rotated, round_line, say, sync
from bench.training.graphs import tensor_learning_rates

TARGETS = {"bert-base-random": {32: 3.5, 128: 1.0}, "minilm": {32: 5.0}}  # encoder -> batch -> speed-up (issue 43)
CAPTURE_TARGET_S = 5.0


def graphs_bench(args: argparse.Namespace) -> dict:
    """Eager vs graphed training steps for each method and batch size (see the module), then the shard."""
    device = torch.device(args.device)
    report: dict[str, Any] = {"benchmark": "graphs", "device": args.device, "device_name": device_name(device),
                              "encoder": args.encoder, "dataset": args.dataset, "max_length": args.max_length,
                              "steps": args.steps, "rounds": args.rounds, "precision": args.precision,
                              "captured": device.type == "cuda", "cases": []}
    if device.type != "cuda":
        report["note"] = "no GPU: the graph-ready step ran eagerly (no capture); speed-ups are not GPU figures"
    for size in args.batch_size_list:
        for name in args.method_list:
            sized = copy.copy(args)
            sized.batch_size = size
            case = graph_case(sized, name)
            target = TARGETS.get(args.encoder, {}).get(size)
            if target is not None and device.type == "cuda":
                case["target_speedup"] = target
                case["target_met"] = case["speedup"] >= target and case["max_capture_seconds"] < CAPTURE_TARGET_S
            report["cases"].append(case)
    if getattr(args, "shards", None):
        report["shard"] = shard_end_to_end(args)
    return report


def full_batches(trainer: Any, data: Any, size: int) -> list[dict[str, torch.Tensor]]:
    """The host batches of one length-grouped pass, partial ones left out (the graphed step runs those eagerly)."""
    trainer.method.train()
    order = length_grouped_batches(data.lengths, size, np.random.default_rng([0, 0]))
    return [trainer.host_batch(data, index, training=True) for index in order if len(index) == size]


def graph_case(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """One method at one batch size: timing, loss agreement, capture, memory and busy share."""
    eager, data, cfg, _ = prepare(args, name)
    graphed, _, _, _ = prepare(args, name, graph_step=True)
    batches = full_batches(eager, data, cfg.batch_size)
    if not batches:
        raise ValueError(f"graphs: no full batch of {cfg.batch_size} in {len(data)} examples; raise --steps")
    device = eager.device
    eager_opt, graphed_opt = eager.optimizer(), graphed.optimizer()
    tensor_learning_rates(graphed_opt, device)
    run_graphed = graphed.graphed_steps(graphed_opt)
    variants = {"eager": lambda b: eager.step(to_device(b, device), eager_opt), "graphed": run_graphed}
    entry: dict[str, Any] = {"method": name, "batch_size": cfg.batch_size, "steps_per_round": len(batches),
                             "batch_widths": sorted({int(b["input_ids"].shape[1]) for b in batches})}

    def one_round(variant: str) -> float:
        start = time.perf_counter()
        for batch in batches:
            variants[variant](batch)
        sync(device)
        return time.perf_counter() - start

    one_round("eager")  # warm-up
    reserved = memory(device)
    one_round("graphed")  # warm-up: every width's eager steps and its capture
    entry["capture_seconds"] = {str(k[0][1][1]) if k else "?": round(s, 3)
                                for k, s in run_graphed.capture_seconds.items()}
    entry["max_capture_seconds"] = max(run_graphed.capture_seconds.values(), default=0.0)
    entry["graphs_captured"] = run_graphed.captured
    state = sum(t.numel() * t.element_size() for t in state_tensors(graphed, graphed_opt))  # any step's, made now
    entry["extra_memory_mib"] = round((memory(device) - reserved - state) / 2**20, 1) if device.type == "cuda" else None
    times: dict[str, list[float]] = {"eager": [], "graphed": []}
    for round_ in range(1, args.rounds + 1):
        speeds = {}
        for variant in rotated(list(variants), round_):
            seconds = one_round(variant) / len(batches)
            times[variant].append(seconds)
            speeds[variant] = cfg.batch_size / seconds
        say(args, f"{name} b{cfg.batch_size} " + round_line(round_, args.rounds, speeds))
    for variant, values in times.items():
        entry[f"{variant}_ms_per_step"] = round(1000 * statistics.median(values), 3)
        entry[f"{variant}_seq_per_s"] = round(cfg.batch_size / statistics.median(values), 1)
    entry["speedup"] = round(entry["eager_ms_per_step"] / entry["graphed_ms_per_step"], 3)
    entry["all_rounds_ms"] = {k: [round(1000 * x, 3) for x in v] for k, v in times.items()}
    entry["gpu_busy_share"] = {v: busy_share(lambda v=v: one_round(v), device) for v in variants}
    entry["loss_agreement"] = loss_agreement(args, name, batches)
    return entry


def state_tensors(trainer: Any, optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The gradients and optimiser state a first training step allocates (eager or graphed alike)."""
    grads = [p.grad for p in trainer.method.parameters() if p.grad is not None]
    return grads + [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]


def loss_agreement(args: argparse.Namespace, name: str, batches: list[dict[str, torch.Tensor]],
                   steps: int = 6) -> dict[str, Any]:
    """The losses of fresh eager and graphed trainers over the same `steps` batches of one width with dropout off
    (eval mode: dropout's random streams differ between eager and a graph), and their largest absolute difference
    (the graphed one's last steps are replays)."""
    widths = [int(b["input_ids"].shape[1]) for b in batches]
    common = max(set(widths), key=widths.count)  # one width: its graph is captured after the warm-up steps
    same = [b for b, w in zip(batches, widths) if w == common]
    losses = {}
    for variant in ("eager", "graphed"):
        trainer, _, _, _ = prepare(args, name, graph_step=variant == "graphed")
        optimizer = trainer.optimizer()
        trainer.method.eval()
        if variant == "graphed":
            tensor_learning_rates(optimizer, trainer.device)
            run = trainer.graphed_steps(optimizer)
        else:
            def run(b, trainer=trainer, optimizer=optimizer):
                return trainer.step(to_device(b, trainer.device), optimizer)
        values = []
        for batch in (same * steps)[:steps]:
            _, total = run(batch)
            values.append(total.detach().float().clone())
        losses[variant] = torch.stack(values).cpu().tolist()
    diff = max(abs(a - b) for a, b in zip(losses["eager"], losses["graphed"]))
    return {"steps": steps, "eager": [round(x, 6) for x in losses["eager"]],
            "graphed": [round(x, 6) for x in losses["graphed"]], "max_abs_difference": diff,
            "within_bf16_tolerance": diff <= 2e-2 * max(1.0, max(abs(x) for x in losses["eager"]))}


def memory(device: torch.device) -> int:
    """Bytes the caching allocator holds on `device` (0 on a CPU)."""
    if device.type != "cuda":
        return 0
    sync(device)
    return torch.cuda.memory_reserved(device)


def busy_share(run_round: Any, device: torch.device) -> float | None:
    """The share of one round's wall time in which a GPU kernel ran (None on a CPU)."""
    if device.type != "cuda":
        return None
    from benchmarks.profile import busy_seconds, device_kernels

    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        wall = run_round()
    return round(min(1.0, busy_seconds(device_kernels(prof.events())) / wall), 4)


def shard_end_to_end(args: argparse.Namespace) -> dict[str, Any]:
    """One real shard of the first method, `clbench run` in a fresh process, with --cuda-graphs off and auto: wall
    and training seconds, test accuracy and what each row recorded."""
    from benchmarks.fixed_cost import launch

    shard_args = copy.copy(args)
    shard_args.batch_size = args.batch_size_list[0]
    out: dict[str, Any] = {"method": args.method_list[0]}
    for mode in ("off", "auto"):
        with tempfile.TemporaryDirectory(prefix="clbench-graphs-") as folder:
            runs, launched, finished, shown, startup = launch(
                shard_args, ["--methods", args.method_list[0], "--seeds", "1", "--cuda-graphs", mode], folder)
            rows = json.loads((runs[0] / "rows.json").read_text())
            clean = next(r for r in rows if r["metric"] == "accuracy" and r["split"] == "test")
            out[mode] = {"wall_seconds": round(finished - launched, 2), "startup_seconds": round(startup, 2),
                         "train_seconds": clean["train_seconds"], "test_accuracy": round(clean["value"], 4),
                         "cuda_graphs": clean.get("cuda_graphs"), "command": shown}
    out["train_speedup"] = round(out["off"]["train_seconds"] / max(1e-9, out["auto"]["train_seconds"]), 3)
    return out
