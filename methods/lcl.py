"""lcl — label-aware contrastive loss (Suresh & Ong 2021): a weighting network scores how confusable each
class is for an anchor, and those weights scale the contrastive terms."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bench.errors import BenchError
from bench.registry import METHODS
from bench.methods.base import Method
from bench.methods.losses import lcl_loss
from bench.methods.views import SecondView


@dataclass(frozen=True)
class LCLConfig:
    """variant: released (the authors' train.py: both cross-entropy terms over all 2M rows, originals and second
    views) or paper (over the M originals); tau: temperature; ce_weight: L = w CE(main) + (1-w) LCL + w
    CE(helper) (the paper's λ); weighting: separate (a second encoder, as the paper) or shared-head (a second
    head on the main encoder); views: dropout (a dropout twin) or synonym (a WordNet synonym view at syn_rate)."""

    variant: str = "released"
    tau: float = 0.3
    ce_weight: float = 0.5
    weighting: str = "separate"
    views: str = "dropout"
    syn_rate: float = 0.4

    def __post_init__(self) -> None:
        if self.variant not in ("released", "paper"):
            raise BenchError(f"lcl: variant is released or paper, got {self.variant!r}")
        if self.tau <= 0 or not 0 <= self.ce_weight <= 1:
            raise BenchError("lcl: tau > 0 and ce_weight in [0, 1]")
        if self.weighting not in ("separate", "shared-head") or self.views not in ("dropout", "synonym"):
            raise BenchError("lcl: weighting is separate or shared-head; views is dropout or synonym")
        if not 0 < self.syn_rate <= 1:
            raise BenchError("lcl: syn_rate in (0, 1]")


@METHODS.register("lcl")
class LCL(SecondView, Method):
    """CE + label-aware contrastive loss weighted by a helper classifier's (undetached) class probabilities."""

    Config = LCLConfig
    key_names = {"ce_weight": "lambda_"}  # renamed from lambda_ (same objective)
    version = 2  # 2: the `variant` knob (released by default: cross-entropy over all 2M rows)

    def __init__(self, encoder, num_labels, config=None, head_dropout=0.1):
        super().__init__(encoder, num_labels, config, head_dropout)
        self.helper_encoder = copy.deepcopy(encoder) if self.config.weighting == "separate" else None
        self.helper_head = nn.Sequential(nn.Dropout(head_dropout), nn.Linear(encoder.hidden_size, num_labels))

    def loss(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        m = batch["labels"].shape[0]
        rows = self.paired_rows(batch)
        labels = torch.cat([batch["labels"], batch["labels"]])
        pooled = self.encode(rows).pooled
        if self.helper_encoder is not None:
            helper_pooled = self.helper_encoder(rows["input_ids"], rows["attention_mask"]).pooled
        else:
            helper_pooled = pooled
        helper_logits = self.helper_head(helper_pooled).float()
        weights = torch.softmax(helper_logits, dim=-1)
        w = self.config.ce_weight
        rows_ce = 2 * m if self.config.variant == "released" else m  # the rows both cross-entropy terms read
        return {
            "ce": w * F.cross_entropy(self.head(pooled[:rows_ce]).float(), labels[:rows_ce]),
            "lcl": (1 - w) * lcl_loss(pooled, labels, weights, self.config.tau),
            "ce_helper": w * F.cross_entropy(helper_logits[:rows_ce], labels[:rows_ce]),
        }
