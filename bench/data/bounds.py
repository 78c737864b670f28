"""Texts bounded to what a model can see, once per run: a generous character cap first (so that no later pass
tokenises, perturbs or embeds megabytes), then the exact cut after the last word that the model's tokenizer
keeps within `max_length` tokens. Training, prediction and every evaluator get the cut texts; a text the model
sees whole is left as it is (the same object), so a dataset of short texts is unchanged."""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field
from itertools import islice
from typing import Callable

from bench.data.loading import SPLITS, Split, TextData

log = logging.getLogger(__name__)

# The character cap is max_length * CHARS_PER_TOKEN: far above what max_length tokens span in real text (English
# word pieces average ~4-5 characters), so it changes nothing a model sees; it only bounds the cost of a
# pathological text (one 10 MB line) before anything tokenises it.
CHARS_PER_TOKEN = 64
CHUNK = 256  # texts tokenised per call while finding the exact cut
WORD = re.compile(r"\S+")  # the words of str.split(), with their positions (the same whitespace rule)
WordTokenizer = Callable[[list[list[str]]], tuple[list[list[int]], list[list[int]]]]


@dataclass(frozen=True)
class TextBound:
    """What a model sees of a text: at most `max_length` tokens of its start. `tokenize_words` (an encoder
    bundle's: token ids and each token's word index, truncated at max_length) gives the exact cut; without it
    texts are only capped at `max_chars`."""

    max_length: int
    tokenize_words: WordTokenizer | None = field(default=None, compare=False)

    @property
    def max_chars(self) -> int:
        """The character cap applied before any tokenisation."""
        return self.max_length * CHARS_PER_TOKEN

    def cut(self, texts: list[str]) -> list[str]:
        """Each text cut to what the model sees (texts it sees whole are returned as they are)."""
        out = [text[:self.max_chars] if len(text) > self.max_chars else text for text in texts]
        if self.tokenize_words is None:
            return out
        # a text of at most max_length characters has at most about max_length tokens: left whole (it costs
        # nothing, and its last word or two beyond the model's view change nothing it predicts)
        longer = [i for i, text in enumerate(out) if len(text) > self.max_length]
        # a word gives at least one token, so the model sees at most max_length words: the first max_length + 1
        # are tokenised; only a text whose words give no token (control characters) needs all of its own
        unsure = self.cut_at_words(out, longer, self.max_length + 1)
        self.cut_at_words(out, unsure, None)
        return out

    def cut_at_words(self, out: list[str], which: list[int], words: int | None) -> list[int]:
        """Cut the texts out[i] (in place) after the last word the model sees of their first `words` words
        (None: all); returns those whose cut lies past these words (the model sees them all)."""
        unsure = []
        for start in range(0, len(which), CHUNK):
            chunk = which[start:start + CHUNK]
            spans = [[m.span() for m in islice(WORD.finditer(out[i]), words)] for i in chunk]
            ids, word_ids = self.tokenize_words([[out[i][a:b] for a, b in s] for i, s in zip(chunk, spans)])
            for i, text_spans, tokens, seen in zip(chunk, spans, ids, word_ids):
                last = max(seen, default=-1)  # the last word the model sees (whole or in part)
                if len(tokens) >= self.max_length and last >= 0:  # its view ends in word `last`
                    if WORD.search(out[i], text_spans[last][1]):  # more words follow: cut after it
                        out[i] = out[i][:text_spans[last][1]]
                elif words is not None and len(text_spans) == words and WORD.search(out[i], text_spans[-1][1]):
                    unsure.append(i)  # more words follow: the model may see some of them
        return unsure


def cut_split(split: Split, bound: TextBound) -> tuple[Split, int]:
    """The split with its texts cut (`TextBound.cut`) and how many were cut."""
    texts = bound.cut(split.texts)
    cut = sum(new is not old for new, old in zip(texts, split.texts))
    return (Split(split.ids, texts, split.labels) if cut else split), cut


def bound_data(data: TextData, bound: TextBound) -> TextData:
    """The dataset with every split's texts cut to what the model sees (`texts_cut`: how many per split), said
    once in the log when any was cut; data already bounded to this max_length is returned as it is."""
    if data.bounded_to == bound.max_length:
        return data
    splits, counts = {}, {}
    for name in SPLITS:
        splits[name], counts[name] = cut_split(getattr(data, name), bound)
    longest = max((len(t) for name in SPLITS if counts[name] for t in getattr(data, name).texts), default=0)
    if any(counts.values()):
        say_once(cut_note(data.name, bound, counts, longest))
    return dataclasses.replace(data, **splits, texts_cut=counts, bounded_to=bound.max_length)


def cut_note(name: str, bound: TextBound, counts: dict[str, int], longest: int) -> str:
    """The line that says how many texts were cut, per split, and the longest one's length."""
    per_split = ", ".join(f"{split} {n}" for split, n in counts.items() if n)
    how = "" if bound.tokenize_words else f" (at {bound.max_chars} characters)"
    return (f"{name}: {sum(counts.values())} text(s) longer than the model's {bound.max_length} tokens cut to "
            f"what it sees{how} ({per_split}; the longest had {longest} characters); training and every "
            "evaluator use the cut texts")


_said: set[str] = set()


def say_once(message: str) -> None:
    """Log `message` (INFO) the first time this process meets it (a sweep cuts the same data for every shard)."""
    if message not in _said:
        _said.add(message)
        log.info(message)
