"""The evaluator framework (storage, skips, failures, `clbench evaluate`), contrast sets and representation
metrics, against hand-computed values on scripted classifiers."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from bench.data.loading import load_dataset
from bench.errors import BenchError, SkipEvaluator
from bench.catalog import evaluator_names
from bench.running.evaluation import build_evaluators, evaluate_run, evaluation_path
from bench.evaluators.base import EvalContext, EvalOptions, Evaluation, Evaluator
from bench.evaluators.contrast import ContrastSets, read_pairs
from bench.evaluators.representation import Representation, alignment, class_pair_stats, normalise, uniformity
from scripted import FunctionClassifier, KeywordClassifier
from bench.spec import RunSpec
from conftest import FAST, FIXTURE, evaluate_and_store, write_jsonl, write_sentiment_set

SENTIMENT = ["negative", "positive"]
KEYWORDS = {"positive": {"good", "great"}, "negative": {"bad", "awful"}}


def contrast_rows() -> list[dict]:
    """Four pairs; the keyword model gets pair 0 fully right, pair 1 only the original, pair 2 only the
    contrast, pair 3 neither."""
    pairs = [("a good film", "positive", "a bad film", "negative"),
             ("great fun", "positive", "not great fun", "negative"),          # contrast wrong
             ("plain but good", "negative", "a good and lively film", "positive"),  # original wrong
             ("awful but good", "positive", "good but awful", "negative")]
    rows = []
    for i, (o, ol, c, cl) in enumerate(pairs):
        rows += [{"id": f"p{i}-o", "text": o, "label": ol, "pair_id": f"p{i}", "kind": "original"},
                 {"id": f"p{i}-c", "text": c, "label": cl, "pair_id": f"p{i}", "kind": "contrast"}]
    return rows


def context(classifier, data, tmp_path, **options) -> EvalContext:
    run_dir = tmp_path / "results" / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    return EvalContext(classifier, data, run_dir, tmp_path / "results" / ".cache", 1, EvalOptions(**options),
                       "run", tmp_path / "results")


@pytest.fixture
def sentiment_data(tmp_path):
    folder = tmp_path / "senti"
    train = [{"text": t, "label": l} for t, l in [("good", "positive"), ("bad", "negative")] * 3]
    test = [{"id": f"t{i}", "text": t, "label": l} for i, (t, l) in enumerate(
        [("good good", "positive"), ("great", "positive"), ("bad", "negative"), ("awful bad", "negative"),
         ("good", "positive"), ("bad film", "negative")])]
    write_jsonl(folder / "train.jsonl", train)
    write_jsonl(folder / "test.jsonl", test)
    return load_dataset(str(folder))


def test_contrast_metrics_match_hand_computed_values(tmp_path, sentiment_data):
    write_jsonl(tmp_path / "cs" / "test.jsonl", contrast_rows())
    model = KeywordClassifier(SENTIMENT, KEYWORDS, default="negative")
    # model predictions: p0 (pos, neg) right/right; p1 (pos, pos) right/wrong; p2 (pos, pos) wrong/right;
    # p3 "awful but good" tie -> negative (wrong), "good but awful" tie -> negative (right)
    ctx = context(model, sentiment_data, tmp_path, contrast_set=str(tmp_path / "cs"))
    records = {r["metric"]: r for r in evaluate_and_store(ContrastSets(), ctx)}
    assert records["original_accuracy"]["value"] == pytest.approx(2 / 4)
    assert records["contrast_accuracy"]["value"] == pytest.approx(3 / 4)
    assert records["consistency"]["value"] == pytest.approx(1 / 4)
    assert {r["n"] for r in records.values()} == {4}
    assert model.queries == 8  # one batched call for all texts
    stored = [json.loads(line) for line in __import__("gzip").open(ctx.run_dir / "contrast_predictions.jsonl.gz", "rt")]
    assert [s["contrast_predicted"] for s in stored] == ["negative", "positive", "positive", "negative"]


def test_contrast_set_problems(tmp_path, sentiment_data):
    bad = contrast_rows()[:-1]  # pair p3 loses its contrast row
    write_jsonl(tmp_path / "cs" / "test.jsonl", bad)
    with pytest.raises(BenchError, match="lack an original or a contrast"):
        read_pairs(tmp_path / "cs", "test")
    write_jsonl(tmp_path / "cs2" / "test.jsonl", [{"id": 1, "text": "x", "label": "positive"}])
    with pytest.raises(BenchError, match="row 1 .* lacks pair_id, kind"):
        read_pairs(tmp_path / "cs2", "test")
    with pytest.raises(BenchError, match="no validation file"):
        read_pairs(tmp_path / "cs", "validation")
    topics = load_dataset(str(FIXTURE))
    write_jsonl(tmp_path / "cs3" / "test.jsonl", contrast_rows())
    ctx = context(KeywordClassifier(topics.label_names, {}), topics, tmp_path, contrast_set=str(tmp_path / "cs3"))
    with pytest.raises(SkipEvaluator, match="does not predict"):
        ContrastSets().evaluate(ctx)
    assert "no contrast set" in ContrastSets().skip_reason(context(None, topics, tmp_path))
    with pytest.raises(BenchError, match="not found"):
        ContrastSets().check(EvalOptions(contrast_set=str(tmp_path / "missing")), topics, tmp_path)


def test_sentiment_cards_name_the_imdb_contrast_set():
    from bench.evaluators.contrast import default_contrast_set

    assert default_contrast_set("mr") == default_contrast_set("sst2") == "imdb_contrast"
    assert default_contrast_set("trec") == ""


def brute_force_representation(x: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The representation metrics with plain loops over pairs."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    pairs = list(itertools.combinations(range(len(x)), 2))
    same = [(i, j) for i, j in pairs if labels[i] == labels[j]]
    other = [(i, j) for i, j in pairs if labels[i] != labels[j]]
    dist2 = lambda i, j: float(sum((a - b) ** 2 for a, b in zip(x[i], x[j])))
    cos = lambda i, j: float(sum(a * b for a, b in zip(x[i], x[j])))
    return {"uniformity": math.log(sum(math.exp(-2 * dist2(i, j)) for i, j in pairs) / len(pairs)),
            "alignment_class": sum(dist2(i, j) for i, j in same) / len(same),
            "cos_within": sum(cos(i, j) for i, j in same) / len(same),
            "cos_across": sum(cos(i, j) for i, j in other) / len(other)}


def test_representation_metrics_match_brute_force():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(9, 4))
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 0, 1])
    expected = brute_force_representation(x, labels)
    u = normalise(x)
    got = {"uniformity": uniformity(u), **class_pair_stats(u, labels)}
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, abs=1e-9), name
    assert got["cos_gap"] == pytest.approx(expected["cos_within"] - expected["cos_across"])
    assert alignment(u, u) == 0.0
    shifted = normalise(x + 0.1)
    assert alignment(u, shifted) == pytest.approx(np.mean([np.sum((a - b) ** 2) for a, b in zip(u, shifted)]))


def test_representation_evaluator_uses_dropout_views_and_stores_tsne(tmp_path, sentiment_data):
    calls = []
    rng = np.random.default_rng(0)
    base = rng.normal(size=(len(sentiment_data.test), 3))

    def embed(texts):
        calls.append(len(texts))
        return base + 0.01 * len(calls)  # each call a slightly different "dropout view"

    model = FunctionClassifier(SENTIMENT, lambda t: np.full((len(t), 2), 0.5), embed)
    ctx = context(model, sentiment_data, tmp_path, tsne=True, tsne_n=5)
    records = {r["metric"]: r["value"] for r in evaluate_and_store(Representation(), ctx)}
    assert len(calls) == 3  # clean embeddings + two dropout views
    assert records["alignment_dropout"] > 0
    assert records["uniformity"] < 0
    tsne = json.loads((ctx.run_dir / "tsne.json").read_text())
    assert len(tsne["x"]) == len(tsne["labels"]) == 5


class Exploding(Evaluator):
    name = "exploding"

    def evaluate(self, ctx):
        raise ValueError("boom")


class Missing(Evaluator):
    name = "missing"

    def evaluate(self, ctx):
        raise SkipEvaluator("needs a resource: pip install it")


def test_evaluations_are_stored_cached_skipped_and_failures_recorded(tmp_path, sentiment_data):
    spec = RunSpec("ce", sentiment_data.name, "scripted", 1, sentiment_data.fingerprint)
    run_dir = tmp_path / "results" / spec.key
    run_dir.mkdir(parents=True)
    model = KeywordClassifier(SENTIMENT, KEYWORDS)
    options = EvalOptions()
    evaluators = [Representation(), Missing(), Exploding(), ContrastSets()]
    outcomes = {o.evaluator: o for o in evaluate_run(spec, sentiment_data, model, run_dir, evaluators, options,
                                                     torch.device("cpu"))}
    assert outcomes["repr"].status == "done"
    assert outcomes["missing"].status == "skipped" and "pip install" in outcomes["missing"].message
    assert outcomes["exploding"].status == "failed" and "boom" in outcomes["exploding"].message
    error = json.loads(evaluation_path(run_dir, Exploding(), options).with_suffix(".error.json").read_text())
    assert "ValueError" in error["traceback"]
    skipped_row = outcomes["missing"].rows[0]
    assert skipped_row["metric"] == "skipped" and skipped_row["note"].startswith("needs a resource")
    assert all(r["run_key"] == spec.key and r["evaluator"] == "repr" for r in outcomes["repr"].rows)
    assert {"git_commit", "eval_hash", "eval_seconds", "config_hash"} <= set(outcomes["repr"].rows[0])
    again = {o.evaluator: o.status for o in evaluate_run(spec, sentiment_data, model, run_dir, evaluators, options,
                                                         torch.device("cpu"))}
    assert again["repr"] == "cached"            # finished: not recomputed
    assert again["missing"] == "skipped"        # stored: skipped again, retried only when what it read changed
    assert again["exploding"] == "failed"


def test_a_classifier_without_a_bound_never_builds_the_runs_encoder(tmp_path, sentiment_data, monkeypatch):
    import bench.encoders.models as models

    def no_build(*args, **kwargs):
        raise AssertionError("an encoder was built for a run that has its classifier")

    monkeypatch.setattr(models, "build_encoder", no_build)
    spec = RunSpec("ce", sentiment_data.name, "scripted", 1, sentiment_data.fingerprint)
    run_dir = tmp_path / "results" / spec.key
    run_dir.mkdir(parents=True)
    model = KeywordClassifier(SENTIMENT, KEYWORDS)
    assert model.bound is None                  # an outside model's classifier has none either
    (outcome,) = evaluate_run(spec, sentiment_data, model, run_dir, [Representation()], EvalOptions(),
                              torch.device("cpu"))
    assert outcome.status == "done"


def test_evaluator_names():
    assert evaluator_names(["representation"]) == ["repr"]
    assert evaluator_names(["none"]) == []
    assert "contrast" in evaluator_names(None)
    with pytest.raises(BenchError, match="unknown evaluator 'nope'"):
        evaluator_names(["nope"])
    assert [e.name for e in build_evaluators(["repr"])] == ["repr"]


# ----------------------------------------------------------------------------------------------- CLI end to end

def test_run_with_evaluators_then_evaluate_without_retraining(cli, tmp_path, results, monkeypatch):
    folder = tmp_path / "senti"
    write_sentiment_set(folder)
    write_jsonl(tmp_path / "cs" / "test.jsonl", contrast_rows())
    args = [a for a in FAST if a not in ("--evaluators", "none")]
    code, out, err = cli("run", "--methods", "ce", "--datasets", folder, *args, "--evaluators", "repr")
    assert code == 0, err
    (run_dir,) = [p.parent for p in results.glob("*/rows.json")]
    assert (run_dir / "model.safetensors").is_file() and not (run_dir / "checkpoint.pt").exists()
    assert "repr: representation: within- minus across-class cosine" in out  # one line per evaluator

    trained_at = (run_dir / "rows.json").stat().st_mtime_ns
    code, out, err = cli("evaluate", run_dir.name, "--evaluators", "contrast,repr", "--contrast-set", tmp_path / "cs")
    assert code == 0, err
    assert "consistency" in out and (run_dir / "rows.json").stat().st_mtime_ns == trained_at
    table = pd.read_parquet(results / "results.parquet")
    assert {"clean", "repr", "contrast"} <= set(table.evaluator)
    assert table[table.evaluator == "repr"].metric.value_counts().max() == 1  # repr stored once, not twice

    # re-running `clbench run` with an evaluator the run lacks evaluates the saved model, no retraining
    code, out, err = cli("run", "--methods", "ce", "--datasets", folder, *args, "--evaluators", "contrast",
                         "--contrast-set", tmp_path / "cs", "--contrast-split", "test")
    assert code == 0 and "skipped" in err

    (run_dir / "model.safetensors").unlink()
    code, _, err = cli("evaluate", run_dir.name, "--evaluators", "repr", "--overwrite")
    assert code == 2 and "without a saved model" in err
    code, _, err = cli("evaluate", "nothing_*", "--evaluators", "repr")
    assert code == 2 and "no run 'nothing_*'" in err
    code, _, err = cli("run", "--methods", "ce", "--datasets", folder, *args, "--evaluators", "repr", "--tsne")
    assert code == 0 and "has no model: missing" in err


def test_evaluate_checks_every_run_has_a_model_before_scoring_any(cli, tiny, results):
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, "--seeds", "1,2", *FAST)
    assert code == 0, err
    first, second = sorted(p.parent for p in results.glob("*/rows.json"))
    (second / "model.safetensors").unlink()
    code, _, err = cli("evaluate", "ce_*", "--evaluators", "repr")
    assert code == 2 and f"without a saved model: {second.name} (the first: never saved" in err
    assert not (first / "evals").exists()  # the run that has a model was not scored either
    code, _, err = cli("evaluate", first.name, "--evaluators", "repr")
    assert code == 0 and list((first / "evals").glob("repr-*.json")), err


def test_evaluate_finds_named_sets_beside_the_runs_data(cli, tmp_path, results):
    data = tmp_path / "data"  # a card dataset (mr) and its default contrast set (imdb_contrast) side by side
    train = [{"text": t, "label": l} for t, l in [("a good film", "positive"), ("a bad film", "negative"),
                                                   ("great fun", "positive"), ("awful fun", "negative")]] * 3
    write_jsonl(data / "mr" / "train.jsonl", train)
    write_jsonl(data / "mr" / "test.jsonl", train[:4])
    write_jsonl(data / "imdb_contrast" / "test.jsonl", contrast_rows())
    code, _, err = cli("run", "--methods", "ce", "--datasets", "mr", "--data-dir", data, *FAST)
    assert code == 0, err
    (run_dir,) = [p.parent for p in results.glob("*/rows.json")]
    code, out, err = cli("evaluate", run_dir.name, "--evaluators", "contrast")  # no --data-dir: the run's folder
    assert code == 0 and "consistency" in out and "not found" not in err, err
    stored = json.loads(next((run_dir / "evals").glob("contrast-*.json")).read_text())
    assert stored["status"] == "done"


def test_no_save_model_and_bad_evaluator_options(cli, tiny, results):
    args = [a for a in FAST if a not in ("--evaluators", "none")]
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *args, "--evaluators", "repr",
                       "--no-save-model")
    assert code == 0, err
    assert not list(results.glob("*/model.safetensors")) and list(results.glob("*/evals/repr-*.json"))
    (run,) = [p.parent for p in results.glob("*/rows.json")]
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *args, "--evaluators", "nope")
    assert code == 2 and "unknown evaluator" in err
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *args, "--attack-mode", "transfer")
    assert code == 2 and "--attack-source" in err
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *args, "--contrast-set", "/no/such/set")
    assert code == 2 and "not found" in err
    assert len(list(results.glob("*/rows.json"))) == 1  # the rejected commands wrote nothing
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *args, "--evaluators", "repr,checklist,contrast")
    assert code == 0 and "skipped" in err
    assert [line.strip() for line in err.splitlines() if "no-model" in line] == [  # repr: stored already
        f"checklist, contrast: no-model: {run.name} has no model: not kept (--keep-models none); retrain the run "
        "with `clbench run ... --overwrite` (and --keep-models all to keep its model)"]  # one line, not one each


def test_default_evaluators_then_an_explicit_attack(cli, tiny, results, monkeypatch):
    # a healthy run here (FAST's tiny-bert may collapse on the CPU, and a collapsed run skips the model's evaluators)
    monkeypatch.setattr("bench.evaluators.metrics.collapse_note", lambda *args: "")
    args = [a for a in FAST if a not in ("--evaluators", "none")]
    # on the CPU: textfooler is left out by default there only (on a GPU it would run)
    code, out, err = cli("run", "--methods", "ce", "--datasets", tiny, *args, "--checklist-n", "10", "--device", "cpu")
    assert code == 0, err
    assert "contrast: skipped: no contrast set" in err
    assert "textfooler: skipped: not run by default on CPU" in err
    table = pd.read_parquet(results / "results.parquet")
    assert {"clean", "checklist", "repr", "contrast", "textfooler", "tfidf"} == set(table.evaluator)
    skipped = table[table.metric == "skipped"]
    assert set(skipped.evaluator) == {"contrast", "textfooler"} and skipped.note.str.len().min() > 10

    run_key = table.run_key.iloc[0]
    code, out, err = cli("evaluate", run_key, "--evaluators", "textfooler", "--attack-n", "3", "--word-vectors",
                         "glove")   # plain GloVe: the counter-fitted default takes a minute to build once
    assert code == 0, err
    table = pd.read_parquet(results / "results.parquet")
    attack = table[(table.evaluator == "textfooler") & (table.metric != "skipped")]
    assert {"clean_accuracy", "accuracy_under_attack", "attack_success_rate"} <= set(attack.metric)
    assert (attack.word_vectors == "glove-6b-50d").all() and (attack.sim_threshold == 0.7).all()
    assert (results / run_key / "adversarial_textfooler.jsonl.gz").is_file()


def test_evaluation_table_keeps_different_settings_apart():
    from bench.reporting.summary import evaluation_table

    base = {"dataset": "d", "encoder": "e", "method": "ce", "evaluator": "textfooler", "split": "attack",
            "metric": "accuracy_under_attack", "label": "", "note": ""}
    rows = [{**base, "seed": 1, "eval_hash": "adaptive", "value": 0.1},
            {**base, "seed": 2, "eval_hash": "adaptive", "value": 0.3},
            {**base, "seed": 1, "eval_hash": "transfer", "value": 0.9},
            {**base, "seed": 1, "eval_hash": "x", "metric": "skipped", "value": float("nan")}]
    table = evaluation_table(rows).set_index("eval_hash")
    assert list(table.index) == ["adaptive", "transfer"]
    assert table.loc["adaptive", "seeds"] == 2 and table.loc["adaptive", "value"].startswith("0.2 ±")
    assert table.loc["transfer", "value"] == "0.9"


class Echo(Evaluator):
    """Returns its `checklist_n` option as a per-example file (stands in for adversarial examples, t-SNE...)."""

    name = "echo"
    option_names = ("checklist_n",)

    def artefacts(self, options):
        return ("echo.json",)

    def evaluate(self, ctx):
        return Evaluation([{"split": "test", "metric": "n", "value": float(ctx.options.checklist_n), "n": 1}],
                          {"echo.json": {"n": ctx.options.checklist_n}})


def test_per_example_files_of_other_settings_are_kept_and_restored(tmp_path, sentiment_data):
    spec = RunSpec("ce", sentiment_data.name, "scripted", 1, sentiment_data.fingerprint)
    run_dir = tmp_path / "results" / spec.key
    run_dir.mkdir(parents=True)
    model = KeywordClassifier(SENTIMENT, KEYWORDS)

    def evaluate(n):
        outcome, = evaluate_run(spec, sentiment_data, model, run_dir, [Echo()], EvalOptions(checklist_n=n),
                                torch.device("cpu"))
        return outcome.status, json.loads((run_dir / "echo.json").read_text())["n"]

    assert evaluate(10) == ("done", 10)
    assert evaluate(20) == ("done", 20)     # other settings: computed, stored beside
    kept = {p.parent.name: json.loads(p.read_text())["n"] for p in (run_dir / "evals").glob("echo-*/echo.json")}
    assert sorted(kept.values()) == [10, 20]
    assert evaluate(10) == ("cached", 10)   # asked again: not recomputed, and its own file is back in place
    assert evaluate(20) == ("cached", 20)


def test_files_written_before_they_were_kept_go_to_the_evaluation_that_wrote_them(tmp_path, sentiment_data):
    import os
    import shutil

    from bench.running.evaluation import artefact_folder, is_done

    spec = RunSpec("ce", sentiment_data.name, "scripted", 1, sentiment_data.fingerprint)
    run_dir = tmp_path / "results" / spec.key
    run_dir.mkdir(parents=True)
    model = KeywordClassifier(SENTIMENT, KEYWORDS)
    ten, twenty = EvalOptions(checklist_n=10), EvalOptions(checklist_n=20)

    def as_an_older_version_left_it(options, stamp):
        """Files only under their plain name (no evaluation folder), the rows written just after them."""
        shutil.rmtree(artefact_folder(run_dir, Echo(), options))
        plain = run_dir / "echo.json"
        plain.write_text(plain.read_text())  # a fresh inode, as the old writer made (no second link)
        os.utime(plain, (stamp, stamp))
        os.utime(evaluation_path(run_dir, Echo(), options), (stamp + 1, stamp + 1))

    def kept(options):
        return json.loads((artefact_folder(run_dir, Echo(), options) / "echo.json").read_text())["n"]

    evaluate_run(spec, sentiment_data, model, run_dir, [Echo()], ten, torch.device("cpu"))
    as_an_older_version_left_it(ten, 1_000_000)
    assert is_done(run_dir, Echo(), ten) and kept(ten) == 10          # adopted by the evaluation that wrote it
    shutil.rmtree(artefact_folder(run_dir, Echo(), ten))
    (run_dir / "echo.json").write_text(json.dumps({"n": 10}))
    os.utime(run_dir / "echo.json", (1_000_000, 1_000_000))
    evaluate_run(spec, sentiment_data, model, run_dir, [Echo()], twenty, torch.device("cpu"))
    assert kept(ten) == 10 and kept(twenty) == 20                     # kept before the new one replaced it
    as_an_older_version_left_it(twenty, 2_000_000)
    assert is_done(run_dir, Echo(), twenty) and kept(twenty) == 20
    assert is_done(run_dir, Echo(), ten)
