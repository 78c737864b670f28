"""mirror-bert — cross-entropy plus Mirror-BERT's self-supervised contrast (Liu, Vulić, Korhonen and Collier 2021):
a text and a copy of it with a random span of characters masked, each through dropout, are a positive pair; the
other texts of the batch and their copies are the negatives; labels play no part in the contrast."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from bench.data.batching import Encoded
from bench.data.spans import LITERAL, masked_views
from bench.errors import BenchError
from bench.registry import METHODS
from bench.methods.base import Method, PrepareContext
from bench.methods.losses import nt_xent
from bench.methods.views import TokenViews, collate_with_views, with_views

MASKS = ("literal", "tokenizer")  # the string that replaces a span: "[MASK]" as written, or the tokenizer's own


@dataclass(frozen=True)
class MirrorBERTConfig:
    """variant: released (cambridgeltl/mirror-bert: the literal string [MASK], also for RoBERTa) or paper (the
    tokenizer's mask token); tau: temperature (0.04, the released sentence setting); lambda_: the contrast's
    weight, L = (1-λ) CE + λ NT-Xent (ours: the paper trains without labels); span: characters masked (5);
    min_chars: texts shorter than this are not masked (30); mask: literal | tokenizer."""

    VARIANT_KNOBS = {"released": {"mask": "literal"}, "paper": {"mask": "tokenizer"}}

    variant: str = "released"
    tau: float = 0.04
    lambda_: float = 0.5
    span: int = 5  # SPAN (literals: bench.catalog reads the defaults from this source without importing it)
    min_chars: int = 30  # MIN_CHARS
    mask: str = "literal"

    def __post_init__(self) -> None:
        if self.variant not in ("released", "paper"):
            raise BenchError(f"mirror-bert: variant is released or paper, got {self.variant!r}")
        if self.tau <= 0 or not 0 <= self.lambda_ <= 1:
            raise BenchError("mirror-bert: tau > 0 and lambda in [0, 1]")
        if self.span < 1 or self.min_chars < 0 or self.mask not in MASKS:
            raise BenchError("mirror-bert: span >= 1, min_chars >= 0, mask literal or tokenizer")


@METHODS.register("mirror-bert", "mirrorbert", "Mirror-BERT")
class MirrorBERT(Method):
    """CE + λ NT-Xent between each text and a copy with a random span of characters masked (no labels).

    One forward pass over both, each with its own dropout; the masked copies are drawn anew every epoch, as the
    released data loader draws them each time a text is loaded."""

    capturable = True  # tests/test_graphs.py (the views are collated on the host)

    Config = MirrorBERTConfig

    context: PrepareContext | None = None
    views: TokenViews | None = None

    def prepare(self, context: PrepareContext) -> None:
        self.context = context

    def on_epoch_start(self, epoch: int) -> None:
        """This epoch's masked copy of every training text, tokenised as the training texts are."""
        context = self.context
        if context is None:
            raise RuntimeError("mirror-bert needs prepare() before training")
        bundle = context.bundle
        token = LITERAL if self.config.mask == "literal" else bundle.mask_token
        texts = masked_views(context.train_texts, context.seed, epoch, self.config.span, self.config.min_chars, token)
        ids = bundle.tokenize(texts)
        self.views = TokenViews(Encoded(ids, np.zeros(len(ids), dtype=np.int64)), [[0] * len(i) for i in ids],
                                bundle.pad_id, bundle.min_length, context.bucket, context.max_width)

    def collate(self, data: Encoded, index: np.ndarray, pad_id: int, min_length: int, bucket: int,
                max_width: int | None) -> dict[str, torch.Tensor]:
        """The training batch with its texts' masked copies (`view_input_ids`, `view_attention_mask`)."""
        if self.views is None:
            raise RuntimeError("mirror-bert collates a training batch only after on_epoch_start()")
        return collate_with_views(data, index, pad_id, min_length, bucket, max_width, {"view": self.views},
                                  flags=False)

    def loss(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        m = batch["labels"].shape[0]
        pooled = self.encode(with_views(batch, "view")).pooled  # rows i and m + i: a text and its masked copy
        ce = F.cross_entropy(self.head(pooled[:m]).float(), batch["labels"])
        contrast = nt_xent(pooled[:m], pooled[m:], self.config.tau)
        lam = self.config.lambda_
        return {"ce": (1 - lam) * ce, "mirror": lam * contrast}
