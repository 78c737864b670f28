"""Where a result came from: package, code and library versions, device and host, and the machine's load."""

from __future__ import annotations

import functools
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import torch

import bench
from bench.running.machine_load import load_average

SOURCE_DIR = Path(bench.__file__).resolve().parent.parent
_started: dict[str, Any] = {"load": load_average(), "adapted": False}  # on import: before this process trains anything (a sweep marks its own)


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """The project's git commit (with `+dirty` when tracked files changed), or `unknown` outside a checkout."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(SOURCE_DIR), *args], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def device_name(device: torch.device) -> str:
    """A readable device description, e.g. `cuda:0 NVIDIA H100` or `cpu (2 threads)`."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} {torch.cuda.get_device_name(index)}"
    return f"cpu ({torch.get_num_threads()} threads)"


def provenance(device: torch.device) -> dict[str, Any]:
    """Provenance fields stored in every result row."""
    import transformers

    return {
        "clbench_version": bench.__version__,
        "git_commit": git_commit(),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "python_version": platform.python_version(),
        "device": device_name(device),
        "cpu_threads": torch.get_num_threads(),  # CPU threads of this process (--jobs K shares the cores)
        "load_avg_1m": _started["load"],  # the machine's load before the sweep trained: other work only
        "load_avg_end": load_average(),  # as the rows are written: this shard's own threads included
        "threads_adapted": _started["adapted"],  # threads lowered for the load (--adapt-threads), else torch's own
        "host": socket.gethostname(),
        "slurm_job": slurm_job(),
    }


def mark_start(load: float | None, threads_adapted: bool = False) -> None:
    """Record the load a sweep measured before it trained anything (rows carry it as `load_avg_1m`) and whether
    it lowered the torch threads for that load (`threads_adapted`)."""
    _started["load"] = load
    _started["adapted"] = bool(threads_adapted)


def threads_adapted() -> bool:
    """Whether this process (or its sweep) trains with torch threads lowered for the machine's load."""
    return bool(_started["adapted"])


def start_load() -> float | None:
    """The load recorded before this process (or its sweep) trained anything."""
    return _started["load"]


def slurm_job() -> str:
    """The SLURM job this process runs in (`123_4` for task 4 of array 123), "" outside SLURM."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID", "")
