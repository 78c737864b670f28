"""What a training process sets up around the loop: the device, seeds and random-number states, the choice of
kernels and precision, the learning-rate schedule, and out-of-memory errors as one line."""

from __future__ import annotations

import contextlib
import copy
import os
import random
from typing import Any, Callable

import numpy as np
import torch

from bench.errors import BenchError


@contextlib.contextmanager
def out_of_memory_as_error(batch_size: int, max_length: int):
    """Turn a CUDA or CPU out-of-memory error into a one-line BenchError."""
    try:
        yield
    except (torch.OutOfMemoryError, RuntimeError) as exc:
        if isinstance(exc, torch.OutOfMemoryError) or "can't allocate memory" in str(exc):
            raise BenchError(f"out of memory at batch size {batch_size} (max length {max_length}); "
                             "lower --batch-size or --max-length") from exc
        raise


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def deterministic_kernels(device: torch.device, strict: bool = False) -> bool:
    """Choose this process's kernels for training on `device`; returns whether they are deterministic (recorded
    in every result row). `strict` (`clbench run --deterministic`): deterministic algorithms on any device (an op
    without a deterministic implementation raises instead of running), attention on the plain math kernel
    (flash, memory-efficient and cuDNN attention are not bit-reproducible on a GPU) and a fixed cuBLAS
    workspace; cuDNN's autotuner is off whenever the kernels are deterministic. Otherwise deterministic
    algorithms on a CPU (warnings only), and on a GPU the fastest kernels. Every call sets every switch, so
    shards run one after another in a process do not inherit each other's choice."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS starts; needed by strict mode
    on = strict or device.type == "cpu"
    torch.use_deterministic_algorithms(on, warn_only=not strict)
    if on:
        torch.backends.cudnn.benchmark = False  # the autotuner may pick a different algorithm each run
    for enable in (torch.backends.cuda.enable_flash_sdp, torch.backends.cuda.enable_mem_efficient_sdp,
                   torch.backends.cuda.enable_cudnn_sdp):
        enable(not strict)
    torch.backends.cuda.enable_math_sdp(True)
    return on


def resolve_device(requested: str = "auto") -> torch.device:
    """`auto` picks CUDA when available, else CPU; anything else is passed to torch.device."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BenchError(f"--device {requested}: CUDA is not available here; use --device cpu or auto")
    return device


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """bf16 under `bf16`, and under `auto` on CUDA; None means full fp32."""
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return None


def rng_state() -> dict[str, Any]:
    """Every random-number-generator state that training consumes."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what `rng_state` captured."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def cpu_copy(state: dict[str, Any]) -> dict[str, Any]:
    """A detached CPU copy of a state dict (non-tensor extra state deep-copied)."""
    return {k: v.detach().to("cpu", copy=True) if torch.is_tensor(v) else copy.deepcopy(v) for k, v in state.items()}


def linear_schedule(warmup: int, total: int) -> Callable[[int], float]:
    """Learning-rate factor: linear warm-up over `warmup` steps, then linear decay to 0 at `total`. During the
    warm-up it is one step ahead of transformers' get_linear_schedule_with_warmup (step s gets (s+1)/warmup, so
    the first step trains at lr/warmup instead of 0 and the peak is held for two steps); afterwards the two agree.
    Kept, not adopted, so that stored results keep one schedule under one run key (docs/RUNNING.md)."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor
