import numpy as np
import torch

from bench.data.batching import Encoded, collate, length_grouped_batches, sorted_batches
from benchmarks.loops import random_batches


def test_length_grouped_batches_cover_every_index_once():
    lengths = np.random.default_rng(0).integers(1, 100, size=1003)
    batches = length_grouped_batches(lengths, 32, np.random.default_rng(1), group=4)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(1003))
    assert all(len(b) == 32 for b in batches[:-1])


def test_length_grouping_reduces_padding():
    lengths = np.random.default_rng(0).integers(1, 200, size=4096)

    def padded_tokens(batches):
        return sum(len(b) * lengths[b].max() for b in batches)

    grouped = padded_tokens(length_grouped_batches(lengths, 32, np.random.default_rng(1)))
    plain = padded_tokens(random_batches(len(lengths), 32, np.random.default_rng(1)))
    assert grouped < 0.7 * plain


def test_batch_order_depends_on_the_rng_only():
    lengths = np.arange(100)
    a = length_grouped_batches(lengths, 8, np.random.default_rng([3, 1]))
    b = length_grouped_batches(lengths, 8, np.random.default_rng([3, 1]))
    c = length_grouped_batches(lengths, 8, np.random.default_rng([3, 2]))
    assert all((x == y).all() for x, y in zip(a, b))
    assert any((x != y).any() for x, y in zip(a, c))


def test_sorted_batches_for_inference():
    batches = sorted_batches(np.array([3, 9, 1, 5]), 2)
    assert [b.tolist() for b in batches] == [[1, 3], [0, 2]]


def test_collate_pads_dynamically():
    data = Encoded([[5, 6, 7], [8], [9, 10]], np.array([0, 1, 2]))
    batch = collate(data, np.array([1, 2]), pad_id=0)
    assert batch["input_ids"].tolist() == [[8, 0], [9, 10]]
    assert batch["attention_mask"].tolist() == [[1, 0], [1, 1]]
    assert batch["labels"].tolist() == [1, 2]
    assert batch["index"].tolist() == [1, 2]
    assert batch["input_ids"].dtype == torch.int64


def test_collate_min_length_and_fixed_width():
    data = Encoded([[5], [6]], np.array([0, 1]))
    assert collate(data, np.array([0, 1]), pad_id=1, min_length=5)["input_ids"].shape == (2, 5)
    assert collate(data, np.array([0]), pad_id=1, pad_to=7)["input_ids"].tolist() == [[5, 1, 1, 1, 1, 1, 1]]
