"""In which precision a trained model is stored (`--model-precision`): `auto` (the default) stores float16 --
half the disk -- when the weights rounded to float16 still predict what the trained weights predicted on at least
HALF_AGREEMENT of the test items, else float32; `float32` always keeps them as trained. The check costs one more
prediction pass over the test split; its result goes into the model file's metadata and the run's train_log.json
(`model_storage`).

A model stored in float16 is the run's model from then on: its weights stay rounded in memory and its test
predictions are the rounded model's, so the run's predictions, clean metrics and evaluators are those of the model
on disk, and a later `clbench evaluate` or `clbench export` reproduces them exactly."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from bench.results.modelfile import model_state
from bench.spec import PRECISIONS

HALF_AGREEMENT = 0.995  # the share of test items whose prediction must survive rounding to float16
FLOAT16_MAX = 65504.0  # the largest finite float16: a weight beyond it keeps the model in float32


def half_kept(agreement: float | None) -> bool:
    """Whether float16 weights that predict the same on this share of test items are kept (None: they do not fit)."""
    return agreement is not None and agreement >= HALF_AGREEMENT


def round_to_half(trainer: Any, method: Any, test: Any, logits: np.ndarray) -> tuple[float | None, np.ndarray]:
    """Round every weight the model file stores to float16 (in place, kept as float32 values) and predict the test
    split (`test`, encoded) again: (the share of items whose predicted class is unchanged, the test logits of the
    model kept). When the share is below HALF_AGREEMENT the trained weights are restored and `logits` returned;
    a weight beyond float16's range gives (None, logits) and changes nothing."""
    tensors = [t for t in model_state(method).values() if t.is_floating_point()]  # views of the live weights
    with torch.no_grad():
        if any(bool(t.abs().max() > FLOAT16_MAX) for t in tensors if t.numel()):
            return None, logits
        originals = [t.clone() for t in tensors]
        for t in tensors:
            t.copy_(t.half())
        rounded = trainer.require_finite_outputs(trainer.predict(test), "test")
        agreement = float((rounded.argmax(1) == logits.argmax(1)).mean()) if len(logits) else 1.0
        if half_kept(agreement):
            return agreement, rounded
        for t, original in zip(tensors, originals):
            t.copy_(original)
    return agreement, logits


def storage(agreement: float | None, precision: str = "auto") -> tuple[str, dict[str, Any]]:
    """The dtype to store a model in and what decided it (for the file's metadata and train_log.json)."""
    if precision not in PRECISIONS:
        raise ValueError(f"--model-precision is {' or '.join(PRECISIONS)}, got {precision!r}")
    half = precision == "auto" and half_kept(agreement)
    why = ("asked for (--model-precision float32)" if precision == "float32" else
           "a weight is beyond float16's range" if agreement is None else
           f"float16 predicts the same on {100 * agreement:.2f}% of test items "
           f"({'>=' if half else '<'} {100 * HALF_AGREEMENT:.1f}%)")
    return ("float16" if half else "float32"), {"dtype": "float16" if half else "float32", "why": why,
                                                "test_agreement_float16": agreement}
