"""The README.md model card of a Hugging Face export (`clbench export`, `--save-format hf`), as the Hugging Face
Trainer writes one: YAML front matter (library, tags, dataset, metrics, model-index), then prose: what the model
is, how it was trained, on what data, its test results, how to load it, and the suite's version. It is written
from the export record (bench.running.export.export_record), the same one clbench_export.json holds."""

from __future__ import annotations

import json
from typing import Any

import yaml

CARD = "README.md"  # the card's file name in the export folder (what the Hub shows)
WHAT_COLLAPSED = "the model predicts one class whatever the input: it is not a result"


def front_matter(about: dict[str, Any]) -> dict[str, Any]:
    """The card's YAML header; model-index results only for a run that did not collapse."""
    header: dict[str, Any] = {"library_name": "transformers", "pipeline_tag": "text-classification",
                              "tags": ["clbench", about["method"], "text-classification"],
                              "datasets": [about["dataset"]], "metrics": ["accuracy", "f1"]}
    test = about["metrics"].get("test", {})
    if about["collapsed"] or test.get("accuracy") is None:
        return header
    metrics = [{"type": "accuracy", "value": test["accuracy"], "name": "Accuracy"}]
    if test.get("macro_f1") is not None:
        metrics.append({"type": "f1", "value": test["macro_f1"], "name": "Macro-F1", "args": {"average": "macro"}})
    header["model-index"] = [{"name": about["run_key"], "results": [{
        "task": {"type": "text-classification", "name": "Text Classification"},
        "dataset": {"name": about["dataset"], "type": about["dataset"], "split": "test"},
        "metrics": metrics}]}]
    return header


def percent(value: Any) -> str:
    """A fraction in percent with two decimals; '—' when there is none."""
    return "—" if value is None else f"{100 * float(value):.2f}"


def settings_lines(about: dict[str, Any]) -> list[str]:
    """The training settings as list items."""
    train, knobs = about["training"], about.get("knobs", {})
    method = f"`{about['method']}`" + (f" ({', '.join(f'{k}={v}' for k, v in sorted(knobs.items()))})"
                                       if knobs else "")
    ran = about.get("epochs_run")
    epochs = f"{train['epochs']}" + (f" (ran {ran}; best epoch by validation accuracy: {about['best_epoch']})"
                                     if ran and about.get("best_epoch") else "")
    return [f"- method: {method}", f"- encoder: `{about['encoder']}` (pooling: {about['pooling']})",
            f"- learning rate: {train['lr']:g}", f"- epochs: {epochs}", f"- batch size: {train['batch_size']}",
            f"- max length: {train['max_length']} tokens", f"- weight decay: {train['weight_decay']:g}, warmup "
            f"ratio: {train['warmup_ratio']:g}, head dropout: {train['head_dropout']:g}",
            f"- precision: {train['precision']}", f"- seed: {about['seed']}"]


def data_lines(about: dict[str, Any]) -> list[str]:
    """The data section as list items."""
    data = about["data"]
    sizes = data.get("sizes", {})
    regime = data.get("regime") or "the whole training split, labels as given"
    flipped = f" ({data['flipped']} training labels flipped)" if data.get("flipped") else ""
    return [f"- dataset: `{about['dataset']}` (fingerprint `{data['fingerprint']}`), labels: "
            f"{', '.join(about['labels'])}",
            f"- examples: {sizes.get('train', '?')} train, {sizes.get('validation', '?')} validation, "
            f"{sizes.get('test', '?')} test",
            f"- data regime: {regime}{flipped}"]


def results_lines(about: dict[str, Any]) -> list[str]:
    """The results section: a table in percent, with a warning first for a collapsed run."""
    metrics = about["metrics"]
    lines = []
    if about["collapsed"]:
        lines += [f"> **Warning: this run collapsed.** {WHAT_COLLAPSED[0].upper()}{WHAT_COLLAPSED[1:]}. Its "
                  "numbers below describe that failure; do not report them as the method's result.", ""]
    if not metrics.get("test"):
        return lines + ["No test results were recorded for this run."]
    lines += ["| split | examples | accuracy (%) | macro-F1 (%) |", "|---|---|---|---|"]
    for split in ("test", "validation"):
        row = metrics.get(split)
        if row:
            lines.append(f"| {split} | {row.get('n', '?')} | {percent(row.get('accuracy'))} | "
                         f"{percent(row.get('macro_f1'))} |")
    lines += ["", "Test: the dataset's test split, scored once after training. Validation: the best epoch's "
              "accuracy, which chose the saved weights. `clbench_export.json` holds the same numbers as fractions."]
    return lines


def usage_lines(location: str, max_length: int) -> list[str]:
    """How to load the folder, as code."""
    return ["```python", "from transformers import pipeline", "",
            f"classifier = pipeline(\"text-classification\", model={json.dumps(location)})",
            "print(classifier(\"a text to classify\"))", "```", "",
            f"The tokenizer cuts texts at {max_length} tokens, as in training. "
            "`AutoModelForSequenceClassification` and `AutoTokenizer` load the folder as well (no custom code)."]


def model_card(about: dict[str, Any], location: str) -> str:
    """The README.md of an export folder from its record `about`; `location`: the folder, for the loading code."""
    header = yaml.safe_dump(front_matter(about), sort_keys=False, allow_unicode=True)
    versions = about.get("versions", {})
    variant = f", variant {about['variant']}" if about.get("variant") else ""
    lines = ["---", header.rstrip("\n"), "---", "",
             f"<!-- Written by clbench {about['exported_with']} from run {about['run_key']}. -->", "",
             f"# {about['run_key']}", "",
             f"A text classifier for the `{about['dataset']}` dataset: the encoder `{about['encoder']}` fine-tuned "
             f"with the `{about['method']}` method{variant} (seed {about['seed']}) by clbench, a benchmark suite "
             f"for contrastive fine-tuning of text classifiers. It is saved as a stock `{about['class']}` that "
             "predicts what the run's model predicted (the export checks the logits).", ""]
    if about["collapsed"]:
        lines += [f"**Collapsed run:** {WHAT_COLLAPSED}.", ""]
    lines += ["## Training settings", "", *settings_lines(about), "", "## Data", "", *data_lines(about), "",
              "## Results", "", *results_lines(about), "", "## How to use", "",
              *usage_lines(location, about["max_length"]), "", "## Versions", "",
              f"- trained with clbench {versions.get('clbench', '?')} (commit {versions.get('git_commit', '?')}), "
              f"exported with clbench {about['exported_with']}",
              f"- Transformers {versions.get('transformers', '?')}, PyTorch {versions.get('torch', '?')}", ""]
    return "\n".join(lines)
