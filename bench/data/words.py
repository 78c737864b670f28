"""Whitespace tokens of English text: a token's word and the punctuation around it, its capitalisation, and the
stop words that are never replaced."""

from __future__ import annotations

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
