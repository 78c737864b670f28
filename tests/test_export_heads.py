"""Every built-in method at its default variant exports to Hugging Face format: lcl's released head (Linear(d, d),
dropout, ReLU, Linear(d, N)) through `DebertaV2ForSequenceClassification`'s pooler (dense = its first Linear,
`pooler_hidden_act` relu, classifier = its second Linear), the shared head (dropout, Linear) as before; a head
no stock class holds is refused with one line naming the problem and the fix (bench.encoders.hf_heads)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bench.methods  # noqa: F401  (registers every method)
from bench.cli.main import main
from bench.errors import BenchError
from bench.registry import METHODS
from conftest import FIXTURE

NAMES = ["food", "sport", "weather"]
# lcl at its defaults (variant released, head released) learns the fixture with these (3 classes predicted)
LCL_TRAIN = ["--methods", "lcl", "--datasets", str(FIXTURE), "--encoder", "tiny-bert", "--epochs", "3", "--lr",
             "1e-2", "--batch-size", "8", "--no-progress", "--max-length", "32", "--evaluators", "none"]
KNOBS = {"clld-static": {"pairs": (("food", "sport"),)}}  # the knob clld-static has no default for


def fixture_texts() -> list[str]:
    return [json.loads(line)["text"] for line in (FIXTURE / "test.jsonl").read_text().splitlines()]


def stored_predictions(run_dir: Path) -> list[str]:
    with gzip.open(run_dir / "predictions.jsonl.gz", "rt") as f:
        return [json.loads(line)["predicted"] for line in f]


def tiny_bundle(pooling: str = "cls"):
    """tiny-bert with weights far from the initial ones, so that texts give clearly different logits."""
    from bench.encoders.models import build_encoder
    from bench.spec import TrainConfig

    torch.manual_seed(0)
    bundle = build_encoder("tiny-bert", fixture_texts(), TrainConfig(max_length=32, pooling=pooling))
    with torch.no_grad():
        for p in bundle.model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return bundle


def export(head: nn.Module, folder: Path, pooling: str = "cls", names: list[str] = NAMES) -> dict:
    """export_hf of tiny-bert + `head`, checked on the fixture's test texts; the config.json it wrote beside."""
    from bench.encoders.hf_export import export_hf

    bundle = tiny_bundle(pooling)
    summary = export_hf(bundle.model, head, bundle, names, 0.1, 32, folder, fixture_texts())
    return {**summary, "config": json.loads((folder / "config.json").read_text())}


def released_head(num_labels: int = 3) -> nn.Module:
    from bench.methods.lcl import ReleasedHead

    torch.manual_seed(1)
    return ReleasedHead(32, num_labels, 0.1)


@pytest.fixture(scope="module")
def lcl_run(tmp_path_factory) -> Path:
    """A finished lcl run at its default settings on the tiny fixture, trained with --save-format both."""
    results = tmp_path_factory.mktemp("lcl") / "results"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.delenv("BENCH_DATA_DIR", raising=False)
        assert main(["run", *LCL_TRAIN, "--save-format", "both", "--results-dir", str(results)]) == 0
    (run_dir,) = [p.parent for p in results.glob("*/rows.json")]
    return run_dir


# ------------------------------------------------------------------------------------------- lcl, end to end

def test_lcl_at_its_defaults_exports_through_the_deberta_pooler_and_predicts_what_the_run_predicted(lcl_run, cli,
                                                                                                   tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

    from bench.results import store
    from bench.running.evaluation import data_for_run, load_run_classifier
    from bench.spec import RunSpec

    spec = RunSpec.from_json(store.read_json(lcl_run / "spec.json"))
    assert dict(spec.method_config)["variant"] == "released" and dict(spec.method_config)["head"] == "released"
    assert (lcl_run / "hf" / "config.json").is_file()  # --save-format hf exported it at the end of training
    target = tmp_path / "exported"
    code, out, err = cli("export", lcl_run.name, target, "--results-dir", lcl_run.parent)
    assert code == 0, err
    assert "DebertaV2ForSequenceClassification" in err and "from_pretrained" in out
    config = json.loads((target / "config.json").read_text())
    assert config["pooler_hidden_act"] == "relu" and config["pooler_hidden_size"] == 32

    # the pooler's dense layer is the head's first Linear, the classifier its second
    data = data_for_run(lcl_run, spec, None)
    suite = load_run_classifier(lcl_run, spec, data, torch.device("cpu"))
    head = suite.method.head
    weights = load_file(target / "model.safetensors")
    assert torch.equal(weights["pooler.dense.weight"], head.dense.weight.detach())
    assert torch.equal(weights["pooler.dense.bias"], head.dense.bias.detach())
    assert torch.equal(weights["classifier.weight"], head.out.weight.detach())
    assert torch.equal(weights["classifier.bias"], head.out.bias.detach())

    texts = data.test.texts
    stored = stored_predictions(lcl_run)
    assert len(set(stored)) >= 2  # not a collapsed model: argmax equality means something
    model = AutoModelForSequenceClassification.from_pretrained(target).eval()
    tokenizer = AutoTokenizer.from_pretrained(target)
    with torch.no_grad():
        logits = model(**tokenizer(texts, truncation=True, padding=True, return_tensors="pt")).logits
    assert [model.config.id2label[int(i)] for i in logits.argmax(1)] == stored
    torch.testing.assert_close(logits, torch.as_tensor(suite._run(texts, "logits")).float(), atol=1e-5, rtol=0)
    classify = pipeline("text-classification", model=str(target), device="cpu")
    assert [r["label"] for r in classify(texts, truncation=True)] == stored

    # with tanh in place of relu the exported model would predict otherwise: the activation matters here
    model.config.pooler_hidden_act = "tanh"
    with torch.no_grad():
        wrong = model(**tokenizer(texts, truncation=True, padding=True, return_tensors="pt")).logits
    assert float((wrong - logits).abs().max()) > 0.05


def test_lcl_with_the_encoders_pooler_is_refused_naming_the_settings_that_export(tmp_path):
    from bench.data.loading import load_dataset
    from bench.encoders.models import build_encoder
    from bench.running.export import export_model, save_hf_in_run
    from bench.spec import RunSpec, TrainConfig, method_config

    data = load_dataset(str(FIXTURE))
    train = TrainConfig(max_length=32, pooling="pooler")
    bundle = build_encoder("tiny-bert", data.train.texts, train)
    lcl = METHODS.get("lcl")
    knobs = method_config("lcl", {})
    spec = RunSpec("lcl", data.name, "tiny-bert", 1, data.fingerprint, train, knobs, lcl.version)
    method = lcl(bundle.model, data.num_labels, lcl.Config(**dict(knobs)))
    with pytest.raises(BenchError) as caught:  # `clbench export`
        export_model(method, bundle, data, spec, tmp_path / "hf")
    message = str(caught.value)
    assert "--pooling pooler with a two-layer classifier head has no stock Hugging Face class" in message
    assert "train with --set lcl.head=linear or with --pooling cls (the default)" in message and "\n" not in message
    # `--save-format hf`: the shard's warning says the same; the run's results stand
    assert save_hf_in_run(method, bundle, data, spec, tmp_path, []) == f"no Hugging Face export (hf/): {message}"
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------- every built-in method

@pytest.mark.parametrize("name", list(METHODS))
def test_every_built_in_method_at_its_default_variant_exports(name, tmp_path):
    from bench.encoders.hf_export import export_hf
    from bench.spec import method_config

    method_class = METHODS.get(name)
    bundle = tiny_bundle()
    config = method_class.Config(**dict(method_config(name, KNOBS.get(name, {}))))
    method = method_class(bundle.model, 3, config, head_dropout=0.1)
    summary = export_hf(method.encoder, method.head, bundle, NAMES, 0.1, 32, tmp_path / "hf", fixture_texts())
    assert summary["class"] == "DebertaV2ForSequenceClassification" and summary["max_logit_gap"] <= 1e-5
    activation = json.loads((tmp_path / "hf" / "config.json").read_text())["pooler_hidden_act"]
    assert activation == ("relu" if name == "lcl" else "linear")


@pytest.mark.slow
def test_every_built_in_method_trained_at_its_defaults_exports_with_the_command(cli, tmp_path, monkeypatch):
    from transformers import pipeline

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    results = tmp_path / "results"
    train = [a if a != "lcl" else ",".join(METHODS) for a in LCL_TRAIN]
    train[train.index("--epochs") + 1] = "1"
    code, _, err = cli("run", *train, "--set", "clld-static.pairs=[[food, sport]]", "--results-dir", results)
    assert code == 0, err
    runs = sorted(p.parent for p in results.glob("*/rows.json"))
    assert sorted(json.loads((r / "spec.json").read_text())["method"] for r in runs) == sorted(METHODS)
    for run_dir in runs:
        target = tmp_path / "exports" / run_dir.name
        code, _, err = cli("export", run_dir, target)
        assert code == 0, f"{run_dir.name}: {err}"
        classify = pipeline("text-classification", model=str(target), device="cpu")
        assert [r["label"] for r in classify(fixture_texts(), truncation=True)] == stored_predictions(run_dir)


# ------------------------------------------------------------------------------------------------ head shapes

@pytest.mark.parametrize("activation,name", [(nn.ReLU(), "relu"), (nn.GELU(), "gelu"), (nn.Tanh(), "tanh"),
                                             (nn.SiLU(), "silu"), (nn.Identity(), "linear")])
def test_a_two_layer_head_exports_with_its_activation(activation, name, tmp_path):
    torch.manual_seed(2)
    head = nn.Sequential(nn.Dropout(0.1), nn.Linear(32, 32), nn.Dropout(0.1), activation, nn.Linear(32, 3),
                         nn.Dropout(0.1))
    written = export(head, tmp_path / "hf")
    assert written["config"]["pooler_hidden_act"] == name and written["max_logit_gap"] <= 1e-5


def test_the_released_head_reads_as_dense_relu_classifier():
    from bench.encoders.hf_heads import head_layers

    head = released_head()
    layers = head_layers(head)
    assert layers.dense is head.dense and layers.classifier is head.out and layers.activation == "relu"
    assert head.training  # read in eval mode on a copy: the head itself is left as it was


class BackwardsHead(nn.Module):
    """classifier(gelu(dense(x))) with the classifier registered first and both Linear(32, 32): the order is
    found by computing, not by the order of the modules."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.classifier = nn.Linear(32, 32)
        self.dense = nn.Linear(32, 32)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(F.gelu(self.dense(pooled)))


def test_which_linear_comes_first_is_found_by_computing(tmp_path):
    from bench.encoders.hf_heads import head_layers

    head = BackwardsHead()
    layers = head_layers(head)
    assert layers.dense is head.dense and layers.classifier is head.classifier and layers.activation == "gelu"
    written = export(head, tmp_path / "hf", names=[f"c{i}" for i in range(32)])
    assert written["config"]["pooler_hidden_act"] == "gelu"


@pytest.mark.parametrize("wrong", ["tanh", "swapped"])
def test_a_wrong_activation_or_swapped_linears_fail_the_logit_check(wrong, tmp_path, monkeypatch):
    from bench.encoders import hf_export
    from bench.encoders.hf_heads import HeadLayers

    head = released_head(num_labels=32)  # square layers: swapped ones load, and the logit check must catch them
    if wrong == "tanh":
        layers = HeadLayers(head.out, head.dense, "tanh")
    else:
        layers = HeadLayers(head.dense, head.out, "relu")
    monkeypatch.setattr(hf_export, "head_layers", lambda _head: layers)
    with pytest.raises(BenchError, match="export check failed"):
        export(head, tmp_path / "hf", names=[f"c{i}" for i in range(32)])
    assert not (tmp_path / "hf").exists()


class CubeHead(nn.Module):
    """Linear, x ** 3, Linear: no activation transformers has."""

    def __init__(self):
        super().__init__()
        self.dense, self.out = nn.Linear(32, 32), nn.Linear(32, 3)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.out(self.dense(pooled) ** 3)


@pytest.mark.parametrize("head,problem", [
    (nn.Sequential(nn.Linear(32, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 3)), "a LayerNorm layer with weights"),
    (nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3)), "3 linear layers"),
    (nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 3)), "are Linear(32, 16) and Linear(16, 3)"),
    (CubeHead(), "does not compute Linear, activation, Linear with an activation transformers has"),
    (nn.Sequential(nn.Dropout(0.1), nn.Linear(32, 3), nn.Tanh()), "does not compute"),
])
def test_a_head_no_stock_class_holds_is_refused_naming_the_problem_and_the_fix(head, problem, tmp_path):
    with pytest.raises(BenchError) as caught:
        export(head, tmp_path / "hf")
    message = str(caught.value)
    assert problem in message and "train with the shared head (dropout + Linear) to export" in message
    assert "\n" not in message and not (tmp_path / "hf").exists()


def test_the_encoders_pooler_with_a_two_layer_head_is_refused_naming_the_settings(tmp_path):
    with pytest.raises(BenchError, match=r"--pooling pooler with a two-layer classifier head .* train with the "
                                         r"shared head \(dropout \+ Linear\) or with --pooling cls"):
        export(released_head(), tmp_path / "hf", pooling="pooler")
    assert not (tmp_path / "hf").exists()
    # the shared head with the encoder's pooler still exports (BertForSequenceClassification)
    written = export(nn.Sequential(nn.Dropout(0.1), nn.Linear(32, 3)), tmp_path / "shared", pooling="pooler")
    assert written["class"] == "BertForSequenceClassification"
