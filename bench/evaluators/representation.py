"""Representation quality of test embeddings: alignment and uniformity (Wang & Isola 2020) and the mean
cosine similarity within and across classes; optional t-SNE coordinates for plotting."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.results import store
from bench.data.loading import fixed_sample
from bench.evaluators.base import EvalContext, EvalOptions, Evaluation, Evaluator
from bench.registry import EVALUATORS

MAX_EXAMPLES = 2000  # pairwise metrics are O(n^2): a fixed, seeded sample of the test split above this
TSNE_FILE = store.TSNE


def normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (all-zero rows stay zero)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def squared_distances(x: np.ndarray) -> np.ndarray:
    """Pairwise squared Euclidean distances (n, n), in float64."""
    x = x.astype(np.float64)
    sq = (x * x).sum(1)
    return np.maximum(sq[:, None] + sq[None, :] - 2 * x @ x.T, 0.0)


def uniformity(x: np.ndarray, t: float = 2.0) -> float:
    """log of the mean of exp(-t ||u - v||^2) over distinct pairs of normalised rows (NaN without a pair)."""
    if len(x) < 2:
        return float("nan")
    d = squared_distances(x)
    upper = d[np.triu_indices(len(x), k=1)]
    return float(np.log(np.mean(np.exp(-t * upper))))


def alignment(a: np.ndarray, b: np.ndarray, alpha: float = 2.0) -> float:
    """Mean ||a_i - b_i||^alpha over paired normalised rows."""
    return float(np.mean(np.linalg.norm(a.astype(np.float64) - b, axis=1) ** alpha))


def class_pair_stats(x: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Class alignment (mean squared distance of same-class pairs) and mean cosine within / across classes."""
    same = labels[:, None] == labels[None, :]
    upper = np.triu(np.ones_like(same, dtype=bool), k=1)
    cos = x.astype(np.float64) @ x.T.astype(np.float64)
    within, across = same & upper, ~same & upper
    stats = {"alignment_class": float(np.mean(2 - 2 * cos[within])) if within.any() else float("nan"),
             "cos_within": float(cos[within].mean()) if within.any() else float("nan"),
             "cos_across": float(cos[across].mean()) if across.any() else float("nan")}
    stats["cos_gap"] = stats["cos_within"] - stats["cos_across"]
    return stats


def undefined_notes(x: np.ndarray, labels: np.ndarray, names: list[str]) -> dict[str, str]:
    """Why each metric that cannot be computed from these embeddings and labels is NaN (metric -> note)."""
    n = len(labels)
    notes: dict[str, str] = {}
    if n < 2:
        notes["uniformity"] = f"{n} test text scored: uniformity needs at least two"
    same = labels[:, None] == labels[None, :]
    if not (same & ~np.eye(n, dtype=bool)).any():
        within = (f"one example per class: no two of the {n} test texts scored share a class; the within-class "
                  "metrics need at least two examples of a class")
        notes.update(alignment_class=within, cos_within=within)
    if n and same.all():
        notes["cos_across"] = (f"one class: all {n} test texts scored are '{names[labels[0]]}'; the across-class "
                               "cosine needs examples of two classes")
    gap = "; ".join(notes[m] for m in ("cos_within", "cos_across") if m in notes)
    if gap:
        notes["cos_gap"] = gap
    bad = int((~np.isfinite(x)).any(axis=1).sum())
    if bad:
        diverged = (f"the model's embeddings are not finite (NaN or inf) for {bad} of {n} test texts: a diverged "
                    "model")
        notes = {m: diverged for m in ("alignment_dropout", "uniformity", "alignment_class", "cos_within",
                                         "cos_across", "cos_gap")}
    return notes


def test_sample(n_total: int, limit: int) -> np.ndarray:
    """Indices of a fixed sample of at most `limit` test examples (all when there are fewer), sorted: the same
    rule as the attacked sample."""
    return np.asarray(fixed_sample(n_total, limit), dtype=np.int64)


def tsne_coordinates(x: np.ndarray, seed: int) -> np.ndarray:
    """2-D t-SNE of the rows (scikit-learn; cosine metric, seeded)."""
    from sklearn.manifold import TSNE

    perplexity = float(min(30, max(2, (len(x) - 1) // 3)))
    return TSNE(n_components=2, perplexity=perplexity, metric="cosine", init="pca",
                random_state=seed).fit_transform(x.astype(np.float32))


@EVALUATORS.register("repr", "representation")
class Representation(Evaluator):
    """Alignment / uniformity and within- vs across-class cosine of the test embeddings (the head's input)."""

    name = "repr"
    option_names = ()  # t-SNE only adds an artefact (tsne.json); the metrics do not depend on it

    def artefacts(self, options: EvalOptions) -> tuple[str, ...]:
        """The t-SNE coordinates, when asked for."""
        return (TSNE_FILE,) if options.tsne else ()

    def evaluate(self, ctx: EvalContext) -> Evaluation:
        """The metrics of a fixed test sample's embeddings; with `tsne`, its 2-D coordinates as the artefact."""
        test = ctx.data.test
        index = test_sample(len(test), MAX_EXAMPLES)
        texts = [test.texts[i] for i in index]
        labels = test.labels[index]
        x = normalise(ctx.classifier.embed(texts))
        view_a = normalise(ctx.classifier.embed(texts, dropout=True))
        view_b = normalise(ctx.classifier.embed(texts, dropout=True))
        with np.errstate(invalid="ignore", divide="ignore"):  # a metric that cannot be computed is NaN, noted
            values = {"alignment_dropout": alignment(view_a, view_b), "uniformity": uniformity(x),
                      **class_pair_stats(x, labels)}
        notes = undefined_notes(np.concatenate([x, view_a, view_b], axis=1), labels, ctx.label_names)
        artefacts: dict[str, Any] = {}
        if ctx.options.tsne:
            chosen = test_sample(len(texts), ctx.options.tsne_n)
            xy = tsne_coordinates(x[chosen], ctx.seed)
            names = ctx.label_names
            artefacts[TSNE_FILE] = {
                "ids": [test.ids[index[i]] for i in chosen], "labels": [names[labels[i]] for i in chosen],
                "x": xy[:, 0].round(4).tolist(), "y": xy[:, 1].round(4).tolist()}
        return Evaluation([{"split": "test", "metric": metric, "value": value, "n": len(texts), "label": "",
                            "note": (notes.get(metric) or "not computable from these embeddings")
                            if np.isnan(value) else ""}
                           for metric, value in values.items()], artefacts)
