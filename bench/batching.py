"""Tokenised splits, length-grouped batch orders and dynamic padding."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Encoded:
    """A tokenised split: token-id lists, integer labels and their lengths."""

    token_ids: list[list[int]]
    labels: np.ndarray

    def __post_init__(self) -> None:
        self.lengths = np.array([len(t) for t in self.token_ids], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.token_ids)


def length_grouped_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
                           group: int = 50) -> list[np.ndarray]:
    """Shuffled batches of similar-length examples: shuffle, sort within chunks of `group` batches, shuffle batches.

    Every index appears exactly once; only the last batch may be smaller than `batch_size`.
    """
    order = rng.permutation(len(lengths))
    chunk = batch_size * group
    sorted_order = np.concatenate([
        part[np.argsort(-lengths[part], kind="stable")] for part in np.split(order, range(chunk, len(order), chunk))
    ]) if len(order) else order
    batches = [sorted_order[i:i + batch_size] for i in range(0, len(sorted_order), batch_size)]
    full = [b for b in batches if len(b) == batch_size]
    tail = [b for b in batches if len(b) < batch_size]
    return [full[i] for i in rng.permutation(len(full))] + tail


def random_batches(n: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Plain shuffled batches (no length grouping), for comparison in benchmarks."""
    order = rng.permutation(n)
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]


def sorted_batches(lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Batches in order of decreasing length, for fast inference."""
    order = np.argsort(-lengths, kind="stable")
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def collate(data: Encoded, index: np.ndarray, pad_id: int, min_length: int = 1,
            pad_to: int | None = None) -> dict[str, torch.Tensor]:
    """Pad the examples at `index` to the longest of them (or `pad_to`): input_ids, attention_mask, labels, index."""
    lengths = data.lengths[index]
    width = max(int(lengths.max()), min_length) if pad_to is None else pad_to
    input_ids = np.full((len(index), width), pad_id, dtype=np.int64)
    for row, i in enumerate(index):
        ids = data.token_ids[i][:width]
        input_ids[row, :len(ids)] = ids
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    return {
        "input_ids": torch.from_numpy(input_ids),
        "attention_mask": torch.from_numpy(mask),
        "labels": torch.from_numpy(data.labels[index]),
        "index": torch.from_numpy(np.asarray(index, dtype=np.int64)),
    }
