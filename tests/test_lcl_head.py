"""lcl's classifier heads (docs/METHODS.md "lcl"): under `variant: released` the authors' primary-encoder classifier
(varsha33/LCL_loss, model.py, `primary_encoder`, commit 385e4abf80d6c819d2af15f086a02bf68e8642d5): logits =
drop(W2 relu(drop(W1 e + b1)) + b2), in training and in prediction; the weighting network's head (dropout at
--head-dropout, Linear) active in training, the identity in eval mode; a finished run rebuilt for prediction
with the head it trained.

References are written here in float64 from the parameters (explicit matmuls, ReLU and masks), sharing no code
with `methods/`. Dropout in training mode is made checkable by replacing torch.nn.functional.dropout (what every
nn.Dropout calls) with a fake that applies seeded masks and records each call's input, p and mode."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bench.methods  # noqa: F401  (registers every method)
from bench.encoders.models import EncoderOutput, TextEncoder
from bench.errors import BenchError
from bench.registry import METHODS
from bench.spec import RunSpec, TrainConfig, method_config
from conftest import FAST
from test_losses import lcl_ref

D64 = torch.float64
VOCAB, HIDDEN, N = 12, 7, 4
LCL = METHODS.get("lcl")


class TableEncoder(TextEncoder):
    """pooled[r] = table[input_ids[r, 0]]: known pooled vectors, no dropout of its own."""

    def __init__(self, seed: int = 0):
        super().__init__()
        self.hidden_size = self.token_size = HIDDEN
        gen = torch.Generator().manual_seed(seed)
        self.table = nn.Parameter(torch.randn(VOCAB, HIDDEN, generator=gen, dtype=D64))

    def forward(self, input_ids, attention_mask):
        pooled = self.table[input_ids[:, 0]]
        return EncoderOutput(pooled, pooled[:, None, :].expand(-1, input_ids.shape[1], -1), attention_mask)


def make_batch(rows: int = 10) -> dict[str, torch.Tensor]:
    ids = torch.arange(rows * 3).reshape(rows, 3) % VOCAB
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.arange(rows) % N,
            "index": torch.arange(rows)}


def build(head_dropout: float, seed: int = 0, **knobs):
    """lcl on the table encoder in float64 (every parameter drawn from `seed`; the helper encoder's table moved
    off the main one), knobs as `clbench run --set` would give them (the variant's implied knobs included)."""
    config = LCL.Config(**dict(method_config("lcl", knobs)))
    method = LCL(TableEncoder(seed), N, config, head_dropout=head_dropout).double()
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in method.named_parameters():
            if not name.startswith("encoder."):
                p.copy_(0.8 * torch.randn(p.shape, generator=gen, dtype=D64))
    return method


def params(method) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in method.named_parameters()}


def linear(P, name, x):
    return x @ P[f"{name}.weight"].T + P[f"{name}.bias"]


def released_ref(P, e, masks=None, p=0.0):
    """The authors' head in float64: h = W1 e + b1; drop (mask 1); ReLU; z = W2 . + b2; drop (mask 2)."""
    hidden = linear(P, "head.dense", e)
    if masks is not None:
        hidden = hidden * masks[0] / (1 - p)
    logits = linear(P, "head.out", torch.relu(hidden))
    if masks is not None:
        logits = logits * masks[1] / (1 - p)
    return logits


@dataclass
class Call:
    input: torch.Tensor
    mask: torch.Tensor
    p: float
    training: bool


class FakeDropout:
    """Stands in for F.dropout: in training mode multiplies by a mask drawn from a seeded generator (kept with
    the call) and rescales by 1/(1-p), as inverted dropout does; the identity in eval mode."""

    def __init__(self, seed: int = 5, keep: float = 0.6):
        self.gen = torch.Generator().manual_seed(seed)
        self.keep = keep
        self.calls: list[Call] = []

    def __call__(self, input, p=0.5, training=True, inplace=False):
        mask = (torch.rand(input.shape, generator=self.gen) < self.keep).to(input.dtype)
        self.calls.append(Call(input.detach().clone(), mask, p, training))
        return input * mask / (1 - p) if training else input

    def find(self, value: torch.Tensor) -> Call:
        """The one call whose input was `value`."""
        hits = [c for c in self.calls if c.input.shape == value.shape and torch.allclose(c.input, value.detach())]
        assert len(hits) == 1, f"{len(hits)} dropout calls on this input (calls: {[c.input.shape for c in self.calls]})"
        return hits[0]


@pytest.fixture
def fake_dropout(monkeypatch):
    fake = FakeDropout()
    monkeypatch.setattr(torch.nn.functional, "dropout", fake)
    return fake


# ----------------------------------------------------------------------------------------------- the knob

def test_the_head_knob_follows_the_variant_and_is_checked():
    assert LCL.version == 3
    assert dict(method_config("lcl", {}))["head"] == "released"
    assert dict(method_config("lcl", {"variant": "paper"}))["head"] == "linear"
    assert dict(method_config("lcl", {"variant": "paper", "head": "released"}))["head"] == "released"  # --set wins
    assert dict(method_config("lcl", {"head": "linear"}))["variant"] == "released"
    with pytest.raises(BenchError, match="lcl: head is released or linear, got 'mlp'"):
        LCL.Config(head="mlp")
    released, linear_head = build(0.3), build(0.3, variant="paper")
    layers = [type(m).__name__ for m in released.head.modules()][1:]
    assert layers == ["Linear", "Dropout", "Linear"] and released.head.dropout.p == 0.3
    assert (released.head.dense.in_features, released.head.dense.out_features) == (HIDDEN, HIDDEN)
    assert (released.head.out.in_features, released.head.out.out_features) == (HIDDEN, N)
    assert isinstance(linear_head.head, nn.Sequential) and linear_head.head[0].p == 0.3  # the shared head


# ----------------------------------------------------------------------------------------------- prediction

def test_released_logits_in_eval_mode_match_the_float64_head_without_dropout():
    method = build(0.3).eval()
    batch = make_batch()
    P = params(method)
    e = P["encoder.table"][batch["input_ids"][:, 0]]
    expected = released_ref(P, e)
    assert torch.allclose(method.logits(batch).detach(), expected, rtol=1e-12, atol=1e-12)
    # not vacuous: the ReLU cuts, and the reference without it, or with the shared head's form, differs
    hidden = linear(P, "head.dense", e)
    assert (hidden < 0).sum() > 5
    assert not torch.allclose(expected, linear(P, "head.out", hidden), atol=1e-3)
    assert not torch.allclose(expected, linear(P, "head.out", e), atol=1e-3)


def test_released_logits_in_training_mode_drop_before_the_relu_and_on_the_logits(fake_dropout):
    p = 0.3
    method = build(p).train()
    batch = make_batch()
    P = params(method)
    e = P["encoder.table"][batch["input_ids"][:, 0]]
    got = method.logits(batch).detach()
    calls = fake_dropout.calls
    assert [(tuple(c.input.shape), c.p, c.training) for c in calls] == [((10, HIDDEN), p, True), ((10, N), p, True)]
    assert torch.allclose(calls[0].input, linear(P, "head.dense", e))  # no dropout on e itself
    expected = released_ref(P, e, [calls[0].mask, calls[1].mask], p)
    assert torch.allclose(got, expected, rtol=1e-12, atol=1e-12)
    # not vacuous: the logits' mask zeroes some logits, and some kept pre-activations are negative
    assert (calls[1].mask == 0).any() and (got == 0).any()
    assert ((calls[0].input < 0) & (calls[0].mask > 0)).sum() > 3


def test_real_dropout_zeroes_logits_in_training_and_is_the_identity_in_eval():
    """Without the fake: at p = 0.5 about half of the training-mode logits are exactly 0 (only a dropout on the
    logits can do that); in eval mode none are, and two calls agree."""
    method = build(0.5)
    batch = make_batch(64)
    torch.manual_seed(0)
    logits = method.train().logits(batch).detach()
    assert 0.35 < float((logits == 0).double().mean()) < 0.65
    method.eval()
    first, second = method.logits(batch).detach(), method.logits(batch).detach()
    assert torch.equal(first, second) and not (first == 0).any()


# ----------------------------------------------------------------------------------------------- training

@pytest.mark.parametrize("weighting", ["separate", "shared-head"])
def test_training_uses_the_released_head_and_the_helper_heads_dropout(weighting, fake_dropout):
    """Every term of the loss in training mode, against the float64 composition: the main CE through the
    released head (both of its dropouts), the helper's logits through its own dropout at --head-dropout."""
    p, tau, w = 0.4, 0.3, 0.35
    method = build(p, tau=tau, ce_weight=w, weighting=weighting).train()
    if method.helper_encoder is not None:
        with torch.no_grad():
            method.helper_encoder.table.mul_(-0.7).add_(0.2)  # the helper encoder differs from the main one
    batch = make_batch()
    P = params(method)
    losses = method.loss(batch)
    ids = torch.cat([batch["input_ids"], batch["input_ids"]])[:, 0]  # the batch and its dropout twin
    labels = torch.cat([batch["labels"], batch["labels"]])
    e = P["encoder.table"][ids]
    helper = P["helper_encoder.table"][ids] if weighting == "separate" else e
    calls = fake_dropout.calls
    assert len(calls) == 3 and all(c.p == p and c.training for c in calls)
    helper_call = fake_dropout.find(helper)  # the helper head's dropout, on the helper's pooled vectors
    helper_logits = linear(P, "helper_head.1", helper * helper_call.mask / (1 - p))
    hidden = linear(P, "head.dense", e)
    first = fake_dropout.find(hidden)
    pre_logits = linear(P, "head.out", torch.relu(hidden * first.mask / (1 - p)))
    second = fake_dropout.find(pre_logits)
    logits = pre_logits * second.mask / (1 - p)
    expected = {"ce": w * F.cross_entropy(logits, labels),
                "lcl": (1 - w) * lcl_ref(e, labels, torch.softmax(helper_logits, dim=1), tau),
                "ce_helper": w * F.cross_entropy(helper_logits, labels)}
    assert set(losses) == set(expected)
    for name, value in expected.items():
        assert torch.allclose(losses[name].detach().to(D64), value, rtol=1e-5, atol=1e-6), name


def test_the_helper_heads_dropout_is_at_head_dropout_active_in_training_the_identity_in_eval(fake_dropout):
    p = 0.37
    method = build(p)
    P = params(method)
    x = torch.randn(9, HIDDEN, generator=torch.Generator().manual_seed(3), dtype=D64)
    assert [m.p for m in method.helper_head.modules() if isinstance(m, nn.Dropout)] == [p]
    method.train()
    out = method.helper_head(x).detach()
    (call,) = fake_dropout.calls
    assert call.p == p and call.training and torch.allclose(call.input, x)
    assert torch.allclose(out, linear(P, "helper_head.1", x * call.mask / (1 - p)))
    method.eval()
    assert torch.allclose(method.helper_head(x).detach(), linear(P, "helper_head.1", x), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(out, linear(P, "helper_head.1", x))  # the training-mode mask changed something


# ----------------------------------------------------------------------------------------------- finished runs

def spec_of(version: int, **knobs) -> RunSpec:
    return RunSpec("lcl", "tiny", "tiny-bert", 1, "fp", TrainConfig(head_dropout=0.2),
                   method_config("lcl", knobs), version)


def test_a_finished_run_is_rebuilt_with_the_head_it_trained():
    from bench.methods.lcl import ReleasedHead

    head = LCL.run_head(spec_of(3), HIDDEN, N)
    assert isinstance(head, ReleasedHead) and head.dropout.p == 0.2 and head.out.out_features == N
    assert LCL.run_head(spec_of(3, variant="paper"), HIDDEN, N) is None  # the shared head
    assert LCL.run_head(spec_of(3, head="linear"), HIDDEN, N) is None
    old = RunSpec("lcl", "tiny", "tiny-bert", 1, "fp", TrainConfig(),
                  tuple((k, v) for k, v in method_config("lcl", {}) if k != "head"), 2)
    assert LCL.run_head(old, HIDDEN, N) is None  # version 2 trained the shared head
    assert METHODS.get("ce").run_head(spec_of(3), HIDDEN, N) is None


def test_a_trained_lcl_run_predicts_again_from_its_saved_model(cli, tiny, results):
    """`clbench evaluate` and the other re-scorers rebuild the run's classifier from model.pt: with the released
    head it predicts exactly what the run stored."""
    from bench.results import store
    from bench.running.evaluation import data_for_run, load_run_classifier
    from bench.methods.lcl import ReleasedHead

    code, _, err = cli("run", "--datasets", tiny, "--methods", "lcl", *FAST)
    assert code == 0, err
    (run_dir,) = [p.parent for p in results.glob("lcl_*/rows.json")]
    spec = RunSpec.from_json(store.read_json(run_dir / "spec.json"))
    assert spec.method_version == 3 and dict(spec.method_config)["head"] == "released"
    classifier = load_run_classifier(run_dir, spec, data_for_run(run_dir, spec, None), torch.device("cpu"))
    assert isinstance(classifier.method.head, ReleasedHead)
    with gzip.open(run_dir / "predictions.jsonl.gz", "rt") as f:
        stored = [json.loads(line) for line in f]
    texts = [json.loads(line)["text"] for line in (tiny / "test.jsonl").read_text().splitlines()]
    assert len(stored) == len(texts)
    np.testing.assert_allclose(classifier.predict_proba(texts), [r["probabilities"] for r in stored], atol=1e-5)
