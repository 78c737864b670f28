"""dcl — disentangled contrastive learning (Chen et al.), fine-tuning form: BYOL-style alignment of an online
network's prediction with a momentum (EMA) target network's projection of another view."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bench.errors import BenchError
from bench.registry import METHODS
from bench.methods.base import Method, Progress
from bench.methods.losses import PowerNorm, alignment_loss, ema_update
from bench.methods.views import SecondView


@dataclass(frozen=True)
class DCLConfig:
    """variant: released (the authors' PowerNorm: rows scaled by their RMS first, a cumulative-mean warm-up of the
    running statistic, their approximate backward) or paper (the earlier form; docs/METHODS.md "dcl"); momentum:
    EMA rate of the target network; lambda_: L = CE + λ L_align; views: synonym (WordNet, at syn_rate) or dropout
    (the same text twice); hidden/out: projector and predictor widths (Linear-PowerNorm-ReLU-Linear); powernorm_alpha /
    powernorm_warmup: PowerNorm's running-statistic rate and the steps during which it normalises with the batch
    statistic."""

    variant: str = "released"
    momentum: float = 0.996
    lambda_: float = 1.0
    views: str = "synonym"
    syn_rate: float = 0.4
    hidden: int = 512
    out: int = 128
    powernorm_alpha: float = 0.9
    powernorm_warmup: int = 1000

    def __post_init__(self) -> None:
        if self.variant not in ("released", "paper"):
            raise BenchError(f"dcl: variant is released or paper, got {self.variant!r}")
        if not 0 <= self.momentum <= 1 or self.lambda_ < 0 or self.views not in ("synonym", "dropout"):
            raise BenchError("dcl: momentum in [0, 1], lambda >= 0, views synonym or dropout")
        if not 0 < self.syn_rate <= 1 or self.hidden < 1 or self.out < 1:
            raise BenchError("dcl: syn_rate in (0, 1], hidden and out >= 1")
        if not 0 <= self.powernorm_alpha <= 1 or self.powernorm_warmup < 0:
            raise BenchError("dcl: powernorm_alpha in [0, 1], powernorm_warmup >= 0")


def mlp(config: DCLConfig, dim_in: int) -> nn.Sequential:
    """Linear(d, hidden) - PowerNorm - ReLU - Linear(hidden, out)."""
    return nn.Sequential(nn.Linear(dim_in, config.hidden),
                         PowerNorm(config.hidden, config.powernorm_alpha, config.powernorm_warmup,
                                   variant=config.variant),
                         nn.ReLU(), nn.Linear(config.hidden, config.out))


@METHODS.register("dcl")
class DCL(SecondView, Method):
    """CE + symmetric alignment loss against a separate EMA target network (stop-gradient)."""

    capturable = True  # tests/test_graphs.py

    Config = DCLConfig
    # 2: the `variant` knob (the released PowerNorm by default).
    # 3: `released` PowerNorm also takes the released backward (zxlzr/DCL PowerFunction.backward, commit 8fc953e):
    #    the approximate gradient with its accumulated statistic ema_gz, instead of plain autograd. `paper` is
    #    unchanged.
    version = 3

    def __init__(self, encoder, num_labels, config=None, head_dropout=0.1):
        super().__init__(encoder, num_labels, config, head_dropout)
        self.projector = mlp(self.config, encoder.hidden_size)
        self.predictor = mlp(self.config, self.config.out)
        self.target_encoder = copy.deepcopy(encoder).requires_grad_(False)
        self.target_projector = copy.deepcopy(self.projector).requires_grad_(False)

    def loss(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        m = batch["labels"].shape[0]
        rows = self.paired_rows(batch)
        online = self.encode(rows).pooled
        ce = F.cross_entropy(self.head(online[:m]).float(), batch["labels"])
        prediction = self.predictor(self.projector(online))
        with torch.no_grad():
            target = self.target_projector(self.target_encoder(rows["input_ids"], rows["attention_mask"]).pooled)
        align = alignment_loss(prediction[:m], target[m:]) + alignment_loss(prediction[m:], target[:m])
        return {"ce": ce, "align": self.config.lambda_ * align}

    def on_step_end(self, progress: Progress) -> None:
        ema_update(self.target_encoder, self.encoder, self.config.momentum)
        ema_update(self.target_projector, self.projector, self.config.momentum)
