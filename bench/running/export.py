"""A trained run's model in Hugging Face format (`clbench export`, `clbench run --save-format hf`): the folder that
`AutoModelForSequenceClassification.from_pretrained` loads (bench.encoders.hf_export writes and checks it), with
the run's record and metrics in clbench_export.json and a README.md model card (bench.running.model_card)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import torch

import bench
from bench.data.loading import TextData
from bench.encoders.hf_export import check_target, export_hf, pooling_problem
from bench.encoders.models import EncoderBundle
from bench.errors import BenchError
from bench.results import modelfile, runfiles, store
from bench.running.evaluation import data_for_run, load_run_classifier
from bench.running.model_card import CARD, model_card
from bench.running.provenance import git_commit
from bench.spec import RunSpec, regime_label

HF_FOLDER = "hf"  # the run folder's model in Hugging Face format (--save-format hf)
CHECK_TEXTS = 32  # test texts on which an export's logits are checked against the suite's
UNIT = "fraction"  # the metrics of clbench_export.json: 0.81, not 81


def fraction(value: Any) -> float | None:
    """A metric as a float, None when missing or not finite (JSON has no NaN)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def run_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's clean overall metrics per split (accuracy, macro-F1, n) as fractions, from its clean rows."""
    metrics: dict[str, Any] = {}
    for row in rows:
        if row.get("evaluator", "clean") == "clean" and not row.get("label") and \
                row.get("metric") in ("accuracy", "macro_f1"):
            split = metrics.setdefault(str(row["split"]), {})
            split[row["metric"]] = fraction(row.get("value"))
            split["n"] = int(row.get("n", 0))
    order = ("accuracy", "macro_f1", "n")
    return {**{s: {k: metrics[s][k] for k in order if k in metrics[s]} for s in ("test", "validation")
               if s in metrics}, "unit": UNIT}


def export_record(spec: RunSpec, data: TextData, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What clbench_export.json records about the run beside the Hugging Face files: identity, settings, data,
    metrics (fractions) and whether it collapsed, from the run's spec, data and clean rows."""
    import transformers

    first = next((r for r in rows if r.get("evaluator", "clean") == "clean"), {})
    knobs = {k: list(v) if isinstance(v, tuple) else v for k, v in spec.method_config if k != "variant"}
    return {"run_key": spec.key, "method": spec.method, "variant": spec.variant, "dataset": spec.dataset,
            "encoder": spec.encoder, "seed": spec.seed, "knobs": knobs,
            "training": dataclasses.asdict(spec.train),
            "best_epoch": first.get("best_epoch"), "epochs_run": first.get("epochs_run"),
            "data": {"fingerprint": spec.data_fingerprint, "regime": regime_label(spec.train.regime()),
                     "regime_settings": spec.train.regime(), "flipped": int(data.regime.get("flipped", 0) or 0),
                     "sizes": {s: len(getattr(data, s)) for s in ("train", "validation", "test")}},
            "metrics": run_metrics(rows), "collapsed": any(store.is_collapsed_flag(r.get("collapsed")) for r in rows),
            "versions": {"clbench": first.get("clbench_version", bench.__version__),
                         "git_commit": first.get("git_commit", git_commit()),
                         "torch": first.get("torch_version", torch.__version__),
                         "transformers": first.get("transformers_version", transformers.__version__)},
            "exported_with": bench.__version__}


def export_model(method: Any, bundle: EncoderBundle, data: TextData, spec: RunSpec, folder: Path,
                 overwrite: bool = False, rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write a trained method's encoder + head as a Hugging Face folder, checked on the first test texts, with
    its record (`rows`: the run's clean rows, for its metrics) and model card."""
    about = export_record(spec, data, rows or [])
    return export_hf(method.encoder, method.head, bundle, data.label_names, spec.train.head_dropout,
                     spec.train.max_length, folder, data.test.texts[:CHECK_TEXTS], about, overwrite,
                     files={CARD: lambda summary: model_card(summary, str(folder))}, head_fix=shared_head_setting(spec))


def shared_head_setting(spec: RunSpec) -> str:
    """The --set that trains the run's method with the shared head (dropout + Linear), which every pooling
    exports: `head=linear` for a method with a `head` knob (lcl); '' for the others."""
    return f"--set {spec.method}.head=linear" if "head" in dict(spec.method_config) else ""


def save_hf_in_run(method: Any, bundle: EncoderBundle, data: TextData, spec: RunSpec, run_dir: Path,
                   rows: list[dict[str, Any]]) -> str:
    """`--save-format hf` at the end of training: the run's model in `<run>/hf/`, with its clean `rows`' metrics;
    returns '' or, when it cannot be exported, the one-line reason (the run's results stand; the shard reports it
    as a warning)."""
    try:
        export_model(method, bundle, data, spec, run_dir / HF_FOLDER, overwrite=True, rows=rows)
    except BenchError as exc:
        return f"no Hugging Face export ({HF_FOLDER}/): {exc}"
    return ""


def export_run(run_dir: Path, folder: Path, device: torch.device, data_dir: str | None = None,
               overwrite: bool = False) -> dict[str, Any]:
    """Export a finished run's saved model (model.safetensors, or an older model.pt) to `folder`; returns what
    was written."""
    if not store.is_finished(run_dir):
        raise BenchError(f"run {run_dir.name} is not finished; finish it with `clbench run` first")
    if not modelfile.has_model(run_dir) and (run_dir / HF_FOLDER / "config.json").is_file():
        raise BenchError(f"run {run_dir.name} kept its model in Hugging Face format only (--save-format hf): "
                         f"{run_dir / HF_FOLDER} is the export; copy that folder")
    modelfile.require_model(run_dir)
    check_target(Path(folder), overwrite)  # before the (slow) rebuild
    spec = RunSpec.from_json(runfiles.read_json(run_dir, store.SPEC))
    if pooling_problem(spec.train.pooling):
        raise BenchError(f"run {spec.key}: {pooling_problem(spec.train.pooling)}")
    rows = runfiles.read_json(run_dir, store.ROWS)
    data = data_for_run(run_dir, spec, data_dir)
    classifier = load_run_classifier(run_dir, spec, data, device)
    return export_model(classifier.method, classifier.bundle, data, spec, folder, overwrite, rows)
