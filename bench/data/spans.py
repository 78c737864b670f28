"""Random span masking of raw strings, as Mirror-BERT builds its second view (cambridgeltl/mirror-bert at 69ab7c3,
`src/data_loader.py` `erase_and_mask`): a span of `span` characters (5) at a random start is replaced by a mask
token between spaces; a text of fewer than `min_chars` characters (30), or not longer than the span, is left as
it is. The string is split at the first occurrence of the chosen span's characters, which may lie before the
drawn position, as the released code does."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SPAN = 5  # characters masked (Mirror-BERT's --random_span_mask 5)
MIN_CHARS = 30  # shorter texts are not masked
LITERAL = "[MASK]"  # what the released code inserts, also for RoBERTa (whose mask token is <mask>)
STREAM = 1  # the draws' own stream: the Trainer orders an epoch's batches with [seed, epoch]


def span_masked(text: str, rng: np.random.Generator, span: int = SPAN, min_chars: int = MIN_CHARS,
                token: str = LITERAL) -> str:
    """`text` with one random span of `span` characters replaced by " `token` " (one draw from `rng` for a text
    that is masked, none for one that is not)."""
    if len(text) <= span or len(text) < min_chars:
        return text
    start = int(rng.integers(len(text) - span))
    left, right = text.split(text[start:start + span], 1)
    return " ".join([left, token, right])


def masked_views(texts: Sequence[str], seed: int, epoch: int, span: int = SPAN, min_chars: int = MIN_CHARS,
                 token: str = LITERAL) -> list[str]:
    """One masked view of every text for one epoch: deterministic per (seed, epoch), a new span every epoch (the
    released data loader masks each time a text is loaded)."""
    rng = np.random.default_rng([seed, epoch, STREAM])
    return [span_masked(text, rng, span, min_chars, token) for text in texts]
