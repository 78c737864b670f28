"""Data regimes: few labels (a stratified training sample of N examples, or K per class), a validation split sized
like that sample, and noisy training labels (symmetric, or flipped to each class's most confusable class). Every
random choice is seeded from the run's draw (bench.spec.TrainConfig.draw): the data seed, and for a per-seed draw
the model seed, never the method, so every method at one seed sees the same data (paired runs)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from bench.data.textdata import Split, TextData
from bench.errors import BenchError
from bench.spec import NOISE_KINDS, REGIME_DEFAULTS, REGIME_FIELDS, TrainConfig

DEFAULTS: dict[str, Any] = REGIME_DEFAULTS
# A distinct stream per step, so e.g. adding noise leaves the training sample as it was.
TRAIN_STREAM, VALIDATION_STREAM, NOISE_STREAM = 1, 2, 3


# ----------------------------------------------------------------------------------------------- settings

def regime_settings(regime: Mapping[str, Any]) -> dict[str, Any]:
    """All five regime settings, missing ones at their defaults, checked (BenchError naming the fix)."""
    unknown = sorted(set(regime) - set(REGIME_FIELDS))
    if unknown:
        raise BenchError(f"unknown data-regime setting(s) {unknown}; the settings are {', '.join(REGIME_FIELDS)}")
    values = {**DEFAULTS, **{k: v for k, v in regime.items() if v is not None}}
    try:
        settings = {"train_size": int(values["train_size"]), "shots": int(values["shots"]),
                    "val_size": int(values["val_size"]), "label_noise": float(values["label_noise"]),
                    "noise_kind": str(values["noise_kind"])}
    except (TypeError, ValueError) as exc:
        raise BenchError(f"data-regime settings must be numbers ({exc}); e.g. --train-size 100 --label-noise 0.2")
    TrainConfig(**settings)  # its checks, with their messages (one source for what a valid regime is)
    return settings


def is_default(regime: Mapping[str, Any]) -> bool:
    """Whether every regime setting given is at its default (the data is used as loaded)."""
    if set(regime) - set(REGIME_FIELDS):
        return False
    return all(regime.get(name, default) in (default, None) for name, default in DEFAULTS.items())


# ----------------------------------------------------------------------------------------------- sampling

def allocate(counts: np.ndarray, n: int) -> np.ndarray:
    """How many of each class a stratified sample of n takes: proportional to `counts`, at least one of every
    present class when n allows, largest remainders first (ties: lowest class), exactly n in all."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if not 0 <= n <= total:
        raise ValueError(f"cannot sample {n} of {total}")
    present = counts > 0
    floor = 1 if n >= int(present.sum()) else 0
    scaled = n * counts  # quota of class c is scaled[c] / total; compared in integers, exactly
    alloc = np.minimum(np.where(present, np.maximum(scaled // total, floor), 0), counts)
    while alloc.sum() < n:  # the largest remainder (quota - allocation) among classes with examples left
        room = alloc < counts
        alloc[int(np.argmax(np.where(room, scaled - alloc * total, np.iinfo(np.int64).min)))] += 1
    while alloc.sum() > n:  # the smallest remainder among classes above their floor
        spare = present & (alloc > floor)
        alloc[int(np.argmin(np.where(spare, scaled - alloc * total, np.iinfo(np.int64).max)))] -= 1
    return alloc


def sample(labels: np.ndarray, per_class: np.ndarray, rng: np.random.Generator) -> list[int]:
    """Sorted positions of a sample taking per_class[c] random examples of each class c."""
    chosen: list[int] = []
    for c in range(len(per_class)):
        positions = np.flatnonzero(labels == c)
        if len(positions):  # a full permutation per class: a larger sample extends a smaller one
            chosen += rng.permutation(positions)[: int(per_class[c])].tolist()
    return sorted(chosen)


def class_counts(split: Split, num_labels: int) -> np.ndarray:
    """Examples per class of a split."""
    return np.bincount(split.labels, minlength=num_labels)


def sample_train(data: TextData, settings: dict[str, Any], rng: np.random.Generator) -> Split:
    """The training sample of `train_size` examples or `shots` per class (the whole split without either)."""
    counts = class_counts(data.train, data.num_labels)
    present = int((counts > 0).sum())
    n, k = settings["train_size"], settings["shots"]
    if n:
        if n < present:
            raise BenchError(f"--train-size {n} is fewer than the {present} classes of {data.name}'s train; give "
                             f"at least {present} so every class is present")
        if n > len(data.train):
            raise BenchError(f"--train-size {n} is too large: {data.name}'s train has only {len(data.train)} "
                             f"examples; give at most {len(data.train)} (or 0 for all)")
        return data.train.subset(sample(data.train.labels, allocate(counts, n), rng))
    if k:
        short = [c for c in range(data.num_labels) if 0 < counts[c] < k]
        if short:
            c = short[0]
            raise BenchError(f"--shots {k} is too many: class {data.label_names[c]!r} of {data.name}'s train has "
                             f"only {counts[c]} examples; give --shots {int(counts[counts > 0].min())} or fewer")
        return data.train.subset(sample(data.train.labels, np.where(counts > 0, k, 0), rng))
    return data.train


def sample_validation(data: TextData, settings: dict[str, Any], train_classes: list[int], draw: str,
                      rng: np.random.Generator) -> tuple[Split, str, list[str]]:
    """The validation split the settings ask for, what it is (validation_source) and any warnings; `draw` names
    the draw (`draw_name`)."""
    val, n, k, m = data.validation, settings["train_size"], settings["shots"], settings["val_size"]
    counts = class_counts(val, data.num_labels)
    origin = f"{len(val)} validation examples ({data.validation_source}; {draw})"
    if m == -1 or (m == 0 and not (n or k)):
        return val, data.validation_source, []
    if m > 0:
        present = int((counts > 0).sum())
        if m > len(val):
            raise BenchError(f"--val-size {m} is too large: {data.name}'s validation has only {len(val)} examples; "
                             f"give at most {len(val)} (or -1 for all)")
        if m < present:
            raise BenchError(f"--val-size {m} is fewer than the {present} classes of {data.name}'s validation; "
                             f"give at least {present} so every class is present")
        return val.subset(sample(val.labels, allocate(counts, m), rng)), f"stratified {m} of {origin}", []
    target = n or k * len(train_classes)
    if len(val) < target:
        return val, data.validation_source, [
            f"{data.name}: validation has only {len(val)} examples, fewer than the {target} of the training "
            f"sample; kept all of them (give --val-size to choose another size)"]
    if n:
        return val.subset(sample(val.labels, allocate(counts, n), rng)), f"stratified {n} of {origin}", []
    per_class = np.minimum(counts, k)
    short = [data.label_names[c] for c in train_classes if counts[c] < k]
    warnings = [f"{data.name}: validation has fewer than {k} examples of {short}; kept all of those (give "
                f"--val-size to choose another size)"] if short else []
    return val.subset(sample(val.labels, per_class, rng)), f"{k} per class of {origin}", warnings


# ----------------------------------------------------------------------------------------------- noise

def noise_map(texts: list[str], labels: np.ndarray, num_labels: int) -> dict[int, int]:
    """Each class present in `labels` -> its most confusable other class: the one whose TF-IDF centroid is
    most cosine-similar to its own (ties: the lowest class index)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    labels = np.asarray(labels)
    present = [c for c in range(num_labels) if (labels == c).any()]
    if len(present) < 2:
        raise BenchError(f"label noise needs at least two classes in train, found {len(present)}; "
                         "drop --label-noise or add examples of other classes")
    try:
        rows = TfidfVectorizer().fit_transform(texts)  # rows L2-normalised
        centroids = np.vstack([np.asarray(rows[np.flatnonzero(labels == c)].mean(axis=0)).ravel()
                               for c in present])
    except ValueError:  # no words at all (e.g. only punctuation): every class equally close
        centroids = np.zeros((len(present), 1))
    norms = np.linalg.norm(centroids, axis=1, keepdims=True)
    unit = np.divide(centroids, norms, out=np.zeros_like(centroids), where=norms > 0)
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -np.inf)
    return {c: present[int(np.argmax(similarity[i]))] for i, c in enumerate(present)}


def flip_labels(train: Split, settings: dict[str, Any], num_labels: int,
                rng: np.random.Generator) -> tuple[Split, list[int], dict[int, int] | None]:
    """Training labels with round(label_noise * n_c) of each class c flipped; returns the new split, the
    flipped positions and, for asymmetric noise, the class map used."""
    p, kind = settings["label_noise"], settings["noise_kind"]
    present = [c for c in range(num_labels) if (train.labels == c).any()]
    if len(present) < 2:
        raise BenchError(f"label noise needs at least two classes in train, found {len(present)}; "
                         "drop --label-noise or add examples of other classes")
    mapping = noise_map(train.texts, train.labels, num_labels) if kind == "asymmetric" else None
    labels = train.labels.copy()
    flipped: list[int] = []
    for c in present:
        positions = np.flatnonzero(train.labels == c)
        chosen = np.sort(rng.permutation(positions)[: int(round(p * len(positions)))])
        others = np.array([o for o in present if o != c], dtype=np.int64)
        if mapping is not None:
            labels[chosen] = mapping[c]
        else:
            labels[chosen] = others[rng.integers(0, len(others), size=len(chosen))]
        flipped += chosen.tolist()
    return dataclasses.replace(train, ids=list(train.ids), texts=list(train.texts), labels=labels), \
        sorted(flipped), mapping


# ----------------------------------------------------------------------------------------------- the regime

def draw_name(draw: Sequence[int]) -> str:
    """A draw in words: `data seed 0` (fixed: one draw for every seed) or `data seed 0, seed 3` (per seed)."""
    return f"data seed {draw[0]}" + (f", seed {draw[1]}" if len(draw) > 1 else "")


def stream(draw: Sequence[int], step: int) -> np.random.Generator:
    """The random stream of one step of the regime under `draw`: a fixed draw (data_seed,) seeds it as every run
    made before draws varied did ([data_seed, step]); a per-seed draw adds the model seed."""
    return np.random.default_rng([draw[0], step, *draw[1:]])


def apply_regime(data: TextData, regime: Mapping[str, Any], draw: int | Sequence[int]) -> TextData:
    """The data under a regime (few labels, a validation split sized like them, noisy training labels), drawn
    with `draw` (TrainConfig.draw: (data_seed,) or (data_seed, seed); an int is a fixed draw): a new TextData
    recording what was done and drawn in `regime`, or `data` itself when every setting is at its default."""
    if is_default(regime):
        return data
    draw = (int(draw),) if isinstance(draw, (int, np.integer)) else tuple(int(d) for d in draw)
    settings = regime_settings(regime)
    train = sample_train(data, settings, stream(draw, TRAIN_STREAM))
    train_classes = np.flatnonzero(class_counts(train, data.num_labels)).tolist()
    validation, validation_source, warnings = sample_validation(
        data, settings, train_classes, draw_name(draw), stream(draw, VALIDATION_STREAM))
    flipped: list[int] = []
    mapping = None
    if settings["label_noise"] > 0:
        train, flipped, mapping = flip_labels(train, settings, data.num_labels, stream(draw, NOISE_STREAM))
    record: dict[str, Any] = {
        **settings,
        "draw": "per-seed" if len(draw) > 1 else "fixed",
        "draw_seeds": list(draw),
        "train_examples": len(train),
        "validation_examples": len(validation),
        "source_train_examples": len(data.train),
        "source_validation_examples": len(data.validation),
        "flipped_ids": sorted(train.ids[i] for i in flipped),
        "flipped": len(flipped),
    }
    if settings["train_size"] or settings["shots"]:  # what was drawn, by id (the whole split needs none)
        record["train_ids"] = sorted(train.ids)
    if validation is not data.validation:
        record["validation_ids"] = sorted(validation.ids)
    if mapping is not None:
        record["noise_map"] = {data.label_names[c]: data.label_names[t] for c, t in mapping.items()}
    return dataclasses.replace(data, train=train, validation=validation, validation_source=validation_source,
                               warnings=[*data.warnings, *warnings], regime=record)
