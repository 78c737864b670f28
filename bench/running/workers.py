"""The sweep's pool of worker processes: how each starts (a GPU and a share of the CPU threads, dying with the
sweep's process, stopping at a safe point on a signal), which GPU each gets, the stop signals passed on to them,
and the resource tracker kept quiet about a killed one (bench.running.runner runs the pool)."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from bench.errors import BenchError
from bench.results import stopping
from bench.running import provenance


def _die_with_parent(parent: int) -> None:
    """Have Linux kill this worker when the sweep's main process dies (no orphans holding a GPU or racing a
    re-run on the same shards); elsewhere a no-op."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)


def _init_worker(gpu_ids: Any, threads: int, parent: int | None = None, handle_signals: bool = False,
                 load: float | None = None, threads_adapted: bool = False) -> None:
    """Pin a pool worker to one GPU (via CUDA_VISIBLE_DEVICES) and a share of the CPU threads; it dies with
    the main process. `handle_signals`: a SIGTERM or SIGINT stops its shard at a safe point (bench.results.stopping;
    the main process passes its own on). `load`: the sweep's load before it trained (the rows' `load_avg_1m`);
    `threads_adapted`: `threads` were lowered for that load (--adapt-threads; the rows' `threads_adapted`)."""
    import torch

    provenance.mark_start(load, threads_adapted)

    if handle_signals:
        stopping.install()
    if parent is not None:
        _die_with_parent(parent)
    if gpu_ids is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu_ids.get())
    torch.set_num_threads(threads)


def worker_gpus(jobs: int, gpu_count: int, shards_per_gpu: int = 1) -> list[int | None]:
    """The GPU of each pool worker (None: CPU). `shards_per_gpu` K > 1 asks for K workers per GPU (K on the
    CPU when there is no GPU), or `jobs` workers if more; workers are dealt to GPUs round-robin."""
    if shards_per_gpu < 1:
        raise BenchError("--shards-per-gpu must be >= 1")
    workers = max(jobs, max(gpu_count, 1) * shards_per_gpu) if shards_per_gpu > 1 else jobs
    return [i % gpu_count if gpu_count else None for i in range(workers)]


TRACKER_QUIET = "ignore::UserWarning:multiprocessing.resource_tracker"


def quiet_resource_tracker() -> None:
    """Keep the resource tracker from warning at exit about semaphores of a killed worker ("leaked semaphore
    objects"; it cleans them up): the sweep has said that a worker died. The tracker process starts with this
    interpreter's -W options (multiprocessing.util._args_from_interpreter_flags), so the filter goes there."""
    if TRACKER_QUIET not in sys.warnoptions:
        sys.warnoptions.append(TRACKER_QUIET)


def pass_on(pool: ProcessPoolExecutor, signum: int) -> None:
    """Send a stop signal to the pool's worker processes (each stops its shard at a safe point)."""
    try:
        pids = list(getattr(pool, "_processes", None) or {})  # CPython's ProcessPoolExecutor: pid -> process
    except RuntimeError:  # changed size while read: a worker is being started or has ended
        pids = []
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
