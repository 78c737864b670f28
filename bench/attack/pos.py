"""The part-of-speech constraint: a substitute must have exactly the replaced word's coarse tag.

Tags come from `bench.data.tagging.pos_tags` (NOUN, VERB, ADJ, ADV, OTHER). With its WordNet fallback a tag does not
depend on context, so tags are cached per word; with a spaCy model (context-dependent) the substitute is
tagged in place, inside a window of CONTEXT words either side. OTHER (words WordNet does not know) only
matches OTHER. The paper's relaxation that lets nouns and verbs stand for each other is not applied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bench.data import tagging
from bench.data.words import split_token

CONTEXT = 4  # words either side given to a contextual tagger

Tagger = Callable[[Sequence[str]], list[str]]


class PartOfSpeech:
    """Same-tag check for substitutes; `tagger(tokens) -> tags` defaults to bench.data.tagging.pos_tags."""

    def __init__(self, tagger: Tagger | None = None, contextual: bool | None = None, name: str | None = None):
        self.tagger = tagger or tagging.pos_tags
        default = tagger is None
        self.contextual = (tagging.tagger_name() != "wordnet") if contextual is None and default else bool(contextual)
        self.name = name or (tagging.tagger_name() if default else getattr(tagger, "__name__", "custom"))
        self._word_tags: dict[str, str] = {}

    def word_tag(self, word: str) -> str:
        """The context-free tag of one word (cached)."""
        key = word.lower()
        if key not in self._word_tags:
            self._word_tags[key] = self.tagger([key])[0]
        return self._word_tags[key]

    def tag_at(self, tokens: Sequence[str], position: int) -> str:
        """The tag of tokens[position] (in context when the tagger is contextual)."""
        if not self.contextual:
            return self.word_tag(split_token(tokens[position])[1])
        start = max(0, position - CONTEXT)
        return self.tagger(list(tokens[start:position + CONTEXT + 1]))[position - start]

    def allowed(self, tokens: Sequence[str], position: int, substitutes: Sequence[str]) -> list[bool]:
        """Per substitute word: whether it takes the same tag at position as tokens[position] has."""
        wanted = self.tag_at(tokens, position)
        if not self.contextual:
            return [self.word_tag(word) == wanted for word in substitutes]
        out = []
        for word in substitutes:
            swapped = list(tokens)
            swapped[position] = word
            out.append(self.tag_at(swapped, position) == wanted)
        return out
