"""Label-preserving text perturbations for the CheckList evaluator's INV tests, and text-style helpers.

Every generator takes `(text, rng, n)` and returns up to `n` perturbed copies of `text`, each different from
`text` and from one another; an empty list means the generator does not apply to that text. Randomness
comes only from `rng`; `text_rng(seed, name, text)` gives each (generator, text) pair its own stream, so the
cases do not depend on which other texts were sampled or in which order.

Lower-cased datasets (SST, MR) and PTB-tokenised ones ("it 's", "is n't", "good .") are handled: names and
places are matched in lower case when the whole text is lower case, and contractions and added punctuation
follow the text's tokenisation.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass
from typing import Callable

from bench.evaluators import lexicons

Generator = Callable[[str, random.Random, int], list[str]]

LETTERS = re.compile(r"[^\W\d_]+")
NUMBER = re.compile(r"(?<![\w.,])\d+(?!\w|[.,]\d)")
FINAL_PUNCT = re.compile(r"\s*[.!?]+\s*$")
PTB_MARKS = re.compile(r"\w (?:n't|'s|'re|'m|'ll|'ve|'d)(?!\w)| [.,!?;:](?:\s|$)")
APOSTROPHE = "['\u2019]"
NEGATABLE = ("is", "are", "will")    # "they are not" contracts to "they aren't", not "they're not"
NOT_AHEAD = r"(?!\s+not(?!\w))"
INVERTED = re.compile(r"\s+(?:i|you|he|she|it|we|they|there|that)(?!\w)", re.IGNORECASE)


def text_rng(seed: int, generator: str, text: str) -> random.Random:
    """A random stream for one generator on one text (stable across processes and sample orders)."""
    return random.Random(f"{seed}\x1f{generator}\x1f{text}")


def is_tokenised(text: str) -> bool:
    """Whether `text` looks PTB-tokenised (split-off clitics like "is n't", or spaces before punctuation)."""
    return PTB_MARKS.search(text) is not None


@dataclass(frozen=True)
class Style:
    """How a dataset writes its texts: all lower case, and/or punctuation split off by spaces."""

    lower: bool = False
    tokenised: bool = False


def detect_style(texts: list[str]) -> Style:
    """The dominant style of `texts`: lower case if 90% are, tokenised if half look PTB-tokenised."""
    if not texts:
        return Style()
    lower = sum(t == t.lower() for t in texts) >= 0.9 * len(texts)
    tokenised = sum(is_tokenised(t) for t in texts) >= 0.5 * len(texts)
    return Style(lower=lower, tokenised=tokenised)


def apply_style(sentence: str, style: Style) -> str:
    """`sentence` (written normally) rewritten in `style` (lower-cased, punctuation split off)."""
    if style.lower:
        sentence = sentence.lower()
    if style.tokenised:
        sentence = re.sub(r"\s*([.,!?;:])", r" \1", sentence).strip()
    return sentence


def append_sentence(text: str, sentence: str, style: Style) -> str:
    """`text` followed by `sentence` in the dataset's style (a full stop first when `text` has none)."""
    text = text.rstrip()
    if not FINAL_PUNCT.search(text):
        text += " ." if style.tokenised else "."
    return f"{text} {apply_style(sentence, style)}"


def _match_case(replacement: str, original: str) -> str:
    """`replacement` with the capitalisation of `original` (ALL CAPS, Capitalised or as is)."""
    if len(original) > 1 and original.isupper():
        return replacement.upper()
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def _distinct(text: str, candidates: list[str], n: int) -> list[str]:
    """The first `n` candidates that differ from `text` and from one another."""
    out: list[str] = []
    for candidate in candidates:
        if candidate != text and candidate not in out:
            out.append(candidate)
        if len(out) == n:
            break
    return out


# ------------------------------------------------------------------------------------------- generators

def typos(text: str, rng: random.Random, n: int = 3) -> list[str]:
    """Swap two adjacent (different) characters inside one word of 4+ letters; one typo per copy."""
    words = [m for m in LETTERS.finditer(text) if len(m.group()) >= 4]
    candidates = []
    for _ in range(4 * n if words else 0):
        match = rng.choice(words)
        word = match.group()
        spots = [j for j in range(len(word) - 1) if word[j] != word[j + 1]]
        if not spots:
            continue
        j = rng.choice(spots)
        typo = word[:j] + word[j + 1] + word[j] + word[j + 2:]
        candidates.append(text[:match.start()] + typo + text[match.end():])
    return _distinct(text, candidates, n)


def _ptb_form(contraction: str) -> str:
    """The PTB tokenisation of a contraction: "isn't" -> "is n't", "can't" -> "ca n't", "it's" -> "it 's"."""
    if contraction.endswith("n't"):
        return contraction[:-3] + " n't"
    cut = contraction.index("'")
    return contraction[:cut] + " " + contraction[cut:]


@functools.lru_cache(maxsize=None)
def _contraction_tables() -> tuple[re.Pattern, dict[str, str], re.Pattern, dict[str, tuple[str, str]]]:
    """(pattern of contractions, contraction -> expansion, pattern of expansions, expansion -> forms)."""
    expand: dict[str, str] = {}
    contract: dict[str, tuple[str, str]] = {}
    for short, full in lexicons.CONTRACTIONS.items():
        expand[short] = full
        expand[_ptb_form(short)] = full
        contract[full] = (short, _ptb_form(short))

    def alternation(keys: list[str]) -> re.Pattern:
        parts = [re.escape(k).replace("'", APOSTROPHE).replace(r"\ ", r"\s+")
                 + (NOT_AHEAD if k.split()[-1] in NEGATABLE and len(k.split()) > 1 else "")
                 for k in sorted(keys, key=len, reverse=True)]
        return re.compile(r"(?<![\w'])(?:" + "|".join(parts) + r")(?![\w'])", re.IGNORECASE)

    return alternation(list(expand)), expand, alternation(list(contract)), contract


def _key(matched: str) -> str:
    """Lookup key of a matched contraction or expansion: lower case, plain apostrophe, single spaces."""
    return " ".join(matched.lower().replace("\u2019", "'").split())


def expand_contractions(text: str) -> str:
    """Every known contraction written out ("isn't" -> "is not", "it 's" -> "it is").

    A negation followed by a pronoun is kept ("isn't it?", "don't you think"): "is not it" is not English."""
    pattern, expand, _, _ = _contraction_tables()

    def replace(m: re.Match) -> str:
        if _key(m.group()).endswith("n't") and INVERTED.match(text, m.end()):
            return m.group()
        return _match_case(expand[_key(m.group())], m.group())

    return pattern.sub(replace, text)


def contract_expansions(text: str) -> str:
    """Every known expansion contracted ("is not" -> "isn't", or "is n't" in a PTB-tokenised text).

    Before "not", the negation is contracted: "it is not" -> "it isn't" (not "it's not")."""
    _, _, pattern, contract = _contraction_tables()
    form = 1 if is_tokenised(text) else 0
    return pattern.sub(lambda m: _match_case(contract[_key(m.group())][form], m.group()), text)


def contractions(text: str, rng: random.Random, n: int = 3) -> list[str]:
    """The text with its contractions expanded and/or its expansions contracted (where either applies)."""
    return _distinct(text, [expand_contractions(text), contract_expansions(text)], n)


@functools.lru_cache(maxsize=None)
def _entity_pattern(names: tuple[str, ...], lower: bool) -> re.Pattern:
    """Whole-word pattern for any of `names` (lower-cased ones for lower-case texts), longest first."""
    keys = sorted({k.lower() if lower else k for k in names}, key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(k) for k in keys) + r")(?!\w)")


def _swap_entity(text: str, rng: random.Random, n: int, groups: tuple[tuple[str, ...], ...]) -> list[str]:
    """Replace every occurrence of one entity of the text with other entities of the same group.

    Capitalised texts match the lexicon's capitalised spelling only; lower-case texts match lower case."""
    lower = text == text.lower()
    found: list[tuple[str, tuple[str, ...]]] = []
    for group in groups:
        for match in _entity_pattern(group, lower).finditer(text):
            if all(match.group() != seen for seen, _ in found):
                found.append((match.group(), group))
    if not found:
        return []
    entity, group = rng.choice(found)
    others = [e.lower() if lower else e for e in group if e.lower() != entity.lower()]
    whole = re.compile(r"(?<!\w)" + re.escape(entity) + r"(?!\w)")
    return _distinct(text, [whole.sub(other, text) for other in rng.sample(others, min(n, len(others)))], n)


def change_names(text: str, rng: random.Random, n: int = 3) -> list[str]:
    """Replace a first name from the lexicon with other first names of the same list."""
    return _swap_entity(text, rng, n, (lexicons.MALE_NAMES, lexicons.FEMALE_NAMES))


def change_locations(text: str, rng: random.Random, n: int = 3) -> list[str]:
    """Replace a city (country) from the lexicon with other cities (countries)."""
    return _swap_entity(text, rng, n, (lexicons.CITIES, lexicons.COUNTRIES))


def change_numbers(text: str, rng: random.Random, n: int = 3) -> list[str]:
    """Replace one integer with nearby integers (within 20%, at least 1; never negative).

    Decimals, thousands-separated numbers, numbers glued to letters ("1st", "mp3") and zero-padded
    numbers ("007") are left alone."""
    numbers = [m for m in NUMBER.finditer(text) if not (len(m.group()) > 1 and m.group().startswith("0"))]
    if not numbers:
        return []
    match = rng.choice(numbers)
    value = int(match.group())
    spread = max(1, value // 5)
    pool = range(max(0, value - spread), value + spread + 1)
    picks = [v for v in rng.sample(pool, min(len(pool), n + 1)) if v != value][:n]
    return _distinct(text, [text[:match.start()] + str(v) + text[match.end():] for v in picks], n)


def punctuation(text: str, rng: random.Random, n: int = 3) -> list[str]:
    """Remove the final punctuation (. ! ?) when there is some, else add a full stop."""
    if FINAL_PUNCT.search(text):
        stripped = FINAL_PUNCT.sub("", text)
        return [stripped] if stripped.strip() else []
    return _distinct(text, [text.rstrip() + (" ." if is_tokenised(text) else ".")], n)
