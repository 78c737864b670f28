"""Evaluator artefacts: evaluators return them, the store writes them into the run folder (by their name's kind)
and the runner keeps them per settings; no built-in evaluator writes into the run folder itself."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.evaluators.base import EvalContext, EvalOptions, Evaluation, Evaluator
from bench.evaluators.checklist import ChecklistEvaluator
from bench.evaluators.contrast import ContrastSets
from bench.evaluators.representation import Representation
from scripted import FunctionClassifier, KeywordClassifier
from bench.evaluators.tfidf import TfidfReference
from bench.registry import EVALUATORS
from bench.results import runfiles, store
from bench.running.evaluation import artefact_folder, evaluate_run
from bench.spec import RunSpec
from conftest import evaluate_and_store, write_jsonl
from test_checklist import BINARY, SUITE, keyword_model, make_data
from test_evaluation import contrast_rows
from test_textfooler import PAIRS, keyword_classifier, text_data
from test_textfooler import evaluator as textfooler

RECORDS = [{"id": "a", "value": 1}, {"id": "b", "value": 2}]


class Files(Evaluator):
    """Returns a JSON artefact and a JSON Lines one that depend on its `checklist_n` option; counts its calls."""

    name = "files"
    option_names = ("checklist_n",)

    def __init__(self):
        self.calls = 0

    def artefacts(self, options):
        return (store.TSNE, store.CONTRAST_PREDICTIONS)

    def evaluate(self, ctx):
        self.calls += 1
        n = ctx.options.checklist_n
        return Evaluation([{"split": "test", "metric": "n", "value": float(n), "n": 1}],
                          {store.TSNE: {"n": n}, store.CONTRAST_PREDICTIONS: [{**r, "n": n} for r in RECORDS]})


class PlainRows(Evaluator):
    """A plugin-style evaluator: returns a plain list of rows (no artefacts)."""

    name = "plainrows"

    def evaluate(self, ctx):
        return [{"split": "test", "metric": "answer", "value": 42.0, "n": 1}]


class BadName(Evaluator):
    """Returns a valid artefact and one whose name the store cannot write."""

    name = "badname"

    def __init__(self, bad: str):
        self.bad = bad

    def evaluate(self, ctx):
        return Evaluation([{"split": "test", "metric": "x", "value": 1.0, "n": 1}],
                          {store.TSNE: {"ok": True}, self.bad: {"oops": 1}})


def read_jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture
def run(tmp_path):
    """(spec, data, run folder) of a scripted run on the checklist test texts."""
    data = make_data(BINARY)
    spec = RunSpec("ce", data.name, "scripted", 1, data.fingerprint)
    run_dir = tmp_path / "results" / spec.key
    run_dir.mkdir(parents=True)
    return spec, data, run_dir


def evaluate(run, evaluator, options):
    spec, data, run_dir = run
    outcome, = evaluate_run(spec, data, keyword_model(), run_dir, [evaluator], options, torch.device("cpu"))
    return outcome


def test_returned_artefacts_are_written_by_the_store_and_kept_per_settings(run):
    _, _, run_dir = run
    files, ten, twenty = Files(), EvalOptions(checklist_n=10), EvalOptions(checklist_n=20)
    assert evaluate(run, files, ten).status == "done"
    assert json.loads((run_dir / store.TSNE).read_text()) == {"n": 10}
    assert read_jsonl_gz(run_dir / store.CONTRAST_PREDICTIONS) == [{**r, "n": 10} for r in RECORDS]
    kept = artefact_folder(run_dir, files, ten)
    assert json.loads((kept / store.TSNE).read_text()) == {"n": 10}
    assert read_jsonl_gz(kept / store.CONTRAST_PREDICTIONS) == [{**r, "n": 10} for r in RECORDS]

    assert evaluate(run, files, twenty).status == "done"   # other settings replace the plain files...
    assert json.loads((run_dir / store.TSNE).read_text()) == {"n": 20}
    assert json.loads((kept / store.TSNE).read_text()) == {"n": 10}   # ...and the first ones stay kept
    assert files.calls == 2

    outcome = evaluate(run, files, ten)                     # cached: restored, not recomputed
    assert outcome.status == "cached" and files.calls == 2 and outcome.rows[0]["value"] == 10.0
    assert json.loads((run_dir / store.TSNE).read_text()) == {"n": 10}
    assert read_jsonl_gz(run_dir / store.CONTRAST_PREDICTIONS) == [{**r, "n": 10} for r in RECORDS]


def test_a_plugin_evaluator_returning_a_plain_list_still_works(run):
    _, _, run_dir = run
    outcome = evaluate(run, PlainRows(), EvalOptions())
    assert outcome.status == "done" and [(r["metric"], r["value"]) for r in outcome.rows] == [("answer", 42.0)]
    assert sorted(p.name for p in run_dir.iterdir()) == [store.EVALS, "manifest.json"]
    again = evaluate(run, PlainRows(), EvalOptions())
    assert again.status == "cached" and again.rows == outcome.rows


@pytest.mark.parametrize("name, message", [("notes.txt", "unknown kind"), ("table.csv.gz", "unknown kind"),
                                           ("sub/tsne.json", "not a plain file name"),
                                           ("../tsne.json", "not a plain file name"), ("", "not a plain")])
def test_an_artefact_the_store_cannot_write_is_a_clear_error(run, name, message):
    _, _, run_dir = run
    with pytest.raises(ValueError, match=message):
        runfiles.write_artefact(run_dir, name, {"x": 1})
    outcome = evaluate(run, BadName(name), EvalOptions())
    assert outcome.status == "failed" and message in outcome.message
    assert not (run_dir / store.TSNE).exists()   # checked before anything is written


def test_write_artefact_writes_each_kind_atomically(tmp_path):
    path = runfiles.write_artefact(tmp_path / "run", store.CHECKLIST_INFO, {"a": [1, 2]})
    assert path == tmp_path / "run" / store.CHECKLIST_INFO and json.loads(path.read_text()) == {"a": [1, 2]}
    path = runfiles.write_artefact(tmp_path / "run", store.ADVERSARIAL, RECORDS)
    assert read_jsonl_gz(path) == RECORDS
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == sorted([store.CHECKLIST_INFO, store.ADVERSARIAL, "manifest.json"])


# ---------------------------------------------------------------- no built-in evaluator writes into run_dir

def builtin_cases(tmp_path: Path) -> list[tuple[Evaluator, EvalContext]]:
    """One (evaluator, context) per built-in evaluator and mode, each with a fresh empty run folder."""
    results = tmp_path / "results"
    write_jsonl(tmp_path / "cs" / "test.jsonl", contrast_rows())
    sentiment = KeywordClassifier(BINARY, {"positive": {"good", "great"}, "negative": {"bad", "awful"}})
    embedder = FunctionClassifier(BINARY, lambda texts: np.full((len(texts), 2), 0.5),  # distinct embeddings
                                  lambda texts: np.array([[len(t), t.count("a"), t.count("e") + 1.0] for t in texts]))
    source = EvalContext(keyword_classifier(), text_data(PAIRS), results / "source", tmp_path / "cache", 7,
                         EvalOptions(), "source", results)
    source.run_dir.mkdir(parents=True)
    evaluate_and_store(textfooler(), source)   # the adversarial examples a transfer evaluation reads

    def ctx(name, classifier, data, **options):
        return EvalContext(classifier, data, results / name, tmp_path / "cache", 7, EvalOptions(**options), name,
                           results)

    return [
        (ChecklistEvaluator(), ctx("checklist", keyword_model(), make_data(BINARY), checklist_n=4)),
        (ChecklistEvaluator(), ctx("suite", keyword_model(), make_data(BINARY), checklist_suite=str(SUITE))),
        (ContrastSets(), ctx("contrast", sentiment, make_data(BINARY), contrast_set=str(tmp_path / "cs"))),
        (Representation(), ctx("repr", embedder, make_data(BINARY), tsne=True, tsne_n=5)),
        (textfooler(), ctx("adaptive", keyword_classifier(), text_data(PAIRS))),
        (textfooler(), ctx("transfer", keyword_classifier(), text_data(PAIRS), attack_mode="transfer",
                           attack_source="source")),
        (TfidfReference(), ctx("tfidf", None, make_data(BINARY))),  # scores no model; caches under the cache
    ]


def test_no_builtin_evaluator_writes_into_the_run_folder(tmp_path):
    cases = builtin_cases(tmp_path)
    builtin = {cls for _, cls in EVALUATORS.items()  # importing bench.evaluators registered them all
               if cls.__module__.startswith("bench.evaluators.")}
    assert builtin == {type(evaluator) for evaluator, _ in cases}   # a new built-in evaluator needs a case here
    for evaluator, ctx in cases:
        ctx.run_dir.mkdir(parents=True)
        os.chmod(ctx.run_dir, 0o555)   # read-only (where not root); in any case it must stay empty
        try:
            evaluation = evaluator.evaluate(ctx)
        finally:
            os.chmod(ctx.run_dir, 0o755)
        assert isinstance(evaluation, Evaluation), evaluator.name
        assert list(ctx.run_dir.iterdir()) == [], f"{evaluator.name} wrote into run_dir"
        assert set(evaluator.artefacts(ctx.options)) <= set(evaluation.artefacts), evaluator.name
        for name in evaluation.artefacts:
            runfiles.check_artefact_name(name)
