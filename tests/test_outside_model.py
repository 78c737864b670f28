"""`clbench evaluate --model`: a sequence classifier trained elsewhere (a local Hugging Face folder), its labels
mapped onto the dataset's, scored into a results run (method `external`) with its files' hashes recorded."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

from bench.errors import BenchError
from bench.running.outside import label_columns
from conftest import FIXTURE, read_fixture

DATASET = ["food", "sport", "weather"]


def outside_model(folder: Path, labels: list[str], seed: int = 0) -> Path:
    """A small random BERT classifier with a word tokenizer, saved as any Hugging Face model folder is."""
    from transformers import BertConfig, BertForSequenceClassification

    from bench.encoders.vocab import build_vocab, word_tokenizer

    torch.manual_seed(seed)
    vocab = build_vocab([row["text"] for row in read_fixture("train")])
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=len(labels),
                        id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)})
    model = BertForSequenceClassification(config).eval()
    with torch.no_grad():  # weights far from the initial ones, so that texts get different classes
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(folder)
    word_tokenizer(vocab).save_pretrained(folder)
    return folder


def predicted_names(folder: Path, texts: list[str]) -> list[str]:
    """What the model predicts, read with the Auto classes (label names from its own config)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = model(**tokenizer(texts, truncation=True, padding=True, return_tensors="pt")).logits
    return [model.config.id2label[int(i)] for i in logits.argmax(1)]


def test_labels_match_by_name_in_any_order_and_case():
    assert label_columns(DATASET, ["Weather", "FOOD", "sport"]) == [1, 2, 0]
    assert label_columns(DATASET, ["LABEL_0", "LABEL_1", "LABEL_2"], "positional") == [0, 1, 2]
    assert label_columns(DATASET, ["LABEL_0", "LABEL_1", "LABEL_2"], "food=LABEL_2,SPORT=label_0,weather=LABEL_1") \
        == [2, 0, 1]
    assert label_columns(["negative", "positive"], ["neg", "positive"], "negative=neg") == [0, 1]
    with pytest.raises(BenchError) as error:
        label_columns(DATASET, ["LABEL_0", "LABEL_1", "LABEL_2"])
    message = str(error.value)
    assert "\n" not in message and "[LABEL_0, LABEL_1, LABEL_2] (generic names" in message
    assert "[food, sport, weather]" in message and "--label-map positional" in message
    with pytest.raises(BenchError, match="has 2 labels"):
        label_columns(DATASET, ["food", "sport"], "positional")
    with pytest.raises(BenchError, match="'drink' is not a label of the dataset"):
        label_columns(DATASET, ["a", "b", "c"], "drink=a")
    with pytest.raises(BenchError, match="do not match"):  # two dataset labels onto one model label
        label_columns(DATASET, ["food", "sport", "weather"], "weather=sport")


def test_evaluate_model_maps_labels_stores_a_run_and_records_the_weights(cli, tmp_path, results):
    from bench.results import store

    labels = ["weather", "food", "sport"]  # the model's order is not the dataset's
    folder = outside_model(tmp_path / "model", labels)
    code, out, err = cli("evaluate", "--model", folder, "--datasets", FIXTURE, "--evaluators", "repr")
    assert code == 0, err
    (run_dir,) = [p.parent for p in results.glob("external_tiny_*/rows.json")]
    texts = [row["text"] for row in read_fixture("test")]
    with gzip.open(run_dir / "predictions.jsonl.gz", "rt") as f:
        stored = [json.loads(line) for line in f]
    expected = predicted_names(folder, texts)
    assert len(set(expected)) >= 2 and [r["predicted"] for r in stored] == expected
    gold = [row["label"] for row in read_fixture("test")]
    rows = store.read_json(run_dir / "rows.json")
    accuracy = next(r["value"] for r in rows if r["metric"] == "accuracy" and r["split"] == "test")
    assert accuracy == pytest.approx(sum(p == g for p, g in zip(expected, gold)) / len(gold))
    assert {r["method"] for r in rows} == {"external"} and rows[0]["model_source"] == str(folder.resolve())
    assert list((run_dir / "evals").glob("repr-*.json"))
    spec = store.read_json(run_dir / "spec.json")
    assert spec["external"]["label_columns"] == [1, 2, 0] and len(spec["external"]["weights_sha256"]) == 64

    # the same model again: nothing new; other weights in the same folder: another run
    assert cli("evaluate", "--model", folder, "--datasets", FIXTURE, "--evaluators", "none")[0] == 0
    assert len(list(results.glob("external_*"))) == 1
    outside_model(folder, labels, seed=1)
    assert cli("evaluate", "--model", folder, "--datasets", FIXTURE, "--evaluators", "none")[0] == 0
    assert len(list(results.glob("external_*/rows.json"))) == 2

    code, _, err = cli("evaluate", run_dir.name, "--evaluators", "repr")
    assert code == 2 and "scored an outside model" in err and "--model" in err


def test_generic_labels_need_a_label_map(cli, tmp_path, results):
    folder = outside_model(tmp_path / "model", ["LABEL_0", "LABEL_1", "LABEL_2"])
    code, _, err = cli("evaluate", "--model", folder, "--datasets", FIXTURE, "--evaluators", "none")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "LABEL_0" in err and "food, sport, weather" in err and "--label-map positional" in err
    assert not results.exists() or not list(results.glob("external_*"))  # nothing scored
    code, _, err = cli("evaluate", "--model", folder, "--datasets", FIXTURE, "--evaluators", "none",
                       "--label-map", "positional")
    assert code == 0, err
    code, _, err = cli("evaluate", "--model", folder, "--evaluators", "none")
    assert code == 2 and "--model needs --datasets" in err
    code, _, err = cli("evaluate", "--model", tmp_path / "nowhere", "--datasets", FIXTURE)
    assert code == 2 and "cannot load model" in err
    code, _, err = cli("evaluate", "--datasets", FIXTURE)
    assert code == 2 and "applies to --model only" in err
