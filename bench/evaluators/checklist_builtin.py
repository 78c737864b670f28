"""The built-in CheckList cases (after Ribeiro et al. 2020), generated for a dataset.

They run on a fixed sample of `options.checklist_n` test texts (`data.fixed_sample`; perturbations seeded
with 0 for every run, so every method sees identical cases): INV tests on any dataset, plus DIR and MFT tests
on sentiment sets (label names containing "positive" and "negative").

Sentiment sides: the positive side is every label whose lower-cased name contains "positive" (sst5's "very
positive" too), the negative side likewise. DIR and MFT cases expect a side: `label` is the plain
"positive" / "negative" label when it exists (else the side's first label) and `accept` the whole side.
"Not bad"-style cases expect the positive side on sets made only of the two sides, and anything but the
negative side where other labels (e.g. "neutral") exist; such cases have label null and an explicit accept.
With a neutral band (checklist_semantics.py), a binary set's cases are built for its labels plus "neutral".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from bench.data.loading import FIXED_SAMPLE_SEED, Split, TextData, fixed_sample
from bench.errors import BenchError
from bench.evaluators import lexicons, perturb
from bench.evaluators.checklist_suite import Case

SAMPLE_SEED = 0          # the same perturbations for every run (the sample itself is data.fixed_sample)
PER_TEXT = 3             # perturbations per original text and generator (at most)

# Built-in INV tests: (test name, capability, generator).
INV_TESTS: tuple[tuple[str, str, perturb.Generator], ...] = (
    ("typos", "Robustness", perturb.typos),
    ("contractions", "Robustness", perturb.contractions),
    ("punctuation", "Robustness", perturb.punctuation),
    ("change first names", "NER", perturb.change_names),
    ("change locations", "NER", perturb.change_locations),
    ("change numbers", "NER", perturb.change_numbers),
)


# ------------------------------------------------------------------------------------------- sentiment

@dataclass(frozen=True)
class Sides:
    """A sentiment label set split into positive side, negative side and the other labels."""

    positive: tuple[str, ...]
    negative: tuple[str, ...]
    others: tuple[str, ...]

    @property
    def plain_positive(self) -> str:
        """The label reported for positive-side cases: "positive" itself when present."""
        return next((l for l in self.positive if l.strip().lower() == "positive"), self.positive[0])

    @property
    def plain_negative(self) -> str:
        """The label reported for negative-side cases: "negative" itself when present."""
        return next((l for l in self.negative if l.strip().lower() == "negative"), self.negative[0])

    @property
    def not_negative(self) -> tuple[str, ...]:
        """What "not bad" may be: the positive side on two-sided sets, anything but negative otherwise."""
        return self.positive if not self.others else (*self.others, *self.positive)


def sentiment_sides(label_names: list[str]) -> Sides | None:
    """The sentiment sides of a label set, or None when it is not a sentiment set.

    A label belongs to the positive (negative) side when its lower-cased name contains "positive"
    ("negative") and not the other word; a sentiment set has at least one label on each side."""
    positive, negative, others = [], [], []
    for name in label_names:
        low = name.lower()
        if "positive" in low and "negative" not in low:
            positive.append(name)
        elif "negative" in low and "positive" not in low:
            negative.append(name)
        else:
            others.append(name)
    if not positive or not negative:
        return None
    return Sides(tuple(positive), tuple(negative), tuple(others))


# ------------------------------------------------------------------------------------------- cases

def sample_indices(size: int, n: int) -> list[int]:
    """`min(n, size)` positions out of `size` in ascending order: the project's fixed evaluation sample
    (`data.fixed_sample`), so CheckList perturbs texts the attack and representation metrics also use."""
    if n < 1:
        raise BenchError(f"checklist_n must be at least 1 (got {n}); it is how many test texts are perturbed")
    return fixed_sample(size, n)


def _slug(test: str) -> str:
    return test.replace(" ", "_")


def inv_cases(ids: list[str], texts: list[str], seed: int = SAMPLE_SEED) -> list[Case]:
    """INV cases of every built-in generator that applies to each text (original + up to 3 copies)."""
    cases = []
    for test, capability, generator in INV_TESTS:
        for case_id, text in zip(ids, texts):
            copies = generator(text, perturb.text_rng(seed, test, text), PER_TEXT)
            if copies:
                cases.append(Case(test, capability, "INV", f"{_slug(test)}:{case_id}", (text, *copies)))
    return cases


def dir_cases(ids: list[str], texts: list[str], sides: Sides, style: perturb.Style,
              seed: int = SAMPLE_SEED) -> list[Case]:
    """DIR cases: each text with clearly positive (negative) sentences appended must not lose more than
    0.1 of its positive (negative) side probability."""
    cases = []
    for test, phrases, label, accept in (
            ("add positive phrase", lexicons.POSITIVE_PHRASES, sides.plain_positive, sides.positive),
            ("add negative phrase", lexicons.NEGATIVE_PHRASES, sides.plain_negative, sides.negative)):
        for case_id, text in zip(ids, texts):
            chosen = perturb.text_rng(seed, test, text).sample(phrases, PER_TEXT)
            copies = tuple(perturb.append_sentence(text, p, style) for p in chosen)
            cases.append(Case(test, "Vocabulary", "DIR", f"{_slug(test)}:{case_id}", (text, *copies),
                              label, accept))
    return cases


def _templated(test: str, capability: str, template: Callable[[str, str, int], str],
               adjectives: tuple[str, ...], label: str | None, accept: tuple[str, ...],
               style: perturb.Style) -> list[Case]:
    """One MFT case per (noun, adjective): `template(noun, adjective, k)` written in the dataset's style."""
    cases = []
    for i, noun in enumerate(lexicons.NEUTRAL_NOUNS):
        for j, adjective in enumerate(adjectives):
            k = len(cases)
            sentence = perturb.apply_style(template(noun, adjective, i + j), style)
            cases.append(Case(test, capability, "MFT", f"{_slug(test)}:{k}", (sentence,), label, accept))
    return cases


def _plain(noun: str, adjective: str, k: int) -> str:
    return f"The {noun} is {adjective}." if k % 2 == 0 else f"This {noun} was {adjective}."


def _negated(noun: str, adjective: str, k: int) -> str:
    return f"The {noun} is not {adjective}." if k % 2 == 0 else f"This {noun} was not {adjective}."


def _intensified(noun: str, adjective: str, k: int) -> str:
    return f"The {noun} is {lexicons.INTENSIFIERS[k % len(lexicons.INTENSIFIERS)]} {adjective}."


def mft_cases(sides: Sides, style: perturb.Style) -> list[Case]:
    """MFT template cases: plain, intensified and negated positive/negative adjectives about neutral nouns."""
    pos, neg = lexicons.POSITIVE_ADJECTIVES, lexicons.NEGATIVE_ADJECTIVES
    positive = (sides.plain_positive, sides.positive)
    negative = (sides.plain_negative, sides.negative)
    not_negative = (sides.plain_positive if not sides.others else None, sides.not_negative)
    return [
        *_templated("positive adjectives", "Vocabulary", _plain, pos, *positive, style),
        *_templated("negative adjectives", "Vocabulary", _plain, neg, *negative, style),
        *_templated("intensified positive adjectives", "Vocabulary", _intensified, pos, *positive, style),
        *_templated("intensified negative adjectives", "Vocabulary", _intensified, neg, *negative, style),
        *_templated("negated positive adjectives", "Negation", _negated, pos, *negative, style),
        *_templated("negated negative adjectives", "Negation", _negated, neg, *not_negative, style),
    ]


def builtin_suite(data: TextData, n: int,
                  label_names: list[str] | None = None) -> tuple[list[Case], dict[str, Any]]:
    """The built-in cases for `data` (INV always; DIR and MFT on sentiment sets) and their provenance.

    `label_names` are the labels the cases may expect (default the dataset's; with a neutral band, a binary
    set's two and "neutral", so that "not bad" accepts neutral or positive, as CheckList's suite)."""
    split: Split = data.test
    index = sample_indices(len(split), n)
    ids = [split.ids[i] for i in index]
    texts = [split.texts[i] for i in index]
    style = perturb.detect_style(texts)
    cases = inv_cases(ids, texts)
    sides = sentiment_sides(data.label_names if label_names is None else label_names)
    notes = []
    if sides is None:
        notes.append("not a sentiment label set (no labels containing 'positive' and 'negative'): "
                     "INV tests only, no DIR or MFT tests")
    else:
        cases += dir_cases(ids, texts, sides, style) + mft_cases(sides, style)
    info = {"source": "builtin", "sample_seed": FIXED_SAMPLE_SEED, "perturbation_seed": SAMPLE_SEED,
            "sample_size": len(texts), "checklist_n": n, "test_size": len(split), "sentiment": sides is not None,
            "style": {"lower": style.lower, "tokenised": style.tokenised}, "notes": notes}
    return cases, info
