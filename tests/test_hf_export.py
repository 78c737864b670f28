"""Models in Hugging Face format: `clbench run --save-format hf`, `clbench export`, and the exported folder loaded
with the stock Auto classes predicting what the run predicted (and scored again with `clbench evaluate --model`)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from bench.cli.main import main
from bench.errors import BenchError
from conftest import FIXTURE

# learns the fixture (not collapsed) in a few seconds; the run is trained once for the module
TRAIN = ["--methods", "ce", "--datasets", str(FIXTURE), "--encoder", "tiny-bert", "--epochs", "2", "--lr", "5e-3",
         "--batch-size", "8", "--no-progress", "--max-length", "32", "--evaluators", "none"]
LONG = " ".join(["the coach trained in the rain and the cafe served bread"] * 6)  # past --max-length 32


def stored_predictions(run_dir: Path) -> list[dict]:
    with gzip.open(run_dir / "predictions.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def fixture_texts() -> list[str]:
    return [json.loads(line)["text"] for line in (FIXTURE / "test.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished tiny-bert run on the tiny fixture, trained with --save-format safetensors,hf."""
    results = tmp_path_factory.mktemp("hf") / "results"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.delenv("BENCH_DATA_DIR", raising=False)
        assert main(["run", *TRAIN, "--save-format", "safetensors,hf", "--results-dir", str(results)]) == 0
    (run_dir,) = [p.parent for p in results.glob("*/rows.json")]
    return run_dir


def hf_logits(folder: Path, texts: list[str]) -> tuple[torch.Tensor, object]:
    """Logits of the folder's model as a user would load it (Auto classes, no custom code)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(**tokenizer(texts, truncation=True, padding=True, return_tensors="pt")).logits, model


def test_save_format_hf_folder_loads_with_auto_classes_and_predicts_what_the_run_predicted(trained, cli):
    from bench.results import store
    from bench.running.evaluation import data_for_run, load_run_classifier
    from bench.spec import RunSpec

    folder = trained / "hf"
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in folder.iterdir()}
    assert (trained / "model.safetensors").is_file()  # safetensors,hf: both
    texts = fixture_texts()
    logits, model = hf_logits(folder, texts)
    assert model.config.id2label == {0: "food", 1: "sport", 2: "weather"}  # the dataset's label names
    stored = stored_predictions(trained)
    assert [model.config.id2label[int(i)] for i in logits.argmax(1)] == [r["predicted"] for r in stored]
    assert len({r["predicted"] for r in stored}) >= 2  # not a collapsed model: argmax equality means something
    np.testing.assert_allclose(torch.softmax(logits, 1).numpy(), [r["probabilities"] for r in stored], atol=2e-6)

    spec = RunSpec.from_json(store.read_json(trained / "spec.json"))
    data = data_for_run(trained, spec, None)
    suite = load_run_classifier(trained, spec, data, torch.device("cpu"))
    both = texts + [LONG]  # a text past max_length: the exported tokenizer truncates as training did
    ours = suite._run(both, "logits")
    np.testing.assert_allclose(hf_logits(folder, both)[0].numpy(), ours, atol=1e-5, rtol=0)

    # the format is not part of the run key: the same command without it finds the run finished
    code, _, err = cli("run", *TRAIN, "--results-dir", trained.parent)
    assert code == 0 and "skipped" in err and trained.name in err


def test_export_command_writes_the_same_model_and_refuses_to_overwrite(trained, cli, tmp_path):
    from safetensors.torch import load_file

    from bench.results import runfiles

    target = tmp_path / "exported"
    code, out, err = cli("export", trained.name, target, "--results-dir", trained.parent)
    assert code == 0, err
    assert "DebertaV2ForSequenceClassification" in err and "from_pretrained" in out
    mine, saved = load_file(target / "model.safetensors"), load_file(trained / "hf" / "model.safetensors")
    assert mine.keys() == saved.keys() and all(torch.equal(mine[k], saved[k]) for k in mine)
    about = json.loads((target / "clbench_export.json").read_text())
    assert about["run_key"] == trained.name and about["labels"] == ["food", "sport", "weather"]

    code, _, err = cli("export", trained.name, target, "--results-dir", trained.parent)
    assert code == 2 and "not empty" in err and "--overwrite" in err
    assert cli("export", trained.name, target, "--results-dir", trained.parent, "--overwrite")[0] == 0
    code, _, err = cli("export", "nothing_*", tmp_path / "x", "--results-dir", trained.parent)
    assert code == 2 and "no run 'nothing_*'" in err

    hf_only = tmp_path / "results" / "hf_only"  # --save-format hf: no model.pt, the run's hf/ is the export
    shutil.copytree(trained, hf_only)
    (hf_only / "model.safetensors").unlink()
    code, _, err = cli("export", hf_only, tmp_path / "z")
    assert code == 2 and "Hugging Face format only" in err and f"{hf_only / 'hf'} is the export" in err

    mean = tmp_path / "results" / "mean_run"  # a run trained with mean pooling: refused before any rebuild
    shutil.copytree(trained, mean, ignore=shutil.ignore_patterns("hf"))
    spec = json.loads((mean / "spec.json").read_text())
    spec["train"]["pooling"] = "mean"
    runfiles.write_json(mean, "spec.json", spec)  # recorded in its manifest, as the run's own writes are
    code, _, err = cli("export", mean, tmp_path / "y")
    assert code == 2 and "--pooling mean has no stock Hugging Face" in err and not (tmp_path / "y").exists()


def test_evaluate_model_on_the_export_reproduces_the_runs_clean_results(trained, cli, tmp_path):
    from bench.data.loading import load_dataset
    from bench.results import store
    from bench.running.evaluation import load_run_classifier
    from bench.running.outside import OutsideClassifier, load_outside
    from bench.spec import RunSpec

    results = tmp_path / "results"
    shutil.copytree(trained.parent, results, ignore=shutil.ignore_patterns(".*"))
    code, out, err = cli("evaluate", "--model", trained / "hf", "--datasets", FIXTURE, "--evaluators", "repr",
                         "--results-dir", results)
    assert code == 0, err
    (external,) = [p.parent for p in results.glob("external_*/rows.json")]
    ours = {(r["split"], r["metric"], r["label"]): r["value"] for r in store.read_json(trained / "rows.json")}
    theirs = {(r["split"], r["metric"], r["label"]): r["value"] for r in store.read_json(external / "rows.json")}
    for key in [("test", "accuracy", ""), ("test", "macro_f1", ""), ("validation", "accuracy", "")]:
        assert theirs[key] == pytest.approx(ours[key]), key
    predicted = [r["predicted"] for r in stored_predictions(external)]
    assert predicted == [r["predicted"] for r in stored_predictions(trained)]
    about = store.read_json(external / "spec.json")["external"]
    assert about["model"] == str((trained / "hf").resolve()) and len(about["weights_sha256"]) == 64
    table = pd.read_parquet(results / "results.parquet")  # beside the trained run, for `clbench report`
    assert {"ce", "external"} <= set(table.method) and "repr" in set(table[table.method == "external"].evaluator)

    # the representation the evaluators read is the suite's pooled vector
    spec = RunSpec.from_json(store.read_json(trained / "spec.json"))
    data = load_dataset(str(FIXTURE))
    model, tokenizer, _ = load_outside(str(trained / "hf"), torch.device("cpu"))
    outside = OutsideClassifier(model, tokenizer, [0, 1, 2], data.label_names, torch.device("cpu"), 32)
    suite = load_run_classifier(trained, spec, data, torch.device("cpu"))
    np.testing.assert_allclose(outside.embed(data.test.texts), suite.embed(data.test.texts), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["tiny-bert", "tiny-roberta", "tiny-distilbert"])
@pytest.mark.parametrize("pooling", ["cls", "pooler"])
def test_each_encoder_and_pooling_maps_onto_a_stock_class_exactly(kind, pooling, tmp_path):
    from bench.encoders.hf_export import export_hf
    from bench.encoders.models import build_encoder
    from bench.spec import TrainConfig

    texts = fixture_texts()
    torch.manual_seed(0)
    bundle = build_encoder(kind, texts, TrainConfig(max_length=32, pooling=pooling))
    with torch.no_grad():  # weights far from the initial ones, so that inputs give clearly different logits
        for p in bundle.model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    head = nn.Sequential(nn.Dropout(0.1), nn.Linear(32, 3))
    names = ["food", "sport", "weather"]
    if kind == "tiny-distilbert" and pooling == "pooler":
        with pytest.raises(BenchError, match="no pooler layer"):
            export_hf(bundle.model, head, bundle, names, 0.1, 32, tmp_path / "hf", texts)
        return
    summary = export_hf(bundle.model, head, bundle, names, 0.1, 32, tmp_path / "hf", texts)
    expected = {"cls": "DebertaV2ForSequenceClassification",
                "pooler": {"tiny-bert": "BertForSequenceClassification",
                           "tiny-roberta": "RobertaForSequenceClassification"}.get(kind)}[pooling]
    assert summary["class"] == expected
    both = texts + [LONG]
    got, model = hf_logits(tmp_path / "hf", both)
    assert type(model).__name__ == expected
    from bench.encoders.hf_export import suite_logits

    want = suite_logits(bundle.model, head, bundle, both)
    assert float(want.std(0).mean()) > 0.05  # the check compares logits that differ between texts
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_mean_pooling_textcnn_and_bad_formats_are_refused_before_training(cli, tiny, results):
    args = [a if a != str(FIXTURE) else str(tiny) for a in TRAIN]
    code, _, err = cli("run", *args, "--pooling", "mean", "--save-format", "hf")
    assert code == 2 and "--pooling mean has no stock Hugging Face" in err
    code, _, err = cli("run", *[a if a != "tiny-bert" else "textcnn" for a in args], "--save-format", "both")
    assert code == 2 and "textcnn is not a Hugging Face transformer" in err
    code, _, err = cli("run", *args, "--save-format", "onnx")
    assert code == 2 and "use safetensors, hf, safetensors,hf or both" in err
    code, _, err = cli("run", *args, "--save-format", "hf", "--no-save-model")
    assert code == 2 and "give one" in err
    assert not results.exists() or not list(results.glob("*/spec.json"))  # nothing trained


def test_an_export_that_does_not_reproduce_the_logits_is_refused_and_leaves_nothing(tmp_path, monkeypatch):
    from bench.data.loading import load_dataset
    from bench.encoders import hf_export
    from bench.encoders.models import build_encoder
    from bench.methods.base import Method
    from bench.running.export import save_hf_in_run
    from bench.spec import RunSpec, TrainConfig

    texts = fixture_texts()
    bundle = build_encoder("tiny-bert", texts, TrainConfig(max_length=32))
    head = nn.Sequential(nn.Dropout(0.1), nn.Linear(32, 3))
    correct = hf_export.deberta_state

    def off_by_a_little(model, linear):
        state = correct(model, linear)
        state["classifier.bias"] = state["classifier.bias"] + 1e-3
        return state

    monkeypatch.setattr(hf_export, "deberta_state", off_by_a_little)
    with pytest.raises(BenchError, match="export check failed: .* differ from the suite's by 1.00e-03"):
        hf_export.export_hf(bundle.model, head, bundle, ["food", "sport", "weather"], 0.1, 32, tmp_path / "hf", texts)
    assert list(tmp_path.iterdir()) == []  # neither the folder nor its staging copy

    # in a shard (--save-format hf) a model that cannot be exported is a warning; the run's results stand
    data = load_dataset(str(FIXTURE))
    bundle = build_encoder("tiny-bert", data.train.texts, TrainConfig(max_length=32, pooling="mean"))
    spec = RunSpec("ce", data.name, "tiny-bert", 1, data.fingerprint, TrainConfig(max_length=32, pooling="mean"))
    message = save_hf_in_run(Method(bundle.model, 3), bundle, data, spec, tmp_path, [])
    assert message.startswith("no Hugging Face export (hf/): --pooling mean") and not (tmp_path / "hf").exists()
