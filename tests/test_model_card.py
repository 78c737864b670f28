"""What an export folder says about its model (bench.running.export, bench.running.model_card): clbench_export.json
with the run's metrics (fractions) and collapsed flag, a README.md model card with valid YAML front matter, a
warning when the exported run collapsed; and what `clbench evaluate --model` prints (the folder's name, a legend
for †)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from bench.results import runfiles, store
from conftest import FIXTURE
from test_hf_export import trained  # noqa: F401  (the module's tiny-bert run, trained with --save-format pt,hf)
from test_outside_model import DATASET, outside_model


def header_and_body(card: str) -> tuple[dict, str]:
    """The card's YAML front matter (parsed) and the prose after it."""
    assert card.startswith("---\n")
    header, _, body = card[4:].partition("\n---\n")
    return yaml.safe_load(header), body


def clean_metric(rows: list[dict], split: str, metric: str) -> tuple[float, int]:
    (row,) = [r for r in rows if (r["split"], r["metric"], r["label"]) == (split, metric, "")]
    return row["value"], row["n"]


def check_metrics(about: dict, rows: list[dict]) -> None:
    """The export record's metrics are the run's clean rows, as fractions."""
    metrics = about["metrics"]
    assert metrics["unit"] == "fraction"
    for split, metric in [("test", "accuracy"), ("test", "macro_f1"), ("validation", "accuracy")]:
        value, n = clean_metric(rows, split, metric)
        assert metrics[split][metric] == value and metrics[split]["n"] == n, (split, metric)
    assert 0 < metrics["test"]["accuracy"] <= 1


def test_the_export_carries_the_runs_metrics_settings_and_a_model_card(trained, cli, tmp_path):  # noqa: F811
    import bench

    rows = runfiles.read_json(trained, store.ROWS)
    spec = runfiles.read_json(trained, store.SPEC)
    target = tmp_path / "exported"
    code, out, err = cli("export", trained.name, target, "--results-dir", trained.parent)
    assert code == 0 and "warning" not in err and "README.md model card" in err
    about = json.loads((target / "clbench_export.json").read_text())
    check_metrics(about, rows)
    assert about["collapsed"] is False and about["run_key"] == trained.name
    assert (about["method"], about["dataset"], about["encoder"], about["seed"]) == ("ce", "tiny", "tiny-bert", 1)
    assert about["data"]["fingerprint"] == spec["data_fingerprint"] and about["data"]["regime"] == ""
    assert about["versions"]["clbench"] == rows[0]["clbench_version"] and about["exported_with"] == bench.__version__
    assert about["training"]["lr"] == 5e-3 and about["training"]["batch_size"] == 8

    header, body = header_and_body((target / "README.md").read_text())
    accuracy, n = clean_metric(rows, "test", "accuracy")
    f1, _ = clean_metric(rows, "test", "macro_f1")
    assert header["library_name"] == "transformers" and {"clbench", "ce"} <= set(header["tags"])
    assert header["datasets"] == ["tiny"]
    (result,) = header["model-index"][0]["results"]
    assert {m["type"]: m["value"] for m in result["metrics"]} == {"accuracy": accuracy, "f1": f1}
    assert f"| test | {n} | {100 * accuracy:.2f} | {100 * f1:.2f} |" in body
    assert "- learning rate: 0.005" in body and "- batch size: 8" in body and "- max length: 32 tokens" in body
    assert "- seed: 1" in body and f"pipeline(\"text-classification\", model={json.dumps(str(target))})" in body
    assert f"clbench {bench.__version__}" in body and "collapsed" not in body.lower()

    # --save-format hf wrote the same record inside the run, before its rows.json existed
    inside = json.loads((trained / "hf" / "clbench_export.json").read_text())
    check_metrics(inside, rows)
    assert inside["collapsed"] is False and inside["best_epoch"] == rows[0]["best_epoch"]
    assert header_and_body((trained / "hf" / "README.md").read_text())[0]["model-index"] == header["model-index"]


def test_a_collapsed_run_exports_with_a_one_line_warning_and_a_card_that_says_so(trained, cli, tmp_path):  # noqa: F811
    results = tmp_path / "results"
    run = results / trained.name
    shutil.copytree(trained, run, ignore=shutil.ignore_patterns("hf", ".*"))
    rows = runfiles.read_json(run, store.ROWS)
    runfiles.write_json(run, store.ROWS, [{**r, "collapsed": 1} for r in rows])  # as the shard flags it
    target = tmp_path / "exported"
    code, _, err = cli("export", run.name, target, "--results-dir", results)
    assert code == 0 and (target / "model.safetensors").is_file()
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and run.name in warnings[0]
    assert "predicts one class whatever the input" in warnings[0] and "not a result" in warnings[0]
    about = json.loads((target / "clbench_export.json").read_text())
    assert about["collapsed"] is True
    check_metrics(about, rows)
    header, body = header_and_body((target / "README.md").read_text())
    assert "model-index" not in header  # a collapsed run posts no result
    assert "Warning: this run collapsed" in body and "not a result" in body


def test_evaluate_model_prints_the_folder_name_and_a_legend_for_the_dagger(cli, tmp_path, results):
    from transformers import BertForSequenceClassification

    folder = outside_model(tmp_path / "my-classifier", DATASET)
    model = BertForSequenceClassification.from_pretrained(folder)
    with torch.no_grad():  # one class whatever the input: a collapsed model, marked †
        model.classifier.bias.copy_(torch.tensor([0.0, 1e4, 0.0]))
    model.save_pretrained(folder)
    code, out, err = cli("evaluate", "--model", folder, "--datasets", FIXTURE, "--evaluators", "repr")
    assert code == 0, err
    table = [line for line in out.splitlines() if "repr" in line]
    assert table and all("†" in line and "my-classifier" in line for line in table)
    assert str(folder.resolve()) not in out
    legend = [line for line in out.splitlines() if line.startswith("note: † =")]
    assert len(legend) == 1 and "predicts one class whatever the input" in legend[0]
    assert out.splitlines().index(legend[0]) > out.splitlines().index(table[-1])  # under the table
    (run_dir,) = [p.parent for p in Path(results).glob("external_*/rows.json")]
    stored = runfiles.read_json(run_dir, store.ROWS)
    assert {r["encoder"] for r in stored} == {str(folder.resolve())} == {r["model_source"] for r in stored}
    assert all(r["collapsed"] == 1 for r in stored)


@pytest.mark.parametrize("collapsed", [False, True])
def test_the_card_is_valid_front_matter_whatever_the_names(collapsed):
    from bench.running.model_card import model_card

    about = {"run_key": "ce_x_s1_abc", "method": "ce", "variant": "", "dataset": "a: b #c", "encoder": "tiny-bert",
             "seed": 1, "knobs": {}, "class": "DebertaV2ForSequenceClassification", "pooling": "cls",
             "labels": ["yes", "no"], "max_length": 32, "collapsed": collapsed, "best_epoch": 2, "epochs_run": 3,
             "training": {"lr": 1e-4, "epochs": 3, "batch_size": 16, "max_length": 32, "weight_decay": 0.01,
                          "warmup_ratio": 0.06, "head_dropout": 0.1, "precision": "auto"},
             "data": {"fingerprint": "f00", "regime": "n=100", "flipped": 0,
                      "sizes": {"train": 100, "validation": 10, "test": 20}},
             "metrics": {"test": {"accuracy": 0.85, "macro_f1": 0.8, "n": 20},
                         "validation": {"accuracy": 0.9, "n": 10}, "unit": "fraction"},
             "versions": {"clbench": "0.1.0"}, "exported_with": "0.1.0"}
    header, body = header_and_body(model_card(about, "out/model"))
    assert header["datasets"] == ["a: b #c"]
    assert ("model-index" in header) is not collapsed
    assert "| test | 20 | 85.00 | 80.00 |" in body and "| validation | 10 | 90.00 | — |" in body
    assert "- data regime: n=100" in body and "- epochs: 3 (ran 3; best epoch by validation accuracy: 2)" in body
    assert ("Warning: this run collapsed" in body) is collapsed
