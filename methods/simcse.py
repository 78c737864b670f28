"""simcse — cross-entropy plus SimCSE's self-supervised contrast (Gao, Yao and Chen 2021): two dropout views of the
same text are a positive pair, the other texts of the batch its negatives; labels play no part in the contrast."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bench.errors import BenchError
from bench.registry import METHODS
from bench.methods.base import Method
from bench.methods.losses import info_nce
from bench.methods.views import doubled, projection_head


@dataclass(frozen=True)
class SimCSEConfig:
    """variant: released (princeton-nlp/SimCSE at 206d7ae, unsupervised: the [CLS] vector through an MLP of Linear
    and Tanh used in training only, temperature 0.05); tau: temperature; lambda_: the contrast's weight, L =
    (1-λ) CE + λ InfoNCE (ours: the paper trains without labels); projection: tanh (SimCSE's MLP) | mlp | linear |
    none, on the pooled vector, for the contrast only."""

    VARIANT_KNOBS = {"released": {"tau": 0.05, "projection": "tanh"}}

    variant: str = "released"
    tau: float = 0.05
    lambda_: float = 0.5
    projection: str = "tanh"

    def __post_init__(self) -> None:
        if self.variant != "released":
            raise BenchError(f"simcse: variant is released, got {self.variant!r}")
        if self.tau <= 0 or not 0 <= self.lambda_ <= 1:
            raise BenchError("simcse: tau > 0 and lambda in [0, 1]")
        if self.projection not in ("tanh", "mlp", "linear", "none"):
            raise BenchError("simcse: projection is tanh, mlp, linear or none")


@METHODS.register("simcse", "SimCSE")
class SimCSE(Method):
    """CE + λ InfoNCE between two dropout views of each text, the batch's other texts as negatives (no labels).

    One forward pass over the batch stacked on itself; the classifier reads the first view."""

    capturable = True  # tests/test_graphs.py

    Config = SimCSEConfig

    def __init__(self, encoder, num_labels, config=None, head_dropout=0.1):
        super().__init__(encoder, num_labels, config, head_dropout)
        self.projection = projection_head(self.config.projection, encoder.hidden_size)

    def loss(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        m = batch["labels"].shape[0]
        pooled = self.encode(doubled(batch)).pooled  # rows i and m + i: one text, two dropout masks
        ce = F.cross_entropy(self.head(pooled[:m]).float(), batch["labels"])
        z = self.projection(pooled)
        contrast = info_nce(z[:m], z[m:], self.config.tau)
        lam = self.config.lambda_
        return {"ce": (1 - lam) * ce, "simcse": lam * contrast}
