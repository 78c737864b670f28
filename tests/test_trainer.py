import numpy as np
import pytest
import torch

from bench.data.batching import Encoded
from bench.data.loading import load_dataset
from bench.encoders.models import build_encoder
from bench.errors import BenchError
from bench.registry import METHODS
from bench.spec import TrainConfig
from bench.training.trainer import Trainer
from bench.training.setup import linear_schedule, seed_everything
from conftest import FIXTURE
from bench.methods.base import Method

CFG = TrainConfig(epochs=3, lr=1e-3, batch_size=8, max_length=32, patience=5)


def setup(cfg=CFG, method="ce", checkpoint=None, seed=1):
    data = load_dataset(str(FIXTURE))
    seed_everything(seed)
    bundle = build_encoder("tiny-bert", data.train.texts, cfg)
    cls = METHODS.get(method)
    model = cls(bundle.model, data.num_labels, head_dropout=cfg.head_dropout)
    encoded = {s: Encoded(bundle.tokenize(getattr(data, s).texts), getattr(data, s).labels)
               for s in ("train", "validation", "test")}
    trainer = Trainer(model, cfg, torch.device("cpu"), bundle.pad_id, seed, checkpoint=checkpoint, progress=False)
    return trainer, encoded


def test_training_learns_the_fixture():
    trainer, data = setup(TrainConfig(epochs=6, lr=2e-3, batch_size=8, max_length=32, patience=6))
    before = trainer.evaluate(data["test"])[0]
    fit = trainer.fit(data["train"], data["validation"])
    after = trainer.evaluate(data["test"])[0]
    assert after > max(before, 0.6)
    assert fit.history[0]["train_loss"] > fit.history[-1]["train_loss"]


def test_same_seed_gives_identical_results():
    first, data = setup()
    first.fit(data["train"], data["validation"])
    second, data2 = setup()
    second.fit(data2["train"], data2["validation"])
    assert np.array_equal(first.predict(data["test"]), second.predict(data2["test"]))


def test_different_seed_gives_different_results():
    first, data = setup(seed=1)
    first.fit(data["train"], data["validation"])
    second, data2 = setup(seed=2)
    second.fit(data2["train"], data2["validation"])
    assert not np.array_equal(first.predict(data["test"]), second.predict(data2["test"]))


class Killed(BaseException):
    """Stands in for the process being killed right after a checkpoint was written."""


def killed_after_first_checkpoint(monkeypatch, trainer: Trainer, data: dict) -> None:
    """Train `trainer` until its first checkpoint is written, then stop it as a kill would (Killed raised)."""
    original_save = Trainer.save

    def save_then_die(self, *args):
        original_save(self, *args)
        raise Killed

    monkeypatch.setattr(Trainer, "save", save_then_die)
    with pytest.raises(Killed):
        trainer.fit(data["train"], data["validation"])
    monkeypatch.setattr(Trainer, "save", original_save)


def test_resume_after_kill_equals_uninterrupted_run(tmp_path, monkeypatch):
    reference, data = setup()
    reference.fit(data["train"], data["validation"])
    expected = reference.predict(data["test"])

    checkpoint = tmp_path / "checkpoint.pt"
    killed_after_first_checkpoint(monkeypatch, *setup(checkpoint=checkpoint))
    assert checkpoint.exists()

    resumed, data = setup(checkpoint=checkpoint)
    fit = resumed.fit(data["train"], data["validation"])
    assert fit.resumed_from_epoch == 1
    assert len(fit.history) == 3
    assert np.array_equal(resumed.predict(data["test"]), expected)


def test_early_stopping_restores_the_best_epoch():
    trainer, data = setup(TrainConfig(epochs=8, lr=1e-9, batch_size=8, max_length=32, patience=2))
    fit = trainer.fit(data["train"], data["validation"])
    # with a vanishing learning rate validation accuracy cannot improve after epoch 1
    assert fit.best_epoch == 1
    assert len(fit.history) == 3 and fit.stopped_early


class NanLoss(Method):
    """Test method whose loss is NaN."""

    def loss(self, batch):
        return {"nan": self.logits(batch).sum() * float("nan")}


def test_nan_loss_fails_with_a_reason():
    if "nan-test" not in METHODS:
        METHODS.add("nan-test", NanLoss)
    trainer, data = setup(method="nan-test")
    with pytest.raises(BenchError, match="loss became nan in epoch 1"):
        trainer.fit(data["train"], data["validation"])


def test_linear_schedule():
    factor = linear_schedule(warmup=2, total=10)
    assert [round(factor(s), 3) for s in (0, 1, 2, 6, 10)] == [0.5, 1.0, 1.0, 0.5, 0.0]


def test_no_weight_decay_on_biases_and_norms():
    trainer, _ = setup()
    decay, no_decay = trainer.optimizer().param_groups
    assert no_decay["weight_decay"] == 0.0 and decay["weight_decay"] == CFG.weight_decay
    assert all(p.ndim >= 2 for p in decay["params"])


@pytest.mark.parametrize("method", ["ce", "clld-adaptive"])
def test_bf16_autocast_step_stays_close_to_fp32(method):
    """The mixed-precision path (bf16 autocast, losses in fp32) gives the fp32 loss and gradient direction."""
    results = {}
    for precision in ("fp32", "bf16"):
        cfg = TrainConfig(epochs=1, lr=1e-3, batch_size=8, max_length=32, precision=precision, head_dropout=0.0)
        trainer, data = setup(cfg, method=method)
        assert (trainer.amp_dtype is None) == (precision == "fp32")
        batch = trainer.batch(data["train"], np.arange(8))
        torch.manual_seed(0)  # the same dropout masks in both precisions
        with trainer.autocast():
            losses = trainer.method.loss(batch)
        total = sum(losses.values())
        assert total.dtype == torch.float32
        total.backward()
        grads = torch.cat([p.grad.flatten() for p in trainer.method.parameters() if p.grad is not None])
        results[precision] = (total.item(), grads)
    (loss32, grad32), (loss16, grad16) = results["fp32"], results["bf16"]
    assert loss16 != loss32  # bf16 really was used
    assert abs(loss16 - loss32) < 0.02 * abs(loss32)
    assert torch.nn.functional.cosine_similarity(grad32, grad16, dim=0) > 0.98


def test_schedule_against_transformers():
    """Our warm-up runs one step ahead of get_linear_schedule_with_warmup, and equals it afterwards
    (docs/RUNNING.md, 'The learning-rate schedule')."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    from bench.training.setup import linear_schedule

    for warmup, total in ((6, 100), (1, 10), (0, 20), (10, 11)):
        ours = linear_schedule(warmup, total)
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        theirs = get_linear_schedule_with_warmup(optimizer, warmup, total).lr_lambdas[0]
        for step in range(total + 2):
            expected = theirs(step + 1) if step < warmup else theirs(step)
            assert abs(ours(step) - expected) < 1e-12, (warmup, total, step)
        if warmup:
            assert ours(0) == 1 / warmup and theirs(0) == 0.0
