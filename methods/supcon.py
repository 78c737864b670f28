"""supcon — supervised contrastive fine-tuning (Gunel et al. 2021; Khosla et al. 2020)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bench.errors import BenchError
from bench.registry import METHODS
from bench.methods.base import Method
from bench.methods.losses import supcon_loss
from bench.methods.views import doubled, projection_head


SUPCONTRAST_BASE_TEMPERATURE = 0.07  # HobbitLong/SupContrast losses.py SupConLoss(base_temperature=0.07)


@dataclass(frozen=True)
class SupConConfig:
    """variant: paper (Gunel et al.'s SCL, the default: the mean over anchors with a positive) or released
    (SupContrast's loss at commit 66a8fe5: the mean over all anchors, an anchor without a positive counting 0,
    scaled by tau / base_temperature 0.07); tau: temperature; lambda_: SCL weight, L = (1-λ) CE + λ SCL;
    views: 1 (Gunel, in-batch positives only) or 2 (Khosla, a dropout twin per example); projection: none |
    linear | mlp on the [CLS] vector."""

    variant: str = "paper"
    tau: float = 0.3
    lambda_: float = 0.9
    views: int = 1
    projection: str = "none"

    def __post_init__(self) -> None:
        if self.variant not in ("released", "paper"):
            raise BenchError(f"supcon: variant is released or paper, got {self.variant!r}")
        if self.tau <= 0 or not 0 <= self.lambda_ <= 1 or self.views not in (1, 2):
            raise BenchError("supcon: tau > 0, lambda in [0, 1], views 1 or 2")
        if self.projection not in ("none", "linear", "mlp"):
            raise BenchError("supcon: projection must be none, linear or mlp")


@METHODS.register("supcon")
class SupCon(Method):
    """CE + supervised contrastive loss on L2-normalised sentence vectors (anchors without positives skipped
    under `paper`, counted as 0 under `released`)."""

    capturable = True  # tests/test_graphs.py

    Config = SupConConfig
    # 2: the `variant` knob (paper by default: the objective is unchanged).
    # 3: `released` follows SupContrast's fixed loss (commit 72fd989): an anchor without a positive adds 0 and
    #    counts in the mean over all anchors, so with a singleton class in the batch the term is |A|/R of version
    #    2's (which averaged over the anchors with a positive only). `paper` is unchanged.
    version = 3

    def __init__(self, encoder, num_labels, config=None, head_dropout=0.1):
        super().__init__(encoder, num_labels, config, head_dropout)
        self.projection = projection_head(self.config.projection, encoder.hidden_size)

    def loss(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        m = batch["labels"].shape[0]
        rows = doubled(batch) if self.config.views == 2 else batch
        pooled = self.encode(rows).pooled
        ce = F.cross_entropy(self.head(pooled[:m]).float(), batch["labels"])
        released = self.config.variant == "released"
        scl = supcon_loss(self.projection(pooled), rows["labels"], self.config.tau,
                          mean_over="all" if released else "positive")
        if released:  # SupContrast: loss = -(temperature / base_temperature) * ...
            scl = scl * (self.config.tau / SUPCONTRAST_BASE_TEMPERATURE)
        lam = self.config.lambda_
        return {"ce": (1 - lam) * ce, "supcon": lam * scl}
