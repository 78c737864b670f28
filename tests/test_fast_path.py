"""The GPU fast path, checked on CPU: vectorised padding equals the per-example reference, length buckets bound
the batch shapes, a training step never waits for the device, and --compile compiles once for all shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import bench.methods  # noqa: F401
from bench.data.batching import Encoded, bucket_width, collate, padded_matrix, to_device
from bench.training.compile import compile_encoder, repeated_blocks
from bench.data.loading import load_dataset
from bench.encoders.models import build_encoder
from bench.registry import METHODS
from bench.spec import TrainConfig
from benchmarks.syncs import HostSyncCounter
from bench.training.trainer import Trainer
from bench.training.setup import seed_everything
from bench.methods.base import PrepareContext
from bench.methods.views import TokenViews


def reference_collate(token_ids, labels, index, pad_id, min_length=1, width=None):
    """The per-example loop that the vectorised collate replaced."""
    lengths = [len(token_ids[i]) for i in index]
    width = width or max(max(lengths), min_length)
    ids = np.full((len(index), width), pad_id, dtype=np.int64)
    for row, i in enumerate(index):
        part = token_ids[i][:width]
        ids[row, :len(part)] = part
    mask = (np.arange(width)[None, :] < np.array(lengths)[:, None]).astype(np.int64)
    return ids, mask, np.asarray(labels)[index]


@pytest.mark.parametrize("bucket", [0, 8])
def test_vectorised_collate_equals_the_per_example_loop(bucket):
    rng = np.random.default_rng(0)
    token_ids = [rng.integers(3, 50, size=n).tolist() for n in rng.integers(1, 30, size=60)]
    labels = rng.integers(0, 4, size=60)
    data = Encoded(token_ids, labels)
    for _ in range(20):
        index = rng.choice(60, size=int(rng.integers(1, 12)), replace=False)
        batch = collate(data, index, pad_id=1, min_length=3, bucket=bucket, max_width=32)
        longest = max(max(len(token_ids[i]) for i in index), 3)
        width = bucket_width(longest, bucket, 32)
        ids, mask, gold = reference_collate(token_ids, labels, index, 1, 3, width)
        assert batch["input_ids"].tolist() == ids.tolist()
        assert batch["attention_mask"].tolist() == mask.tolist()
        assert batch["labels"].tolist() == gold.tolist() and batch["index"].tolist() == index.tolist()
    narrow = collate(data, np.arange(5), pad_id=1, pad_to=2)  # pad_to below the lengths truncates
    assert narrow["input_ids"].tolist() == reference_collate(token_ids, labels, np.arange(5), 1, width=2)[0].tolist()


def test_bucket_widths_are_few_and_never_cut_an_example():
    assert [bucket_width(n, 0) for n in (1, 7, 33)] == [1, 7, 33]
    assert [bucket_width(n, 16, 128) for n in (1, 16, 17, 120, 128)] == [16, 16, 32, 128, 128]
    assert bucket_width(100, 16, 100) == 100 and bucket_width(130, 16, 128) == 130
    assert len({bucket_width(n, 16, 128) for n in range(1, 129)}) == 8


def test_padded_matrix_and_device_copy_keep_the_index_on_the_host():
    matrix = padded_matrix([[1, 2, 3], [4], []], np.array([3, 1, 0]), np.int64)
    assert matrix.tolist() == [[1, 2, 3], [4, 0, 0], [0, 0, 0]]
    batch = to_device(collate(Encoded([[5, 6], [7]], np.array([0, 1])), np.array([1, 0]), 0),
                      torch.device("meta"))
    assert batch["index"].device.type == "cpu" and batch["input_ids"].device.type == "meta"


def test_token_views_pad_flags_like_the_per_example_loop():
    token_ids = [[2, 5, 6, 3], [2, 7, 3], [2, 8, 9, 9, 9, 3]]
    replaced = [[0, 1, 0, 0], [0, 0, 0], [0, 1, 1, 0, 1, 0]]
    views = TokenViews(Encoded(token_ids, np.zeros(3, dtype=np.int64)), replaced, pad_id=0, min_length=1, bucket=4)
    index = np.array([1, 2])
    assert views.width(index) == 8
    out = views.rows(index, 12)  # widened to a common width: flags 0 and the pad id on the padding
    assert set(out) == {"input_ids", "attention_mask", "replaced", "candidate"}
    assert out["input_ids"].shape == (2, 12) and out["input_ids"][0, 3:].eq(0).all()
    assert out["replaced"].tolist() == [[0] * 12, [0, 1, 1, 0, 1, 0] + [0] * 6]
    assert out["attention_mask"].sum(1).tolist() == [3, 6] and not out["candidate"].any()
    assert set(views.rows(index, 8, flags=False)) == {"input_ids", "attention_mask"}


# ----------------------------------------------------------------------------------------------- host syncs

def test_the_sync_counter_sees_value_reads_masks_and_host_copies():
    t = torch.randn(6)
    with HostSyncCounter() as counter:
        (t * 2).sum() + 1  # pure device work
    assert counter.total == 0
    with HostSyncCounter() as counter:
        float(t.sum())
        t[t > 0]
        t.cpu()
        t.tolist()
        bool(t.max() > 0)
    assert counter.counts == {"_local_scalar_dense": 2, "boolean_mask_index": 1, "cpu": 1, "tolist": 1}


def fixture_trainer(tiny, method: str, log_every: int, **knobs):
    data = load_dataset(str(tiny))
    cfg = TrainConfig(batch_size=4, max_length=32, lr=1e-3, epochs=1)
    seed_everything(0)
    bundle = build_encoder("tiny-bert", data.train.texts, cfg)
    cls = METHODS.get(method)
    model = cls(bundle.model, data.num_labels, cls.Config(**knobs))
    model.prepare(PrepareContext(data.train.texts, data.label_names, bundle, 0, tiny / "cache", tiny, bucket=8,
                                 max_width=32))
    trainer = Trainer(model, cfg, torch.device("cpu"), bundle.pad_id, 0, bundle.min_length, progress=False,
                      bucket=8, log_every=log_every)
    train = Encoded(bundle.tokenize(data.train.texts), data.train.labels)
    return trainer, train


@pytest.mark.parametrize("method,knobs", [("ce", {}), ("cl", {}), ("clld-adaptive", {}), ("supcon", {}),
                                          ("lcl", {"views": "synonym"}), ("dcl", {"views": "synonym"}), ("cline", {})])
def test_a_training_epoch_reads_the_device_only_at_log_intervals(tiny, method, knobs):
    trainer, train = fixture_trainer(tiny, method, log_every=5, **knobs)
    optimizer = trainer.optimizer(fused=True)  # as on a GPU (the CPU's default AdamW reads its step counts)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    steps = math.ceil(len(train) / 4)
    with HostSyncCounter() as counter:
        trainer.train_epoch(train, 0, optimizer, scheduler, {"step": 0}, total_steps=steps)
    reads = math.ceil(steps / 5) + 1  # one loss read per interval (and at the end), one for the epoch's means
    assert steps >= 10 and counter.total <= reads, dict(counter.counts)


# ----------------------------------------------------------------------------------------------- --compile

def test_regional_compile_finds_the_repeated_layer():
    texts = ["a b c", "d e f g"]
    bert = build_encoder("tiny-bert", texts, TrainConfig(max_length=16)).model
    blocks = repeated_blocks(bert)
    assert len(blocks) == 2 and type(blocks[0]).__name__ == "BertLayer"
    assert repeated_blocks(build_encoder("textcnn", texts, TrainConfig(max_length=16)).model) == []  # 3 widths
    assert compile_encoder(bert, backend="eager") == "regional: 2 x BertLayer"


def test_compiled_training_does_not_recompile_per_batch_shape(tiny):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    trainer, train = fixture_trainer(tiny, "cl", log_every=50)
    trainer.bucket = 0  # every batch its own width: the hardest case for shape guards
    compile_encoder(trainer.method.encoder, backend="eager")
    widths = {int(train.lengths[b].max()) for b in np.array_split(np.arange(len(train)), 11)}
    optimizer = trainer.optimizer()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    for epoch in range(2):
        trainer.train_epoch(train, epoch, optimizer, scheduler, {"step": 0}, total_steps=100)
    trainer.predict(train, batch_size=3)
    graphs = counters["stats"]["unique_graphs"]
    assert len(set(train.lengths.tolist())) >= 5 and len(widths) >= 3
    assert 1 <= graphs <= 2, f"{graphs} compilations"  # one graph; at most one more for a size-1 specialisation


@pytest.mark.slow
def test_bench_run_compile_trains_records_how_and_matches_eager(tiny, tmp_path, cli):
    """The real inductor path end to end (tens of seconds on two cores: one layer compiled, reused)."""
    import json

    common = ["run", "--methods", "ce", "--datasets", tiny, "--encoder", "tiny-bert", "--epochs", "1",
              "--batch-size", "8", "--lr", "1e-3", "--no-progress", "--evaluators", "none",
              "--device", "cpu"]  # both runs on the CPU: compared with each other, and the CPU's default buckets
    assert cli(*common, "--results-dir", tmp_path / "eager")[0] == 0
    code, out, err = cli(*common, "--results-dir", tmp_path / "compiled", "--compile")
    assert code == 0, err
    rows = {}
    for name in ("eager", "compiled"):
        (run,) = (tmp_path / name).glob("ce_*")
        rows[name] = [r for r in json.loads((run / "rows.json").read_text()) if r["metric"] == "accuracy"][0]
        phases = json.loads((run / "train_log.json").read_text())["phases"]
        assert set(phases) == {"build_seconds", "prepare_seconds", "tokenize_seconds", "test_seconds",
                               "half_check_seconds"}  # the float16 check of the kept model (training.precision)
    assert rows["compiled"]["compiled"] == "regional: 2 x BertLayer" and rows["eager"]["compiled"] == ""
    assert rows["compiled"]["length_bucket"] == 16 and rows["eager"]["length_bucket"] == 0  # CPU defaults
    assert rows["compiled"]["run_key"] == rows["eager"]["run_key"]  # speed settings are not part of the key
    assert abs(rows["compiled"]["value"] - rows["eager"]["value"]) <= 0.1


def test_length_bucket_must_be_a_whole_number(tiny, cli, results):
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, "--encoder", "tiny-bert",
                       "--results-dir", results, "--length-bucket", "-3")
    assert code == 2 and "--length-bucket" in err and not results.exists()
