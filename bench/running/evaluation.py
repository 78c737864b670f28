"""Run evaluators on a trained run (right after training, or later from its saved model) and store what they
return in the run folder: their rows in `evals/<evaluator>-<settings hash>.json`, one file per evaluator and
settings, and their artefacts (per-example files) under their plain names, kept per settings beside the rows.
A stored skip is run again only when what it read (`Evaluator.skip_inputs`) changed."""

from __future__ import annotations

import json
import logging
import math
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

import bench.evaluators  # noqa: F401  (registers the evaluators)
from bench.results import modelfile, runfiles, store
from bench.data.bounds import TextBound, bound_data
from bench.data.cards import Card
from bench.data.loading import FOLDER, TextData, load_dataset, source_data_dir
from bench.data.regimes import apply_regime
from bench.errors import BenchError, SkipEvaluator
from bench.evaluators.base import (Classifier, EvalContext, EvalOptions, Evaluator, as_evaluation, hash_settings,
                                   settings_text)
from bench.evaluators.model import ModelClassifier
from bench.running.provenance import provenance
from bench.registry import DATASETS, EVALUATORS, METHODS
from bench.spec import RunSpec, changed_against_defaults

log = logging.getLogger(__name__)
CACHE = ".cache"


@dataclass
class EvalOutcome:
    """How one evaluator ended on one run: done, cached (stored earlier), skipped (with reason; now, or stored
    and still current) or failed."""

    run_key: str
    evaluator: str
    status: str
    message: str = ""
    seconds: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)


def build_evaluators(names: list[str]) -> list[Evaluator]:
    """An instance of each named evaluator."""
    return [EVALUATORS.get(name)() for name in names]


def data_card(name: str, source: str) -> Card | None:
    """The card of a run's data (its name and source as `TextData` records them); None for a folder given by
    path, which has no card even when its name is a card's."""
    return DATASETS.get(name) if name in DATASETS and not source.startswith(FOLDER) else None


def options_for_data(options: EvalOptions, data: TextData) -> EvalOptions:
    """The options an evaluation of a run on `data` uses: the user's, and for each option left unset the
    dataset card's `eval_defaults` value (`EvalOptions.for_card`), so that a run is scored with the same settings
    whatever else the command that scores it asks for."""
    return options.for_card(data_card(data.name, data.source))


def run_data(run_dir: Path) -> dict[str, Any]:
    """The `data` record of the run's spec.json (empty while it has none)."""
    spec = run_dir / store.SPEC
    return runfiles.read_json(run_dir, store.SPEC).get("data", {}) if spec.is_file() else {}


def options_for_run(options: EvalOptions, run_dir: Path) -> EvalOptions:
    """`options_for_data` for the run in `run_dir`, its data read from its spec.json (the options as given while
    it has none)."""
    data = run_data(run_dir)
    return options.for_card(data_card(str(data.get("name", "")), str(data.get("source", ""))))


def evaluation_path(run_dir: Path, evaluator: Evaluator, options: EvalOptions) -> Path:
    """Where an evaluator's rows for these settings are stored in a run folder."""
    return run_dir / store.EVALS / f"{evaluator.name}-{evaluator.settings_hash(options)}.json"


def evaluation_name(path: Path) -> str:
    """An evaluation file's name inside its run folder (`evals/<evaluator>-<hash>.json`)."""
    return f"{store.EVALS}/{path.name}"


def artefact_folder(run_dir: Path, evaluator: Evaluator, options: EvalOptions) -> Path:
    """Where the per-example files of one evaluation are kept: evals/<evaluator>-<settings hash>/. The files
    under their plain names in the run folder are those of the settings evaluated (or asked for) last."""
    return evaluation_path(run_dir, evaluator, options).with_suffix("")


def write_artefacts(run_dir: Path, artefacts: dict[str, Any]) -> None:
    """Write an evaluation's artefacts into the run folder under their plain names, through the store (every
    name is checked first: one the store cannot write leaves all unwritten)."""
    for name in artefacts:
        runfiles.check_artefact_name(name)
    for name, content in artefacts.items():
        runfiles.write_artefact(run_dir, name, content)


def keep_artefacts(run_dir: Path, evaluator: Evaluator, options: EvalOptions) -> None:
    """Keep this evaluation's files in its own folder, so that evaluating other settings never loses them."""
    folder = artefact_folder(run_dir, evaluator, options)
    for name in evaluator.artefacts(options):
        if (run_dir / name).is_file():  # one not written leaves the evaluation incomplete (see is_done)
            runfiles.link(run_dir, name, f"{folder.relative_to(run_dir).as_posix()}/{name}")


def restore_artefacts(run_dir: Path, evaluator: Evaluator, options: EvalOptions) -> None:
    """Put a stored evaluation's files back under their plain names (they are what was asked for now)."""
    folder = artefact_folder(run_dir, evaluator, options)
    for name in evaluator.artefacts(options):
        runfiles.link(run_dir, f"{folder.relative_to(run_dir).as_posix()}/{name}", name)


def adopt_unkept_files(run_dir: Path, evaluator: Evaluator, names: tuple[str, ...]) -> None:
    """Files under their plain names that no evaluation folder holds (written before files were kept per
    settings) go to the folder of the evaluation that wrote them: the first one stored after the file (an
    evaluation wrote its files, then its rows)."""
    unkept = [run_dir / n for n in names if (run_dir / n).is_file() and (run_dir / n).stat().st_nlink == 1]
    if not unkept:
        return
    stored = sorted((p for p in (run_dir / store.EVALS).glob(f"{evaluator.name}-*.json")
                     if not p.name.endswith(".error.json")
                     and runfiles.read_json(run_dir, f"{store.EVALS}/{p.name}").get("status") == "done"),
                    key=lambda p: p.stat().st_mtime)
    for file in unkept:
        owner = next((p for p in stored if p.stat().st_mtime >= file.stat().st_mtime), None)
        if owner is not None and not (owner.with_suffix("") / file.name).exists():
            runfiles.link(run_dir, file.name, f"{store.EVALS}/{owner.stem}/{file.name}")


def skip_inputs(evaluator: Evaluator, options: EvalOptions, data_name: str, explicit: bool,
                device_type: str) -> Any:
    """`evaluator.skip_inputs` as stored (a JSON value); None when it fails (a stored skip is then retried)."""
    try:
        return json.loads(json.dumps(evaluator.skip_inputs(options, data_name, explicit, device_type),
                                     sort_keys=True, default=str))
    except Exception as exc:  # a plugin's bug must not stop the run: its skips are retried, as before
        log.warning("%s: skip_inputs failed (%s: %s); its stored skips are retried", evaluator.name,
                    exc.__class__.__name__, exc)
        return None


def stored_status(run_dir: Path, evaluator: Evaluator, options: EvalOptions, explicit: bool = True,
                  device_type: str | None = None, data_name: str | None = None) -> str | None:
    """`done` when the evaluation is stored as finished with every file the options ask for, `skipped` when it
    is stored as skipped and what its skip read is unchanged (`Evaluator.skip_inputs`; a skip stored without
    them, or a `device_type` of None, is retried), else None; the options as they apply to the run
    (`options_for_run`), its data name read from its spec.json unless given."""
    options = options_for_run(options, run_dir)
    path = evaluation_path(run_dir, evaluator, options)
    stored = runfiles.read_json(run_dir, evaluation_name(path)) if path.is_file() else {}
    if stored.get("status") == "skipped":
        if device_type is None or stored.get("skip_inputs") is None:
            return None
        name = str(run_data(run_dir).get("name", "")) if data_name is None else data_name
        current = skip_inputs(evaluator, options, name, explicit, device_type)
        return "skipped" if stored["skip_inputs"] == current else None
    if stored.get("status") != "done":
        return None
    names = evaluator.artefacts(options)
    adopt_unkept_files(run_dir, evaluator, names)
    folder = artefact_folder(run_dir, evaluator, options)
    return "done" if all((folder / name).is_file() for name in names) else None


def is_done(run_dir: Path, evaluator: Evaluator, options: EvalOptions, explicit: bool = True,
            device_type: str | None = None) -> bool:
    """Whether the evaluation needs no run: stored as finished with its files, or stored as skipped with the
    same `skip_inputs` (see `stored_status`; `explicit` and `device_type` as the run would have them)."""
    return stored_status(run_dir, evaluator, options, explicit, device_type) is not None


def requested_device_type(device: str) -> str | None:
    """The device type a `--device` value runs on (`auto`: cuda when available, else cpu), cheaply, without
    resolving it; None for a value that does not parse or names a CUDA device where there is none."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        kind = torch.device(device).type
    except (RuntimeError, ValueError):
        return None
    return None if kind == "cuda" and not torch.cuda.is_available() else kind


def evaluate_run(spec: RunSpec, data: TextData, classifier: Classifier | None, run_dir: Path,
                 evaluators: list[Evaluator], options: EvalOptions, device: torch.device, overwrite: bool = False,
                 explicit: bool = True) -> list[EvalOutcome]:
    """Run each evaluator on a trained classifier (None: only evaluators that score no model) unless its rows for these settings, or a skip that still
    holds (`stored_status`), are stored already; the options as they apply to the run's data
    (`options_for_data`), its texts cut to what the model sees (bench.data.bounds: the classifier's bound; with no
    classifier, the run's encoder's tokenizer, `encoder_bound`; a classifier without a bound, e.g. an outside
    model's: the run's max_length in characters)."""
    options = options_for_data(options, data)
    if classifier is None:
        bound = encoder_bound(spec, data)
    else:
        bound = classifier.bound or TextBound(spec.train.max_length)
    data = bound_data(data, bound)
    outcomes = []
    for evaluator in evaluators:
        path = evaluation_path(run_dir, evaluator, options)
        stored = None if overwrite else stored_status(run_dir, evaluator, options, explicit, device.type, data.name)
        if stored == "skipped":  # what skipped it is unchanged: skipped again, for the reason stored
            record = runfiles.read_json(run_dir, evaluation_name(path))
            outcomes.append(EvalOutcome(spec.key, evaluator.name, "skipped", str(record.get("reason", "")),
                                        rows=record.get("rows", [])))
            continue
        if stored == "done":
            restore_artefacts(run_dir, evaluator, options)
            stored_rows = runfiles.read_json(run_dir, evaluation_name(path))["rows"]
            outcomes.append(EvalOutcome(spec.key, evaluator.name, "cached", rows=stored_rows))
            continue
        outcomes.append(run_one(spec, data, classifier, run_dir, evaluator, options, device, path, explicit, bound))
    return outcomes


def run_one(spec: RunSpec, data: TextData, classifier: Classifier, run_dir: Path, evaluator: Evaluator,
            options: EvalOptions, device: torch.device, path: Path, explicit: bool = True,
            bound: TextBound | None = None) -> EvalOutcome:
    """One evaluator on one run; its artefacts, then its rows (or its skip reason) are written atomically,
    failures recorded. `bound`: how the data's texts were cut (the evaluator cuts its own texts alike)."""
    ctx = EvalContext(classifier, data, run_dir, run_dir.parent / CACHE, spec.seed, options, spec.key,
                      run_dir.parent, explicit, bound)
    adopt_unkept_files(run_dir, evaluator, evaluator.artefacts(options))  # about to be replaced: keep them
    started = time.perf_counter()
    status, reason, records = "done", "", []
    try:
        reason = evaluator.skip_reason(ctx) or ""
        if reason:
            status = "skipped"
        else:
            torch.manual_seed(spec.seed)
            evaluation = as_evaluation(evaluator.evaluate(ctx))
            write_artefacts(run_dir, evaluation.artefacts)
            records = evaluation.rows
    except SkipEvaluator as exc:
        status, reason = "skipped", str(exc)
    except BenchError as exc:
        return record_failure(spec, evaluator, path, str(exc), "", started)
    except Exception as exc:  # a bug: keep the traceback beside the run, go on with the next evaluator
        return record_failure(spec, evaluator, path, f"{exc.__class__.__name__}: {exc}", traceback.format_exc(),
                              started)
    seconds = time.perf_counter() - started
    if status == "skipped":
        records = [{"split": "", "metric": "skipped", "value": math.nan, "n": 0, "label": "", "note": reason}]
    settings = evaluator.settings(options)  # may fingerprint files (attack data, vectors): once per evaluation
    meta = {**spec_columns(spec), "eval_hash": hash_settings(settings),
            "eval_settings": settings_text(settings),
            "eval_seconds": round(seconds, 2), **provenance(device),
            "finished_at": datetime.now(timezone.utc).isoformat()}
    rows = [row_for(spec, evaluator.name, record, meta) for record in records]
    if status == "done":
        keep_artefacts(run_dir, evaluator, options)  # before the rows: a stored "done" has its files
    record = {"status": status, "reason": reason, "settings": settings, "rows": rows}
    if status == "skipped":  # what the skip read: it is retried when that changes (stored_status)
        record["skip_inputs"] = skip_inputs(evaluator, options, data.name, explicit, device.type)
    runfiles.write_json(run_dir, evaluation_name(path), record)
    path.with_suffix(".error.json").unlink(missing_ok=True)
    return EvalOutcome(spec.key, evaluator.name, status, reason, seconds, rows)


def record_failure(spec: RunSpec, evaluator: Evaluator, path: Path, reason: str, trace: str,
                   started: float) -> EvalOutcome:
    """Write `<evaluation>.error.json` (no rows) and report the failure."""
    store.write_json(path.with_suffix(".error.json"), {"evaluator": evaluator.name, "reason": reason,
                                                       "traceback": trace,
                                                       "at": datetime.now(timezone.utc).isoformat()})
    return EvalOutcome(spec.key, evaluator.name, "failed", reason, time.perf_counter() - started)


def spec_columns(spec: RunSpec) -> dict[str, Any]:
    """The columns every row of a run carries from its spec, besides its identity (`row_for`): the config hash,
    method version and variant, the data fingerprint, the knob combination (`combo`, equal across seeds) and the
    knobs it changed (`knobs`, JSON), the data regime's settings (train_size, ..., noise_kind) and its draw
    (`data_draw`: per-seed or fixed, TrainConfig.data_draw; `data_seed` and `val_fraction`, which with the seed
    say which training and validation sample the run had: bench.reporting.pairs pairs runs by them)."""
    changed = changed_against_defaults(spec, METHODS)
    return {"config_hash": spec.config_hash, "method_version": spec.method_version, "variant": spec.variant,
            "data_fingerprint": spec.data_fingerprint, "combo": spec.combo,
            "knobs": json.dumps(changed, sort_keys=True, separators=(",", ":"), default=list),
            **spec.train.regime(), "data_draw": spec.train.data_draw, "data_seed": spec.train.data_seed,
            "val_fraction": spec.train.val_fraction}


def row_for(spec: RunSpec, evaluator: str, record: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """A tidy result row: the run's identity, the evaluator's record, then `meta` (settings and their hash,
    timing, provenance), shared by all rows of one evaluation."""
    return {"run_key": spec.key, "method": spec.method, "dataset": spec.dataset, "encoder": spec.encoder,
            "seed": spec.seed, "evaluator": evaluator, "label": "", "note": "", **record, **meta}


# ----------------------------------------------------------------------------------------------- saved runs

def data_for_run(run_dir: Path, spec: RunSpec, data_dir: str | None) -> TextData:
    """Reload the run's dataset (same carve) and check it is the data the run was trained on."""
    recorded = runfiles.read_json(run_dir, store.SPEC).get("data", {})
    source = str(recorded.get("source", ""))
    candidates: list[str | None] = [data_dir] if data_dir else []
    recorded_dir = source_data_dir(source)
    if recorded_dir:
        candidates.append(recorded_dir)
    name = source[len("folder:"):] if source.startswith("folder:") else spec.dataset
    *earlier, last = candidates or [None]
    for candidate in earlier:  # the first folder that has the dataset wins; the last one's error is reported
        try:
            data = load_dataset(name, candidate, spec.train.data_seed, spec.train.val_fraction)
            break
        except BenchError:
            continue
    else:
        data = load_dataset(name, last, spec.train.data_seed, spec.train.val_fraction)
    data.require_fingerprint(spec.data_fingerprint, f"run {spec.key}", "point --data-dir at the original files")
    return apply_regime(data, spec.train.regime(), spec.train.draw(spec.seed))


def encoder_bound(spec: RunSpec, data: TextData) -> TextBound:
    """What the run's model sees of a text, for evaluators that score no model: the run's encoder is built as
    training built it (its tokenizer; the saved weights are not read). An encoder that cannot be built here
    leaves the texts capped at the run's max_length in characters (bench.data.bounds), said in the log."""
    from bench.encoders.models import build_encoder

    try:
        bundle = build_encoder(spec.encoder, data.train.texts, spec.train)
    except BenchError as exc:
        log.warning("%s: texts capped by characters, not cut by the encoder's tokenizer (%s)", spec.key, exc)
        return TextBound(spec.train.max_length)
    return TextBound(spec.train.max_length, bundle.tokenize_words)


def load_run_classifier(run_dir: Path, spec: RunSpec, data: TextData, device: torch.device) -> ModelClassifier:
    """The run's trained classifier, rebuilt from its encoder and saved weights (no retraining)."""
    from bench.data.batching import auto_bucket
    from bench.encoders.models import build_encoder
    from bench.training.setup import autocast_dtype
    from bench.methods.base import Method

    modelfile.require_model(run_dir)  # before the (slow) encoder build
    bundle = build_encoder(spec.encoder, data.train.texts, spec.train)
    method = Method(bundle.model, data.num_labels, head_dropout=spec.train.head_dropout)
    # the head the run trained where it is not the shared one (lcl's released head: Method.run_head)
    run_head = getattr(METHODS.get(spec.method), "run_head", None) if spec.method in METHODS else None
    head = run_head(spec, bundle.model.hidden_size, data.num_labels) if run_head is not None else None
    if head is not None:
        method.head = head
    modelfile.load_model(run_dir, method)
    return ModelClassifier(method, bundle, data.label_names, device,
                           amp_dtype=autocast_dtype(spec.train.precision, device),
                           bucket=auto_bucket(device.type, compiled=False), max_width=spec.train.max_length)
