"""`floor`: the TF-IDF floor's cost (bench.evaluators.tfidf) on real datasets, against its first configuration
(multinomial lbfgs, warm-started along the C grid, `min_df` 1 at every size) on the same texts in the same run:
seconds, features, the C chosen on validation and test accuracy of each. Texts are cut to what the encoder
sees (its tokenizer, `--max-length` tokens), as a shard cuts them."""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench.data.bounds import TextBound, bound_data
from bench.data.loading import load_dataset
from bench.data.textdata import TextData
from bench.evaluators import tfidf
from benchmarks.common import say
from bench.spec import TrainConfig


def first_configuration(data: TextData) -> dict[str, Any]:
    """The floor as first built: multinomial lbfgs over the C grid, each fit starting from the last, `min_df` 1."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    started = time.perf_counter()
    vectorizer = TfidfVectorizer(ngram_range=tfidf.NGRAMS, sublinear_tf=True, min_df=1)
    features = vectorizer.fit_transform(data.train.texts)
    test, validation = vectorizer.transform(data.test.texts), vectorizer.transform(data.validation.texts)
    model = LogisticRegression(max_iter=tfidf.MAX_ITER, random_state=tfidf.RANDOM_STATE, warm_start=True)
    fits = []
    for c in tfidf.C_GRID:
        model.set_params(C=c).fit(features, data.train.labels)
        fits.append(((model.predict(validation) == data.validation.labels).mean(), c, model.predict(test)))
    score, chosen, predicted = tfidf.best_fit(fits)
    return {"accuracy": float((predicted == data.test.labels).mean()), "c": chosen,
            "features": int(features.shape[1]), "seconds": round(time.perf_counter() - started, 3)}


def bounded(name: str, data_dir: str | None, encoder: str, max_length: int) -> TextData:
    """The dataset (seed 0's validation carve) with its texts cut to `max_length` tokens of `encoder`."""
    from bench.encoders.models import build_encoder

    data = load_dataset(name, data_dir)
    bundle = build_encoder(encoder, data.train.texts, TrainConfig(max_length=max_length))
    return bound_data(data, TextBound(max_length, bundle.tokenize_words))


def floor_bench(args: argparse.Namespace) -> dict:
    """Per dataset, the floor now and as first built, alternating `--rounds` times: median seconds, their ratio,
    and what each chose and scored (the same every round: the fits are deterministic)."""
    report: dict[str, Any] = {"benchmark": "floor", "encoder": args.encoder, "max_length": args.max_length,
                              "rounds": args.rounds, "datasets": {}}
    variants = {"now": tfidf.fit_and_score, "first": first_configuration}
    for name in args.dataset_list:
        data = bounded(name, args.data_dir, args.encoder, args.max_length)
        say(args, f"{name}: {len(data.train)} train, {len(data.label_names)} classes")
        seconds: dict[str, list[float]] = {v: [] for v in variants}
        last: dict[str, dict[str, Any]] = {}
        for _ in range(args.rounds):
            for variant, fit in variants.items():
                last[variant] = fit(data)
                seconds[variant].append(float(last[variant]["seconds"]))
                say(args, f"{name} {variant}: {last[variant]['seconds']:.1f} s")
        medians = {v: statistics.median(s) for v, s in seconds.items()}
        report["datasets"][name] = {
            "train": len(data.train), "classes": len(data.label_names),
            **{v: {"median_seconds": round(medians[v], 2), "seconds": seconds[v], "c": last[v]["c"],
                   "features": last[v]["features"], "test_accuracy": round(100 * float(last[v]["accuracy"]), 2)}
               for v in variants},
            "speedup": round(medians["first"] / medians["now"], 2)}
    return report
