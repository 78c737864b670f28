"""A classical reference: TF-IDF features and logistic regression (scikit-learn), trained on a CPU (in seconds on
most sets) on the run's own training draw and scored on its test split. Reports show it as a floor beside the
methods, never as one of them. It scores no model (`needs_model = False`): collapsed runs get it too, no model is
loaded, and the runs of a sweep on one draw train it once (cached under the results folder's `.cache/tfidf/`)."""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.data.textdata import Split, TextData
from bench.errors import SkipEvaluator
from bench.evaluators.base import EvalContext, EvalOptions, Evaluation, Evaluator
from bench.registry import EVALUATORS
from bench.results.atomic import write_json

NGRAMS = (1, 2)      # words and word bigrams: the demo card's ~95% model
# min_df 1: a few-label draw (20-100 texts) would lose most of its bigrams at 2. A vocabulary above
# LARGE_VOCABULARY terms (long texts at 128 tokens: 20ng 267k, r52 151k) keeps only terms of 2+ training texts
# (min_df 2: 95k, 46k), which costs time there, not accuracy; SST-2 (81k) and the short-text sets keep every term
MIN_DF = 1
LARGE_VOCABULARY = 100_000
C_GRID = (0.1, 1.0, 10.0, 100.0)  # inverse regularisation, chosen on the run's validation split (never test)
DEFAULT_C = 1.0  # scikit-learn's: taken without a validation split, preferred among C that tie on it
# one binary logistic regression per class (one-vs-rest; a single one for two classes), liblinear's primal
# solver: seconds where multinomial lbfgs carries features x classes weights through thousands of iterations
# (r52, 52 classes: 298 s for the grid, 37 s now); see docs/EVALUATORS.md
SOLVER = "liblinear"
MAX_ITER = 2000
RANDOM_STATE = 0
CACHE_FOLDER = "tfidf"
METRICS = ("accuracy", "macro_f1")


def digest(*splits: Split, extra: Any = None) -> str:
    """A short SHA-256 of the splits' ids, texts and labels (and `extra`, as JSON)."""
    hasher = hashlib.sha256(json.dumps(extra, sort_keys=True, default=str).encode())
    for split in splits:
        for item in (*split.ids, *split.texts):
            hasher.update(str(item).encode("utf-8", "surrogatepass") + b"\x00")
        hasher.update(np.asarray(split.labels, dtype=np.int64).tobytes())
    return hasher.hexdigest()[:24]


def draw_id(data: TextData) -> str:
    """What identifies the run's draw (its training and validation examples, by id and label, and the test
    ids): the same for every method, encoder and seed that trained on this draw, so reports count it once."""
    parts = [Split(s.ids, [""] * len(s), s.labels) for s in (data.train, data.validation, data.test)]
    return digest(*parts, extra=data.fingerprint)[:16]


def featurise(train: list[str], *others: list[str]) -> tuple[Any, ...]:
    """TF-IDF features (L2-normalised rows) of the training texts and of `others` on the training vocabulary; a
    vocabulary above LARGE_VOCABULARY keeps only the terms of two or more training texts, exactly as min_df 2
    would (the kept columns, each row normalised again)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    vectorizer = TfidfVectorizer(ngram_range=NGRAMS, sublinear_tf=True, min_df=MIN_DF)
    matrices = [vectorizer.fit_transform(train), *(vectorizer.transform(texts) for texts in others)]
    if matrices[0].shape[1] <= LARGE_VOCABULARY:
        return tuple(matrices)
    kept = np.flatnonzero(np.bincount(matrices[0].indices, minlength=matrices[0].shape[1]) >= 2)
    return tuple(normalize(matrix[:, kept]) for matrix in matrices)


def best_fit(fits: list[tuple[float, float, Any]]) -> tuple[float, float, Any]:
    """Of (validation accuracy, C, test predictions) fits, the one best on validation; among ties the C nearest
    DEFAULT_C."""
    return max(fits, key=lambda f: (f[0], -abs(math.log10(f[1] / DEFAULT_C))))


def fit_and_score(data: TextData) -> dict[str, Any]:
    """Fit TF-IDF + one-vs-rest logistic regression on the training split for each C of the grid, keep the one
    best on validation (among ties the C nearest DEFAULT_C), score the test split: its accuracy and macro-F1, the
    C chosen, the number of features and the seconds taken."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    started = time.perf_counter()
    features, test, validation = featurise(data.train.texts, data.test.texts, data.validation.texts)
    validation = validation if len(data.validation) else None
    fits = []  # (validation accuracy, C, test predictions)
    for c in C_GRID if validation is not None else (DEFAULT_C,):
        model = OneVsRestClassifier(LogisticRegression(solver=SOLVER, C=c, max_iter=MAX_ITER,
                                                       random_state=RANDOM_STATE))
        model.fit(features, data.train.labels)
        score = float((model.predict(validation) == data.validation.labels).mean()) if validation is not None else 0.
        fits.append((score, c, model.predict(test)))
    score, chosen, predicted = best_fit(fits)
    from bench.evaluators.metrics import classification_records  # scikit-learn: imported when it runs

    records = {r["metric"]: r["value"] for r in classification_records(data.test.labels, predicted, data.label_names)
               if r["label"] == "" and r["metric"] in METRICS}
    return {**records, "n": len(data.test), "c": chosen, "features": int(features.shape[1]),
            "validation_accuracy": score if validation is not None else None,
            "seconds": round(time.perf_counter() - started, 3)}


def sklearn_version() -> str:
    """The installed scikit-learn's version (part of the cache key: another version may fit otherwise)."""
    import sklearn

    return str(sklearn.__version__)


def read_cached(path: Path) -> dict[str, Any] | None:
    """A cached result, or None when there is none or it does not read (it is then fitted again)."""
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return cached if isinstance(cached, dict) and all(m in cached for m in (*METRICS, "n", "c", "seconds")) else None


@EVALUATORS.register("tfidf", "tf-idf")
class TfidfReference(Evaluator):
    """A floor for every table: TF-IDF (word uni+bigrams) + logistic regression on the run's training draw."""

    name = "tfidf"
    version = 2  # 2: one-vs-rest liblinear, min_df 2 on large vocabularies (1: multinomial lbfgs, min_df 1)
    needs_model = False

    def settings(self, options: EvalOptions) -> dict[str, Any]:
        """Its version and hyperparameters (they name its stored results)."""
        return {**super().settings(options), "ngram_range": list(NGRAMS), "sublinear_tf": True, "min_df": MIN_DF,
                "large_vocabulary_min_df_2": LARGE_VOCABULARY, "c_grid": list(C_GRID), "default_c": DEFAULT_C,
                "model": f"one-vs-rest logistic regression ({SOLVER})", "max_iter": MAX_ITER,
                "random_state": RANDOM_STATE}

    def evaluate(self, ctx: EvalContext) -> Evaluation:
        """Test accuracy and macro-F1 of the reference (fitted once per draw and texts, then read from the
        cache), with the draw's id, the chosen C and the seconds the fit took."""
        data = ctx.data
        if len(np.unique(data.train.labels)) < 2:
            raise SkipEvaluator("the training draw holds one class: logistic regression needs two")
        key = digest(data.train, data.validation, data.test,
                     extra=[data.label_names, self.settings(ctx.options), sklearn_version()])
        path = ctx.cache_dir / CACHE_FOLDER / f"{key}.json"  # the same texts and settings: fitted once
        result = read_cached(path)
        if result is None:
            result = fit_and_score(data)
            write_json(path, result)
        common = {"split": "test", "n": int(result["n"]), "label": "", "note": "", "draw": draw_id(data),
                  "tfidf_c": float(result["c"]), "fit_seconds": float(result["seconds"])}
        return Evaluation([{**common, "metric": metric, "value": float(result[metric])} for metric in METRICS])
