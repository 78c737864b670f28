"""A metric that cannot be computed is NaN with a `note` saying why, never a bare NaN: every path of the
representation evaluator that gives NaN (one example per class, one class, one text, a diverged model), and a
real run on many classes with one test example each."""

from __future__ import annotations

import math

import numpy as np

from bench.data.loading import Split, TextData
from bench.evaluators.base import Classifier, EvalContext
from bench.evaluators.representation import Representation
from bench.results import store
from conftest import write_jsonl


class Vectors(Classifier):
    """Fixed random embeddings per text (NaN ones when `diverged`); dropout views add a little noise."""

    def __init__(self, label_names: list[str], diverged: bool = False):
        self.label_names = label_names
        self.diverged = diverged

    def embed(self, texts: list[str], dropout: bool = False) -> np.ndarray:
        rng = np.random.default_rng([len(t) for t in texts] + [int(dropout)])
        x = np.stack([np.random.default_rng(list(t.encode())).normal(size=8) for t in texts])
        x = x + (0.01 * rng.normal(size=x.shape) if dropout else 0)
        if self.diverged:
            x[0] = np.nan
        return x.astype(np.float32)


def repr_rows(tmp_path, test_labels: list[int], n_labels: int, diverged: bool = False) -> dict[str, dict]:
    """The repr evaluator's rows (by metric) on a test split with these labels."""
    names = [f"class-{i}" for i in range(n_labels)]
    test = Split([f"t{i}" for i in range(len(test_labels))], [f"text number {i}" for i in range(len(test_labels))],
                 np.array(test_labels, dtype=np.int64))
    data = TextData("many", names, test, test, test, "test", "test", "fp")
    ctx = EvalContext(Vectors(names, diverged), data, tmp_path / "run", tmp_path / "cache", 1)
    return {r["metric"]: r for r in Representation().evaluate(ctx).rows}


def check_notes(rows: dict[str, dict]) -> None:
    """Every NaN row has a note; no other row has one."""
    for metric, row in rows.items():
        assert bool(row["note"]) == math.isnan(row["value"]), (metric, row)


def test_one_example_per_class(tmp_path):
    rows = repr_rows(tmp_path, list(range(500)), 500)
    check_notes(rows)
    for metric in ("alignment_class", "cos_within", "cos_gap"):
        assert math.isnan(rows[metric]["value"]) and rows[metric]["note"].startswith("one example per class")
        assert "at least two examples of a class" in rows[metric]["note"]
    assert not math.isnan(rows["cos_across"]["value"]) and not math.isnan(rows["uniformity"]["value"])


def test_one_class(tmp_path):
    rows = repr_rows(tmp_path, [1, 1, 1, 1], 3)
    check_notes(rows)
    assert rows["cos_across"]["note"].startswith("one class: all 4 test texts scored are 'class-1'")
    assert rows["cos_gap"]["note"] == rows["cos_across"]["note"]
    assert not math.isnan(rows["cos_within"]["value"])


def test_one_text(tmp_path):
    rows = repr_rows(tmp_path, [0], 2)
    check_notes(rows)
    assert "uniformity needs at least two" in rows["uniformity"]["note"]
    assert "one example per class" in rows["cos_gap"]["note"] and "one class" in rows["cos_gap"]["note"]
    assert not math.isnan(rows["alignment_dropout"]["value"])


def test_a_diverged_model(tmp_path):
    rows = repr_rows(tmp_path, [0, 0, 1, 1], 2, diverged=True)
    check_notes(rows)
    assert all(math.isnan(r["value"]) for r in rows.values())
    assert all("not finite (NaN or inf) for 1 of 4" in r["note"] for r in rows.values())


def test_a_well_posed_split_has_no_notes(tmp_path):
    rows = repr_rows(tmp_path, [0, 0, 1, 1, 2, 2], 3)
    assert all(not math.isnan(r["value"]) and r["note"] == "" for r in rows.values())


def test_a_run_on_one_test_example_per_class_notes_every_nan(tmp_path, results, cli):
    """A real run: 60 classes, one test example each; no row of the run is a bare NaN."""
    words = [f"w{i}" for i in range(60)]
    train = [{"text": f"{w} topic text {k}", "label": w} for w in words for k in range(3)]
    write_jsonl(tmp_path / "many" / "train.jsonl", train)
    write_jsonl(tmp_path / "many" / "validation.jsonl", [{"text": f"{w} topic", "label": w} for w in words])
    write_jsonl(tmp_path / "many" / "test.jsonl", [{"text": f"{w} topic again", "label": w} for w in words])
    code, _, err = cli("run", "--methods", "ce", "--datasets", tmp_path / "many", "--encoder", "tiny-bert",
                       "--epochs", "1", "--max-length", "16", "--no-progress", "--evaluators", "repr",
                       "--results-dir", results)
    assert code == 0, err
    run_dir = next(p for p in results.iterdir() if p.name.startswith("ce_"))
    rows = store.run_rows(run_dir)
    nan_rows = [r for r in rows if isinstance(r["value"], float) and math.isnan(r["value"])]
    assert {r["metric"] for r in nan_rows} == {"alignment_class", "cos_within", "cos_gap"}
    assert all(r["note"].startswith("one example per class") for r in nan_rows)


def test_textfooler_metrics_that_cannot_be_computed_say_why():
    """summarise: an empty sample, a sample the model got all wrong, and no success each note their NaN rows."""
    from bench.attack.search import AttackResult, summarise

    def result(status):
        return AttackResult(gold=0, original_text="a b", adversarial_text="a c", original_pred=0,
                            final_pred=1 if status == "success" else 0, status=status, words_changed=1,
                            num_words=2, queries=3.0)

    def notes(results):
        return {r["metric"]: r.get("note") for r in summarise(results, 1.0) if r["value"] != r["value"]}

    assert set(notes([])) == {"clean_accuracy", "accuracy_under_attack", "attack_success_rate",
                              "words_changed_pct", "queries_per_example"}
    assert all("empty" in note for note in notes([]).values())
    skipped = notes([result("skipped")] * 2)
    assert set(skipped) == {"attack_success_rate", "words_changed_pct", "queries_per_example"}
    assert all("misclassified every" in note for note in skipped.values())
    assert notes([result("failed")]) == {"words_changed_pct": "no attack succeeded: there are no changed words to "
                                                             "average"}
    assert notes([result("success"), result("failed")]) == {}
