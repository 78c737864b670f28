"""Benchmarks of the harness itself: `python -m benchmarks COMMAND` (`--help` lists the commands) measures one
thing and reports it as JSON on stdout, as a ratio against a baseline measured in the same run where there is one.

One module per job:

    cli          the command line: the options, their checks and defaults, `main`
    common       what the benchmarks share: `prepare` (a model set up as a real shard's), timing, medians and
                 ratios, progress lines, stdout kept for the report, device name, the bf16 peak table
    loops        overhead, padding, methods: the Trainer vs a minimal loop, padding strategies, each method vs ce
    hf_baseline  hf-trainer: our Trainer vs a plain Hugging Face Trainer
    mfu          throughput, report: seq/s, TFLOP/s and MFU vs the vendor peak and a GEMM; the GPU targets
    fast_path    short-texts: the loop before the fast path vs Trainer.train_epoch (and a compiled encoder)
    concurrency  shards: K training processes sharing one device vs one
    fixed_cost   shard-cost, grid-cost: what shards in a worker and a few-shot knob grid cost besides training
    compile      compile: eager vs torch.compile step time per method
    profile      profile: one method's training step under the PyTorch profiler (top operators, GPU busy share)
    estimate     estimate: a sweep's expected wall time from a measured or assumed rate
    costs        the model FLOPs of a shard and the wall-time arithmetic `estimate` and `mfu` use
    slurm        slurm: submission time and requeue overhead on a real cluster (and the real-cluster tests' helpers)
    demo         demo: `clbench run` with no arguments (a new user's first command) against its 3-minute budget
    vectors      vectors: counter-fitting GloVe for TextFooler, timed, and SimLex-999 before and after

The names of those modules (and `INHERENT_PASSES` of bench.running.walltime) are importable from `benchmarks` itself; they
are imported on first use, so `import benchmarks` loads neither a benchmark nor torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, tuple[str, ...]] = {
    "benchmarks.cli": ("PROG", "COMMANDS", "UsageError", "Parser", "whole_numbers", "resolve", "build_parser",
                       "main"),
    "benchmarks.common": ("say", "one_line", "cache_folder", "remove_cache_folder", "build_method", "Prepared",
                          "prepare", "sync", "timed", "constant_schedule", "trainer_epoch", "rotated", "round_line",
                          "summarise", "device_name", "PEAK_BF16_TFLOPS", "peak_tflops", "unique_graphs",
                          "stdout_to_stderr"),
    "benchmarks.loops": ("minimal_loop", "overhead", "padding", "methods_step", "encoder_work"),
    "benchmarks.hf_baseline": ("hf_trainer_epoch", "hf_trainer"),
    "benchmarks.mfu": ("throughput", "host_syncs", "significant", "gemm_tflops", "gpu_utilisation", "MFU_TARGETS",
                       "HF_RATIO_TARGET", "report", "targets"),
    "benchmarks.fast_path": ("old_collate", "OLD_LOG_EVERY", "old_epoch", "short_texts", "short_texts_one"),
    "benchmarks.concurrency": ("shard_worker", "launch_shards", "shards"),
    "benchmarks.demo": ("demo_report", "BUDGET_SECONDS"),  # not `demo`: benchmarks.demo is its module
    "benchmarks.fixed_cost": ("shard_cost", "grid_cost", "run_parts", "all_parts"),
    "benchmarks.compile": ("compile_bench", "compile_one"),
    "benchmarks.profile": ("device_kernels", "busy_seconds", "self_time_us", "top_ops", "host_ops"),  # not `profile`:
    # benchmarks.profile is its module (as with demo)
    "benchmarks.estimate": ("run_estimate",),
    "benchmarks.slurm": ("slurm_bench", "slow_dataset", "cluster_problem", "hurry_requeued", "task_spans",
                         "restarts"),
    "benchmarks.vectors": ("vectors_bench",),
    "benchmarks.costs": ("training_flops",),
    "bench.running.walltime": ("INHERENT_PASSES",),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """`benchmarks.NAME`: NAME from the module that defines it, imported now (then kept here)."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's own names and the re-exported ones."""
    return sorted({*globals(), *_HOME})
