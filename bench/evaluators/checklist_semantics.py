"""How CheckList cases are judged: the INV / DIR tolerances, the DIR score and the neutral band, from the
evaluator options, and the three-class view of a binary sentiment model that the neutral band gives.

Defaults are the project's rules (documented in checklist.py); each knob selects the behaviour of CheckList's
released sentiment suite (marcotcr/checklist: checklist/expect.py, checklist/test_types.py,
notebooks/Sentiment.ipynb, notebooks/tutorials/5. Testing transformer pipelines.ipynb):

- `checklist_inv_tolerance` (0.0): a changed prediction still passes an INV case when the probability of the
  original prediction's label moved by at most this much. 0 = any change fails; CheckList's INV uses 0.1.
- `checklist_dir_tolerance` (0.1, as CheckList): the most a DIR score may drop.
- `checklist_dir_score`: "side" (default) = P(accepted labels); "margin" = P(accepted side) - P(opposite
  side), as the suite's "add positive/negative phrases" tests; "monotonic" = "side", but a case whose
  original side probability is at most the tolerance (it cannot fail) is not scorable, as Expect.monotonic.
- `checklist_neutral_band` ("" = none; "LOW,HIGH", CheckList's tutorial: "1/3,2/3"): on a binary sentiment
  set, the model is scored as a negative / neutral / positive model: P(positive) strictly inside the band
  predicts "neutral" (a label suite files may then name), with the tutorial's probabilities (`band_view`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.evaluators.base import EvalOptions
from bench.evaluators.checklist_builtin import sentiment_sides

NEUTRAL = "neutral"                         # the band's label, appended to a binary set's labels
DIR_SCORES = ("side", "margin", "monotonic")
KNOBS = ("checklist_inv_tolerance", "checklist_dir_tolerance", "checklist_dir_score", "checklist_neutral_band")
FLOAT_SLACK = 1e-6                          # float32 probabilities: 0.7 - 0.6 must count as exactly 0.1


@dataclass(frozen=True)
class Semantics:
    """The rules one evaluation scores with (the defaults are the project's)."""

    inv_tolerance: float = 0.0
    dir_tolerance: float = 0.1
    dir_score: str = "side"
    neutral_band: tuple[float, float] | None = None

    def view(self, label_names: list[str]) -> list[str] | None:
        """The three scoring labels (the set's two, then "neutral") when the neutral band applies to
        `label_names` (a binary sentiment set), else None."""
        if self.neutral_band is None or len(label_names) != 2 or sentiment_sides(label_names) is None:
            return None
        return [*label_names, NEUTRAL]

    def values(self) -> dict[str, Any]:
        """Every knob by option name (the band as [low, high] or None)."""
        return {"checklist_inv_tolerance": self.inv_tolerance, "checklist_dir_tolerance": self.dir_tolerance,
                "checklist_dir_score": self.dir_score,
                "checklist_neutral_band": None if self.neutral_band is None else list(self.neutral_band)}

    def settings(self) -> dict[str, Any]:
        """The knobs that differ from the defaults (what enters the evaluator's settings: the default
        settings, and their hash, stay those of evaluations stored before the knobs existed)."""
        default = Semantics().values()
        return {k: v for k, v in self.values().items() if v != default[k]}


def _number(text: str) -> float:
    """A decimal or a fraction ("1/3")."""
    return float(Fraction(text.strip()))


def parse_band(text: str) -> tuple[float, float] | None:
    """`"LOW,HIGH"` (decimals or fractions) -> (low, high) with 0 <= low < 0.5 < high <= 1; "" -> None."""
    if not text.strip():
        return None
    parts = text.split(",")
    try:
        low, high = (_number(p) for p in parts) if len(parts) == 2 else (None, None)
    except (ValueError, ZeroDivisionError):
        low = high = None
    if low is None or high is None or not 0 <= low < 0.5 < high <= 1:
        raise BenchError(f"checklist_neutral_band must be LOW,HIGH with 0 <= LOW < 0.5 < HIGH <= 1 (decimals or "
                         f"fractions; CheckList's is 1/3,2/3), got {text!r}")
    return low, high


def semantics(options: EvalOptions) -> Semantics:
    """The scoring rules the options ask for; BenchError naming the option on a bad value."""
    for name in ("checklist_inv_tolerance", "checklist_dir_tolerance"):
        value = getattr(options, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise BenchError(f"{name} must be a probability between 0 and 1, got {value!r}")
    if options.checklist_dir_score not in DIR_SCORES:
        raise BenchError(f"unknown checklist_dir_score {options.checklist_dir_score!r}; use one of "
                         f"{', '.join(DIR_SCORES)}")
    return Semantics(float(options.checklist_inv_tolerance), float(options.checklist_dir_tolerance),
                     options.checklist_dir_score, parse_band(options.checklist_neutral_band))


def band_view(probs: np.ndarray, label_names: list[str], band: tuple[float, float]) -> np.ndarray:
    """Binary probabilities (columns in `label_names` order) as (.., .., neutral) probabilities, after
    CheckList's tutorial wrapper for binary models, generalised to a band (low, high) around 0.5.

    With p = P(positive): outside the open band, (1 - p) on the negative column and p on the positive one;
    for 0.5 <= p < high, neutral 1 - (p - 0.5) / (2 (high - 0.5)) and positive the rest; for low < p < 0.5,
    neutral 1 - (0.5 - p) / (2 (0.5 - low)) and negative the rest. Neutral is then above 0.5 inside the band,
    so the prediction is "neutral" exactly when low < p < high. (At p == high exactly the tutorial's wrapper
    gives all zeros, i.e. "negative"; here it is "positive".)"""
    sides = sentiment_sides(label_names)
    assert sides is not None and len(label_names) == 2
    pos, neg = label_names.index(sides.positive[0]), label_names.index(sides.negative[0])
    low, high = band
    p = probs[:, pos]
    out = np.zeros((len(probs), 3))
    outside = (p <= low) | (p >= high)
    out[outside, pos], out[outside, neg] = p[outside], 1 - p[outside]
    upper = ~outside & (p >= 0.5)
    out[upper, 2] = 1 - (p[upper] - 0.5) / (2 * (high - 0.5))
    out[upper, pos] = 1 - out[upper, 2]
    lower = ~outside & (p < 0.5)
    out[lower, 2] = 1 - (0.5 - p[lower]) / (2 * (0.5 - low))
    out[lower, neg] = 1 - out[lower, 2]
    return out


def opposite(accept: tuple[str, ...], label_names: list[str]) -> list[str]:
    """What a "margin" DIR score subtracts: the other sentiment side when `accept` lies within one side of
    a sentiment set (neutral labels count for neither), else every label outside `accept`."""
    sides = sentiment_sides(label_names)
    if sides is not None:
        if set(accept) <= set(sides.positive):
            return list(sides.negative)
        if set(accept) <= set(sides.negative):
            return list(sides.positive)
    return [name for name in label_names if name not in accept]
