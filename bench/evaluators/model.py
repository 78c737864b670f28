"""Trained models behind the evaluators' `Classifier` interface (saving and loading them: bench.results.runfiles)."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import torch

from bench.data.batching import Encoded, collate, in_input_order, sorted_batches, to_device
from bench.data.bounds import TextBound
from bench.encoders.models import EncoderBundle
from bench.evaluators.base import Classifier
from bench.evaluators.metrics import softmax


class ModelClassifier(Classifier):
    """A trained Method (encoder + head) with its tokenizer: length-sorted batches, no gradients, padded as in
    training (`bucket`), outputs copied to the host once per call."""

    def __init__(self, method: Any, bundle: EncoderBundle, label_names: list[str], device: torch.device,
                 batch_size: int = 128, amp_dtype: torch.dtype | None = None, bucket: int = 0,
                 max_width: int | None = None):
        self.method = method.to(device)
        self.bundle = bundle
        self.label_names = list(label_names)
        self.device = device
        self.batch_size = batch_size
        self.amp_dtype = amp_dtype
        self.bucket = bucket
        self.max_width = max_width
        self.queries = 0
        # what the model sees of a text: the run's data and the evaluators' own texts are cut to it
        self.bound = TextBound(max_width, bundle.tokenize_words) if max_width else None

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    @torch.no_grad()
    def _run(self, texts: list[str], output: str, dropout: bool = False) -> np.ndarray:
        """Logits or pooled vectors for `texts`, in their order."""
        if not texts:
            width = len(self.label_names) if output == "logits" else self.method.encoder.hidden_size
            return np.zeros((0, width), dtype=np.float32)
        if self.bound is not None:  # never tokenise megabytes: a text past the character cap is capped first
            cap = self.bound.max_chars
            texts = [text[:cap] if len(text) > cap else text for text in texts]
        encoded = Encoded(self.bundle.tokenize(list(texts)), np.zeros(len(texts), dtype=np.int64))
        self.method.train(dropout)
        batches = sorted_batches(encoded.lengths, self.batch_size)
        parts = []
        try:
            for index in batches:
                batch = to_device(collate(encoded, index, self.bundle.pad_id, self.bundle.min_length,
                                          bucket=self.bucket, max_width=self.max_width,
                                          pin=self.device.type == "cuda"), self.device)
                with self._autocast():
                    values = (self.method.logits(batch) if output == "logits"
                              else self.method.encode(batch).pooled)
                parts.append(values.float())
        finally:
            self.method.eval()
        return in_input_order(batches, parts)

    def predict_proba(self, texts: list[str]) -> np.ndarray:
        """Class probabilities (n, N)."""
        self.queries += len(texts)
        return softmax(self._run(texts, "logits"))

    def embed(self, texts: list[str], dropout: bool = False) -> np.ndarray:
        """Pooled representations (n, d)."""
        return self._run(texts, "pooled", dropout)
