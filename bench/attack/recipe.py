"""The TextFooler recipe: word vectors + part-of-speech and sentence-similarity constraints + greedy search,
assembled with the defaults (GloVe 6B-50d or a vectors file, MiniLM cosine, bench.data.tagging's tagger).

`attack_pairs` runs it on (text, label) pairs outside any evaluator, e.g. for benchmarks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench.attack import skip
from bench.attack.pos import PartOfSpeech, Tagger
from bench.attack.search import AttackConfig, AttackResult, TextFoolerAttack, summarise
from bench.attack.similarity import MiniLMEncoder, SentenceEncoder
from bench.attack.wordvectors import COUNTER_FITTED, WordVectors, load_word_vectors
from bench.errors import BenchError

if TYPE_CHECKING:  # bench.evaluators imports this package: no import cycle at run time
    from bench.evaluators.base import Classifier

WORDNET_HINT = ("the textfooler attack's antonym filter and part-of-speech constraint need WordNet: apt-get "
                "install wordnet-base wordnet-sense-index (or python -m nltk.downloader wordnet)")


def check_wordnet(tagger_needs_it: bool = True, antonyms_need_it: bool = True) -> None:
    """SkipEvaluator when WordNet cannot be loaded but the default tagger (falling back to WordNet) or the
    antonym filter needs it."""
    from bench.data import tagging
    from bench.data.wordnet import load_wordnet

    if not (antonyms_need_it or (tagger_needs_it and tagging.tagger_name() == "wordnet")):
        return
    try:
        load_wordnet()
    except BenchError as exc:
        raise skip(WORDNET_HINT) from exc


def build_attack(word_vectors: str | WordVectors = COUNTER_FITTED, encoder: SentenceEncoder | None = None,
                 tagger: Tagger | None = None, config: AttackConfig | None = None) -> TextFoolerAttack:
    """A TextFoolerAttack: word_vectors is a WordVectors, or a --word-vectors value (`counter-fitted`, `glove`
    or a vectors file path);
    encoder defaults to MiniLM and tagger to bench.data.tagging.pos_tags (WordNet checked up front)."""
    vectors = word_vectors if isinstance(word_vectors, WordVectors) else load_word_vectors(word_vectors)
    check_wordnet(tagger_needs_it=tagger is None, antonyms_need_it=(config or AttackConfig()).drop_antonyms)
    return TextFoolerAttack(vectors, encoder or MiniLMEncoder(), PartOfSpeech(tagger), config)


def label_index(label: Any, label_names: Sequence[str]) -> int:
    """A label given as an index or as one of label_names, as an index (BenchError otherwise)."""
    if isinstance(label, str):
        if label not in label_names:
            raise BenchError(f"label {label!r} is not one of the classifier's labels {list(label_names)}")
        return list(label_names).index(label)
    index = int(label)
    if not 0 <= index < len(label_names):
        raise BenchError(f"label index {index} is out of range for {len(label_names)} labels")
    return index


def attack_pairs(classifier: Classifier, pairs: Sequence[tuple[str, Any]], attack: TextFoolerAttack | None = None,
                 **build: Any) -> tuple[list[AttackResult], list[dict[str, Any]]]:
    """Attack (text, label) pairs (labels as indices or names); returns per-text results and the summary
    metrics. Without `attack`, one is built from `build` (build_attack's keyword arguments)."""
    attack = attack or build_attack(**build)
    golds = [label_index(label, classifier.label_names) for _, label in pairs]
    results, seconds = attack.attack_many(classifier, [text for text, _ in pairs], golds)
    return results, [{**row, **attack.columns()} for row in summarise(results, seconds)]
