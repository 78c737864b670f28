"""Cross-check backend: TextAttack's own TextFoolerJin2019 recipe run against a bench Classifier.

TextAttack is not a dependency; its recipe downloads counter-fitted vectors and the Universal Sentence
Encoder on first use, so offline machines get a SkipEvaluator with the reason instead of a result.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench.attack import skip
from bench.attack.search import AttackResult

if TYPE_CHECKING:  # bench.evaluators imports this package: no import cycle at run time
    from bench.evaluators.base import Classifier

INSTALL_HINT = ("textattack is not installed; it needs transformers < 5, so install it in a second environment, "
                "not this one: python -m venv ta && ta/bin/pip install -e . textattack")
# What TextAttack's recipe uses, recorded as result columns (its similarity is angular, not cosine).
COLUMNS = {"word_vectors": "textattack:paragramcf", "max_candidates": 50, "cos_threshold": 0.5,
           "sim_threshold": 0.840845057, "sim_window": 15, "sim_kind": "angular",
           "sentence_encoder": "textattack:USE", "pos_tagger": "textattack", "max_change": 1.0}


def available() -> bool:
    """Whether textattack can be imported (without importing it)."""
    return importlib.util.find_spec("textattack") is not None


def _reason(exc: BaseException) -> str:
    """First line of an exception, for a one-line skip reason."""
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


def build_recipe(classifier: Classifier) -> Any:
    """TextAttack's TextFoolerJin2019 attack around classifier; SkipEvaluator when it cannot be built."""
    if not available():
        raise skip(INSTALL_HINT)
    try:
        from textattack.attack_recipes import TextFoolerJin2019
        from textattack.models.wrappers import ModelWrapper
    except Exception as exc:  # a broken install: one line, no traceback
        raise skip(f"textattack could not be imported ({_reason(exc)})") from exc

    class Wrapper(ModelWrapper):
        """Texts in, class probabilities out, through the bench classifier."""

        def __init__(self, model: Classifier):
            self.model = model

        def __call__(self, text_input_list: list[str]) -> Any:
            return self.model.predict_proba(list(text_input_list))

    try:
        return TextFoolerJin2019.build(Wrapper(classifier))
    except Exception as exc:  # offline downloads of embeddings or USE fail here
        raise skip(f"textattack's TextFoolerJin2019 could not be built ({_reason(exc)}); it "
                            "downloads its word vectors and sentence encoder on first use") from exc


def attack_many(classifier: Classifier, texts: Sequence[str], golds: Sequence[int]) -> list[AttackResult]:
    """Attack each (text, gold label index) with TextAttack's recipe; results in the builtin's format.

    A failure on the first text (e.g. a lazy download) becomes a SkipEvaluator; later ones propagate."""
    recipe = build_recipe(classifier)  # SkipEvaluator when textattack is missing or cannot build it
    from textattack.attack_results import SkippedAttackResult, SuccessfulAttackResult

    results = []
    for number, (text, gold) in enumerate(zip(texts, golds)):
        try:
            outcome = recipe.attack(text, int(gold))
        except Exception as exc:
            if number == 0:
                raise skip(f"textattack's TextFoolerJin2019 failed ({_reason(exc)})") from exc
            raise
        original, perturbed = outcome.original_result, outcome.perturbed_result
        status = ("success" if isinstance(outcome, SuccessfulAttackResult)
                  else "skipped" if isinstance(outcome, SkippedAttackResult) else "failed")
        changed = original.attacked_text.all_words_diff(perturbed.attacked_text)
        words = text.split()
        results.append(AttackResult(int(gold), text, perturbed.attacked_text.text if status != "skipped" else text,
                                    int(original.output), int(perturbed.output), status,
                                    len(changed) if status != "skipped" else 0, len(words),
                                    float(getattr(perturbed, "num_queries", 0) or 0)))
    return results
