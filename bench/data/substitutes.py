"""WordNet substitutes of one word: synonyms (else hypernyms), antonyms and other regular inflections, each
written in the word's own inflection."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.data.tagging import WORDNET_POS
from bench.data.wordnet import load_wordnet, per_wordnet
from bench.data.words import STOP_WORDS

# Synonyms come from a word's most frequent senses (WordNet lists them first) when those have any:
# all 49 verb senses of "make" would mostly give rare readings ("make up" -> "pee-pee up").
FREQUENT_SENSES = 3


# ---------------------------------------------------------------- candidates

@per_wordnet(maxsize=1 << 17)
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


@per_wordnet(maxsize=1 << 17)
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


@per_wordnet(maxsize=1 << 17)
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
