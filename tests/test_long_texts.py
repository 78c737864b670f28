"""Long texts are cut once to what the model sees (bench.data.bounds): a character cap before any tokenisation,
then the exact cut after the last word within max_length tokens; training, prediction and every evaluator use
the cut texts, a run says how many were cut, and a dataset of short texts is left exactly as it was."""

from __future__ import annotations

import gzip
import json
import random
import time
from pathlib import Path

import numpy as np
import pytest
from transformers import PreTrainedTokenizerBase

from bench.data.bounds import CHARS_PER_TOKEN, TextBound, bound_data
from bench.data.loading import load_dataset
from bench.encoders.models import build_encoder
from bench.evaluators.model import ModelClassifier
from bench.methods.base import Method
from bench.results import store
from bench.spec import TrainConfig
from conftest import FIXTURE, read_fixture, write_jsonl

WORDS = "the home side trained all week in the north new cafe tasted of garlic".split()
MAX_LENGTH = 32
CAP = MAX_LENGTH * CHARS_PER_TOKEN


def prose(n_chars: int, seed: int = 0) -> str:
    """A single line of fixture words, n_chars long."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n_chars // 4 + 10))[:n_chars]


@pytest.fixture(scope="module")
def bundles():
    """A tiny-bert bundle ([CLS] ... [SEP], word pieces) and a TextCNN one (no special tokens), max_length 32."""
    texts = [r["text"] for r in read_fixture("train")]
    cfg = TrainConfig(max_length=MAX_LENGTH)
    return {name: build_encoder(name, texts, cfg) for name in ("tiny-bert", "textcnn")}


@pytest.fixture
def tokenizer_spy(monkeypatch):
    """Every string any Hugging Face tokenizer is called with: their count and the longest one's length."""
    seen = {"calls": 0, "longest": 0}
    original = PreTrainedTokenizerBase.__call__

    def spy(self, text=None, *args, **kwargs):
        items = [text] if isinstance(text, str) else list(text or [])
        for item in items:
            words = item if isinstance(item, (list, tuple)) else [item]
            seen["longest"] = max([seen["longest"], *(len(w) for w in words if isinstance(w, str))])
        seen["calls"] += 1
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(PreTrainedTokenizerBase, "__call__", spy)
    return seen


@pytest.mark.parametrize("encoder", ["tiny-bert", "textcnn"])
def test_a_long_text_is_cut_after_the_last_word_the_model_sees(bundles, encoder):
    bundle = bundles[encoder]
    bound = TextBound(MAX_LENGTH, bundle.tokenize_words)
    long, short = prose(5000), "the coach trained all week"
    cut_long, cut_short = bound.cut([long, short])
    assert cut_short is short  # seen whole: the same object
    assert long.startswith(cut_long) and len(cut_long) < 300
    assert bundle.tokenize([cut_long]) == bundle.tokenize([long])  # the model sees exactly what it saw before
    without_last_word = cut_long.rsplit(" ", 1)[0]
    assert len(bundle.tokenize([without_last_word])[0]) < MAX_LENGTH  # nothing past the model's view is kept
    assert bound.cut([cut_long]) == [cut_long]  # cutting again changes nothing


def test_words_that_give_no_token_are_looked_past():
    """The first max_length + 1 words usually hold the model's view; words some tokenizers drop (control
    characters, for BERT's) give no token, so a text that starts with many is cut after all of its words were
    tokenised."""
    def tokenize_words(texts: list[list[str]]) -> tuple[list[list[int]], list[list[int]]]:
        """One token per word, none for "~", truncated at MAX_LENGTH: ids and word indices."""
        kept = [[(len(w), i) for i, w in enumerate(words) if w != "~"][:MAX_LENGTH] for words in texts]
        return [[t for t, _ in k] for k in kept], [[i for _, i in k] for k in kept]

    text = "~ " * 200 + prose(3000)
    cut = TextBound(MAX_LENGTH, tokenize_words).cut([text])[0]
    assert text.startswith(cut) and len(cut.split()) == 200 + MAX_LENGTH


def test_the_character_cap_comes_before_any_tokeniser(bundles, tokenizer_spy):
    bundle = bundles["tiny-bert"]
    huge = prose(2_000_000)
    cut = TextBound(MAX_LENGTH, bundle.tokenize_words).cut([huge])[0]
    assert tokenizer_spy["calls"] >= 1 and tokenizer_spy["longest"] <= CAP
    assert bundle.tokenize([cut]) == bundle.tokenize([huge[:CAP]])
    assert TextBound(MAX_LENGTH).cut([huge]) == [huge[:CAP]]  # without a tokenizer: the character cap only


def test_short_data_is_left_exactly_as_loaded(bundles):
    data = load_dataset(str(FIXTURE))
    bounded = bound_data(data, TextBound(MAX_LENGTH, bundles["tiny-bert"].tokenize_words))
    assert bounded.texts_cut == {"train": 0, "validation": 0, "test": 0} and bounded.bounded_to == MAX_LENGTH
    for split in ("train", "validation", "test"):
        assert getattr(bounded, split) is getattr(data, split)  # not even copied
    assert bounded.fingerprint == data.fingerprint
    assert bound_data(bounded, TextBound(MAX_LENGTH)) is bounded  # bounded once


def test_the_classifier_never_tokenises_past_the_cap(bundles, tokenizer_spy):
    bundle = bundles["tiny-bert"]
    import torch

    classifier = ModelClassifier(Method(bundle.model, 3), bundle, ["a", "b", "c"], torch.device("cpu"),
                                 max_width=MAX_LENGTH)
    huge = prose(1_000_000)
    probabilities = classifier.predict_proba([huge, "the coach trained all week"])
    assert probabilities.shape == (2, 3) and tokenizer_spy["longest"] <= CAP
    assert np.allclose(probabilities[0], classifier.predict_proba([huge[:CAP]])[0], atol=1e-6)


def long_dataset(folder: Path, n_chars: int) -> Path:
    """The tiny fixture with one n_chars single-line text added to train and one to test."""
    train = read_fixture("train")
    test = read_fixture("test")[:4]
    write_jsonl(folder / "train.jsonl", train + [{"id": "big-train", "text": prose(n_chars, 1), "label": "sport"}])
    write_jsonl(folder / "validation.jsonl", read_fixture("test")[10:19])
    write_jsonl(folder / "test.jsonl", test + [{"id": "big-test", "text": prose(n_chars, 2), "label": "food"}])
    return folder


def test_a_10_mb_text_costs_what_a_short_one_does(tmp_path, results, cli, tokenizer_spy):
    """A real run (tiny-bert, CheckList and repr) on data with a 10 MB single-line text in train and in test:
    no tokeniser ever sees more than the cap, CheckList perturbs the cut text, the rows count the cut texts."""
    data = long_dataset(tmp_path / "long", 10_000_000)
    started = time.perf_counter()
    code, _, err = cli("run", "--methods", "ce", "--datasets", data, "--encoder", "tiny-bert", "--epochs", "1",
                       "--batch-size", "8", "--max-length", MAX_LENGTH, "--no-progress", "--evaluators",
                       "checklist,repr", "--results-dir", results)
    assert code == 0, err
    assert time.perf_counter() - started < 60  # was minutes (and GBs) before the cut
    assert tokenizer_spy["calls"] > 3 and tokenizer_spy["longest"] <= CAP  # in this process: the spy saw the run
    run_dir = next(p for p in results.iterdir() if p.name.startswith("ce_"))
    rows = store.run_rows(run_dir)
    clean = [r for r in rows if r["evaluator"] == "clean"]
    assert clean and all(r["texts_cut"] == 2 for r in clean)
    assert store.read_json(run_dir / store.TRAIN_LOG)["texts_cut"] == {"train": 1, "validation": 0, "test": 1}
    assert {r["evaluator"] for r in rows} >= {"checklist", "repr"}
    with gzip.open(run_dir / store.CHECKLIST_CASES, "rt") as fh:
        cases = [json.loads(line) for line in fh]
    assert cases and max(len(t) for c in cases for t in c["texts"]) < 1000  # perturbed the cut text
    # scored again later from the saved model (`clbench evaluate`): the reloaded data is cut the same way
    (run_dir / store.CHECKLIST_CASES).unlink()
    tokenizer_spy["longest"] = 0
    code, _, err = cli("evaluate", run_dir.name, "--evaluators", "checklist", "--overwrite", "--results-dir", results)
    assert code == 0, err
    assert tokenizer_spy["longest"] <= CAP
    with gzip.open(run_dir / store.CHECKLIST_CASES, "rt") as fh:
        assert max(len(t) for line in fh for t in json.loads(line)["texts"]) < 1000


def test_short_data_runs_as_before(results, cli):
    """The fixture (all texts short): nothing cut, the key and the data fingerprint as before the cut existed."""
    code, _, err = cli("run", "--methods", "ce", "--datasets", FIXTURE, "--encoder", "tiny-bert", "--epochs", "1",
                       "--max-length", MAX_LENGTH, "--no-progress", "--evaluators", "none", "--results-dir", results)
    assert code == 0, err
    run_dir = next(p for p in results.iterdir() if p.name.startswith("ce_"))
    rows = store.read_json(run_dir / store.ROWS)
    assert all(r["texts_cut"] == 0 for r in rows)
    assert rows[0]["data_fingerprint"] == load_dataset(str(FIXTURE)).fingerprint
    assert "cut to what it sees" not in err
