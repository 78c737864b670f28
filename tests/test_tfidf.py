"""The classical reference (`tfidf`: TF-IDF + logistic regression on the run's training draw): its rows, its
determinism, its C chosen on validation only, its cache (one fit per draw), its place among the default evaluators
and on collapsed runs (no model loaded), and its floor line in the run summary, `clbench report` and the page:
one per dataset, each draw counted once, never ranked or bold."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import FAST
from bench.catalog import evaluator_names
from bench.data.loading import Split, load_dataset
from bench.data.textdata import TextData
from bench.evaluators import tfidf
from bench.evaluators.base import EvalContext
from bench.reporting import floor
from bench.reporting.summary import evaluator_lines, results_table, summary_table, table_text
from bench.reporting.tables import paper_ii

# tiny-bert that learns the fixture without collapse, on the CPU where it was calibrated (test_degenerate_runs)
HEALTHY = ["--encoder", "tiny-bert", "--lr", "2e-3", "--epochs", "6", "--patience", "6", "--max-length", "32",
           "--batch-size", "8", "--device", "cpu", "--no-progress"]


def context(tiny: Path, tmp_path: Path, data=None, cache: str = "cache") -> EvalContext:
    data = data if data is not None else load_dataset(str(tiny), None, 0, 0.1)
    return EvalContext(None, data, tmp_path / "run", tmp_path / cache, seed=1)  # no classifier: none is read


def count_fits(monkeypatch) -> list[int]:
    calls: list[int] = []
    original = tfidf.fit_and_score

    def counted(data):
        calls.append(len(data.train))
        return original(data)

    monkeypatch.setattr(tfidf, "fit_and_score", counted)
    return calls


# ----------------------------------------------------------------------------------------------- the evaluator

def test_rows_are_test_accuracy_and_macro_f1_with_the_draw_and_the_chosen_c(tiny, tmp_path):
    ctx = context(tiny, tmp_path)
    rows = tfidf.TfidfReference().evaluate(ctx).rows
    assert [r["metric"] for r in rows] == ["accuracy", "macro_f1"]
    assert {r["split"] for r in rows} == {"test"} and {r["n"] for r in rows} == {len(ctx.data.test)}
    assert all(0 <= r["value"] <= 1 for r in rows) and rows[0]["value"] > 0.5  # the fixture is easy for words
    assert rows[0]["tfidf_c"] in tfidf.C_GRID and rows[0]["draw"] and rows[0]["fit_seconds"] >= 0
    assert tfidf.TfidfReference.needs_model is False


def test_deterministic_and_c_chosen_on_validation_never_on_test(tiny, tmp_path):
    data = load_dataset(str(tiny), None, 0, 0.1)
    first, again = tfidf.fit_and_score(data), tfidf.fit_and_score(data)
    assert {k: v for k, v in first.items() if k != "seconds"} == {k: v for k, v in again.items() if k != "seconds"}
    rotated = Split(data.test.ids, data.test.texts, (data.test.labels + 1) % data.num_labels)  # test labels moved
    moved = tfidf.fit_and_score(type(data)(**{**data.__dict__, "test": rotated}))
    assert moved["c"] == first["c"] and moved["validation_accuracy"] == first["validation_accuracy"]
    assert moved["accuracy"] != first["accuracy"]  # test labels change the score, never the choice


def test_the_settings_name_the_hyperparameters(tiny, tmp_path):
    settings = tfidf.TfidfReference().settings(context(tiny, tmp_path).options)
    assert settings["version"] == 2 and settings["min_df"] == tfidf.MIN_DF and settings["c_grid"] == [0.1, 1, 10, 100]
    assert settings["ngram_range"] == [1, 2] and settings["sublinear_tf"] is True
    assert settings["model"] == "one-vs-rest logistic regression (liblinear)"
    assert settings["large_vocabulary_min_df_2"] == tfidf.LARGE_VOCABULARY


@pytest.mark.parametrize("cap, min_df", [(10**9, 1), (10, 2)])
def test_features_equal_the_vectorizers_with_min_df_2_only_above_the_vocabulary_cap(tiny, monkeypatch, cap, min_df):
    from sklearn.feature_extraction.text import TfidfVectorizer

    data = load_dataset(str(tiny), None, 0, 0.1)
    monkeypatch.setattr(tfidf, "LARGE_VOCABULARY", cap)
    train, test = tfidf.featurise(data.train.texts, data.test.texts)
    reference = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=min_df)
    expected = reference.fit_transform(data.train.texts), reference.transform(data.test.texts)
    for got, want in zip((train, test), expected):
        assert got.shape == want.shape
        assert np.allclose(got.toarray(), want.toarray(), atol=1e-12)
    assert train.shape[1] > 10 if min_df == 1 else train.shape[1] < len(TfidfVectorizer(
        ngram_range=(1, 2), min_df=1).fit(data.train.texts).vocabulary_)     # the cap dropped the singletons


def test_one_binary_regression_per_class_and_one_for_two_classes(monkeypatch):
    from sklearn.multiclass import OneVsRestClassifier

    fitted = []
    original = OneVsRestClassifier.fit
    monkeypatch.setattr(OneVsRestClassifier, "fit", lambda self, X, y: fitted.append(self) or original(self, X, y))
    words = ["alpha", "bravo", "charlie", "delta"]
    for classes in (2, 4):
        texts = [f"{words[i % classes]} token {j}" for j in range(12) for i in range(classes)]
        labels = np.array([i % classes for _ in range(12) for i in range(classes)])
        split = Split([str(i) for i in range(len(texts))], texts, labels)
        data = TextData("toy", [str(i) for i in range(classes)], split, split, split, "toy", "toy", "toy")
        assert tfidf.fit_and_score(data)["accuracy"] == 1.0
        assert len(fitted[-1].estimators_) == (1 if classes == 2 else classes)
        assert fitted[-1].estimators_[0].solver == "liblinear"


def test_a_second_run_on_the_same_draw_reads_the_cache_another_draw_fits_again(tiny, tmp_path, monkeypatch):
    calls = count_fits(monkeypatch)
    first = tfidf.TfidfReference().evaluate(context(tiny, tmp_path)).rows
    second = tfidf.TfidfReference().evaluate(context(tiny, tmp_path)).rows  # another method's shard, same draw
    assert len(calls) == 1 and first == second
    assert len(list((tmp_path / "cache" / tfidf.CACHE_FOLDER).glob("*.json"))) == 1
    other = load_dataset(str(tiny), None, 1, 0.1)  # another carve: another draw
    third = tfidf.TfidfReference().evaluate(context(tiny, tmp_path, other)).rows
    assert len(calls) == 2 and third[0]["draw"] != first[0]["draw"]


def test_a_damaged_cache_file_is_fitted_again(tiny, tmp_path, monkeypatch):
    calls = count_fits(monkeypatch)
    tfidf.TfidfReference().evaluate(context(tiny, tmp_path))
    (cached,) = (tmp_path / "cache" / tfidf.CACHE_FOLDER).glob("*.json")
    cached.write_text("{not json")
    tfidf.TfidfReference().evaluate(context(tiny, tmp_path))
    assert len(calls) == 2 and json.loads(cached.read_text())["n"] == 30


# ----------------------------------------------------------------------------------------------- in a sweep

def test_a_default_evaluator_fitted_once_for_the_methods_of_one_draw(cli, tiny, results, monkeypatch):
    assert "tfidf" in evaluator_names(None)
    calls = count_fits(monkeypatch)
    code, out, err = cli("run", "--methods", "ce,supcon", "--datasets", tiny, *FAST[:-2], "--evaluators", "tfidf",
                         "--results-dir", results)
    assert code == 0, err
    assert len(calls) == 1  # two shards, one draw: one fit
    assert len(list(results.glob("*/evals/tfidf-*.json"))) == 2
    lines = [line for line in out.splitlines() if floor.LABEL in line]
    assert len(lines) == 2 and lines[1].startswith(floor.LABEL)  # the floor line, then its note
    assert re.search(r"tiny\s+tf-idf \+ LR \(floor\)\s+1\s+\d+\.\d\d\s+\d+\.\d\d", lines[0])  # 1 draw
    assert "tfidf:" not in out  # a line of the table, not an evaluator line per method


def test_a_collapsed_run_gets_it_by_default_without_its_model(cli, tiny, results, monkeypatch):
    from bench.running import evaluation, tending

    collapse = ["--methods", "ce", "--datasets", tiny, "--encoder", "tiny-bert", "--epochs", "1", "--batch-size", "8",
                "--no-progress", "--device", "cpu", "--results-dir", results]  # collapses on the CPU at the default lr
    code, out, err = cli("run", *collapse, "--evaluators", "none", "--no-save-model")
    assert code == 0 and "a collapsed model, not a result" in err
    (run,) = results.glob("ce_*")
    assert not (run / "evals").exists() and not (run / "model.safetensors").exists()

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(tending, "saved_classifier", no_model)
    monkeypatch.setattr(evaluation, "load_run_classifier", no_model)
    code, out, err = cli("run", *collapse)  # the default evaluators, on the finished collapsed run
    assert code == 0, err
    stored = [json.loads(p.read_text()) for p in (run / "evals").glob("*.json")]
    assert [(s["status"], s["rows"][0]["evaluator"]) for s in stored] == [("done", "tfidf")]  # the others: not run
    assert re.search(r"tf-idf \+ LR \(floor\)\s+1\s+\d+\.\d\d", out)  # the floor stands though ce collapsed


def test_scored_later_without_its_model_it_reads_the_texts_the_model_saw(cli, tiny, tmp_path, monkeypatch):
    seen: list[list[str]] = []
    original = tfidf.fit_and_score
    monkeypatch.setattr(tfidf, "fit_and_score", lambda data: seen.append(list(data.train.texts)) or original(data))
    short = ["--methods", "ce", "--datasets", tiny, *FAST[:-4], "--max-length", "8", "--no-save-model"]
    assert cli("run", *short, "--evaluators", "tfidf", "--results-dir", tmp_path / "during")[0] == 0
    assert cli("run", *short, "--evaluators", "none", "--results-dir", tmp_path / "later")[0] == 0
    assert cli("run", *short, "--evaluators", "tfidf", "--results-dir", tmp_path / "later")[0] == 0  # no model
    during, later = seen
    assert later == during                                       # cut by the encoder's tokenizer both times
    assert during != list(load_dataset(str(tiny), None, 0, 0.1).train.texts)   # 8 tokens cut some texts


# ----------------------------------------------------------------------------------------------- the tables

def clean(method: str, seed: int, dataset: str = "d", accuracy: float = 0.7) -> list[dict]:
    key = f"{method}_{dataset}_s{seed}"
    base = {"run_key": key, "method": method, "dataset": dataset, "encoder": "e", "seed": seed, "evaluator": "clean",
            "split": "test", "label": "", "wall_seconds": 10.0, "collapsed": 0}
    return [{**base, "metric": "accuracy", "value": accuracy}, {**base, "metric": "macro_f1", "value": accuracy - 0.1}]


def reference(method: str, seed: int, draw: str, accuracy: float, dataset: str = "d") -> list[dict]:
    base = {"run_key": f"{method}_{dataset}_s{seed}", "method": method, "dataset": dataset, "encoder": "e",
            "seed": seed, "evaluator": "tfidf", "split": "test", "label": "", "draw": draw, "fit_seconds": 0.5,
            "eval_settings": json.dumps({"evaluator": "tfidf", "version": 1}), "eval_hash": "h1"}
    return [{**base, "metric": "accuracy", "value": accuracy}, {**base, "metric": "macro_f1", "value": accuracy}]


@pytest.fixture
def sweep() -> list[dict]:
    """Dataset d: 3 methods; seeds 1-3 of ce on per-seed draws A, B, C, the others on A only (draw A's value
    repeated by 5 shards, B and C by one each); dataset d2: one method, one draw."""
    rows = []
    for seed, draw, value in ((1, "A", 0.80), (2, "B", 0.90), (3, "C", 1.00)):
        rows += clean("ce", seed) + reference("ce", seed, draw, value)
    for method in ("supcon", "lcl"):
        rows += clean(method, 1, accuracy=0.6) + reference(method, 1, "A", 0.80)
    rows += clean("ce", 1, "d2") + reference("ce", 1, "Z", 0.60, "d2")
    return rows


def test_the_summary_has_one_floor_line_per_dataset_each_draw_counted_once(sweep):
    table = summary_table(sweep)
    lines = table[table["method"] == floor.LABEL]
    assert list(lines["dataset"]) == ["d", "d2"]
    d = lines.iloc[0]
    assert d["seeds"] == 3 and d["accuracy"] == "90.00 ± 10.00"  # over draws A, B, C; not 84.29 over 7 shards
    assert lines.iloc[1]["accuracy"] == "60.00" and lines.iloc[1]["wall_s"] == "0.5"
    assert list(table["method"]) == ["ce", "lcl", "supcon", floor.LABEL, "ce", floor.LABEL]  # after its dataset
    assert floor.LABEL in table_text(table).splitlines()[-1]  # the note under the table
    assert not any(line.startswith("tfidf") for line in evaluator_lines(sweep))


def test_the_floor_is_never_compared_with_the_baseline(tmp_path):
    from bench.reporting import stats
    from bench.results import store
    from test_report import right, write_run

    results = tmp_path / "results"
    write_run(results, "ce", "mr", 1, right(12))
    write_run(results, "cl", "mr", 1, right(16, start=5))
    rows = [row for run in sorted(results.iterdir()) for row in store.read_json(run / store.ROWS)]
    predictions = stats.load_run_predictions(results, sorted({r["run_key"] for r in rows}))
    table = results_table(rows + reference("ce", 1, "A", 0.9, "mr") + reference("cl", 1, "A", 0.9, "mr"), predictions)
    column = table.set_index("method")["Δacc vs ce [95% CI], verdict"]
    assert column[floor.LABEL] == "—" and column["ce"] == "—" and column["cl"].startswith("+")


def test_paper_ii_shows_a_floor_column_never_bold_even_when_highest(sweep):
    frame = pd.DataFrame(sweep + reference("ce", 4, "D", 0.99))
    cells = paper_ii(frame)
    floor_cells = cells[cells["column"] == floor.LABEL]
    assert list(floor_cells["row"]) == ["d", "d2"] and not floor_cells["best"].any()
    assert floor_cells.iloc[0]["text"] == f"{np.mean([80, 90, 100, 99]):.2f} ± {np.std([80, 90, 100, 99], ddof=1):.2f} (4 draws)"
    assert cells[(cells["row"] == "d") & cells["best"]]["column"].tolist() == ["e ce"]  # a method is best
    assert floor.NOTE in cells.attrs["notes"]


def test_without_reference_rows_no_floor_anywhere(sweep):
    plain = [r for r in sweep if r["evaluator"] == "clean"]
    assert floor.LABEL not in set(summary_table(plain)["method"])
    assert summary_table(plain).attrs["notes"] == [] and floor.LABEL not in set(paper_ii(pd.DataFrame(plain))["column"])


def test_the_page_shows_the_floor_in_its_main_table_never_bold_nor_ranked(cli, tiny, results, tmp_path):
    code, _, err = cli("run", "--methods", "ce,supcon", "--datasets", tiny, *HEALTHY, "--evaluators", "tfidf",
                       "--results-dir", results)
    assert code == 0, err
    page = tmp_path / "page.html"
    code, _, err = cli("report", "--html", page, "--results-dir", results)
    assert code == 0, err
    text = page.read_text()
    main = text.split('id="table-main"')[1].split("</table>")[0]
    (row,) = [r for r in main.split("<tr>") if f'<th scope="row">{floor.LABEL}</th>' in r]
    assert row.count("<td") == 2 and "(1 draw)" in row and "best" not in row and "badge" not in row
    assert 'class="best"' in main  # the methods' best cells are still bold
    for section in ("cost", "compare"):  # when shown (one dataset: no ranking; a collapsed supcon: no comparison)
        if f'<section id="{section}">' not in text:
            continue
        body = text.split(f'<section id="{section}">')[1].split("</section>")[0]
        assert "tf-idf" not in body and "tfidf" not in body
