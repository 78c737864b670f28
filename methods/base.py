"""The method interface: a module that turns a batch into named losses. Methods never own the loop,
the optimiser or the device; the Trainer does."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from bench.data.batching import Encoded, collate
from bench.encoders.models import EncoderBundle, EncoderOutput, TextEncoder


@dataclass(frozen=True)
class Progress:
    """Where training stands when a hook is called."""

    epoch: int
    max_epochs: int
    step: int
    total_steps: int


def validation_steps(steps_per_epoch: int, evaluations: int) -> list[int]:
    """The steps within an epoch (1-based, ascending) after which the Trainer validates when a method asks for
    `evaluations` passes an epoch: evenly spaced, the epoch's end always among them, at most one per step."""
    evaluations = max(1, int(evaluations))
    inner = {round(i * steps_per_epoch / evaluations) for i in range(1, evaluations)} - {0, steps_per_epoch}
    return sorted(inner) + [steps_per_epoch]


@dataclass
class PrepareContext:
    """What a method may need before training: the training texts, labels, tokenizer and cache folders."""

    train_texts: list[str]
    label_names: list[str]
    bundle: EncoderBundle
    seed: int
    cache_dir: Path
    results_dir: Path
    spec: Any = None  # the shard's RunSpec, where the method needs to find related runs
    bucket: int = 0  # per-example views are padded as the Trainer pads (bench.data.batching.bucket_width)
    max_width: int | None = None


@dataclass(frozen=True)
class NoConfig:
    """A method without knobs."""


class Method(nn.Module):
    """Encoder + classifier head (dropout, Linear(d, N)); subclasses define `loss`.

    Subclasses set `Config` to a frozen dataclass of their knobs (with documented defaults). A Config with a
    `variant` knob may name the knobs each variant implies in a class attribute `VARIANT_KNOBS` (see
    `variant_knobs`); its field defaults are then those of its default variant.
    """

    Config: ClassVar[type] = NoConfig
    # Bump when a change alters what the method trains: runs get new keys, and finished runs of the old
    # version are neither skipped as done nor averaged with the new ones unnoticed.
    version: ClassVar[int] = 1
    # knob -> the name it had in run keys before it was renamed: the key keeps the old name, so results stored
    # before a rename (that did not change what is trained) are still found, skipped as done and reported.
    key_names: ClassVar[dict[str, str]] = {}
    evaluations_per_epoch: int = 1
    # True: `loss` keeps the rules of a CUDA-graph capture (bench.training.graphs: no host synchronisation, no
    # host work on the batch, no Python branch on a value that changes between steps, state updated in place), so
    # `--cuda-graphs auto` replays its steps as graphs; tests/test_graphs.py checks every built-in method.
    capturable: ClassVar[bool] = False

    def __init__(self, encoder: TextEncoder, num_labels: int, config: Any = None, head_dropout: float = 0.1):
        super().__init__()
        self.encoder = encoder
        self.config = config if config is not None else self.Config()
        self.num_labels = num_labels
        self.head = nn.Sequential(nn.Dropout(head_dropout), nn.Linear(encoder.hidden_size, num_labels))

    def encode(self, batch: dict[str, torch.Tensor]) -> EncoderOutput:
        """Encoder output for a batch."""
        return self.encoder(batch["input_ids"], batch["attention_mask"])

    def logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Class scores (B, N) used for prediction."""
        return self.head(self.encode(batch).pooled)

    @classmethod
    def run_head(cls, spec: Any, hidden_size: int, num_labels: int) -> nn.Module | None:
        """The classifier head a finished run of this method (its RunSpec `spec`) trained, where it is not the
        shared one (dropout, Linear): bench.running.evaluation rebuilds it to predict from the saved weights.
        None: the shared head."""
        return None

    def loss(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Named scalar losses for a training batch (as `collate` built it, on the device); their sum is
        optimised. Pure device work on the batch's tensors: no host lookups (its host-side `index` may be
        absent), no reads of device values."""
        raise NotImplementedError

    def collate(self, data: Encoded, index: np.ndarray, pad_id: int, min_length: int, bucket: int,
                max_width: int | None) -> dict[str, torch.Tensor]:
        """The training batch of the examples at `index` as CPU tensors (not pinned): bench.data.batching.collate's
        keys (input_ids, attention_mask, labels, index) and whatever else `loss` reads per example (e.g. word
        views). Prediction batches never come through here."""
        return collate(data, index, pad_id, min_length, bucket=bucket, max_width=max_width)

    # Optional hooks -----------------------------------------------------------------------------------
    @classmethod
    def validate(cls, config: Any, label_names: list[str], results_dir: Path) -> None:
        """Check the config against a dataset before any shard starts (raise BenchError on a problem)."""

    def prepare(self, context: PrepareContext) -> None:
        """Called once before training (e.g. to build augmented views of the training texts)."""

    def on_epoch_start(self, epoch: int) -> None:
        """Called before the training batches of each epoch (0-based; a resumed run starts at the epoch it resumes
        at), before any of its batches is collated (e.g. to draw that epoch's augmented views)."""

    def on_step_end(self, progress: Progress) -> None:
        """Called after every optimiser step."""

    def on_eval(self, confusion: np.ndarray, progress: Progress) -> None:
        """Called after every validation pass with its confusion matrix (rows: gold, columns: predicted)."""

    def state_for_report(self) -> dict[str, Any]:
        """JSON-serialisable method state stored with the run (e.g. a label-distance matrix)."""
        return {}

    def row_fields(self) -> dict[str, Any]:
        """Columns about how the method trained, put in every result row of the run (e.g. CLLD's update count);
        asked at the end of training, before the best epoch's weights return."""
        return {}

    def training_warning(self) -> str:
        """A line saying the method did not train as its name says (e.g. an adaptive matrix never adapted), or
        "" when it did; asked with `row_fields`."""
        return ""

    @classmethod
    def config_fields(cls) -> dict[str, Any]:
        """The method's knobs and their defaults (read from the Config dataclass without building it)."""
        return {f.name: f.default for f in dataclasses.fields(cls.Config)}

    @classmethod
    def variant_knobs(cls) -> dict[str, dict[str, Any]]:
        """variant -> the knobs it implies: the Config's `VARIANT_KNOBS`, a plain class attribute holding a
        literal dict (not a dataclass field, so that bench.catalog reads it from source); {} without one.
        bench.spec.method_config applies them between the field defaults and the knobs a user sets."""
        return {variant: dict(knobs) for variant, knobs in getattr(cls.Config, "VARIANT_KNOBS", {}).items()}
