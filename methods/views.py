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
from bench.data.batching import Encoded, batch_width, collate, padded_matrix, take_padded
from bench.methods.base import PrepareContext

ROW_KEYS = ("input_ids", "attention_mask")  # what the encoder reads of a batch or of a view


def projection_head(kind: str, dim: int) -> nn.Module:
    """`mlp` = Linear(d,d)-ReLU-Linear(d,d), `linear` = Linear(d,d), `tanh` = Linear(d,d)-Tanh (SimCSE's MLP, as
    BERT's pooler), `none` = identity."""
    if kind == "tanh":
        return nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
    if kind == "mlp":
        return nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
    if kind == "linear":
        return nn.Linear(dim, dim)
    return nn.Identity()


def doubled(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch stacked on itself (2M rows): one forward pass gives two independent dropout views."""
    return {k: torch.cat([v, v]) for k, v in batch.items()}


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

    def width(self, index: np.ndarray) -> int:
        """The width the views at `index` would be padded to alone (as the Trainer pads a batch)."""
        return batch_width(self.encoded, index, self.min_length, self.bucket, self.max_width)

    def rows(self, index: np.ndarray, width: int, flags: bool = True) -> dict[str, torch.Tensor]:
        """The views of the training examples at `index` padded to `width` (at least `width(index)`), as CPU
        tensors: input_ids and attention_mask, and with `flags` the (B, width) float32 `replaced` and
        `candidate` flags (0 on padding)."""
        index = np.asarray(index, dtype=np.int64)
        out = collate(self.encoded, index, self.pad_id, self.min_length, pad_to=width)
        out = {key: out[key] for key in ROW_KEYS}
        if flags:
            lengths = self.encoded.lengths[index]
            for key, matrix in (("replaced", self.replaced_matrix), ("candidate", self.candidate_matrix)):
                out[key] = torch.from_numpy(take_padded(matrix, index, width, lengths, 0.0))
        return out


def collate_with_views(data: Encoded, index: np.ndarray, pad_id: int, min_length: int, bucket: int,
                       max_width: int | None, views: dict[str, TokenViews], flags: bool = True
                       ) -> dict[str, torch.Tensor]:
    """A training batch (bench.data.batching.collate's keys) and, for each `prefix: views` of `views`, the rows
    of those views at `index` under `<prefix>_input_ids`, `<prefix>_attention_mask` and, with `flags`,
    `<prefix>_replaced` and `<prefix>_candidate`; all padded to one width: the widest any of them would have
    alone. CPU tensors, not pinned."""
    index = np.asarray(index, dtype=np.int64)
    width = max([batch_width(data, index, min_length, bucket, max_width)] + [v.width(index) for v in views.values()])
    batch = collate(data, index, pad_id, min_length, pad_to=width)
    for prefix, view in views.items():
        batch.update({f"{prefix}_{key}": value for key, value in view.rows(index, width, flags).items()})
    return batch


def with_views(batch: dict[str, torch.Tensor], *prefixes: str) -> dict[str, torch.Tensor]:
    """input_ids and attention_mask of the batch's rows followed by those of its views `prefixes` (the keys
    `collate_with_views` adds; one width, so a plain concatenation): (1 + len(prefixes)) M rows."""
    for prefix in prefixes:
        if f"{prefix}_input_ids" not in batch:
            raise RuntimeError(f"the batch has no {prefix!r} views: build it with the method's `collate` "
                               "(Trainer.batch does), after prepare()")
    return {key: torch.cat([batch[key], *(batch[f"{prefix}_{key}"] for prefix in prefixes)]) for key in ROW_KEYS}


def word_views(context: PrepareContext, kind: str, rate: float, quota: str = "content",
               antonym_share: float | None = None, redraw_same: bool = True) -> TokenViews:
    """WordNet views (a bench.data.augment.KINDS kind, rate counted by a QUOTAS rule; `antonym_share` and
    `redraw_same`: see augment_texts) of every training text, cached on disk per dataset and seed."""
    views = augment_texts(context.train_texts, kind, rate, context.seed, cache_dir=context.cache_dir, quota=quota,
                          antonym_share=antonym_share, redraw_same=redraw_same)
    tokenize_words = context.bundle.tokenize_words
    ids, word_ids = tokenize_words([list(v.tokens) for v in views])
    replaced = [[int(w >= 0 and v.replaced[w]) for w in wid] for v, wid in zip(views, word_ids)]
    candidate = [[int(w >= 0 and v.candidate[w]) for w in wid] for v, wid in zip(views, word_ids)]
    labels = np.zeros(len(ids), dtype=np.int64)
    return TokenViews(Encoded(ids, labels), replaced, context.bundle.pad_id, context.bundle.min_length,
                      context.bucket, context.max_width, candidate)


def require_wordnet() -> None:
    """Fail before any shard starts when WordNet is missing (the error says how to install it)."""
    from bench.data.wordnet import load_wordnet

    load_wordnet()


class SecondView:
    """Mixin for methods with a second view per example: WordNet synonyms at `config.syn_rate` when
    `config.views == "synonym"` (collated into the batch under `syn_` keys), else a dropout twin."""

    views: TokenViews | None = None

    @classmethod
    def validate(cls, config: Any, label_names: list[str], results_dir: Path) -> None:
        if config.views == "synonym":
            require_wordnet()

    def prepare(self, context: PrepareContext) -> None:
        if self.config.views == "synonym":
            self.views = word_views(context, "syn", self.config.syn_rate)

    def collate(self, data: Encoded, index: np.ndarray, pad_id: int, min_length: int, bucket: int,
                max_width: int | None) -> dict[str, torch.Tensor]:
        """The training batch, with its synonym views (`syn_input_ids`, `syn_attention_mask`) when
        `views: synonym`."""
        if self.config.views != "synonym":
            return super().collate(data, index, pad_id, min_length, bucket, max_width)
        if self.views is None:
            raise RuntimeError(f"{type(self).__name__.lower()} with views: synonym needs prepare() before training")
        return collate_with_views(data, index, pad_id, min_length, bucket, max_width, {"syn": self.views},
                                  flags=False)

    def paired_rows(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """2M rows: the batch, then its second views (its synonym views, or itself: a dropout twin)."""
        return with_views(batch, "syn") if self.config.views == "synonym" else doubled(batch)
