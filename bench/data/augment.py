"""Deterministic WordNet word substitutions of texts: synonym views (with or without morphological changes)
and antonym views (cline, dcl, lcl)."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.data import substitutes
from bench.data.tagging import content_positions, pos_tags, tagger_name
from bench.data.words import apply_case, case_style, is_candidate, split_token
from bench.errors import BenchError
from bench.results.store import write_jsonl_gz

# Bump when the substitution rules change: cached views of an older version are then ignored.
VERSION = 2  # 2: each view records which tokens were candidates (content words)
# syn: synonyms, else hypernyms; ant: antonyms, else random words; syn-inflect: syn, else another inflection
# of the word (CLINE's "synonyms, hypernyms and morphological changes").
KINDS = ("syn", "ant", "syn-inflect")
# How a rate becomes the number of words replaced: `content`, rate x content words rounded half up and at
# least 1; `tokens`, int(rate x all words) capped by the content words (CLINE's released replace_word, rate 0.5).
# Words are whitespace tokens, punctuation attached; the released code counts spaCy tokens, where punctuation
# and contraction parts are tokens of their own (docs/METHODS.md, "cline").
QUOTAS = ("content", "tokens")
# The random stream of the released per-text antonym draw (`tries_antonyms`): a fourth entropy word, not 0,
# so that it never equals a text's own word-picking stream (text_rng).
SHARE_STREAM = 1


@dataclass(frozen=True)
class Augmented:
    """One augmented text: its tokens, their single-space join, which tokens were replaced, and which were
    candidates for replacement (content words, replaced or not)."""

    text: str
    tokens: tuple[str, ...]
    replaced: tuple[bool, ...]
    candidate: tuple[bool, ...] = ()


# ---------------------------------------------------------------- views

def replacement_count(rate: float, n_content: int, n_tokens: int | None = None, quota: str = "content") -> int:
    """How many of n_content content words (of n_tokens words) a rate replaces (see QUOTAS)."""
    if rate <= 0 or n_content == 0:
        return 0
    if quota == "tokens":
        return min(n_content, int(rate * (n_content if n_tokens is None else n_tokens) + 1e-9))
    return min(n_content, max(1, math.floor(rate * n_content + 0.5 + 1e-9)))


def synonym_view(text: str, rate: float, rng: np.random.Generator, inflections: bool = False,
                 quota: str = "content") -> Augmented:
    """text with about rate of its content words replaced by WordNet synonyms (else hypernyms; else, with
    `inflections`, another inflection of the word)."""
    def pick(word: str, tag: str) -> str | None:
        candidates = substitutes.synonym_candidates(word, tag) or \
            (substitutes.inflection_candidates(word, tag) if inflections else ())
        return candidates[rng.integers(len(candidates))] if candidates else None

    return _substitute(text, rate, rng, pick, quota)


def antonym_view(text: str, rate: float, rng: np.random.Generator, vocabulary: Sequence[str],
                 quota: str = "content", redraw_same: bool = True) -> Augmented:
    """text with about rate of its content words replaced by WordNet antonyms, else by vocabulary words (word by
    word: a text mixes both; `redraw_same`: see `_other_word`)."""
    def pick(word: str, tag: str) -> str | None:
        candidates = substitutes.antonym_candidates(word, tag)
        if candidates:
            return candidates[rng.integers(len(candidates))]
        return _other_word(vocabulary, word, rng, redraw_same)

    return _substitute(text, rate, rng, pick, quota)


def released_antonym_view(text: str, rate: float, rng: np.random.Generator, vocabulary: Sequence[str],
                          try_antonyms: bool, quota: str = "content", redraw_same: bool = True) -> Augmented:
    """The antonym view as CLINE's released replace_word draws it, per text: where `try_antonyms`, only words
    with a WordNet antonym are replaced (by one), up to the quota, and a text without any gets the random-word
    view instead; otherwise the random-word view: up to the quota of words, each by a vocabulary word (a draw
    equal to the word itself: see `_other_word`)."""
    def antonym(word: str, tag: str) -> str | None:
        candidates = substitutes.antonym_candidates(word, tag)
        return candidates[rng.integers(len(candidates))] if candidates else None

    if try_antonyms:
        view = _substitute(text, rate, rng, antonym, quota)
        if any(view.replaced):
            return view
    return _substitute(text, rate, rng, lambda word, tag: _other_word(vocabulary, word, rng, redraw_same), quota)


def tries_antonyms(seed: int, index: int, share: float) -> bool:
    """Whether text number index tries antonyms in a released antonym view (`antonym_share`): a uniform draw
    from its own generator, apart from the one that picks its words, falls below share (the released
    ANTONYM_RATIO test), so the split depends on the seed and the text's index only."""
    return bool(np.random.default_rng([seed, index, KINDS.index("ant"), SHARE_STREAM]).random() < share)


def _substitute(text: str, rate: float, rng: np.random.Generator,
                pick: Callable[[str, str], str | None], quota_rule: str = "content") -> Augmented:
    """Replace content words, in random order, by pick(lower-case core, tag) until the quota is met."""
    tokens = text.split()
    tags = pos_tags(tokens)
    content = content_positions(tags)
    quota = replacement_count(rate, len(content), len(tokens), quota_rule)
    new, replaced = list(tokens), [False] * len(tokens)
    for i in (content[j] for j in rng.permutation(len(content))):
        if quota == 0:
            break
        lead, core, trail = split_token(tokens[i])
        word = pick(core.lower(), tags[i])
        if word:
            new[i], replaced[i], quota = lead + apply_case(word, case_style(core)) + trail, True, quota - 1
    content_set = set(content)
    candidate = tuple(i in content_set for i in range(len(tokens)))
    return Augmented(" ".join(new), tuple(new), tuple(replaced), candidate)


def _other_word(vocabulary: Sequence[str], word: str, rng: np.random.Generator, redraw_same: bool = True) -> str | None:
    """A random vocabulary word other than word, or None when there is none. `redraw_same` False: one draw, and
    None (the word is skipped, as CLINE's released search_replacement skips it) when it is the word itself."""
    if not vocabulary:
        return None
    if not redraw_same:
        drawn = vocabulary[rng.integers(len(vocabulary))]
        return None if drawn.lower() == word else drawn
    for _ in range(8):
        drawn = vocabulary[rng.integers(len(vocabulary))]
        if drawn.lower() != word:
            return drawn
    others = [w for w in vocabulary if w.lower() != word]
    return others[rng.integers(len(others))] if others else None


def training_vocabulary(texts: Sequence[str]) -> list[str]:
    """Sorted alphabetic lower-case words of texts, stop words left out: the antonym view's fallback words."""
    words = {core.lower() for text in texts for core in (split_token(t)[1] for t in text.split())}
    return sorted(w for w in words if is_candidate(w))


# ---------------------------------------------------------------- datasets, cached

def augment_texts(texts: Sequence[str], kind: str, rate: float, seed: int,
                  cache_dir: str | os.PathLike | None = None, quota: str = "content",
                  antonym_share: float | None = None, redraw_same: bool = True) -> list[Augmented]:
    """One view of a KINDS kind per text (rate counted by a QUOTAS rule), deterministic per (seed, index);
    cached under cache_dir if given. `antonym_share` (kind `ant` only): None, antonyms wherever WordNet has one
    and vocabulary words elsewhere (`antonym_view`); a share s, the released per-text draw: texts chosen with
    probability s (`tries_antonyms`) try antonyms, the rest get random-word views (`released_antonym_view`).
    `redraw_same` (kind `ant` only): a random word equal to the word it replaces is drawn again (True) or the
    word is skipped (False, CLINE's released code)."""
    texts = list(texts)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if quota not in QUOTAS:
        raise ValueError(f"quota must be one of {QUOTAS}, got {quota!r}")
    if not 0 <= rate <= 1:
        raise BenchError(f"augmentation rate must be between 0 and 1, got {rate}")
    if antonym_share is not None and (kind != "ant" or not 0 <= antonym_share <= 1):
        raise ValueError(f"antonym_share is a share in [0, 1] of an `ant` view, got {antonym_share!r} for {kind!r}")
    if not redraw_same and kind != "ant":
        raise ValueError(f"redraw_same is a rule of the random words of an `ant` view, not of {kind!r}")
    rule = ([] if quota == "content" else [quota]) + ([] if antonym_share is None else [f"share={antonym_share!r}"])
    rule += [] if redraw_same else ["no-redraw"]  # views of the other rule are kept apart
    key = cache_key(texts, kind, rate, seed, *rule)
    path = Path(cache_dir) / f"{kind}-{key}.jsonl.gz" if cache_dir else None
    if path is not None:
        cached = _read_cache(path, len(texts))
        if cached is not None:
            return cached
    views = _compute(texts, kind, rate, seed, quota, antonym_share, redraw_same)
    if path is not None:
        _write_cache(path, views)
    return views


def _compute(texts: list[str], kind: str, rate: float, seed: int, quota: str = "content",
             antonym_share: float | None = None, redraw_same: bool = True) -> list[Augmented]:
    """The views of texts, one rng per text."""
    if kind in ("syn", "syn-inflect"):
        # one random stream for both synonym kinds: their views differ only where an inflection stands in
        return [synonym_view(text, rate, text_rng(seed, i, "syn"), inflections=kind == "syn-inflect", quota=quota)
                for i, text in enumerate(texts)]
    vocabulary = training_vocabulary(texts)
    if antonym_share is not None:
        return [released_antonym_view(text, rate, text_rng(seed, i, kind), vocabulary,
                                      tries_antonyms(seed, i, antonym_share), quota, redraw_same)
                for i, text in enumerate(texts)]
    return [antonym_view(text, rate, text_rng(seed, i, kind), vocabulary, quota, redraw_same)
            for i, text in enumerate(texts)]


def text_rng(seed: int, index: int, kind: str) -> np.random.Generator:
    """The random generator of text number index for a seed and a view kind."""
    return np.random.default_rng([seed, index, KINDS.index(kind)])


def cache_key(texts: Sequence[str], kind: str, rate: float, seed: int, *rule: str) -> str:
    """A hash naming the cached views of (texts, kind, rate, seed, quota rule unless `content`, antonym share
    unless None, `no-redraw` unless the random words are drawn again) under this VERSION and tagger."""
    digest = hashlib.sha256(json.dumps([VERSION, tagger_name(), kind, rate, seed, *rule]).encode())
    for text in texts:
        digest.update(json.dumps(text).encode() + b"\n")
    return digest.hexdigest()[:20]


def _read_cache(path: Path, count: int) -> list[Augmented] | None:
    """Views stored at path, or None when missing, unreadable or not count long."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        views = [Augmented(" ".join(r["tokens"]), tuple(r["tokens"]), tuple(r["replaced"]), tuple(r["candidate"]))
                 for r in rows]
    except (OSError, EOFError, ValueError, KeyError, TypeError):
        return None
    return views if len(views) == count else None


def _write_cache(path: Path, views: Sequence[Augmented]) -> None:
    """Store views at path as gzip JSON Lines, atomically."""
    write_jsonl_gz(path, [{"tokens": view.tokens, "replaced": view.replaced, "candidate": view.candidate}
                          for view in views])
