"""TextFooler's search (Jin et al. 2020): rank words by deletion importance, then greedily swap each for the
embedding neighbour that survives the constraints and hurts the original class most, until the label flips.

Texts are split on whitespace (the datasets are pre-tokenised) and rebuilt with single spaces. A token is
attackable when its core (the token without leading/trailing punctuation) is alphabetic, is not a stop word
and has at least one neighbour; substitutes are alphabetic non-stop words too, written in the replaced
word's capitalisation with its punctuation kept. Only attackable words are scored by deletion.

Query batching: one classifier call for the original texts, one per attacked text for all its deletions, and
one per visited position for all of its candidates that passed the constraints (positions whose candidates
all fail make no call).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.data.substitutes import antonym_candidates
from bench.data.tagging import WORDNET_POS
from bench.data.words import apply_case, case_style, is_candidate, split_token
from bench.attack.pos import PartOfSpeech
from bench.attack.similarity import SIM_KIND, SentenceEncoder, window_similarities
from bench.attack.wordvectors import WordVectors

if TYPE_CHECKING:  # bench.evaluators imports this package: no import cycle at run time
    from bench.evaluators.base import Classifier


@dataclass(frozen=True)
class AttackConfig:
    """The attack's knobs (defaults follow the TextFooler paper's code, with MiniLM cosine for USE)."""

    max_candidates: int = 50        # nearest neighbours considered per word
    cos_threshold: float = 0.5      # least word-vector cosine of a substitute
    sim_threshold: float = 0.7      # least sentence-encoder cosine between original and perturbed windows
    sim_window: int = 15            # words in the similarity window around the swapped position
    max_change: float = 1.0         # largest fraction of a text's words that may be changed
    drop_antonyms: bool = True      # never swap a word for one of its WordNet antonyms (see `candidates`)

    def columns(self) -> dict[str, Any]:
        """The knobs as result columns (with the similarity kind)."""
        return {"max_candidates": self.max_candidates, "cos_threshold": self.cos_threshold,
                "sim_threshold": self.sim_threshold, "sim_window": self.sim_window, "sim_kind": SIM_KIND,
                "max_change": self.max_change, "drop_antonyms": self.drop_antonyms}


def query_words(texts: Sequence[str]) -> list[str]:
    """The lower-cased words whose neighbours an attack on `texts` looks up (as TextFooler.candidates does)."""
    words = {split_token(token)[1].lower() for text in texts for token in text.split()}
    return sorted(w for w in words if is_candidate(w))


def attack_vocabulary(vectors: WordVectors, texts: Sequence[str], config: AttackConfig | None = None) -> list[int]:
    """The rows of `vectors` an attack on `texts` can reach (its query words and their neighbours under
    `config`), in the vectors' own order: vectors cut to these rows give the same candidates for these texts.
    ValueError for vectors that search only some of their words (plain GloVe's 50k of 400k)."""
    if vectors.search_size < len(vectors.words):
        raise ValueError(f"{vectors.name} searches {vectors.search_size} of its {len(vectors.words)} words: a cut "
                         "would search them all and find other neighbours")
    config = config or AttackConfig()
    queries = [w for w in query_words(texts) if w in vectors]
    found = vectors.neighbours_many(queries, config.max_candidates, config.cos_threshold)
    row_of_spelling: dict[str, int] = {}
    for row, word in enumerate(vectors.words):
        row_of_spelling.setdefault(word, row)  # neighbours come back spelled as stored
    rows = {vectors.row_of[w] for w in queries}
    rows |= {row_of_spelling[w] for neighbours in found.values() for w, _ in neighbours}
    return sorted(rows)


@dataclass
class AttackResult:
    """The outcome of attacking one text."""

    gold: int
    original_text: str
    adversarial_text: str
    original_pred: int
    final_pred: int
    status: str                     # success | failed | skipped (originally misclassified)
    words_changed: int
    num_words: int
    queries: float                  # classifier queries spent on this text (its share of the first batch: 1)
    changes: list[tuple[int, str, str]] = field(default_factory=list)  # (position, old token, new token)

    @property
    def changed_pct(self) -> float:
        """Percentage of the text's words that were changed."""
        return 100.0 * self.words_changed / max(1, self.num_words)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for JSON)."""
        return asdict(self)


def wordnet_antonyms(word: str) -> frozenset[str]:
    """A lower-case word's WordNet antonyms under every part of speech (needs WordNet)."""
    return frozenset(a for tag in WORDNET_POS for a in antonym_candidates(word, tag))


def word_importance(p_orig: np.ndarray, p_deleted: np.ndarray) -> np.ndarray:
    """Importance of each deleted word from the probabilities with it (p_orig, (N,)) and without it
    (p_deleted, (m, N)): the drop of the predicted class's probability, plus, where the deletion changes the
    prediction, the rise of the newly predicted class's probability."""
    y = int(np.argmax(p_orig))
    if len(p_deleted) == 0:
        return np.zeros(0)
    scores = p_orig[y] - p_deleted[:, y]
    new = p_deleted.argmax(1)
    flipped = new != y
    scores = scores + np.where(flipped, p_deleted[np.arange(len(new)), new] - p_orig[new], 0.0)
    return scores.astype(np.float64)


class TextFoolerAttack:
    """The assembled attack: word vectors, part-of-speech and similarity constraints, greedy search."""

    def __init__(self, vectors: WordVectors, encoder: SentenceEncoder, pos: PartOfSpeech | None = None,
                 config: AttackConfig | None = None, antonyms: Callable[[str], Collection[str]] | None = None):
        self.vectors = vectors
        self.encoder = encoder
        self.pos = pos or PartOfSpeech()
        self.config = config or AttackConfig()
        self.antonyms = antonyms or wordnet_antonyms

    def columns(self) -> dict[str, Any]:
        """Everything that identifies this attack, as result columns."""
        return {"word_vectors": self.vectors.name, **self.config.columns(),
                "sentence_encoder": getattr(self.encoder, "name", type(self.encoder).__name__),
                "pos_tagger": self.pos.name}

    # ---------------------------------------------------------------- candidates

    def candidates(self, tokens: Sequence[str]) -> dict[int, list[str]]:
        """Substitute words per attackable position (stop words, punctuation and words without
        neighbours left out); one batched neighbour search for the text.

        Plain GloVe puts antonyms among the nearest neighbours (good ~ bad); the paper's counter-fitted
        vectors push them apart. With `drop_antonyms` a word's WordNet antonyms are removed instead, so a
        "successful" attack does not simply invert the meaning."""
        cores = [split_token(t)[1] for t in tokens]
        positions = [i for i, core in enumerate(cores) if is_candidate(core)]
        found = self.vectors.neighbours_many([cores[i] for i in positions], self.config.max_candidates,
                                             self.config.cos_threshold)
        out = {}
        for i in positions:
            banned = set(self.antonyms(cores[i].lower())) if self.config.drop_antonyms else set()
            words = [w for w, _ in found[cores[i].lower()] if is_candidate(w) and w.lower() not in banned]
            if words:
                out[i] = words
        return out

    def substituted(self, tokens: Sequence[str], position: int, word: str) -> list[str]:
        """tokens with tokens[position]'s core replaced by word (its punctuation and capitalisation kept)."""
        lead, core, trail = split_token(tokens[position])
        new = list(tokens)
        new[position] = lead + apply_case(word.lower(), case_style(core)) + trail
        return new

    # ---------------------------------------------------------------- one text

    def attack(self, classifier: Classifier, text: str, gold: int, p_orig: np.ndarray | None = None
               ) -> AttackResult:
        """Attack one text whose gold label index is gold; p_orig (the classifier's probabilities for text)
        saves a query when the caller has it already."""
        before = classifier.queries
        own = 0.0
        if p_orig is None:
            p_orig = classifier.predict_proba([text])[0]
        else:
            own = 1.0  # this text's share of the caller's batched call
        tokens = text.split()
        pred = int(np.argmax(p_orig))
        result = AttackResult(gold, text, " ".join(tokens), pred, pred, "skipped", 0, len(tokens), 0.0)
        if pred != gold:
            result.queries = own + classifier.queries - before
            return result
        result.status = "failed"
        self._search(classifier, tokens, gold, p_orig, result)
        result.queries = own + classifier.queries - before
        return result

    def _search(self, classifier: Classifier, tokens: list[str], gold: int, p_orig: np.ndarray,
                result: AttackResult) -> None:
        """Greedy substitution in order of importance; fills result."""
        options = self.candidates(tokens)
        if not options:
            return
        positions = sorted(options)
        deleted = [" ".join(tokens[:i] + tokens[i + 1:]) for i in positions]
        importance = word_importance(p_orig, classifier.predict_proba(deleted))
        order = [positions[j] for j in np.argsort(-importance, kind="stable")]
        budget = int(np.floor(self.config.max_change * len(tokens) + 1e-9))
        current, p_gold = list(tokens), float(p_orig[gold])
        for i in order:
            if len(result.changes) >= budget:
                break
            words = options[i]
            words = [w for w, ok in zip(words, self.pos.allowed(current, i, words)) if ok]
            texts = [self.substituted(current, i, w) for w in words]
            sims = window_similarities(self.encoder, tokens, texts, i, self.config.sim_window)
            keep = [j for j in range(len(texts)) if sims[j] >= self.config.sim_threshold]
            if not keep:
                continue
            probs = classifier.predict_proba([" ".join(texts[j]) for j in keep])
            preds = probs.argmax(1)
            flips = [k for k in range(len(keep)) if preds[k] != gold]
            if flips:
                best = max(flips, key=lambda k: (sims[keep[k]], -k))  # most similar; ties: closest neighbour
                self._apply(result, current, texts[keep[best]], i, int(preds[best]))
                result.status = "success"
                return
            best = int(np.argmin(probs[:, gold]))
            if probs[best, gold] < p_gold:
                p_gold = float(probs[best, gold])
                current = self._apply(result, current, texts[keep[best]], i, gold)

    @staticmethod
    def _apply(result: AttackResult, current: list[str], new: list[str], position: int, pred: int) -> list[str]:
        """Record the swap at position in result; returns the new token list."""
        result.changes.append((position, current[position], new[position]))
        result.words_changed = len(result.changes)
        result.adversarial_text = " ".join(new)
        result.final_pred = pred
        return new

    # ---------------------------------------------------------------- many texts

    def attack_many(self, classifier: Classifier, texts: Sequence[str], golds: Sequence[int]
                    ) -> tuple[list[AttackResult], float]:
        """Attack each (text, gold label index); returns the results and the wall-clock seconds taken.

        The original texts are scored in one batched call first; misclassified ones are skipped."""
        start = time.perf_counter()
        texts = list(texts)
        probs = classifier.predict_proba(texts) if texts else np.zeros((0, 0))
        results = [self.attack(classifier, text, int(gold), p) for text, gold, p in zip(texts, golds, probs)]
        return results, time.perf_counter() - start


def summarise(results: Sequence[AttackResult], seconds: float) -> list[dict[str, Any]]:
    """Attack metrics as {metric, value, n} dicts: clean_accuracy, accuracy_under_attack,
    attack_success_rate, words_changed_pct, queries_per_example, examples_per_second and skipped_examples
    (the count of originally misclassified texts)."""
    n = len(results)
    attacked = [r for r in results if r.status != "skipped"]
    won = [r for r in attacked if r.status == "success"]

    def ratio(num: float, den: int) -> float:
        """num / den, NaN when den is 0."""
        return float(num) / den if den else float("nan")

    rows = [
        {"metric": "clean_accuracy", "value": ratio(len(attacked), n), "n": n},
        {"metric": "accuracy_under_attack", "value": ratio(len(attacked) - len(won), n), "n": n},
        {"metric": "attack_success_rate", "value": ratio(len(won), len(attacked)), "n": len(attacked)},
        {"metric": "words_changed_pct", "value": ratio(sum(r.changed_pct for r in won), len(won)), "n": len(won)},
        {"metric": "queries_per_example", "value": ratio(sum(r.queries for r in attacked), len(attacked)),
         "n": len(attacked)},
        {"metric": "examples_per_second", "value": n / seconds if seconds > 0 else float("nan"), "n": n},
        {"metric": "skipped_examples", "value": float(n - len(attacked)), "n": n},
    ]
    why = ("no text to attack: the attack sample is empty" if not n
           else "nothing attacked: the model misclassified every sampled text before the attack" if not attacked
           else "no attack succeeded: there are no changed words to average" if not won
           else "no time measured")
    for row in rows:  # a metric that cannot be computed says why (never a bare NaN)
        if row["value"] != row["value"]:
            row["note"] = why
    return rows
