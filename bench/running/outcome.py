"""What a shard is asked to do besides training (ShardRequest) and how it ended (ShardOutcome): plain values,
imported without torch (bench.running.shard trains; `clbench run` on a finished sweep never imports it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.evaloptions import EvalOptions


@dataclass
class ShardOutcome:
    """How a shard ended: `done`, `skipped` (already finished), `held` (another live runner holds its lease and
    trains it; not a failure), `failed` (with the reason), `stopped` (by a SIGTERM or SIGINT: its last checkpoint
    kept, its lease released; the message says how far it got) or `cancelled` (a stop came before it started)."""

    key: str
    status: str
    message: str = ""
    seconds: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)
    evaluations: list[Any] = field(default_factory=list)  # EvalOutcome per requested evaluator
    unwritable: bool = False  # failed as the results folder took no write (full, read-only): so would the next
    repaired: list[str] = field(default_factory=list)  # damaged files found and moved aside (bench.results.repair)
    shown: list[dict[str, Any]] = field(default_factory=list)  # skipped: its stored evaluations' rows, of the
    # evaluators asked for (bench.running.tending.plan_finished): a re-run shows them as the first run did


@dataclass(frozen=True)
class ShardRequest:
    """What to do with a shard besides training: which evaluators, their options, whether to keep the model."""

    evaluators: tuple[str, ...] = ()
    options: EvalOptions = field(default_factory=EvalOptions)
    save_model: bool = True
    explicit: bool = True  # evaluators named by the user (False: the default, every evaluator that fits)
    asked: bool = True  # --evaluators given at all (`all` included): collapsed runs are scored too
    compile: bool = False  # torch.compile the encoder (speed only: not part of the run key)
    cuda_graphs: str = "auto"  # whole-step CUDA graphs: auto | on | off (bench.training.graphs; not in the key)
    length_bucket: int | None = None  # batch widths rounded up to a multiple of this; None: `auto_bucket`
    deterministic: bool = False  # strict deterministic kernels on any device (`deterministic_kernels`; not in the key)
    save_format: tuple[str, ...] = ("safetensors",)  # model.safetensors and/or hf/ (bench.running.export; not in
    # the key)
    keep_models: str = "all"  # all | best | none: the models a sweep keeps after its evaluators (running.keeping)
    model_precision: str = "auto"  # auto | float32: how a kept model is stored (bench.training.precision)
    report_to: tuple[str, ...] = ()  # experiment trackers (bench.training.tracking; they only watch: not in the key)
    checkpoint_every_s: float | None = None  # resume checkpoints: at most one per this many seconds of training (0:
    # after every epoch); None: `default_checkpoint_every_s()` when the shard runs; not in the key
