"""Scoring a model trained outside this suite (`clbench evaluate --model`): one results run folder per dataset, with
method `external`, clean rows like a trained run's and the evaluators' rows beside them, so that `clbench report`
shows it next to the suite's runs. The model's source and the SHA-256 of its files are recorded in every clean row
and in spec.json, and are part of the run key (other weights, other run)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from sklearn.metrics import confusion_matrix

from bench.data.loading import TextData, load_dataset, source_data_dir
from bench.evaluators.metrics import classification_records, collapse_note
from bench.results import runfiles, store
from bench.running.evaluation import (EvalOutcome, build_evaluators, evaluate_run, options_for_data,
                                     spec_columns)
from bench.running.outside import (OutsideClassifier, fingerprint, label_columns, load_outside, max_length_of,
                                   model_labels)
from bench.running.provenance import provenance
from bench.running.outcome import ShardRequest
from bench.spec import RunSpec, TrainConfig

EXTERNAL = "external"  # the method name of rows scored from an outside model


@dataclasses.dataclass
class ExternalResult:
    """One dataset scored: the run's spec and folder, its clean rows and the evaluators' outcomes."""

    spec: RunSpec
    run_dir: Path
    rows: list[dict[str, Any]]
    evaluations: list[EvalOutcome]


def shown_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` as tables print them: an outside model's encoder (its source: a local folder's absolute path, kept
    in the stored rows and in `model_source`) shown as the folder's name; a Hub id as it is."""
    def shown(encoder: Any) -> Any:
        return Path(encoder).name or encoder if isinstance(encoder, str) and Path(encoder).is_absolute() else encoder

    return [{**r, "encoder": shown(r.get("encoder"))} if r.get("method") == EXTERNAL else r for r in rows]


def external_spec(source: str, data: TextData, max_length: int, files: dict[str, str],
                  columns: list[int]) -> RunSpec:
    """The spec of an outside model scored on `data`: its source as the encoder, its files' hashes and the label
    mapping as the method's settings (so that other weights or another mapping make another run)."""
    config = (("config_sha256", files["config_sha256"][:16]), ("label_columns", tuple(columns)),
              ("weights_sha256", files["weights_sha256"][:16]))
    return RunSpec(EXTERNAL, data.name, source, 0, data.fingerprint, TrainConfig(max_length=max_length), config)


def clean_rows(spec: RunSpec, data: TextData, classifier: OutsideClassifier, device: Any, run_dir: Path,
               about: dict[str, Any]) -> list[dict[str, Any]]:
    """Test metrics and validation accuracy of the outside model, as a trained run's clean rows (with `about`:
    the model's source and hashes), its test predictions and confusion matrix written beside them."""
    names = data.label_names
    probabilities = classifier.predict_proba(data.test.texts)
    predicted = probabilities.argmax(1)
    validation = classifier.predict(data.validation.texts) if len(data.validation) else np.zeros(0, dtype=int)
    collapsed = collapse_note(data.test.labels, predicted, names)
    runfiles.write_jsonl_gz(run_dir, store.PREDICTIONS, [
        {"id": i, "gold": names[g], "predicted": names[p], "probabilities": np.round(pr, 6).tolist()}
        for i, g, p, pr in zip(data.test.ids, data.test.labels, predicted, probabilities)])
    runfiles.write_json(run_dir, store.CONFUSION, {
        "labels": names, "validation": None,
        "test": confusion_matrix(data.test.labels, predicted, labels=range(len(names))).tolist()})
    base = {"run_key": spec.key, "method": spec.method, "dataset": spec.dataset, "encoder": spec.encoder,
            "seed": spec.seed, "evaluator": "clean"}
    meta = {**spec_columns(spec), "train_examples": 0, "collapsed": int(bool(collapsed)),
            "model_source": about["model"], "config_sha256": about["config_sha256"],
            "weights_sha256": about["weights_sha256"], **provenance(device),
            "finished_at": datetime.now(timezone.utc).isoformat()}
    rows = [{**base, "split": "test", **record, **meta}
            for record in classification_records(data.test.labels, predicted, names)]
    accuracy = float(np.mean(validation == data.validation.labels)) if len(data.validation) else float("nan")
    rows.append({**base, "split": "validation", "metric": "accuracy", "label": "", "value": accuracy,
                 "n": len(data.validation), **meta})
    return rows


def evaluate_external(source: str, datasets: list[str], request: ShardRequest, device: Any, results_dir: Path,
                      data_dir: str | None = None, label_map: str | None = None,
                      overwrite: bool = False) -> Iterator[ExternalResult]:
    """Score the outside model `source` on each dataset (clean rows, then `request`'s evaluators) into a run
    folder under `results_dir`; yields each dataset's result as it is done. Every dataset and its label mapping
    is checked before anything is scored."""
    model, tokenizer, name = load_outside(source, device)
    files = fingerprint(name)
    max_length = max_length_of(model, tokenizer)
    evaluators = build_evaluators(list(request.evaluators))
    planned = []
    for dataset in datasets:
        data = load_dataset(dataset, data_dir)
        columns = label_columns(data.label_names, model_labels(model), label_map)
        options = options_for_data(request.options, data)
        if not options.data_dir:  # named sets (contrast) are looked for beside the dataset
            options = dataclasses.replace(options, data_dir=source_data_dir(data.source))
        for evaluator in evaluators:
            evaluator.check(options, data, results_dir)
        planned.append((data, columns, options))
    for data, columns, options in planned:
        spec = external_spec(name, data, max_length, files, columns)
        run_dir = results_dir / spec.key
        classifier = OutsideClassifier(model, tokenizer, columns, data.label_names, device, max_length)
        about = {"model": name, **files, "label_columns": columns, "model_labels": model_labels(model),
                 "max_length": max_length}
        if overwrite or not store.is_finished(run_dir):
            runfiles.write_json(run_dir, store.SPEC, {**spec.to_json(), "data": data.describe(), "external": about})
            runfiles.write_json(run_dir, store.ROWS, clean_rows(spec, data, classifier, device, run_dir, about))
        rows = runfiles.read_json(run_dir, store.ROWS)
        evaluations = evaluate_run(spec, data, classifier, run_dir, evaluators, options, device, overwrite,
                                   explicit=request.explicit)
        store.gather(results_dir)
        yield ExternalResult(spec, run_dir, rows, evaluations)
