"""Clean classification metrics (scikit-learn) as tidy (metric, label, value, n) records."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 for stable probabilities."""
    shifted = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


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
