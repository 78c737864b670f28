"""Building blocks shared by methods: projection heads, dropout twins in one forward pass, and tokenised
word-substitution views of the training texts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bench.data.augment import augment_texts
from bench.data.batching import Encoded, collate, padded_matrix, take_padded, to_device
from bench.methods.base import PrepareContext


def projection_head(kind: str, dim: int) -> nn.Module:
    """`mlp` = Linear(d,d)-ReLU-Linear(d,d), `linear` = Linear(d,d), `none` = identity."""
    if kind == "mlp":
        return nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
    if kind == "linear":
        return nn.Linear(dim, dim)
    return nn.Identity()


def doubled(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch stacked on itself (2M rows): one forward pass gives two independent dropout views."""
    return {k: torch.cat([v, v]) for k, v in batch.items()}


def stacked(*batches: dict[str, torch.Tensor], pad_id: int) -> dict[str, torch.Tensor]:
    """Several padded batches (same keys) padded to a common width and concatenated along rows."""
    width = max(b["input_ids"].shape[1] for b in batches)

    def widen(t: torch.Tensor, fill: int) -> torch.Tensor:
        return nn.functional.pad(t, (0, width - t.shape[1]), value=fill) if t.ndim == 2 else t

    out = {}
    for key in batches[0]:
        fill = pad_id if key == "input_ids" else 0
        out[key] = torch.cat([widen(b[key], fill) for b in batches])
    return out


@dataclass
class TokenViews:
    """Tokenised augmented copies of the training texts, with per-token `replaced` and `candidate` flags (a
    token of a replaced word / of a content word; special tokens are neither; no `candidate` given: none is);
    batches are padded like the Trainer's (`bucket`, `max_width`: see bench.data.batching.bucket_width)."""

    encoded: Encoded
    replaced: list[list[int]]
    pad_id: int
    min_length: int
    bucket: int = 0
    max_width: int | None = None
    candidate: list[list[int]] | None = None

    def __post_init__(self) -> None:
        self.replaced_matrix = padded_matrix(self.replaced, self.encoded.lengths, np.float32)
        candidate = self.candidate if self.candidate is not None else [[0] * len(r) for r in self.replaced]
        self.candidate_matrix = padded_matrix(candidate, self.encoded.lengths, np.float32)

    def batch(self, index: torch.Tensor, device: torch.device) -> dict[str, torch.Tensor]:
        """The views of the training examples at `index` (a host tensor), padded, with `replaced` and `candidate`
        (B, T) tensors."""
        idx = index.numpy()  # a host tensor: reading it never waits for the GPU
        out = collate(self.encoded, idx, self.pad_id, self.min_length, bucket=self.bucket, max_width=self.max_width,
                      pin=device.type == "cuda")
        width, lengths = out["input_ids"].shape[1], self.encoded.lengths[idx]
        for key, matrix in (("replaced", self.replaced_matrix), ("candidate", self.candidate_matrix)):
            out[key] = torch.from_numpy(take_padded(matrix, idx, width, lengths, 0.0))
            if device.type == "cuda":
                out[key] = out[key].pin_memory()
        return to_device(out, device)


def word_views(context: PrepareContext, kind: str, rate: float, quota: str = "content",
               antonym_share: float | None = None) -> TokenViews:
    """WordNet views (a bench.data.augment.KINDS kind, rate counted by a QUOTAS rule; `antonym_share`: see
    augment_texts) of every training text, cached on disk per dataset and seed."""
    views = augment_texts(context.train_texts, kind, rate, context.seed, cache_dir=context.cache_dir, quota=quota,
                          antonym_share=antonym_share)
    tokenize_words = context.bundle.tokenize_words
    ids, word_ids = tokenize_words([list(v.tokens) for v in views])
    replaced = [[int(w >= 0 and v.replaced[w]) for w in wid] for v, wid in zip(views, word_ids)]
    candidate = [[int(w >= 0 and v.candidate[w]) for w in wid] for v, wid in zip(views, word_ids)]
    labels = np.zeros(len(ids), dtype=np.int64)
    return TokenViews(Encoded(ids, labels), replaced, context.bundle.pad_id, context.bundle.min_length,
                      context.bucket, context.max_width, candidate)


def with_second_view(batch: dict[str, torch.Tensor], views: TokenViews | None) -> dict[str, torch.Tensor]:
    """2M rows: the batch followed by its word-substitution views, or by itself (a dropout twin) without views."""
    if views is None:
        return doubled(batch)
    return stacked(batch, views.batch(batch["index"], batch["labels"].device), pad_id=views.pad_id)


def require_wordnet() -> None:
    """Fail before any shard starts when WordNet is missing (the error says how to install it)."""
    from bench.data.wordnet import load_wordnet

    load_wordnet()


class SecondView:
    """Mixin for methods with a second view per example: WordNet synonyms at `config.syn_rate` when
    `config.views == "synonym"`, else a dropout twin."""

    views: TokenViews | None = None

    @classmethod
    def validate(cls, config: Any, label_names: list[str], results_dir: Path) -> None:
        if config.views == "synonym":
            require_wordnet()

    def prepare(self, context: PrepareContext) -> None:
        if self.config.views == "synonym":
            self.views = word_views(context, "syn", self.config.syn_rate)

    def paired_rows(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """2M rows: the batch, then its second views."""
        return with_second_view(batch, self.views)
