"""Clean classification metrics (scikit-learn) as tidy (metric, label, value, n) records, and a trained model's test
split judged in one call (`judge_test`: probabilities, records, collapse, chance)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_recall_fscore_support

from bench.results import chance


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 for stable probabilities."""
    shifted = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


COLLAPSE_RATIO = 0.1  # predicted-class entropy below this share of the gold labels' entropy: collapsed


def class_entropy(labels: np.ndarray, num_classes: int) -> float:
    """Entropy (nats) of the distribution of `labels` over `num_classes` classes."""
    shares = np.bincount(labels, minlength=num_classes) / max(len(labels), 1)
    shares = shares[shares > 0]
    return float(-(shares * np.log(shares)).sum()) + 0.0  # + 0.0: no "-0.00" for one class


def collapse_note(gold: np.ndarray, predicted: np.ndarray, label_names: list[str],
                  hint: str = "try another --lr or more --epochs") -> str:
    """Why a model counts as collapsed (it predicts nearly one class whatever the input), or "" if it does not:
    the entropy of its predicted classes is below COLLAPSE_RATIO of the gold labels' entropy. `hint`: what to
    try instead (bench.encoders.learning_rates.lr_hint)."""
    n = len(label_names)
    gold_entropy, predicted_entropy = class_entropy(gold, n), class_entropy(predicted, n)
    if gold_entropy == 0 or predicted_entropy >= COLLAPSE_RATIO * gold_entropy:
        return ""
    top = int(np.bincount(predicted, minlength=n).argmax())
    share = float((predicted == top).mean())
    return (f"predicts '{label_names[top]}' for {share:.0%} of test examples (predicted-class entropy "
            f"{predicted_entropy:.2f} vs {gold_entropy:.2f} of the gold labels): a collapsed model, not a result; "
            f"{hint}")


def classification_records(gold: np.ndarray, predicted: np.ndarray, label_names: list[str]) -> list[dict]:
    """Accuracy, macro-F1 (over classes in gold or predictions, as scikit-learn does) and per-class
    precision/recall/F1 (label = class name; '' for aggregates)."""
    labels = list(range(len(label_names)))
    n = len(gold)
    records = [
        {"metric": "accuracy", "label": "", "value": float(accuracy_score(gold, predicted)), "n": n},
        {"metric": "macro_f1", "label": "", "value": float(f1_score(gold, predicted, average="macro", zero_division=0)),
         "n": n},
    ]
    precision, recall, f1, support = precision_recall_fscore_support(gold, predicted, labels=labels,
                                                                     zero_division=0)
    for i, name in enumerate(label_names):
        for metric, values in (("precision", precision), ("recall", recall), ("f1", f1)):
            records.append({"metric": metric, "label": name, "value": float(values[i]), "n": int(support[i])})
    return records


@dataclass
class TestJudged:
    """A trained model's test split, judged (`judge_test`)."""

    probabilities: np.ndarray
    predicted: np.ndarray
    records: list[dict]  # `classification_records`
    confusion: list[list[int]]  # rows: gold, columns: predicted
    collapsed: str  # `collapse_note` ("" when the model did not collapse)
    chance: float  # bench.results.chance.chance_level of the test labels
    near_chance: bool  # not clearly above chance (bench.results.chance.near_chance)
    near_note: str  # what near chance means here ("" when not near chance, or collapsed: that says more)


def judge_test(gold: np.ndarray, logits: np.ndarray, label_names: list[str], hint: str) -> TestJudged:
    """The test split of a trained model in one call: its probabilities and predictions, the clean records and
    confusion matrix, whether it collapsed (`hint`: what to try instead) and whether its accuracy is near chance."""
    gold = np.asarray(gold, dtype=int)
    probabilities = softmax(logits)
    predicted = probabilities.argmax(1)
    collapsed = collapse_note(gold, predicted, label_names, hint)
    level = chance.chance_level(np.bincount(gold, minlength=len(label_names)), len(label_names))
    accuracy = float(np.mean(gold == predicted)) if len(predicted) else float("nan")
    guessing = chance.near_chance(accuracy, len(predicted), level)
    return TestJudged(probabilities, predicted, classification_records(gold, predicted, label_names),
                      confusion_matrix(gold, predicted, labels=range(len(label_names))).tolist(), collapsed, level,
                      guessing, chance.describe(accuracy, level) if guessing and not collapsed else "")
