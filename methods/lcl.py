"""lcl — label-aware contrastive loss (Suresh & Ong 2021): a weighting network scores how confusable each
class is for an anchor, and those weights scale the contrastive terms.

`variant: released` (the default) also classifies as the authors' primary encoder does (`head: released`,
`ReleasedHead`); `variant: paper` with the shared head (`head: linear`). docs/METHODS.md "lcl"."""

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


HEADS = ("released", "linear")


class ReleasedHead(nn.Module):
    """The classifier of the authors' primary encoder (varsha33/LCL_loss, model.py, `primary_encoder`, commit
    385e4abf80d6c819d2af15f086a02bf68e8642d5) on the pooled vector e (there: the last layer's [CLS] state):
    logits = drop(W2 relu(drop(W1 e + b1)) + b2), W1: (d, d), W2: (N, d), one dropout module used twice (before
    the ReLU, which commutes with it, and on the logits), no dropout on e itself."""

    def __init__(self, hidden_size: int, num_labels: int, dropout: float):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_size, num_labels)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.out(F.relu(self.dropout(self.dense(pooled)))))


@dataclass(frozen=True)
class LCLConfig:
    """variant: released (the authors' train.py: both cross-entropy terms over all 2M rows, originals and second
    views) or paper (over the M originals); tau: temperature; ce_weight: L = w CE(main) + (1-w) LCL + w
    CE(helper) (the paper's λ); weighting: separate (a second encoder, as the paper) or shared-head (a second
    head on the main encoder); views: dropout (a dropout twin) or synonym (a WordNet synonym view at syn_rate);
    head: the main classifier, released (the authors' model.py: Linear(d, d), dropout, ReLU, Linear(d, N),
    dropout on the logits) or linear (the shared head of every method: dropout, Linear(d, N)).

    The defaults are the released variant's. VARIANT_KNOBS (a class attribute, not a knob) names what each
    variant implies: bench.spec.method_config applies it between these defaults and the knobs a user sets, so
    `--set lcl.variant=paper` gives the linear head unless --set says otherwise. Building the class directly
    (LCLConfig(variant="paper")) applies nothing: pass every knob."""

    VARIANT_KNOBS = {"released": {"head": "released"}, "paper": {"head": "linear"}}

    variant: str = "released"
    tau: float = 0.3
    ce_weight: float = 0.5
    weighting: str = "separate"
    views: str = "dropout"
    syn_rate: float = 0.4
    head: str = "released"

    def __post_init__(self) -> None:
        if self.variant not in ("released", "paper"):
            raise BenchError(f"lcl: variant is released or paper, got {self.variant!r}")
        if self.head not in HEADS:
            raise BenchError(f"lcl: head is released or linear, got {self.head!r}")
        if self.tau <= 0 or not 0 <= self.ce_weight <= 1:
            raise BenchError("lcl: tau > 0 and ce_weight in [0, 1]")
        if self.weighting not in ("separate", "shared-head") or self.views not in ("dropout", "synonym"):
            raise BenchError("lcl: weighting is separate or shared-head; views is dropout or synonym")
        if not 0 < self.syn_rate <= 1:
            raise BenchError("lcl: syn_rate in (0, 1]")


@METHODS.register("lcl")
class LCL(SecondView, Method):
    """CE + label-aware contrastive loss weighted by a helper classifier's (undetached) class probabilities."""

    capturable = True  # tests/test_graphs.py

    Config = LCLConfig
    key_names = {"ce_weight": "lambda_"}  # renamed from lambda_ (same objective)
    # 2: the `variant` knob (released by default: cross-entropy over all 2M rows). 3: the `head` knob (released
    # by default, with variant released: the authors' two-layer classifier, used in training and prediction).
    version = 3

    def __init__(self, encoder, num_labels, config=None, head_dropout=0.1):
        super().__init__(encoder, num_labels, config, head_dropout)
        if self.config.head == "released":  # replaces the shared head: `logits` (prediction) uses it too
            self.head = ReleasedHead(encoder.hidden_size, num_labels, head_dropout)
        self.helper_encoder = copy.deepcopy(encoder) if self.config.weighting == "separate" else None
        self.helper_head = nn.Sequential(nn.Dropout(head_dropout), nn.Linear(encoder.hidden_size, num_labels))

    @classmethod
    def run_head(cls, spec, hidden_size, num_labels):
        """The released head for a run of version 3 or later that trained it; None (the shared head) for the
        others, runs of versions 1 and 2 included (they had no `head` knob and trained the shared head)."""
        if spec.method_version < 3 or dict(spec.method_config).get("head", "linear") != "released":
            return None
        return ReleasedHead(hidden_size, num_labels, spec.train.head_dropout)

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
