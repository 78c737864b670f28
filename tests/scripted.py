"""Scripted classifiers with known behaviour, for testing evaluators (no training, no torch model): test helpers,
not part of the installed package."""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from bench.evaluators.base import Classifier

WORD = re.compile(r"[a-z']+")


class KeywordClassifier(Classifier):
    """Scores each class by the count of its keywords in the lower-cased text; ties go to `default`.

    Probabilities are a softmax over `sharpness * counts`, so every keyword moves the probability in a known
    direction. Embeddings are the count vectors (plus a constant so none is all-zero).
    """

    def __init__(self, label_names: list[str], keywords: dict[str, set[str]], default: str | None = None,
                 sharpness: float = 2.0):
        self.label_names = list(label_names)
        self.keywords = {label: {w.lower() for w in words} for label, words in keywords.items()}
        self.default = self.label_names.index(default) if default else 0
        self.sharpness = sharpness
        self.queries = 0

    def counts(self, text: str) -> np.ndarray:
        """Keyword count per class."""
        words = WORD.findall(text.lower())
        return np.array([sum(w in self.keywords.get(label, ()) for w in words) for label in self.label_names],
                        dtype=np.float32)

    def predict_proba(self, texts: list[str]) -> np.ndarray:
        self.queries += len(texts)
        scores = np.stack([self.counts(t) for t in texts]) if texts else np.zeros((0, len(self.label_names)))
        scores = scores * self.sharpness
        scores[:, self.default] += 1e-3  # ties go to the default class
        exp = np.exp(scores - scores.max(1, keepdims=True))
        return (exp / exp.sum(1, keepdims=True)).astype(np.float32)

    def embed(self, texts: list[str], dropout: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, len(self.label_names) + 1), dtype=np.float32)
        return np.stack([np.append(self.counts(t), 1.0) for t in texts]).astype(np.float32)


class FunctionClassifier(Classifier):
    """Wraps `fn(texts) -> probabilities` (and optionally `embed_fn`) as a Classifier."""

    def __init__(self, label_names: list[str], fn: Callable[[list[str]], np.ndarray],
                 embed_fn: Callable[[list[str]], np.ndarray] | None = None):
        self.label_names = list(label_names)
        self.fn = fn
        self.embed_fn = embed_fn
        self.queries = 0

    def predict_proba(self, texts: list[str]) -> np.ndarray:
        self.queries += len(texts)
        return np.asarray(self.fn(list(texts)), dtype=np.float32)

    def embed(self, texts: list[str], dropout: bool = False) -> np.ndarray:
        if self.embed_fn is None:
            raise NotImplementedError("this scripted classifier has no embeddings")
        return np.asarray(self.embed_fn(list(texts)), dtype=np.float32)
