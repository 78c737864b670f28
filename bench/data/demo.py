"""Synthetic demo dataset: confusable e-commerce reviews (seeded, template-generated).

This is the default dataset of ``clbench run``: small enough to fine-tune a
classifier on 2 CPU cores in about a minute, yet shaped like the problem the
CLLD paper (Lan et al., Table I) targets.  There, BERT confuses "shipping was
very fast", "shipping was not slow" and "is shipping fast or not?" because the
texts are nearly identical while their labels (shipping_fast / shipping_fast /
shipping_question) are not.

Each review is ``[opener] core [closer]``.  The core sentence comes from one of
several templates per class; classes are arranged in groups of near-identical
wording (shipping fast / slow / question, quality good / poor, wrong item /
refund request), and negations flip the class ("not slow" -> shipping_fast,
"not fast at all" -> shipping_slow, "not bad at all" -> quality_good).
Keywords such as "fast", "slow", "cheap", "refund" occur in several classes, and
some template pairs have the same bag of words in a different order, so a
bag-of-words model cannot reach 100%.  A small, seeded share of labels (3%) is
flipped to a confusable neighbour class as irreducible noise.

All templates and word lists below were written for this module.
"""

from __future__ import annotations

import numpy as np

LABELS: tuple[str, ...] = (
    "shipping_fast",
    "shipping_slow",
    "shipping_question",
    "quality_good",
    "quality_poor",
    "wrong_item",
    "refund_request",
)

# Confusable neighbours used for label noise.
NEIGHBOURS: dict[str, tuple[str, ...]] = {
    "shipping_fast": ("shipping_slow", "shipping_question"),
    "shipping_slow": ("shipping_fast", "shipping_question"),
    "shipping_question": ("shipping_fast", "shipping_slow"),
    "quality_good": ("quality_poor",),
    "quality_poor": ("quality_good",),
    "wrong_item": ("refund_request",),
    "refund_request": ("wrong_item",),
}
NOISE_RATE = 0.03
MIN_WORDS, MAX_WORDS = 5, 25

# All products start with a consonant sound so "a {p}" reads correctly.
PRODUCTS = (
    "phone case", "charger", "blender", "backpack", "water bottle", "desk lamp",
    "kettle", "toaster", "yoga mat", "rain jacket", "pair of sneakers", "wallet",
    "keyboard", "mouse", "monitor stand", "coffee grinder", "frying pan",
    "hair dryer", "dress", "hoodie", "pillow", "duvet cover", "tent",
    "bike light", "smart watch", "speaker", "pair of headphones", "camera bag",
    "toy car", "puzzle", "baby monitor", "dog leash", "cat bed", "lunch box",
    "screwdriver set", "garden hose", "tablet stand", "notebook", "suitcase",
)
VERY = ("", "", "very", "really", "super", "so", "extremely", "incredibly", "quite")
NUMBERS = ("two", "three", "four", "five", "six", "seven", "ten")
ATTRIBUTES = ("color", "size", "model", "version")

OPENERS = (
    "", "", "", "ordered a {p} last week.", "bought this {p} for my mom.",
    "got a {p} as a gift.", "not my first order from this shop.", "hi.",
    "ok so.", "second {p} I bought here.", "quick note about my order.",
    "this is about the {p}.",
)
CLOSERS = (
    "", "", "", "will buy again.", "not sure I will order again.", "thanks.",
    "that is all.", "please reply soon.", "will update later.",
    "overall not a big deal.", "just saying.", "I will tell my friends.",
)

TEMPLATES: dict[str, tuple[str, ...]] = {
    "shipping_fast": (
        "delivery was {very} fast.",
        "the {p} arrived {very} quickly.",
        "shipping was not slow at all.",
        "delivery was not slow, I had the {p} in {n} days.",
        "I expected shipping to be slow but it was fast.",
        "the {p} did not take long to arrive.",
        "never had a {p} ship this fast.",
        "shipping of the {p} was {very} quick, not slow like last time.",
    ),
    "shipping_slow": (
        "delivery was {very} slow.",
        "the {p} took {n} weeks to arrive.",
        "shipping was not fast at all.",
        "delivery was not fast, I had the {p} after {n} weeks.",
        "I expected shipping to be fast but it was slow.",
        "the {p} did take long to arrive.",
        "never had a {p} ship this slow.",
        "shipping of the {p} was {very} slow, not fast like last time.",
    ),
    "shipping_question": (
        "is shipping fast or slow?",
        "how fast will the {p} arrive?",
        "will delivery of the {p} be slow to my area?",
        "does the {p} ship fast or not?",
        "how long does shipping take for the {p}?",
        "is delivery fast or not, I need the {p} in {n} days?",
        "was shipping slow for anyone else, when will my {p} arrive?",
        "can the {p} arrive fast if I pay for shipping?",
    ),
    "quality_good": (
        "the {p} is {very} good.",
        "quality is not bad at all.",
        "the {p} is {very} well made.",
        "I thought the {p} would feel cheap but it is solid.",
        "I expected poor quality but it is good.",
        "the {p} does not feel cheap.",
        "the {p} works {very} well, no problems after {n} weeks.",
        "quality of the {p} is not poor like the reviews say.",
    ),
    "quality_poor": (
        "the {p} is {very} bad.",
        "quality is not good at all.",
        "the {p} is {very} badly made.",
        "I thought the {p} would feel solid but it is cheap.",
        "I expected good quality but it is poor.",
        "the {p} does feel {very} cheap.",
        "the {p} stopped working after {n} weeks.",
        "quality of the {p} is poor like the reviews say.",
    ),
    "wrong_item": (
        "I received the wrong {p}.",
        "I ordered a {p} but got a {q}.",
        "this is not the {p} I ordered.",
        "wrong {a}, no need for a refund, just send the right {p}.",
        "they sent a {q} instead of the {p}.",
        "the {p} in the box is the wrong {a}, please exchange it.",
        "wrong {a} of {p}, I want the correct one, not my money back.",
    ),
    "refund_request": (
        "I want a refund for the {p}.",
        "please give me my money back for the {p}.",
        "no need for an exchange, just refund the {p}.",
        "this is not the {p} I ordered, please refund me.",
        "how do I return the {p} and get my money back?",
        "I want my money back, not the correct {p}.",
        "please refund the {p}, I do not want a replacement.",
    ),
}


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text[:1].upper() + text[1:] if text else ""


def make_text(rng: np.random.Generator, label: str) -> str:
    """Return one review text for ``label`` (opener + core template + closer)."""
    p = _pick(rng, PRODUCTS)
    q = _pick(rng, tuple(x for x in PRODUCTS if x != p))
    fill = dict(p=p, q=q, very=_pick(rng, VERY), n=_pick(rng, NUMBERS),
                a=_pick(rng, ATTRIBUTES))
    parts = (_pick(rng, OPENERS), _pick(rng, TEMPLATES[label]), _pick(rng, CLOSERS))
    return " ".join(s for s in (_sentence(x.format(**fill)) for x in parts) if s)


def _split(rng: np.random.Generator, prefix: str, n: int, seen: set[str]) -> list[dict]:
    # Stratified: cycle through the classes, then shuffle.
    base = [LABELS[i % len(LABELS)] for i in range(n)]
    labels = [base[i] for i in rng.permutation(n)]
    rows = []
    for i, label in enumerate(labels):
        for _ in range(1000):
            text = make_text(rng, label)
            if text not in seen and MIN_WORDS <= len(text.split()) <= MAX_WORDS:
                break
        else:
            raise RuntimeError("could not generate a new unique text")
        seen.add(text)
        if rng.random() < NOISE_RATE:
            label = _pick(rng, NEIGHBOURS[label])
        rows.append({"id": f"{prefix}-{i:05d}", "text": text, "label": label})
    return rows


def generate(seed: int = 0, n_train: int = 400, n_test: int = 250) -> dict[str, list[dict]]:
    """Return {"train": [...], "test": [...]} of {"id", "text", "label"} rows.

    Deterministic per seed; every text is unique across both splits; each split
    is stratified over LABELS before the 3% neighbour-label noise is applied.
    """
    rng = np.random.default_rng(seed)
    seen: set[str] = set()
    train = _split(rng, "train", n_train, seen)
    test = _split(rng, "test", n_test, seen)
    return {"train": train, "test": test}
