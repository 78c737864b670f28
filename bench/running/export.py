"""A trained run's model in Hugging Face format (`clbench export`, `clbench run --save-format hf`): the folder that
`AutoModelForSequenceClassification.from_pretrained` loads (bench.encoders.hf_export writes and checks it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from bench.data.loading import TextData
from bench.encoders.hf_export import check_target, export_hf, pooling_problem
from bench.encoders.models import EncoderBundle
from bench.errors import BenchError
from bench.results import runfiles, store
from bench.running.evaluation import data_for_run, load_run_classifier
from bench.spec import RunSpec

HF_FOLDER = "hf"  # the run folder's model in Hugging Face format (--save-format hf)
CHECK_TEXTS = 32  # test texts on which an export's logits are checked against the suite's


def export_model(method: Any, bundle: EncoderBundle, data: TextData, spec: RunSpec, folder: Path,
                 overwrite: bool = False) -> dict[str, Any]:
    """Write a trained method's encoder + head as a Hugging Face folder, checked on the first test texts."""
    about = {"run_key": spec.key, "method": spec.method, "dataset": spec.dataset, "encoder": spec.encoder,
             "seed": spec.seed}
    return export_hf(method.encoder, method.head, bundle, data.label_names, spec.train.head_dropout,
                     spec.train.max_length, folder, data.test.texts[:CHECK_TEXTS], about, overwrite)


def save_hf_in_run(method: Any, bundle: EncoderBundle, data: TextData, spec: RunSpec, run_dir: Path) -> str:
    """`--save-format hf` at the end of training: the run's model in `<run>/hf/`; returns '' or, when it cannot be
    exported, the one-line reason (the run's results stand; the shard reports it as a warning)."""
    try:
        export_model(method, bundle, data, spec, run_dir / HF_FOLDER, overwrite=True)
    except BenchError as exc:
        return f"no Hugging Face export ({HF_FOLDER}/): {exc}"
    return ""


def export_run(run_dir: Path, folder: Path, device: torch.device, data_dir: str | None = None,
               overwrite: bool = False) -> dict[str, Any]:
    """Export a finished run's saved model (model.pt) to `folder`; returns what was written."""
    if not store.is_finished(run_dir):
        raise BenchError(f"run {run_dir.name} is not finished; finish it with `clbench run` first")
    if not (run_dir / store.MODEL).is_file() and (run_dir / HF_FOLDER / "config.json").is_file():
        raise BenchError(f"run {run_dir.name} kept its model in Hugging Face format only (--save-format hf): "
                         f"{run_dir / HF_FOLDER} is the export; copy that folder")
    runfiles.require_model(run_dir)
    check_target(Path(folder), overwrite)  # before the (slow) rebuild
    spec = RunSpec.from_json(runfiles.read_json(run_dir, store.SPEC))
    if pooling_problem(spec.train.pooling):
        raise BenchError(f"run {spec.key}: {pooling_problem(spec.train.pooling)}")
    data = data_for_run(run_dir, spec, data_dir)
    classifier = load_run_classifier(run_dir, spec, data, device)
    return export_model(classifier.method, classifier.bundle, data, spec, folder, overwrite)
