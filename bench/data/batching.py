"""Tokenised splits, length-grouped batch orders and padding: every split is laid out once as a padded matrix,
so a batch is one vectorised gather (no Python work per example), optionally rounded up to a small set of
fixed widths (length buckets) and put in pinned memory for an asynchronous copy to the GPU."""

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
        self._matrix: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def matrix(self) -> np.ndarray:
        """The token ids as one (n, longest) int64 matrix, zero after each example's end; built on first use."""
        if self._matrix is None:
            self._matrix = padded_matrix(self.token_ids, self.lengths, np.int64)
        return self._matrix


def padded_matrix(rows: list[list[int]] | list[list[float]], lengths: np.ndarray, dtype: type) -> np.ndarray:
    """Ragged rows as one (n, longest) matrix of `dtype`, zero-filled after each row's end."""
    width = int(lengths.max()) if len(lengths) else 0
    out = np.zeros((len(rows), width), dtype=dtype)
    if width:
        flat = np.fromiter((x for row in rows for x in row), dtype=dtype, count=int(lengths.sum()))
        out[np.arange(width)[None, :] < lengths[:, None]] = flat
    return out


def bucket_width(longest: int, bucket: int, max_width: int | None = None) -> int:
    """The padded width of a batch whose longest example has `longest` tokens: `longest` itself when
    `bucket` is 0, else the next multiple of `bucket`, capped at `max_width` (but never below `longest`), so
    that a whole run sees at most max_width / bucket distinct widths."""
    if bucket <= 0:
        return longest
    width = -(-longest // bucket) * bucket
    return max(longest, min(width, max_width)) if max_width else width


def auto_bucket(device_type: str, compiled: bool) -> int:
    """Default length bucket: 16 under --compile (at most max_length / 16 batch shapes), 8 on a GPU (tensor-core
    friendly widths), 0 on a CPU (each batch padded to its longest example: every pad token costs time there)."""
    if compiled:
        return 16
    return 8 if device_type == "cuda" else 0


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


def sorted_batches(lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Batches in order of decreasing length, for fast inference."""
    order = np.argsort(-lengths, kind="stable")
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def in_input_order(batches: list[np.ndarray], outputs: list[torch.Tensor]) -> np.ndarray:
    """The outputs of `batches` (index arrays, e.g. from `sorted_batches`) as one float32 array in the order of
    the input: a single copy to the host for all batches."""
    values = torch.cat(outputs).float().cpu().numpy()
    out = np.zeros_like(values)
    out[np.concatenate(batches)] = values
    return out


def take_padded(matrix: np.ndarray, index: np.ndarray, width: int, lengths: np.ndarray, fill: int | float
                ) -> np.ndarray:
    """Rows `index` of a zero-padded matrix cut or widened to `width` columns, `fill` after each row's end."""
    rows = matrix[index, :width]
    if rows.shape[1] < width:
        rows = np.pad(rows, ((0, 0), (0, width - rows.shape[1])))
    return np.where(np.arange(width)[None, :] < lengths[:, None], rows, rows.dtype.type(fill))


def batch_width(data: Encoded, index: np.ndarray, min_length: int = 1, bucket: int = 0,
                max_width: int | None = None) -> int:
    """The width `collate` pads the examples at `index` to: their longest (at least `min_length`), rounded up as
    `bucket_width` says."""
    longest = max(int(data.lengths[np.asarray(index, dtype=np.int64)].max()), min_length)
    return bucket_width(longest, bucket, max_width)


def collate(data: Encoded, index: np.ndarray, pad_id: int, min_length: int = 1, pad_to: int | None = None,
            bucket: int = 0, max_width: int | None = None, pin: bool = False) -> dict[str, torch.Tensor]:
    """Pad the examples at `index` to the longest of them (rounded up to a multiple of `bucket`, see
    `bucket_width`; or exactly `pad_to`): input_ids, attention_mask, labels and index, as CPU tensors (pinned
    with `pin`, for a non-blocking copy to a GPU)."""
    index = np.asarray(index, dtype=np.int64)
    lengths = data.lengths[index]
    width = batch_width(data, index, min_length, bucket, max_width) if pad_to is None else pad_to
    input_ids = take_padded(data.matrix, index, width, lengths, pad_id)
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    batch = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask),
             "labels": torch.from_numpy(data.labels[index].astype(np.int64, copy=False)),
             "index": torch.from_numpy(index)}
    return pinned(batch) if pin else batch


def pinned(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch in page-locked memory (torch's caching host allocator keeps each buffer until its copy ends)."""
    return {k: v.pin_memory() for k, v in batch.items()}


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """Copy a batch to `device` without waiting (non-blocking from pinned memory); `index` (which training example
    each row is) stays on the host: a training step reads only the device tensors (a method adds per-example
    data such as word views when it collates, `Method.collate`)."""
    return {k: v if k == "index" else v.to(device, non_blocking=True) for k, v in batch.items()}
