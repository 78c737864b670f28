"""The checks of a dataset's texts at load (bench/data/checks.py, docs/DATA.md#checks-of-the-texts): leakage of
test and validation texts into train (a warning, or with --strict-data an error), duplicate rows, conflicting
labels, blank texts, the refused validation carves, the honest `validation_source`, and the counts on every clean
result row. Every dataset here is a tiny one written by the test."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from bench.data.checks import CHECK_COLUMNS, normalised
from bench.data.loading import load_dataset
from bench.errors import BenchError
from bench.reporting.evalsettings import NOT_SETTINGS
from bench.results import store
from conftest import FAST, FIXTURE, read_fixture, write_jsonl

WARNING = logging.WARNING


def rows_of(classes: int, per_class: int, word: str = "text") -> list[dict]:
    """`per_class` distinct texts of each of `classes` classes (c0, c1, ...)."""
    return [{"text": f"{word} of class {c} number {i}", "label": f"c{c}"} for c in range(classes)
            for i in range(per_class)]


def dataset(folder: Path, train: list[dict], test: list[dict], validation: list[dict] | None = None) -> Path:
    """A dataset folder with JSON Lines splits."""
    write_jsonl(folder / "train.jsonl", train)
    write_jsonl(folder / "test.jsonl", test)
    if validation is not None:
        write_jsonl(folder / "validation.jsonl", validation)
    return folder


def checks_logged(caplog) -> list[str]:
    """The warnings the checks logged."""
    return [r.getMessage() for r in caplog.records if r.name == "bench.data.checks" and r.levelno == WARNING]


@pytest.fixture
def leaky(tmp_path) -> Path:
    """The tiny fixture with 3 train texts in test (case and spacing changed), 1 in validation, one duplicate row
    and one text given a second label in train."""
    train = read_fixture("train")
    test = read_fixture("test") + [{"id": f"leak-{i}", "text": f"  {r['text'].upper()}   ", "label": r["label"]}
                                   for i, r in enumerate(train[:3])]
    validation = read_fixture("test")[:9] + [{"id": "leak-v", "text": train[5]["text"], "label": train[5]["label"]}]
    extra = [{"id": "dup", "text": train[10]["text"], "label": train[10]["label"]},
             {"id": "clash", "text": train[11]["text"], "label": "food" if train[11]["label"] != "food" else "sport"}]
    return dataset(tmp_path / "leaky", train + extra, test, validation)


EXPECTED = {"test_in_train": 3, "validation_in_train": 1, "validation_in_test": 9, "duplicate_rows": 2,
            "conflicting_labels": 1}  # the fixture's validation is 9 test texts and a train text


# ----------------------------------------------------------------------------------------------- counts and warnings

def test_leakage_duplicates_and_conflicts_are_counted_and_warned_once(leaky, caplog):
    caplog.set_level(WARNING)
    data = load_dataset(str(leaky))
    assert data.checks == EXPECTED
    lines = checks_logged(caplog)
    assert len(lines) == 5, lines  # test and validation leakage into train, validation into test, duplicates, ...
    test_line, validation_line, validation_test, duplicates, conflicts = lines
    assert validation_test.startswith("leaky: 9 of 10 validation texts (90%) also occur in test (leakage: choosing")
    assert validation_test.endswith("remove them from validation or from test")
    assert test_line.startswith("leaky: 3 of 33 test texts (9.09%) also occur in train (leakage;")
    assert "e.g. '  THE TEAM WON THE MATCH AGAIN   '" in test_line
    assert validation_line.startswith("leaky: 1 of 10 validation texts (10%) also occur in train")
    assert duplicates.startswith("leaky: train has 2 duplicate row(s)") and "(row 46)" in duplicates
    assert conflicts.startswith("leaky: train has 1 text(s) with conflicting labels")
    assert "rows 12 and 47 of train" in conflicts
    assert all("\n" not in line for line in lines)
    assert data.warnings[-5:] == lines and data.describe()["checks"] == EXPECTED  # recorded in spec.json
    load_dataset(str(leaky))  # a second load in this process (a sweep's or `clbench evaluate`'s): no repeat
    assert len(checks_logged(caplog)) == 5


def test_validation_texts_in_test_are_leakage_and_refused_by_strict_data(cli, tmp_path, caplog):
    """Guards issue 54's sixth case: a given validation file that shares texts with test (none with train) passed
    silently, --strict-data too; choosing a knob or an epoch on it reads test texts."""
    caplog.set_level(WARNING)
    test = rows_of(2, 10, "tested")
    folder = dataset(tmp_path / "valtest", rows_of(2, 20), test, rows_of(2, 5, "held") + test[:2])
    data = load_dataset(str(folder))
    assert data.checks["validation_in_test"] == 2 and data.checks["validation_in_train"] == 0
    (line,) = checks_logged(caplog)
    assert line.startswith("valtest: 2 of 12 validation texts (16.7%) also occur in test")
    results = tmp_path / "results"
    code, out, err = cli("run", "--methods", "ce", "--datasets", folder, *FAST, "--strict-data",
                         "--results-dir", results)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "also occur in test" in err
    assert not results.exists() or not any(results.iterdir())


def test_texts_are_compared_after_strip_whitespace_and_casefold_only(tmp_path):
    assert normalised("  Straße\tIST \n gut ") == "strasse ist gut"
    train = rows_of(2, 10)
    test = [{"text": " TEXT of  class 0\tnumber 1 ", "label": "c0"},  # the same text, spaced and cased
            {"text": "text of class 0 number 1!", "label": "c0"},  # punctuation differs: another text
            {"text": "textofclass 0 number 1", "label": "c0"}]  # words joined: another text
    data = load_dataset(str(dataset(tmp_path / "norm", train, test)))
    assert data.checks["test_in_train"] == 1


def test_clean_data_has_zero_counts_and_no_warning(caplog):
    caplog.set_level(WARNING)
    data = load_dataset(str(FIXTURE))
    assert data.checks == dict.fromkeys(CHECK_COLUMNS, 0) and checks_logged(caplog) == []


def test_conflicting_labels_are_named_apart_from_plain_duplicates(tmp_path, caplog):
    caplog.set_level(WARNING)
    same = rows_of(2, 10) + [{"text": "Text of class 0 number 3", "label": "c0"}]  # a duplicate, same label
    data = load_dataset(str(dataset(tmp_path / "same", same, rows_of(2, 2, "test"))))
    assert data.checks["duplicate_rows"] == 1 and data.checks["conflicting_labels"] == 0
    assert not any("conflicting" in line for line in checks_logged(caplog))
    clash = rows_of(2, 10) + [{"text": "text of class 0 number 3", "label": "c1"}]
    data = load_dataset(str(dataset(tmp_path / "clash", clash, rows_of(2, 2, "test"))))
    assert data.checks["duplicate_rows"] == 1 and data.checks["conflicting_labels"] == 1
    assert any("clash: train has 1 text(s) with conflicting labels, e.g. 'text of class 0 number 3' as 'c0' and "
               "'c1' (rows 4 and 21 of train)" in line for line in checks_logged(caplog))


def test_duplicates_in_test_are_counted_in_test(tmp_path):
    test = rows_of(2, 3, "test") + rows_of(2, 3, "test")[:2]
    data = load_dataset(str(dataset(tmp_path / "t", rows_of(2, 10), test)))
    assert data.checks == {**dict.fromkeys(CHECK_COLUMNS, 0), "duplicate_rows": 2}


def test_a_carve_that_splits_a_duplicated_text_leaks_validation(tmp_path, caplog):
    """Train holds every text twice: the carve puts one copy in validation and leaves the other in train."""
    caplog.set_level(WARNING)
    train = rows_of(2, 20) * 2
    data = load_dataset(str(dataset(tmp_path / "twice", train, rows_of(2, 2, "test"))))
    kept = {normalised(t) for t in data.train.texts}
    expected = sum(normalised(t) in kept for t in data.validation.texts)  # counted here without the checks
    assert expected > 0 and data.checks["validation_in_train"] == expected
    assert data.checks["test_in_train"] == 0 and data.checks["duplicate_rows"] == 40
    assert any("validation texts" in line and "remove train's duplicate texts" in line
               for line in checks_logged(caplog))


# ----------------------------------------------------------------------------------------------- --strict-data

def test_strict_data_refuses_leakage_in_one_line_and_writes_nothing(cli, leaky, tmp_path):
    results = tmp_path / "results"
    before = sorted(p.name for p in leaky.iterdir())
    code, out, err = cli("run", "--methods", "ce", "--datasets", leaky, *FAST, "--strict-data",
                         "--results-dir", results)
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith("error: leaky: 3 of 33 test texts (9.09%) also occur in train (leakage;")
    assert "e.g. '  THE TEAM WON THE MATCH AGAIN   '" in line and "without --strict-data" in line
    assert not results.exists() or not any(results.iterdir())
    assert sorted(p.name for p in leaky.iterdir()) == before


def test_strict_data_from_a_config_file_and_a_bad_value(cli, leaky, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(f"methods: ce\ndatasets: {leaky}\nstrict_data: true\n")
    code, _, err = cli("run", "--config", config, *FAST, "--results-dir", tmp_path / "results")
    assert code == 2 and len(err.splitlines()) == 1 and "also occur in train" in err
    config.write_text(f"methods: ce\ndatasets: {leaky}\nstrict_data: maybe\n")
    code, _, err = cli("run", "--config", config, *FAST, "--results-dir", tmp_path / "results")
    assert code == 2 and "strict_data is true or false, got 'maybe'" in err and len(err.splitlines()) == 1


def test_strict_data_lets_clean_data_through(tmp_path):
    data = load_dataset(str(FIXTURE), strict=True)
    assert data.checks["test_in_train"] == 0
    duplicated = rows_of(2, 10) + rows_of(2, 10)[:1]  # duplicates and conflicts stay warnings under strict
    assert load_dataset(str(dataset(tmp_path / "d", duplicated, rows_of(2, 2, "test"))),
                        strict=True).checks["duplicate_rows"] == 1


# ----------------------------------------------------------------------------------------------- blank texts

@pytest.mark.parametrize("text", ["\u200b", "\u200c\u200d", " \u2060 ", "\ufeff", "\x00\x07", "\t\u200b\x1f\n"])
def test_a_text_of_invisible_characters_is_refused_as_empty(tmp_path, text):
    train = rows_of(2, 6) + [{"text": text, "label": "c0"}]
    with pytest.raises(BenchError) as err:
        load_dataset(str(dataset(tmp_path / "blank", train, rows_of(2, 2, "test"))))
    message = str(err.value)
    assert "\n" not in message and "train.jsonl have empty text (first: row 13" in message
    if text.strip():
        assert "row 13's text" in message and "counts as empty" in message


def test_visible_text_with_invisible_characters_loads(tmp_path):
    train = rows_of(2, 6) + [{"text": "zero\u200bwidth", "label": "c0"}, {"text": "\u200b.", "label": "c1"}]
    data = load_dataset(str(dataset(tmp_path / "ok", train, rows_of(2, 2, "test"))))
    assert len(data.train) + len(data.validation) == 14


def test_clbench_run_refuses_a_blank_text_in_one_line(cli, tmp_path):
    folder = dataset(tmp_path / "blank", rows_of(2, 6) + [{"text": "\u200b\u200b", "label": "c1"}],
                     rows_of(2, 2, "test"))
    code, out, err = cli("run", "--methods", "ce", "--datasets", folder, *FAST, "--results-dir", tmp_path / "r")
    (line,) = err.splitlines()
    assert code == 2 and out == "" and "have empty text" in line and "'\\u200b\\u200b'" in line
    assert not (tmp_path / "r").exists()


# ----------------------------------------------------------------------------------------------- the carve

def test_a_carve_that_leaves_one_example_per_class_is_refused(cli, tmp_path):
    folder = dataset(tmp_path / "pairs", rows_of(30, 2), rows_of(30, 1, "test"))
    with pytest.raises(BenchError) as err:
        load_dataset(str(folder))
    message = str(err.value)
    assert message.startswith("pairs: carving a 10% validation split from train (the dataset has no validation "
                              "file) would take 30 of its 60 examples (50%) and leave 30 class(es) with fewer than 2 "
                              "training examples (e.g. 'c0': 2 examples, 1 taken)")
    assert "add a validation file" in message
    code, out, err = cli("run", "--methods", "ce", "--datasets", folder, *FAST, "--results-dir", tmp_path / "r")
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "fewer than 2 training examples" in err
    assert not (tmp_path / "r").exists()


def test_a_carve_that_takes_far_more_than_asked_is_refused_with_the_fraction_that_works(tmp_path):
    folder = dataset(tmp_path / "fours", rows_of(20, 4), rows_of(20, 1, "test"))
    with pytest.raises(BenchError, match=r"would take 20 of its 80 examples \(25%\), more than the 8 asked for, "
                                         r"to hold one example of each of its 20 classes; give --val-fraction 0.25"):
        load_dataset(str(folder))
    data = load_dataset(str(folder), val_fraction=0.25)  # the fix the message gives works
    assert len(data.validation) == 20 and data.validation_source == ("stratified 25% of train (20 of 80; data "
                                                                     "seed 0)")


def test_a_small_carve_rounded_up_to_one_per_class_is_kept(tmp_path):
    """12 examples of 2 classes: 10% asks for 1, one of each class takes 2 (not more than twice 1)."""
    data = load_dataset(str(dataset(tmp_path / "small", rows_of(2, 6), rows_of(2, 1, "test"))))
    assert data.validation_source == "stratified 10% of train (2 of 12; data seed 0)"


def test_validation_source_says_what_the_carve_took(tmp_path):
    assert load_dataset(str(FIXTURE)).validation_source == "stratified 10% of train (4 of 45; data seed 0)"
    data = load_dataset(str(FIXTURE), data_seed=3, val_fraction=0.2)
    assert data.validation_source == f"stratified 20% of train ({len(data.validation)} of 45; data seed 3)"
    assert len(data.validation) == 9
    given = dataset(tmp_path / "given", rows_of(2, 6), rows_of(2, 2, "test"), rows_of(2, 2, "val"))
    assert load_dataset(str(given)).validation_source == "validation split of the source"


# ----------------------------------------------------------------------------------------------- the rows

def test_every_clean_row_carries_the_counts_and_the_warnings_come_once_per_sweep(cli, leaky, tmp_path, caplog):
    caplog.set_level(WARNING)
    results = tmp_path / "results"
    code, _, err = cli("run", "--methods", "ce", "--datasets", leaky, *FAST, "--epochs", "1", "--seeds", "1,2",
                       "--results-dir", results)
    assert code == 0, err
    lines = checks_logged(caplog)
    assert len(lines) == 5 and len(set(lines)) == 5  # two shards, each warning once
    runs = sorted(p for p in results.iterdir() if p.name.startswith("ce_"))
    assert len(runs) == 2
    for run in runs:
        rows = store.read_json(run / store.ROWS)
        assert rows and {r["split"] for r in rows} == {"test", "validation"}
        assert all({k: r[k] for k in CHECK_COLUMNS} == EXPECTED for r in rows)
        assert json.loads((run / "spec.json").read_text())["data"]["checks"] == EXPECTED


def test_the_count_columns_are_not_evaluator_settings():
    assert set(CHECK_COLUMNS) <= NOT_SETTINGS
