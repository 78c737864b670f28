"""Data regimes (bench.data.regimes): stratified few-label samples, validation sized like them, seeded label noise
(symmetric and to the most confusable class), every error on one line, and the untouched default."""

from __future__ import annotations

import copy
import random
from collections import Counter

import numpy as np
import pytest

from bench.data.loading import Split, TextData
from bench.data.regimes import (NOISE_STREAM, TRAIN_STREAM, VALIDATION_STREAM, allocate, apply_regime, noise_map,
                                 sample, stream)
from bench.errors import BenchError
from bench.spec import TrainConfig

# Classes 0 and 1 share "alpha beta", 1 and 2 share "epsilon": the most confusable map is {0: 1, 1: 0, 2: 1}.
WORDS = {0: "alpha beta", 1: "alpha beta epsilon", 2: "gamma delta epsilon"}


def make_split(prefix: str, counts: list[int], words: dict[int, str], seed: int) -> Split:
    """A split with counts[c] examples of class c, classes interleaved in a fixed shuffled order."""
    rows = [(c, i) for c, n in enumerate(counts) for i in range(n)]
    order = np.random.default_rng(seed).permutation(len(rows))
    rows = [rows[j] for j in order]
    return Split([f"{prefix}-{c}-{i}" for c, i in rows], [f"{words[c]} u{c}n{i}" for c, i in rows],
                 np.array([c for c, _ in rows], dtype=np.int64))


def make_data(train=(30, 20, 10), validation=(15, 10, 5), test=(3, 3, 3), words=None) -> TextData:
    words = words or WORDS
    names = [f"c{c}" for c in range(len(train))]
    return TextData("toy", names, make_split("tr", list(train), words, 1), make_split("va", list(validation), words, 2),
                    make_split("te", list(test), words, 3), "folder:/toy", "validation split of the source",
                    "fp0123456789", ["an earlier warning"])


def counts(split: Split, num_labels: int = 3) -> list[int]:
    return np.bincount(split.labels, minlength=num_labels).tolist()


def original_labels(data: TextData, ids) -> list[int]:
    where = dict(zip(data.train.ids, data.train.labels.tolist()))
    return [where[i] for i in ids]


def in_original_order(sample: Split, source: Split) -> bool:
    position = {i: p for p, i in enumerate(source.ids)}
    positions = [position[i] for i in sample.ids]
    return positions == sorted(positions) and len(set(positions)) == len(positions)


# ----------------------------------------------------------------------------------------------- default

def test_the_default_regime_returns_the_very_same_object():
    data = make_data()
    assert apply_regime(data, {}, 0) is data
    assert apply_regime(data, TrainConfig().regime(), 7) is data
    assert data.regime == {}


# ----------------------------------------------------------------------------------------------- few labels

@pytest.mark.parametrize("class_counts,n,expected", [
    ([30, 20, 10], 12, [6, 4, 2]),
    ([30, 20, 10], 7, [4, 2, 1]),  # largest remainder: 3.5, 2.33, 1.17
    ([30, 20, 10], 3, [1, 1, 1]),
    ([100, 1, 1], 3, [1, 1, 1]),  # at least one each, taken back from the largest class
    ([98, 1, 1], 10, [8, 1, 1]),
    ([5, 5, 5], 4, [2, 1, 1]),  # equal remainders: the lowest class first
    ([30, 0, 10], 8, [6, 0, 2]),
    ([30, 20, 10], 60, [30, 20, 10]),
])
def test_allocation_is_proportional_exact_and_covers_every_class(class_counts, n, expected):
    assert allocate(np.array(class_counts), n).tolist() == expected


def test_train_size_is_an_exact_stratified_sample_in_the_original_order():
    data = make_data()
    out = apply_regime(data, {"train_size": 12}, 0)
    assert len(out.train) == 12 and counts(out.train) == [6, 4, 2]
    assert set(out.train.ids) <= set(data.train.ids) and in_original_order(out.train, data.train)
    assert original_labels(data, out.train.ids) == out.train.labels.tolist()
    assert dict(zip(out.train.ids, out.train.texts)) == {i: t for i, t in zip(data.train.ids, data.train.texts)
                                                         if i in set(out.train.ids)}
    small = apply_regime(data, {"train_size": 3}, 0)
    assert counts(small.train) == [1, 1, 1]


def test_shots_take_exactly_k_per_class():
    data = make_data()
    out = apply_regime(data, {"shots": 4}, 0)
    assert counts(out.train) == [4, 4, 4]
    assert in_original_order(out.train, data.train)
    assert out.regime["train_examples"] == 12 and out.regime["source_train_examples"] == 60


def test_the_sample_depends_on_the_data_seed_only():
    data = make_data()
    first = apply_regime(data, {"train_size": 12}, 0)
    np.random.seed(123)
    random.seed(123)
    again = apply_regime(make_data(), {"train_size": 12}, 0)
    assert again.train.ids == first.train.ids and again.validation.ids == first.validation.ids
    other = apply_regime(data, {"train_size": 12}, 1)
    assert other.train.ids != first.train.ids and counts(other.train) == [6, 4, 2]
    assert other.validation.ids != first.validation.ids
    # noise and the validation size leave the training sample as it was
    noisy = apply_regime(data, {"train_size": 12, "label_noise": 0.3, "val_size": -1}, 0)
    assert noisy.train.ids == first.train.ids
    assert apply_regime(data, {"shots": 4}, 3).train.ids == apply_regime(data, {"shots": 4}, 3).train.ids


@pytest.mark.parametrize("draw", [0, (0, 5)])
def test_the_validation_sample_has_its_own_stream(draw):
    """One random stream per step (regimes.stream(draw, step): seeded [data_seed, step, *model seed]): at one
    --val-size the validation sample is the one VALIDATION_STREAM draws, whatever the training sample took (its
    size, shots, nothing at all) and whatever the noise; a stream shared with the training sample would make it
    depend on what that sample drew."""
    data = make_data()
    assert len({TRAIN_STREAM, VALIDATION_STREAM, NOISE_STREAM}) == 3
    seeds = (draw,) if isinstance(draw, int) else draw
    positions = sample(data.validation.labels, allocate(counts(data.validation), 9), stream(seeds, VALIDATION_STREAM))
    expected = sorted(data.validation.ids[i] for i in positions)
    for regime in ({}, {"train_size": 12}, {"train_size": 40}, {"shots": 4}, {"label_noise": 0.3},
                   {"train_size": 20, "label_noise": 0.2, "noise_kind": "asymmetric"}):
        out = apply_regime(data, {**regime, "val_size": 9}, draw)
        assert out.regime["validation_ids"] == expected, regime
    # not vacuous: the training step's stream (or a fresh one seeded like it) would draw another sample
    other = sample(data.validation.labels, allocate(counts(data.validation), 9), stream(seeds, TRAIN_STREAM))
    assert sorted(data.validation.ids[i] for i in other) != expected


# ----------------------------------------------------------------------------------------------- validation

def test_validation_is_sized_like_the_training_sample():
    data = make_data()
    by_size = apply_regime(data, {"train_size": 12}, 0)
    assert len(by_size.validation) == 12 and counts(by_size.validation) == [6, 4, 2]
    assert in_original_order(by_size.validation, data.validation)
    assert by_size.validation_source == ("stratified 12 of 30 validation examples (validation split of the "
                                         "source; data seed 0)")
    by_shots = apply_regime(data, {"shots": 3}, 0)
    assert counts(by_shots.validation) == [3, 3, 3]
    assert by_shots.regime["validation_examples"] == 9 and by_shots.regime["source_validation_examples"] == 30
    assert by_shots.warnings == data.warnings


def test_without_a_training_sample_auto_keeps_all_the_validation():
    data = make_data()
    out = apply_regime(data, {"label_noise": 0.1}, 0)
    assert out.validation.ids == data.validation.ids
    assert out.validation_source == data.validation_source


def test_val_size_all_and_a_given_size():
    data = make_data()
    everything = apply_regime(data, {"train_size": 12, "val_size": -1}, 0)
    assert everything.validation.ids == data.validation.ids and len(everything.train) == 12
    given = apply_regime(data, {"train_size": 12, "val_size": 9}, 0)
    assert len(given.validation) == 9 and counts(given.validation) == [5, 3, 1]
    assert given.validation_source.startswith("stratified 9 of 30 validation examples")
    alone = apply_regime(data, {"val_size": 6}, 0)
    assert counts(alone.validation) == [3, 2, 1] and alone.train is data.train


def test_a_validation_split_smaller_than_the_sample_is_kept_whole_with_a_warning():
    data = make_data()
    out = apply_regime(data, {"train_size": 40}, 0)
    assert len(out.train) == 40 and out.validation.ids == data.validation.ids
    assert out.warnings[0] == "an earlier warning" and len(out.warnings) == 2
    assert "only 30" in out.warnings[1] and "40" in out.warnings[1] and "--val-size" in out.warnings[1]
    assert data.warnings == ["an earlier warning"]


def test_a_validation_split_smaller_than_k_per_class_is_kept_whole_with_a_warning():
    data = make_data(train=(30, 20, 12), validation=(5, 4, 3))
    out = apply_regime(data, {"shots": 5}, 0)
    assert counts(out.train) == [5, 5, 5] and out.validation.ids == data.validation.ids
    assert len(out.warnings) == 2 and "only 12" in out.warnings[1] and "the 15" in out.warnings[1]


def test_a_class_short_in_validation_is_kept_whole_under_shots_with_a_warning():
    data = make_data()
    out = apply_regime(data, {"shots": 6}, 0)
    assert counts(out.train) == [6, 6, 6] and counts(out.validation) == [6, 6, 5]
    assert len(out.warnings) == 2 and "c2" in out.warnings[1] and "c0" not in out.warnings[1]


# ----------------------------------------------------------------------------------------------- untouched

def test_test_fingerprint_and_names_are_untouched_and_the_input_is_not_mutated():
    data = make_data()
    before = copy.deepcopy(data)
    out = apply_regime(data, {"train_size": 12, "label_noise": 0.4, "noise_kind": "asymmetric"}, 0)
    assert out is not data and out.test is data.test
    assert (out.fingerprint, out.name, out.label_names, out.source) == (
        data.fingerprint, data.name, data.label_names, data.source)
    for split in ("train", "validation", "test"):
        old, now = getattr(before, split), getattr(data, split)
        assert old.ids == now.ids and old.texts == now.texts and np.array_equal(old.labels, now.labels)
    assert data.regime == {} and data.warnings == before.warnings
    assert data.validation_source == before.validation_source


def test_the_record_names_the_settings_and_the_outcome():
    out = apply_regime(make_data(), {"train_size": 12, "label_noise": 0.25}, 0)
    assert {k: out.regime[k] for k in ("train_size", "shots", "val_size", "label_noise", "noise_kind")} == {
        "train_size": 12, "shots": 0, "val_size": 0, "label_noise": 0.25, "noise_kind": "symmetric"}
    assert out.regime["train_examples"] == 12 and out.regime["validation_examples"] == 12
    assert out.regime["flipped"] == len(out.regime["flipped_ids"]) == 2 + 1 + 0  # round(1.5), round(1), round(.5)
    assert out.regime["flipped_ids"] == sorted(out.regime["flipped_ids"])
    assert "noise_map" not in out.regime
    clean = apply_regime(make_data(), {"shots": 2}, 0)
    assert clean.regime["flipped_ids"] == [] and clean.regime["flipped"] == 0


# ----------------------------------------------------------------------------------------------- noise

@pytest.mark.parametrize("kind", ["symmetric", "asymmetric"])
@pytest.mark.parametrize("p", [0.1, 0.25, 0.5])
def test_noise_flips_exactly_round_p_n_of_each_class_and_nothing_else(kind, p):
    data = make_data()
    out = apply_regime(data, {"label_noise": p, "noise_kind": kind}, 0)
    assert out.train.ids == data.train.ids and out.train.texts == data.train.texts
    changed = {i for i, old, new in zip(data.train.ids, data.train.labels, out.train.labels) if old != new}
    assert changed == set(out.regime["flipped_ids"]) and out.regime["flipped"] == len(changed)
    per_class = Counter(original_labels(data, changed))
    assert [per_class[c] for c in range(3)] == [round(p * n) for n in (30, 20, 10)]
    assert np.array_equal(out.validation.labels, data.validation.labels)
    assert np.array_equal(out.test.labels, data.test.labels)


def test_noise_is_seeded_by_the_data_seed():
    data = make_data()
    first = apply_regime(data, {"label_noise": 0.3}, 0)
    assert apply_regime(data, {"label_noise": 0.3}, 0).regime["flipped_ids"] == first.regime["flipped_ids"]
    assert apply_regime(data, {"label_noise": 0.3}, 1).regime["flipped_ids"] != first.regime["flipped_ids"]


def test_noise_applies_to_the_sampled_training_set():
    data = make_data()
    out = apply_regime(data, {"train_size": 20, "label_noise": 0.2}, 0)
    assert set(out.regime["flipped_ids"]) <= set(out.train.ids)
    assert Counter(original_labels(data, out.regime["flipped_ids"])) == Counter({0: 2, 1: 1, 2: 1})  # 10, 7, 3


def test_symmetric_noise_spreads_over_the_other_classes():
    words = {c: f"k{c}" for c in range(4)}
    data = make_data(train=(40, 40, 40, 40), validation=(4, 4, 4, 4), test=(2, 2, 2, 2), words=words)
    out = apply_regime(data, {"label_noise": 0.5}, 0)
    targets: dict[int, Counter] = {c: Counter() for c in range(4)}
    for old, new in zip(data.train.labels.tolist(), out.train.labels.tolist()):
        if old != new:
            targets[old][new] += 1
    for c in range(4):
        assert sum(targets[c].values()) == 20 and c not in targets[c]
        assert len(targets[c]) > 1  # not one fixed class
    assert "noise_map" not in out.regime


def test_asymmetric_noise_follows_the_most_confusable_class():
    data = make_data()
    assert noise_map(data.train.texts, data.train.labels, 3) == {0: 1, 1: 0, 2: 1}
    out = apply_regime(data, {"label_noise": 0.5, "noise_kind": "asymmetric"}, 0)
    assert out.regime["noise_map"] == {"c0": "c1", "c1": "c0", "c2": "c1"}
    flipped = set(out.regime["flipped_ids"])
    for i, old, new in zip(data.train.ids, data.train.labels.tolist(), out.train.labels.tolist()):
        assert new == ({0: 1, 1: 0, 2: 1}[old] if i in flipped else old)


def test_noise_map_ties_go_to_the_lowest_class():
    texts = ["same words here"] * 6
    assert noise_map(texts, np.array([0, 0, 1, 1, 2, 2]), 3) == {0: 1, 1: 0, 2: 0}
    # idf weighs words: class 0 shares "aa" (in three classes) with 1 and "bb" (in two) with 2, so it maps to 2
    texts = ["aa bb"] * 3 + ["aa cc"] * 3 + ["bb dd"] * 3 + ["aa ee"] * 3
    assert noise_map(texts, np.repeat([0, 1, 2, 3], 3), 4)[0] == 2
    # classes absent from the labels are neither mapped nor targets
    texts = ["same words here"] * 6
    assert noise_map(texts[:4], np.array([0, 0, 3, 3]), 4) == {0: 3, 3: 0}


@pytest.mark.parametrize("kind", ["symmetric", "asymmetric"])
def test_with_two_classes_both_kinds_flip_to_the_other_class(kind):
    data = make_data(train=(10, 10), validation=(4, 4), test=(2, 2), words={0: "pos good", 1: "neg bad"})
    out = apply_regime(data, {"label_noise": 0.3, "noise_kind": kind}, 0)
    changed = [(o, n) for o, n in zip(data.train.labels.tolist(), out.train.labels.tolist()) if o != n]
    assert sorted(changed) == [(0, 1)] * 3 + [(1, 0)] * 3


# ----------------------------------------------------------------------------------------------- errors

@pytest.mark.parametrize("regime,words", [
    ({"train_size": 2}, ["--train-size 2", "3 classes"]),
    ({"train_size": 61}, ["train has only 60 examples"]),
    ({"shots": 11}, ["'c2'", "only 10 examples", "--shots 10"]),
    ({"train_size": 12, "shots": 3}, ["--train-size and --shots"]),
    ({"label_noise": 1.0}, ["--label-noise", "[0, 1)"]),
    ({"label_noise": -0.1}, ["--label-noise"]),
    ({"val_size": 31}, ["--val-size 31", "only 30 examples"]),
    ({"train_size": 12, "val_size": 2}, ["--val-size 2", "3 classes"]),
    ({"val_size": -2}, ["--val-size must be >= -1"]),
    ({"train_size": -1}, ["--train-size must be >= 0"]),
    ({"shots": -1}, ["--shots must be >= 0"]),
    ({"label_noise": 0.1, "noise_kind": "pairwise"}, ["--noise-kind", "asymmetric"]),
    ({"train_szie": 10}, ["train_szie", "train_size"]),
])
def test_every_error_is_one_line_naming_the_fix(regime, words):
    data = make_data()
    with pytest.raises(BenchError) as caught:
        apply_regime(data, regime, 0)
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message
    assert data.regime == {} and len(data.train) == 60


def test_noise_needs_two_classes():
    data = make_data()
    single = TextData("one", ["c0", "c1"], make_split("tr", [5, 0], WORDS, 1), data.validation, data.test,
                      "x", "y", "fp", [])
    with pytest.raises(BenchError, match="two classes"):
        apply_regime(single, {"label_noise": 0.2}, 0)
