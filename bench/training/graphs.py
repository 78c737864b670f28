"""Whole-step CUDA graphs: a training step (zeroing, forward and loss, backward, clipping, the optimiser step) or a
prediction forward is captured once per batch shape and replayed for every later batch of that shape, so the host
issues one graph launch instead of thousands of kernels (docs/RUNNING.md "CUDA graphs").

The graph-ready structure is the same on every device: each batch shape has static input buffers the next batch is
copied into, and the step reads only those, the parameters, their gradients (zeroed in place, never freed), the
optimiser's state and a learning rate held in a tensor. On a CPU (`capture=False`) the step runs eagerly on the
static buffers, which is what tests check against the plain step; on CUDA (`capture=True`) each shape is first run
`warmup` times eagerly on a side stream (real training steps: lazy initialisation happens there), then captured
into a graph whose memory comes from one pool shared by all shapes, then replayed. A capture (or its first
replay) that raises turns graphs off for the rest of the shard: that step and every later one run eagerly, and
the rows say `cuda_graphs = "off: capture failed: <reason>"` (`StepGraphs.failed`).

Rules the step must keep (`Method.capturable` says a method keeps them): no host synchronisation, no host work that
depends on the batch (word views are built in collation), no Python branch on a value that changes between steps
of one shape, and state that changes between steps updated in place. A graph's outputs are overwritten by the next
replay of any graph of the pool: read (or copy) them before running another batch."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from bench.spec import CUDA_GRAPH_MODES as MODES

log = logging.getLogger(__name__)
WARMUP_STEPS = 2  # eager steps of a shape before its capture (lazy initialisation of kernels, workspaces, state)
HOST_KEYS = ("index",)  # batch entries that stay on the host and are no input of a step

Signature = tuple[tuple[str, tuple[int, ...], torch.dtype], ...]


def signature(batch: dict[str, torch.Tensor]) -> Signature:
    """The shape of a batch as a graph sees it: every device entry's name, shape and dtype."""
    return tuple((k, tuple(v.shape), v.dtype) for k, v in sorted(batch.items()) if k not in HOST_KEYS)


def graphs_decision(mode: str, device: torch.device, method: Any, compiled: bool = False) -> tuple[bool, str]:
    """Whether a shard's steps run as CUDA graphs under `--cuda-graphs mode`, and what its rows record: "on", or
    "off" with the reason ("off: a CPU", "off: --cuda-graphs off", ...). `on` where graphs cannot run raises
    ValueError with the reason (the caller turns it into one line)."""
    if mode not in MODES:
        raise ValueError(f"--cuda-graphs is one of {', '.join(MODES)}, got {mode!r}")
    if mode == "off":
        return False, "off: --cuda-graphs off"
    reasons = []
    if device.type != "cuda":
        reasons.append(f"a {device.type.upper()} device" if device.type != "cpu" else "a CPU")
    if not getattr(method, "capturable", False):
        reasons.append(f"method {type(method).__name__} is not capturable")
    if compiled:
        reasons.append("--compile")
    if not reasons:
        return True, "on"
    if mode == "on":
        raise ValueError(f"--cuda-graphs on: not possible here ({'; '.join(reasons)}); use --cuda-graphs auto")
    return False, "off: " + "; ".join(reasons)


@dataclass
class Shape:
    """One batch shape's static input buffers, eager steps so far, graph and the graph's outputs."""

    static: dict[str, torch.Tensor]
    runs: int = 0
    graph: Any = None
    outputs: Any = None


@dataclass
class StepGraphs:
    """Runs `fn(batch)` through static buffers per batch shape, captured as CUDA graphs when `capture` (see the
    module). Batches whose first dimension is not `rows` (a partial last batch) run eagerly on their own tensors.
    `capture_seconds` holds each captured shape's capture time."""

    fn: Callable[[dict[str, torch.Tensor]], Any]
    device: torch.device
    capture: bool = False
    rows: int | None = None
    warmup: int = WARMUP_STEPS
    pool: Any = None
    shapes: dict[Signature, Shape] = field(default_factory=dict)
    capture_seconds: dict[Signature, float] = field(default_factory=dict)
    eager_steps: int = 0  # batches run eagerly (partial batches and warm-up steps)
    failed: str = ""  # why captures stopped (a capture or first replay raised: `fall_back`); '' while none did
    side: Any = None  # the warm-up stream

    def __post_init__(self) -> None:
        if self.capture and self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()

    def __call__(self, batch: dict[str, torch.Tensor]) -> Any:
        """The step's outputs for `batch` (host or device tensors; host ones are best pinned)."""
        inputs = {k: v for k, v in batch.items() if k not in HOST_KEYS}
        first = next(iter(inputs.values()))
        if self.rows is not None and first.shape[0] != self.rows:
            self.eager_steps += 1
            return self.fn({k: v.to(self.device, non_blocking=True) for k, v in inputs.items()})
        key = signature(inputs)
        shape = self.shapes.get(key)
        if shape is None:
            shape = self.shapes[key] = Shape({k: torch.empty_like(v, device=self.device) for k, v in inputs.items()})
        for name, value in inputs.items():
            shape.static[name].copy_(value, non_blocking=True)
        if not self.capture:
            shape.runs += 1
            return self.fn(shape.static)
        if shape.graph is None and shape.runs < self.warmup:
            shape.runs += 1
            self.eager_steps += 1
            return self.on_side_stream(shape.static)
        if shape.graph is None:
            clock = time.perf_counter()
            try:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=self.pool):  # records only: nothing runs until replay
                    outputs = self.fn(shape.static)
                graph.replay()  # the first replay runs this batch's step
            except Exception as exc:  # a step that cannot be captured here: eager from now on, this batch too
                return self.fall_back(shape, exc)
            shape.graph, shape.outputs = graph, outputs
            self.capture_seconds[key] = time.perf_counter() - clock
            return shape.outputs
        shape.graph.replay()
        return shape.outputs

    def fall_back(self, shape: Shape, exc: Exception) -> Any:
        """After a capture (or its first replay) raised: no graph from now on (`failed` says why, one log line),
        every later step eager on the static buffers, and this batch's step run eagerly now (a capture only
        records; a replay that raises ran nothing)."""
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        self.failed = f"capture failed: {reason}"
        self.capture = False
        for other in self.shapes.values():
            other.graph = other.outputs = None
        log.warning("CUDA graphs: %s; the shard goes on with eager steps (rows: cuda_graphs = \"off: %s\")",
                    self.failed, self.failed)
        self.eager_steps += 1
        return self.fn(shape.static)

    def on_side_stream(self, static: dict[str, torch.Tensor]) -> Any:
        """One eager run on a side stream, ordered after and before the current stream's work (torch's recipe for
        warming up before a capture)."""
        side = self.side = self.side or torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            outputs = self.fn(static)
        torch.cuda.current_stream(self.device).wait_stream(side)
        return outputs

    @property
    def captured(self) -> int:
        """Shapes captured as graphs so far."""
        return sum(shape.graph is not None for shape in self.shapes.values())


def tensor_learning_rates(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Hold every parameter group's learning rate in a tensor on `device` (a captured optimiser step reads it from
    there; the scheduler writes each step's value into it with `fill_`, no host synchronisation). float64 on a CPU
    (the plain step's value exactly), float32 on CUDA (what the fused kernel reads)."""
    dtype = torch.float64 if device.type == "cpu" else torch.float32
    for group in optimizer.param_groups:
        value = group["lr"]
        if torch.is_tensor(value) and value.device == device and value.dtype == dtype:
            continue
        group["lr"] = torch.tensor(float(value), dtype=dtype, device=device)


def float_learning_rates(optimizer: torch.optim.Optimizer) -> None:
    """Undo `tensor_learning_rates` (a checkpoint of a graphed run resumed eagerly; one read at resume)."""
    for group in optimizer.param_groups:
        if torch.is_tensor(group["lr"]):
            group["lr"] = float(group["lr"])
