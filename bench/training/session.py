"""One shard's training, from its spec to its test logits, in one call (`train`): the device and seeds set, the
encoder built, the data cut to what the model sees, the method built and prepared, the splits tokenised (cached),
the trainer fitted (checkpointed, resumable) and the test split predicted (and, for a model to be stored, predicted
once more with float16 weights: bench.training.precision). The shard (bench.running.shard) writes
the run's spec before and its results after; training writes nothing into the run folder but its checkpoint."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.data.batching import Encoded, auto_bucket
from bench.data.bounds import TextBound, bound_data
from bench.data.loading import TextData
from bench.encoders.models import build_encoder
from bench.errors import BenchError
from bench.methods.base import PrepareContext
from bench.registry import METHODS
from bench.results.names import CHECKPOINT
from bench.spec import RunSpec
from bench.training.checkpoint_policy import default_checkpoint_every_s
from bench.training.compile import compile_encoder
from bench.training.graphs import graphs_decision
from bench.training.precision import round_to_half
from bench.training.setup import deterministic_kernels, resolve_device, seed_everything
from bench.training.token_cache import tokenize_cached
from bench.training.trainer import FitResult, Trainer
from bench.training.tracking import Tracker

CACHE = ".cache"  # under the results folder: tokenised splits and augmented views shared by runs on the same data


@dataclass(frozen=True)
class HowToTrain:
    """How a shard trains, beside what (its spec): speed and strictness settings that are not in the run key."""

    compile: bool = False  # torch.compile the encoder
    cuda_graphs: str = "auto"  # whole-step CUDA graphs: auto | on | off (bench.training.graphs)
    length_bucket: int | None = None  # batch widths rounded up to a multiple of this; None: `auto_bucket`
    deterministic: bool = False  # strict deterministic kernels on any device
    checkpoint_every_s: float | None = None  # None: `default_checkpoint_every_s`
    check_half: bool = False  # measure whether float16 weights predict the same on test (bench.training.precision)


@dataclass
class Trained:
    """A trained shard: its method (encoder and head), tokenizer bundle, data as the model saw it, trainer and fit,
    the test split's logits, and how it trained (device, length bucket, deterministic kernels, compiled, CUDA
    graphs) with the seconds of each fixed phase (build, prepare, tokenise, test)."""

    method: Any
    bundle: Any
    data: TextData
    trainer: Trainer
    fit: FitResult
    test_logits: np.ndarray
    device: Any
    bucket: int
    deterministic: bool
    compiled: str
    cuda_graphs: str
    phases: dict[str, float] = field(default_factory=dict)
    half_agreement: float | None = None  # test items predicted the same with float16 weights (`check_half`;
    # at or above HALF_AGREEMENT the weights stay rounded and `test_logits` are the rounded model's)


def train(spec: RunSpec, data: TextData, run_dir: Path, device_name: str, how: HowToTrain = HowToTrain(),
          progress: bool = True, tracker: Tracker | None = None) -> Trained:
    """Train one shard (see the module) and predict its test split; a BenchError for a setting this device cannot
    honour or a model whose outputs are not finite."""
    device = resolve_device(device_name)
    seed_everything(spec.seed)
    deterministic = deterministic_kernels(device, strict=how.deterministic)
    bucket = how.length_bucket if how.length_bucket is not None else auto_bucket(device.type, how.compile)
    phases: dict[str, float] = {}  # the fixed cost of a shard, besides training: seconds per phase
    clock = time.perf_counter()
    bundle = build_encoder(spec.encoder, data.train.texts, spec.train)  # a word vocabulary: of the texts as loaded
    data = bound_data(data, TextBound(spec.train.max_length, bundle.tokenize_words))  # cut to what the model sees
    method_class = METHODS.get(spec.method)
    method = method_class(bundle.model, data.num_labels, method_class.Config(**dict(spec.method_config)),
                          head_dropout=spec.train.head_dropout)
    phases["build_seconds"] = time.perf_counter() - clock
    clock = time.perf_counter()
    method.prepare(PrepareContext(data.train.texts, data.label_names, bundle, spec.seed,
                                  cache_dir=run_dir.parent / CACHE, results_dir=run_dir.parent, spec=spec,
                                  bucket=bucket, max_width=spec.train.max_length))
    phases["prepare_seconds"] = time.perf_counter() - clock
    clock = time.perf_counter()
    identity = {"encoder": spec.encoder, "tokenizer": bundle.info.get("source", ""), "data": data.fingerprint,
                "max_length": spec.train.max_length, "carve": [spec.train.data_seed, spec.train.val_fraction]}
    encoded = {s: Encoded(tokenize_cached(bundle, getattr(data, s).texts, run_dir.parent / CACHE, identity),
                          getattr(data, s).labels) for s in ("train", "validation", "test")}
    phases["tokenize_seconds"] = time.perf_counter() - clock
    compiled = compile_encoder(method.encoder) if how.compile else ""
    try:
        graphed, cuda_graphs = graphs_decision(how.cuda_graphs, device, method, bool(compiled))
    except ValueError as exc:
        raise BenchError(str(exc)) from exc
    trainer = Trainer(method, spec.train, device, bundle.pad_id, spec.seed, bundle.min_length, graph_step=graphed,
                      checkpoint=run_dir / CHECKPOINT, progress=progress, desc=spec.key, bucket=bucket,
                      tracker=tracker, checkpoint_every_s=default_checkpoint_every_s()
                      if how.checkpoint_every_s is None else how.checkpoint_every_s)
    fit = trainer.fit(encoded["train"], encoded["validation"])
    clock = time.perf_counter()
    logits = trainer.require_finite_outputs(trainer.predict(encoded["test"]), "test")
    phases["test_seconds"] = time.perf_counter() - clock
    half = None
    if how.check_half:  # float16 weights kept when they predict the same (then the run's model is theirs)
        clock = time.perf_counter()
        half, logits = round_to_half(trainer, method, encoded["test"], logits)
        phases["half_check_seconds"] = time.perf_counter() - clock
    if trainer.graphs_failed():  # a capture raised: the shard went on eagerly
        cuda_graphs = f"off: {trainer.graphs_failed()}"
    return Trained(method, bundle, data, trainer, fit, logits, device, bucket, deterministic, compiled, cuda_graphs,
                   phases, half)
