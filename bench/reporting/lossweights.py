"""The weight of each loss part a run logged, for the training-curve figures.

A method's `loss(batch)` returns its terms already weighted (the Trainer sums them unweighted), so the
`train_<part>` values of train_log.json are weight × term: supcon's `ce` is (1 − λ)·CE, 0.1 × CE at the default
λ = 0.9. The curves draw these stored values and say so; this module names each run's weights from its knobs
(spec.json's `method_config`, the method's defaults where missing), following the methods' `loss` in methods/.
A part not listed here has no known weight (a plugin's method; cline's learned weights).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.reporting.figures import RunInfo
from bench.results import runfiles, store

Knobs = dict[str, Any]


def ce_weight(knobs: Knobs) -> float:
    """cl, clld-*, lcl: L = w CE + (1 − w) contrastive."""
    return float(knobs["ce_weight"])


def contrast_weight(knobs: Knobs) -> float:
    """cl, clld-*, lcl: the contrastive term's 1 − ce_weight."""
    return 1.0 - float(knobs["ce_weight"])


CE_WEIGHTED = {"ce": ce_weight, "contrastive": contrast_weight}


def lambda_weighted(part: str) -> dict[str, Callable[[Knobs], float]]:
    """supcon, simcse, mirror-bert: L = (1 − λ) CE + λ `part` (knob `lambda_`)."""
    return {"ce": lambda k: 1.0 - float(k["lambda_"]), part: lambda k: float(k["lambda_"])}


# method -> logged part -> its weight from the run's knobs (methods/<method>.py, `loss`)
WEIGHTS: dict[str, dict[str, Callable[[Knobs], float]]] = {
    "ce": {"ce": lambda k: 1.0},
    "supcon": lambda_weighted("supcon"), "simcse": lambda_weighted("simcse"), "mirror-bert": lambda_weighted("mirror"),
    "cl": CE_WEIGHTED, "clld-static": CE_WEIGHTED, "clld-adaptive": CE_WEIGHTED,
    "lcl": {"ce": ce_weight, "lcl": contrast_weight, "ce_helper": ce_weight},
    "dcl": {"ce": lambda k: 1.0, "align": lambda k: float(k["lambda_"])},
    "cline": {"ce": lambda k: 1.0, "cts": lambda k: float(k["lambda_cts"]), "rtd": lambda k: float(k["lambda_rtd"])},
}
LEARNED = "learned"  # cline's `weights: learned`: exp(−s_k) L_k + r(s_k), weights trained with the model


def run_knobs(run: RunInfo) -> Knobs:
    """The run's knobs: spec.json's `method_config`, over the method's defaults (read from source)."""
    from bench.catalog import registry

    stored = dict(runfiles.read_json(run.path, store.SPEC).get("method_config") or {})
    methods = registry("method")
    base = run.method.split(":")[0]
    defaults = methods.get(base).config_fields() if base in methods else {}
    if WEIGHTS.get(base, {}).get("ce") is ce_weight and "ce_weight" not in stored and "lambda_" in stored:
        stored["ce_weight"] = stored["lambda_"]  # runs stored before ce_weight was renamed from lambda_
    return {**defaults, **stored}


def part_weights(run: RunInfo) -> dict[str, float | str]:
    """Logged part -> its weight in the run's objective (a float, or LEARNED); parts of unknown weight absent."""
    base = run.method.split(":")[0]
    if base not in WEIGHTS:
        return {}
    knobs = run_knobs(run)
    if base == "cline" and knobs.get("weights") == LEARNED:
        return {part: LEARNED for part in WEIGHTS[base]}
    try:
        return {part: weight(knobs) for part, weight in WEIGHTS[base].items()}
    except (KeyError, TypeError, ValueError):  # a knob missing or not a number: say nothing rather than guess
        return {}


def is_plain(weights: dict[str, float | str], part: str) -> bool:
    """Whether the logged `part` is the unweighted term (known weight 1)."""
    weight = weights.get(part)
    return isinstance(weight, float) and abs(weight - 1.0) < 1e-12


def weights_text(weights: dict[str, float | str], parts: list[str]) -> str:
    """`ce ×0.1, supcon ×0.9` for the logged `parts` whose weight is not 1 (`learned weights` for cline's learned
    ones; '' when every part is plain)."""
    shown = [p for p in parts if p in weights and not is_plain(weights, p)]
    if any(weights[p] == LEARNED for p in shown):
        return "learned weights"
    return ", ".join(f"{p} ×{weights[p]:.3g}" for p in shown)
