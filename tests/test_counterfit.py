"""Counter-fitting (bench.attack.counterfit): the objective against a brute-force float64 reference, what the
optimisation does to antonyms, synonyms and neighbours, the neighbour search, SimLex scoring, the cache, and
`--word-vectors counter-fitted` as TextFooler's default. Tiny vectors and constraint files only (the real build
from GloVe takes about a minute and is measured, not tested)."""

import gzip

import numpy as np
import pytest
import torch

from bench.attack import counterfit, wordvectors
from bench.attack.counterfit import (Constraints, CounterFitConfig, counter_fit, counter_fitted, objective_terms,
                                     original_neighbours, pair_indices)
from bench.errors import BenchError
from bench.evaluators.base import EvalOptions
from benchmarks.vectors import simlex_pairs, simlex_spearman


def unit(rows) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def reference_objective(vectors, synonyms, antonyms, neighbours, original, config) -> dict:
    """The three terms written out pair by pair (float64)."""
    def distance(i, j):
        u, w = vectors[i], vectors[j]
        return 1.0 - float(u @ w) / (np.linalg.norm(u) * np.linalg.norm(w))

    return {"antonym_repel": config.k1 * sum(max(0.0, config.delta - distance(i, j)) for i, j in antonyms),
            "synonym_attract": config.k2 * sum(max(0.0, distance(i, j) - config.gamma) for i, j in synonyms),
            "vector_space": config.k3 * sum(max(0.0, distance(i, j) - d) for (i, j), d in zip(neighbours, original))}


@pytest.mark.parametrize("config", [CounterFitConfig(), CounterFitConfig(k1=0.3, k2=0.05, k3=1.0, delta=0.7,
                                                                          gamma=0.2)])
def test_objective_matches_the_pairwise_definition(config):
    rng = np.random.default_rng(0)
    vectors = unit(rng.normal(size=(7, 5)))
    synonyms, antonyms = np.array([[0, 1], [2, 3], [1, 4]]), np.array([[0, 5], [3, 6]])
    neighbours, original = np.array([[4, 5], [1, 2], [0, 6]]), np.array([0.05, 0.9, 0.3])
    terms = objective_terms(torch.tensor(vectors), torch.tensor(synonyms), torch.tensor(antonyms),
                            torch.tensor(neighbours), torch.tensor(original), config)
    expected = reference_objective(vectors, synonyms, antonyms, neighbours, original, config)
    for name, value in expected.items():
        assert float(terms[name]) == pytest.approx(value, abs=1e-10), name
    assert expected["vector_space"] > 0 and expected["antonym_repel"] > 0   # every term is exercised


def test_each_term_is_zero_past_its_margin():
    vectors = unit([[1, 0], [-1, 0], [1, 0], [1, 1e-9]])   # 0-1 opposite, 2-3 identical
    terms = objective_terms(torch.tensor(vectors), torch.tensor([[2, 3]]), torch.tensor([[0, 1]]),
                            torch.tensor([[2, 3]]), torch.tensor([0.0]), CounterFitConfig())
    assert all(abs(float(v)) < 1e-12 for v in terms.values())


def test_neighbours_are_the_pairs_within_rho_of_each_other():
    rng = np.random.default_rng(1)
    vectors = unit(rng.normal(size=(40, 3))).astype(np.float32)
    first, second, distance = original_neighbours(vectors, 0.3)
    expected = {(i, j) for i in range(40) for j in range(i + 1, 40) if 1 - vectors[i] @ vectors[j] <= 0.3}
    assert set(zip(first.tolist(), second.tolist())) == expected and expected
    assert np.allclose(distance, [1 - vectors[i] @ vectors[j] for i, j in zip(first, second)], atol=1e-6)


WORDS = ["good", "bad", "great", "fine", "movie", "film", "dull"]


def toy_vectors() -> np.ndarray:
    """good/bad close (antonyms to part), good/great far (synonyms to join), movie/film close neighbours."""
    rng = np.random.default_rng(2)
    base = rng.normal(size=(len(WORDS), 6))
    base[1] = base[0] + 0.1 * rng.normal(size=6)     # bad ~ good
    base[5] = base[4] + 0.1 * rng.normal(size=6)     # film ~ movie
    return unit(base).astype(np.float32)


TOY = Constraints(synonyms=(("good", "great"), ("fine", "good"), ("absent", "good")),
                  antonyms=(("bad", "good"),))


def cosine(matrix, words, a, b) -> float:
    row = {w: i for i, w in enumerate(words)}
    u, w = matrix[row[a]], matrix[row[b]]
    return float(u @ w / (np.linalg.norm(u) * np.linalg.norm(w)))


def test_counter_fitting_parts_antonyms_joins_synonyms_and_keeps_neighbours():
    before = toy_vectors()
    after, report = counter_fit(WORDS, before, TOY, CounterFitConfig(steps=100, lr=1.0))
    assert report["synonym_pairs"] == 2 and report["antonym_pairs"] == 1   # pairs with an unknown word dropped
    assert cosine(before, WORDS, "good", "bad") > 0.9 and cosine(after, WORDS, "good", "bad") <= 0.05
    assert cosine(after, WORDS, "good", "great") > max(0.9, cosine(before, WORDS, "good", "great"))
    assert cosine(after, WORDS, "movie", "film") >= cosine(before, WORDS, "movie", "film") - 0.02
    assert np.allclose(np.linalg.norm(after, axis=1), 1, atol=1e-5)
    assert report["after"]["antonyms_at_margin"] == 1.0 and report["before"]["antonyms_at_margin"] == 0.0
    total = {k: sum(v for n, v in report[k].items() if n in ("antonym_repel", "synonym_attract", "vector_space"))
             for k in ("before", "after")}
    assert total["after"] < total["before"] / 5
    kept, _ = counter_fit(WORDS, before, Constraints((), ()), CounterFitConfig(steps=5))
    first, second, distance = original_neighbours(before, CounterFitConfig().rho)
    assert len(first) and all(1 - kept[i] @ kept[j] <= d + 1e-5 for i, j, d in zip(first, second, distance))
    alone = sorted(set(range(len(WORDS))) - set(first) - set(second))   # in no pair: untouched
    assert alone and np.allclose(kept[alone], before[alone], atol=1e-6)


def test_an_antonym_pair_that_was_close_is_not_held_together_by_the_vector_space_term():
    before = toy_vectors()   # good ~ bad: original neighbours
    apart, report = counter_fit(WORDS, before, Constraints((), (("bad", "good"),)), CounterFitConfig())
    assert report["neighbour_pairs"] == 1 and cosine(apart, WORDS, "movie", "film") >= 0.99   # movie-film only
    assert cosine(apart, WORDS, "good", "bad") < 0.5
    both = Constraints((("bad", "good"),), (("bad", "good"),))   # listed as both: an antonym pair only
    _, report = counter_fit(WORDS, before, both, CounterFitConfig(steps=1))
    assert report["synonym_pairs"] == 0 and report["antonym_pairs"] == 1


def test_pairs_of_unknown_words_are_left_out():
    assert pair_indices([("a", "b"), ("a", "zz")], {"a": 0, "b": 1}).tolist() == [[0, 1]]
    assert pair_indices([], {"a": 0}).shape == (0, 2)


def test_simlex_spearman_scores_the_covered_pairs():
    words, vectors = ["a", "b", "c", "d"], unit([[1, 0], [1, 0.1], [1, 1], [0, 1]])
    ordered = [("a", "b", 9.0), ("a", "c", 5.0), ("a", "d", 1.0), ("a", "zz", 3.0)]
    assert simlex_spearman(words, vectors, ordered) == {"spearman": 1.0, "pairs": 3, "of": 4}
    reversed_ = [(a, b, -score) for a, b, score in ordered]
    assert simlex_spearman(words, vectors, reversed_)["spearman"] == -1.0


def test_the_shipped_simlex_and_constraints_read():
    pairs = simlex_pairs()
    assert len(pairs) == 999 and pairs[0] == ("old", "new", 1.58)
    shipped = counterfit.shipped_constraints()
    assert len(shipped.synonyms) > 15_000 and len(shipped.antonyms) > 6_000   # unique unordered pairs
    assert ("bad", "good") in shipped.antonyms and all(a < b for a, b in shipped.synonyms[:100])
    assert "fawn" in counterfit.shipped_vocabulary() and (counterfit.CONSTRAINTS / "LICENSE.txt").is_file()


def write_gz(path, lines):
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


@pytest.fixture
def constraint_folder(tmp_path):
    folder = tmp_path / "constraints"
    folder.mkdir()
    write_gz(folder / "ppdb_synonyms.txt.gz", ["good great", "fine good"])
    write_gz(folder / "ppdb_antonyms.txt.gz", ["good bad"])
    write_gz(folder / "wordnet_antonyms.txt.gz", [])
    write_gz(folder / "vocabulary.txt.gz", WORDS[:-1])   # dull is not in the vocabulary
    return folder


def test_built_once_then_read_from_the_cache_until_an_input_changes(constraint_folder, tmp_path, monkeypatch):
    calls = []
    real = counterfit.counter_fit
    monkeypatch.setattr(counterfit, "counter_fit", lambda *a, **k: calls.append(1) or real(*a, **k))
    cache, matrix = tmp_path / "cache", toy_vectors()
    words, vectors = counter_fitted("toy", WORDS, matrix, folder=constraint_folder, cache=cache)
    assert words == WORDS[:-1] and vectors.shape == (6, 6) and len(calls) == 1
    again_words, again = counter_fitted("toy", WORDS, matrix, folder=constraint_folder, cache=cache)
    assert again_words == words and np.array_equal(again, vectors) and len(calls) == 1
    identity = counterfit.build_identity("toy", CounterFitConfig(), constraint_folder)
    assert [p.name for p in cache.iterdir()] == [f"toy-counter-fitted-{identity}.npz"]
    write_gz(constraint_folder / "ppdb_antonyms.txt.gz", ["good bad", "great bad"])
    counter_fitted("toy", WORDS, matrix, folder=constraint_folder, cache=cache)
    counter_fitted("toy", WORDS, matrix, CounterFitConfig(steps=3), folder=constraint_folder, cache=cache)
    assert len(calls) == 3 and len(list(cache.iterdir())) == 3


def test_an_unwritable_cache_only_means_building_again(constraint_folder, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    words, vectors = counter_fitted("toy", WORDS, toy_vectors(), folder=constraint_folder, cache=blocked / "x")
    assert len(words) == 6 and np.isfinite(vectors).all()


def test_counter_fitted_is_the_attacks_default_and_glove_stays_available(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(wordvectors, "glove_words_and_matrix", lambda: (WORDS, toy_vectors()))
    wordvectors.counter_fitted_glove.cache_clear()
    wordvectors.glove_vectors.cache_clear()
    try:
        default = wordvectors.load_word_vectors(EvalOptions().word_vectors)
        plain = wordvectors.load_word_vectors("glove")
    finally:
        wordvectors.counter_fitted_glove.cache_clear()
        wordvectors.glove_vectors.cache_clear()
    assert EvalOptions().word_vectors == "counter-fitted" and default.name == "glove-6b-50d-counter-fitted"
    assert set(default.words) <= set(WORDS) and "good" in default and plain.name == "glove-6b-50d"
    assert cosine(default.search, default.words, "good", "bad") < 0.2 < cosine(plain.search, plain.words, "good", "bad")
    assert list((tmp_path / "word-vectors").glob("glove-6b-50d-counter-fitted-*.npz"))
    with pytest.raises(BenchError, match="give counter-fitted, glove or a vectors file"):
        wordvectors.load_word_vectors("")


def test_textfooler_settings_tell_the_vector_sets_apart(tmp_path):
    from bench.evaluators.textfooler import TextFooler

    evaluator = TextFooler()
    default, plain = EvalOptions(), EvalOptions(word_vectors="glove")
    assert evaluator.settings(default)["word_vectors_build"] == counterfit.default_build_identity()
    assert "word_vectors_build" not in evaluator.settings(plain)
    assert evaluator.settings_hash(default) != evaluator.settings_hash(plain)
    with pytest.raises(BenchError, match="takes counter-fitted or glove, or a text file"):
        evaluator.check(EvalOptions(word_vectors="paragram"), None, tmp_path)


def test_the_vectors_benchmark_reports_the_build_and_simlex_of_both_spaces(monkeypatch, capsys):
    import json

    from benchmarks import main as perf_main
    from benchmarks import vectors as vectors_module

    monkeypatch.setattr(vectors_module, "glove_words_and_matrix", lambda: (WORDS, toy_vectors()))
    assert perf_main(["vectors", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["build"]["words"] == len(WORDS) and report["build"]["antonym_pairs"] >= 1   # all shipped words
    assert set(report["simlex999"]) == {"glove_all_words", "glove", "counter-fitted", "paper_glove_300d"}
    assert report["build_seconds"] >= 0 and report["cached_read_seconds"] >= 0
    assert set(report["neighbours"]["good"]) == {"glove", "counter-fitted"}


def test_a_new_version_of_the_procedure_is_a_new_build(monkeypatch):
    before = counterfit.build_identity("glove-6b-50d", CounterFitConfig())
    monkeypatch.setattr(counterfit, "VERSION", counterfit.VERSION + 1)
    assert counterfit.build_identity("glove-6b-50d", CounterFitConfig()) != before
