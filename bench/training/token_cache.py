"""Tokenised splits cached on disk: each dataset is tokenised once per tokenizer and maximum length, then
shared by every method and seed that uses them (`results/.cache/tokens/`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from bench.results import store
from bench.encoders.models import EncoderBundle

VERSION = 1  # bump when the cache format or the tokenisation call changes


def cache_key(texts: list[str], identity: dict[str, Any]) -> str:
    """A hash of the texts and everything that decides their token ids (tokenizer, max length, versions)."""
    import tokenizers
    import transformers

    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\x00")
    described = {"version": VERSION, "texts": digest.hexdigest(), "transformers": transformers.__version__,
                 "tokenizers": tokenizers.__version__, **identity}
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()[:24]


def tokenize_cached(bundle: EncoderBundle, texts: list[str], cache_dir: Path | None,
                    identity: dict[str, Any]) -> list[list[int]]:
    """`bundle.tokenize(texts)`, read from / written to `cache_dir/tokens/<key>.npz` (atomically)."""
    if cache_dir is None:
        return bundle.tokenize(texts)
    path = Path(cache_dir) / "tokens" / f"{cache_key(texts, identity)}.npz"
    if path.is_file():
        try:
            with np.load(path) as saved:
                flat, offsets = saved["flat"], saved["offsets"]
            if len(offsets) == len(texts) + 1:
                return [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))]
        except (OSError, ValueError, KeyError):
            pass  # unreadable: tokenise again and replace it
    token_ids = bundle.tokenize(texts)
    offsets = np.cumsum([0] + [len(ids) for ids in token_ids], dtype=np.int64)
    flat = np.fromiter((i for ids in token_ids for i in ids), dtype=np.int64, count=int(offsets[-1]))
    with store.atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, flat=flat, offsets=offsets)
    return token_ids
