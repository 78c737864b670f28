"""ATen operations per training step, counted with the profiler on a CPU (device-independent): upper bounds for ce
and a contrastive method at tiny-bert, so that a per-parameter loop or an extra host round trip creeping back into
the step fails a test (issue 43). Two counts: every ATen op (bound: measured with torch 2.13.0 + 10%, room for
kernels that dispatch differently on another CPU), and the top-level ones, those issued from Python or by the
autograd engine rather than inside another op (bound: measured + 10; a per-parameter loop adds one a tensor:
torch's own clip_grad_norm_ on a CPU made these 120 for ce, not 80)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import bench.methods  # noqa: F401  (registers the methods)
from bench.data.batching import Encoded
from bench.encoders.models import build_encoder
from bench.registry import METHODS
from bench.spec import TrainConfig
from bench.training.trainer import Trainer

TEXTS = ["a good film", "a bad film", "dull and slow", "bright fun"] * 8
MEASURED = {"ce": (2464, 80), "cl": (2880, 131)}  # (every level, top level) ATen ops of one step, 2026-11-27


def step_ops(method: str) -> tuple[int, int]:
    """ATen ops (every level, top level) of the second Trainer.step of `method` on one batch of 32 short texts."""
    torch.manual_seed(0)
    cfg = TrainConfig(batch_size=32, max_length=32)
    bundle = build_encoder("tiny-bert", TEXTS, cfg)
    model = METHODS.get(method)(bundle.model, 2)
    trainer = Trainer(model, cfg, torch.device("cpu"), bundle.pad_id, 1, bundle.min_length)
    data = Encoded(bundle.tokenize_words([t.split() for t in TEXTS])[0], np.array([0, 1, 1, 0] * 8))
    batch, optimizer = trainer.batch(data, np.arange(32)), trainer.optimizer()
    trainer.step(batch, optimizer)  # the first step builds the optimiser state
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.step(batch, optimizer)
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    return len(events), sum(1 for e in events if e.cpu_parent is None)


@pytest.mark.parametrize("method", sorted(MEASURED))
def test_a_step_stays_within_its_op_budget(method):
    (every, top), (every_budget, top_budget) = step_ops(method), MEASURED[method]
    assert every <= every_budget * 1.10, f"{method}: {every} ATen ops per step, budget {every_budget} + 10%"
    assert top <= top_budget + 10, f"{method}: {top} top-level ATen ops per step, budget {top_budget} + 10"
