"""`vectors`: counter-fitting GloVe 6B-50d with the shipped constraints, from scratch in a temporary cache: how
long it takes, what the objective and the constraints look like before and after, SimLex-999 Spearman of plain
and counter-fitted vectors on the same pairs, and the nearest neighbours of a few words in both spaces."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.attack import counterfit
from bench.attack.wordvectors import COUNTER_FITTED, GLOVE_NAME, WordVectors, glove_words_and_matrix
from benchmarks.common import say

PROBES = ("dull", "good", "bad", "funny", "terrible", "cheap", "love")
SIMLEX_FILE = "SimLex-999.txt.gz"  # shipped beside the constraints (bench/attack/constraints/)


def simlex_pairs(folder: Path = counterfit.CONSTRAINTS) -> list[tuple[str, str, float]]:
    """(word1, word2, SimLex-999 score) of the shipped benchmark."""
    lines = counterfit.read_lines(folder / SIMLEX_FILE)
    return [(parts[0].lower(), parts[1].lower(), float(parts[3])) for parts in (line.split("\t") for line in lines[1:])]


def simlex_spearman(words: list[str], matrix: np.ndarray, pairs: list[tuple[str, str, float]]) -> dict:
    """Spearman correlation of the vectors' cosine with SimLex-999 over the pairs both of whose words they
    cover, and how many that is."""
    from scipy.stats import spearmanr

    row_of = {w: i for i, w in enumerate(words)}
    unit = counterfit.unit_rows(matrix)
    covered = [(row_of[a], row_of[b], score) for a, b, score in pairs if a in row_of and b in row_of]
    cosines = [float(unit[i] @ unit[j]) for i, j, _ in covered]
    rho = spearmanr(cosines, [score for _, _, score in covered]).statistic if len(covered) > 2 else float("nan")
    return {"spearman": round(float(rho), 4), "pairs": len(covered), "of": len(pairs)}


def vectors_bench(args: argparse.Namespace) -> dict:
    """Build counter-fitted GloVe once (timed) and compare it with plain GloVe on SimLex-999 and neighbours."""
    words, matrix = glove_words_and_matrix()
    config = counterfit.CounterFitConfig()
    rows = counterfit.vocabulary_rows(words)
    kept = [words[i].lower() for i in rows]
    plain = matrix[rows]
    say(args, f"counter-fitting {len(kept)} GloVe words with the shipped constraints")
    with tempfile.TemporaryDirectory() as folder:  # from scratch, then read back as a later attack reads it
        started = time.perf_counter()
        counterfit.counter_fitted(GLOVE_NAME, words, matrix, config, cache=Path(folder))
        seconds = time.perf_counter() - started
        reread_started = time.perf_counter()
        _, fitted = counterfit.counter_fitted(GLOVE_NAME, words, matrix, config, cache=Path(folder))
        reread = time.perf_counter() - reread_started
        (stored,) = Path(folder).glob("*.npz")
        with np.load(stored) as npz:
            build = json.loads(str(npz["report"]))
    pairs = simlex_pairs()
    spaces = {"glove": WordVectors(GLOVE_NAME, kept, plain), COUNTER_FITTED: WordVectors(COUNTER_FITTED, kept, fitted)}
    return {"benchmark": "vectors", "source": GLOVE_NAME, "build_seconds": round(seconds, 1),
            "cached_read_seconds": round(reread, 2), "build": build,
            "simlex999": {"glove_all_words": simlex_spearman(words, matrix, pairs),
                          "glove": simlex_spearman(kept, plain, pairs),
                          COUNTER_FITTED: simlex_spearman(kept, fitted, pairs),
                          "paper_glove_300d": {"before": 0.41, "after": 0.58}},
            "neighbours": {word: {name: [w for w, _ in space.neighbours(word, 8)] for name, space in spaces.items()}
                           for word in PROBES if word in spaces["glove"]}}
