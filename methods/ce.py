"""ce: plain cross-entropy fine-tuning (the baseline "CT" of the CLLD paper)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench.registry import METHODS
from bench.methods.base import Method


@METHODS.register("ce")
class CrossEntropy(Method):
    """Cross-entropy on the classifier head's logits."""

    capturable = True  # tests/test_graphs.py

    def loss(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        logits = self.logits(batch)
        return {"ce": F.cross_entropy(logits.float(), batch["labels"])}
