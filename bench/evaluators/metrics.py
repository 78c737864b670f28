"""Clean classification metrics (scikit-learn) as tidy (metric, label, value, n) records."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support


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
