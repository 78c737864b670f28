"""One shard: train one RunSpec, evaluate it on clean test data, and store its results atomically."""

from __future__ import annotations

import hashlib
import json
import logging
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

import bench.methods  # noqa: F401  (registers the methods)
from bench.results import faults, lease, manifest, modelfile, repair, runfiles, stopping, store
from bench.data.loading import TextData
from bench.encoders.learning_rates import lr_hint
from bench.errors import BenchError
from bench.running.evaluation import EvalOutcome, build_evaluators, evaluate_run, spec_columns
from bench.running.tending import evaluate_finished, plan_finished, split_for_collapse, tidy
from bench.evaluators.model import ModelClassifier
from bench.evaluators.metrics import judge_test
from bench.running.export import save_hf_in_run
from bench.running.outcome import ShardOutcome, ShardRequest  # noqa: F401  (also imported from here)
from bench.running.provenance import provenance
from bench.spec import RunSpec
from bench.training.precision import storage
from bench.training.session import HowToTrain, train
from bench.training.tracking import Tracker, tracked

log = logging.getLogger(__name__)
CHECKPOINT = store.CHECKPOINT


def ids_digest(ids: list[str]) -> str:
    """A short hash of a list of example ids (records which examples formed a split)."""
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:12]


def run_shard(spec: RunSpec, data: TextData, results_dir: Path, device: str = "auto",
              overwrite: bool = False, progress: bool = True, gather: bool = True,
              request: ShardRequest = ShardRequest()) -> ShardOutcome:
    """Run one shard unless it is already finished (then only its missing evaluations) or another live runner
    holds its lease (then it is left to that runner: status `held`); failures are recorded, never raised.

    Everything this writes into the run folder (tidying up, --overwrite's reset, the checkpoint's load and
    removal, results, evaluations) happens while it holds the shard's lease (bench.results.lease); a finished shard
    with nothing to tend is skipped without one. Where a sweep handles SIGTERM and SIGINT (bench.results.stopping)
    one stops the shard at a safe point (`stopped`: its last epoch checkpoint kept, its lease released), and one
    received before it starts cancels it. A results folder that takes no write (full, read-only) fails it with
    that one line (`unwritable`), its earlier files intact."""
    run_dir = results_dir / spec.key
    if stopping.pending():
        return ShardOutcome(spec.key, "cancelled", f"not started: stopped by "
                            f"{stopping.signal_name(stopping.received())}")
    started = time.perf_counter()
    try:
        with stopping.armed():
            return claim_and_run(spec, data, results_dir, device, overwrite, progress, gather, request)
    except stopping.Stopped as stop:
        lease.release_all()  # one it was stopped on its way into the `with` of (the shard's, the table's)
        where = stop.where or ("before training resumed (its last checkpoint is kept)"
                               if (run_dir / CHECKPOINT).exists() else "before its first epoch ended")
        if store.is_finished(run_dir):
            where = "while evaluating (its training results are kept)"
        return ShardOutcome(spec.key, "stopped", f"stopped by {stopping.signal_name(stop.signum)} {where}",
                            time.perf_counter() - started)
    except faults.WriteFailed as exc:  # taking its lease, tending a finished run
        return ShardOutcome(spec.key, "failed", str(exc), time.perf_counter() - started, unwritable=True)
    except lease.LeaseLost:
        raise
    except Exception as exc:  # damage or a bug outside training: this shard fails, the sweep goes on
        lease.release_all()
        log.debug("shard %s failed", spec.key, exc_info=True)
        return ShardOutcome(spec.key, "failed", manifest.short(exc) if not isinstance(exc, BenchError) else str(exc),
                            time.perf_counter() - started)


def claim_and_run(spec: RunSpec, data: TextData, results_dir: Path, device: str, overwrite: bool, progress: bool,
                  gather: bool, request: ShardRequest) -> ShardOutcome:
    """`run_shard` without its handling of stop signals and unwritable folders."""
    run_dir = results_dir / spec.key
    folder = runfiles.FolderCheck(False) if overwrite else runfiles.check_folder(run_dir)  # one call: the folder
    plan = plan_finished(run_dir, folder.rows, request, device) if folder.healthy else None  # one call: its evals
    if plan is not None and not plan.needs_lease:
        outcome = ShardOutcome(spec.key, "skipped", "already finished", rows=folder.rows,
                               shown=plan.shown_rows(run_dir))
        if gather and store.table_is_stale(results_dir, run_dir):
            gather_table(results_dir, outcome)
        return outcome
    try:
        claim = lease.acquire(run_dir)
    except lease.Held as held:
        if folder.healthy:  # its holder evaluates or tidies it: left to it
            return ShardOutcome(spec.key, "skipped", f"already finished; {held.info.holder} holds it (evaluating "
                                f"or tidying up), left to it", rows=folder.rows)
        return ShardOutcome(spec.key, "held", held.info.describe())
    started = time.perf_counter()
    try:
        with claim:  # released when the shard ends, done or failed
            if overwrite:
                store.reset_run(run_dir)
            tidy(run_dir)
            again = runfiles.check_folder(run_dir)  # under the lease now: damage found reading the rows included
            repaired = repair.repair(run_dir, again.problems) if again.finished else repair.Repair()
            if store.is_finished(run_dir):  # finished by another runner before this one got the lease
                outcome = ShardOutcome(spec.key, "skipped", "already finished",
                                       rows=runfiles.read_json(run_dir, store.ROWS), repaired=repaired.notes)
                outcome.evaluations = evaluate_finished(spec, data, run_dir, device, request)
            else:
                try:
                    with tracked(request.report_to, spec.key, spec.to_json(), results_dir) as tracker:
                        rows, evaluations, warning = train_and_evaluate(spec, data, run_dir, device, progress,
                                                                        started, request, tracker)
                except lease.LeaseLost:
                    raise
                except BenchError as exc:
                    return fail(run_dir, spec, str(exc), "", started, isinstance(exc, faults.WriteFailed))
                except Exception as exc:  # a bug or an environment problem: keep the traceback with the run
                    return fail(run_dir, spec, failure_reason(exc, request), traceback.format_exc(), started)
                outcome = ShardOutcome(spec.key, "done", warning, seconds=time.perf_counter() - started, rows=rows,
                                       evaluations=evaluations, repaired=repaired.notes)
    except lease.LeaseLost as exc:  # stalled past the lease timeout: another runner has the shard now
        return ShardOutcome(spec.key, "held", str(exc), time.perf_counter() - started)
    if gather and (outcome.status == "done" or any(e.status in ("done", "skipped") for e in outcome.evaluations)
                   or store.table_is_stale(results_dir, run_dir)):
        gather_table(results_dir, outcome)
    return outcome


def gather_table(results_dir: Path, outcome: ShardOutcome) -> None:
    """Refresh the gathered table after a shard; a folder that takes no write now (turned read-only after the
    shard's files were stored) leaves the shard's outcome as it is, with a warning: its results are safe in its
    run folder and the next gather picks them up."""
    try:
        store.gather(results_dir)
    except faults.WriteFailed as exc:
        warning = f"its results are stored, but the gathered table was not updated ({exc})"
        outcome.message = "; ".join(filter(None, [outcome.message, warning]))
        log.warning("%s: %s", outcome.key, warning)


def failure_reason(exc: Exception, request: ShardRequest) -> str:
    """The one-line reason a shard failed with an unexpected exception; under --deterministic an operation that
    has no deterministic implementation on this device says how to run anyway."""
    reason = f"{exc.__class__.__name__}: {exc}"
    if request.deterministic and "deterministic implementation" in str(exc):
        reason = ("--deterministic: an operation this run needs has no deterministic implementation on this "
                  "device; run without --deterministic (the rows then record deterministic=0). " + reason)
    return reason


def fail(run_dir: Path, spec: RunSpec, reason: str, trace: str, started: float,
         unwritable: bool = False) -> ShardOutcome:
    """Record a failed shard in `error.json` (no result rows; not where the folder takes no write) and report
    it; `unwritable`: it failed as the results folder took no write."""
    try:
        store.write_json(run_dir / store.ERROR, {"key": spec.key, "reason": reason, "traceback": trace,
                                                "at": datetime.now(timezone.utc).isoformat()})
    except faults.WriteFailed:
        pass  # the folder is full or read-only: the outcome still says why
    return ShardOutcome(spec.key, "failed", reason, time.perf_counter() - started, unwritable=unwritable)


def train_and_evaluate(spec: RunSpec, data: TextData, run_dir: Path, device_name: str, progress: bool,
                       started: float, request: ShardRequest = ShardRequest(), tracker: Tracker | None = None
                       ) -> tuple[list[dict[str, Any]], list[EvalOutcome], str]:
    """Train, predict on test, write the run folder, then run the requested evaluators; returns the clean
    result rows, the evaluator outcomes and a warning about the result ("" when there is none). `tracker`
    (--report-to) is given the training losses, each epoch's record and the clean rows."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / store.ERROR).unlink(missing_ok=True)
    runfiles.write_json(run_dir, store.SPEC, {
        **spec.to_json(), "data": data.describe(),
        "split_ids": {s: ids_digest(getattr(data, s).ids) for s in ("train", "validation", "test")},
    })
    keeps = request.save_model and "safetensors" in request.save_format  # the run's model file is written
    how = HowToTrain(compile=request.compile, cuda_graphs=request.cuda_graphs, length_bucket=request.length_bucket,
                     deterministic=request.deterministic, checkpoint_every_s=request.checkpoint_every_s,
                     check_half=keeps and request.model_precision == "auto")
    trained = train(spec, data, run_dir, device_name, how, progress, tracker)
    data, fit, method, trainer = trained.data, trained.fit, trained.method, trained.trainer
    dtype, stored = storage(trained.half_agreement, request.model_precision)
    judged = judge_test(data.test.labels, trained.test_logits, data.label_names, lr_hint(spec.encoder))
    predicted, probabilities, collapsed = judged.predicted, judged.probabilities, judged.collapsed
    wall = time.perf_counter() - started
    names = data.label_names

    best_val_confusion = fit.history[fit.best_epoch - 1]["val_confusion"] if fit.best_epoch else None
    files = {
        store.PREDICTIONS: [{"id": i, "gold": names[g], "predicted": names[p],
                             "probabilities": np.round(pr, 6).tolist()}
                            for i, g, p, pr in zip(data.test.ids, data.test.labels, predicted, probabilities)],
        store.CONFUSION: {"labels": names, "test": judged.confusion, "validation": best_val_confusion},
        store.TRAIN_LOG: {
            "history": fit.history, "best_epoch": fit.best_epoch, "best_val_accuracy": fit.best_val_accuracy,
            "resumed_from_epoch": fit.resumed_from_epoch, "stopped_early": fit.stopped_early,
            "encoder": trained.bundle.info, "phases": {k: round(v, 3) for k, v in trained.phases.items()},
            "compiled": trained.compiled, "cuda_graphs": trained.cuda_graphs,
            "graph_capture_seconds": trainer.capture_seconds(), "length_bucket": trained.bucket,
            "deterministic": trained.deterministic, "collapsed": collapsed, "texts_cut": data.texts_cut,
            "checkpoint_seconds": round(trainer.checkpoint_seconds, 3),
            "model_storage": stored if keeps else {"dtype": None, "why": "not kept"}},
        **({store.METHOD_STATE: fit.method_state} if fit.method_state else {})}

    base = {"run_key": spec.key, "method": spec.method, "dataset": spec.dataset, "encoder": spec.encoder,
            "seed": spec.seed, "evaluator": "clean"}
    meta = {**spec_columns(spec), "train_examples": len(data.train), "flipped": int(data.regime.get("flipped", 0)),
            "best_epoch": fit.best_epoch, "epochs_run": len(fit.history),
            "wall_seconds": round(wall, 2),
            "train_seconds": round(sum(h["seconds"] for h in fit.history), 2),  # all epochs, across resumes
            **{k: round(v, 2) for k, v in trained.phases.items()},  # this process's fixed costs (build, tokenise, test)
            "collapsed": int(bool(collapsed)),  # 1: the model predicts one class whatever the input
            "chance": round(judged.chance, 6),  # the test labels' chance level (bench.results.chance)
            "near_chance": int(judged.near_chance),  # 1: not clearly above chance
            "compiled": trained.compiled, "length_bucket": trained.bucket,  # speed settings: not in the run key
            "cuda_graphs": trained.cuda_graphs,  # "on", or "off: <why>" (bench.training.graphs.graphs_decision)
            "deterministic": int(trained.deterministic),  # 1: deterministic kernels (a CPU, or --deterministic)
            "model_dtype": dtype if keeps else "",  # the stored model's weights (float16: the run's model is rounded)
            "texts_cut": sum(data.texts_cut.values()),  # texts longer than max_length tokens, cut (bench.data.bounds)
            **data.checks,  # leakage, duplicate rows, conflicting labels in the data as loaded (bench.data.checks)
            **fit.method_fields,  # how the method trained (Method.row_fields, e.g. clld-adaptive's ldm_updates)
            **provenance(trained.device), "finished_at": datetime.now(timezone.utc).isoformat()}
    rows = [{**base, "split": "test", **record, **meta} for record in judged.records]
    rows.append({**base, "split": "validation", "metric": "accuracy", "label": "",
                 "value": fit.best_val_accuracy, "n": len(data.validation), **meta})
    warning = "; ".join(filter(None, [trainer.checkpoint_note, collapsed, judged.near_note, fit.method_warning]))
    if request.save_model and "hf" in request.save_format:  # one that cannot be exported: a warning, results stand
        warning = "; ".join(filter(None, [warning, save_hf_in_run(method, trained.bundle, data, spec, run_dir,
                                                                  rows)]))
    save = (lambda: modelfile.save_model(run_dir, method, dtype, stored)) if keeps else None
    runfiles.store_run(run_dir, files, save, rows)
    if not keeps:
        modelfile.drop_model(run_dir, modelfile.HF_ONLY if request.save_model else modelfile.NOT_KEPT)
    if tracker:
        tracker.log_final(rows)
    evaluators, left_out = split_for_collapse(spec.key, rows, request, build_evaluators(list(request.evaluators)))
    classifier = ModelClassifier(method, trained.bundle, names, trained.device, amp_dtype=trainer.amp_dtype,
                                 bucket=trained.bucket, max_width=spec.train.max_length)
    evaluations = evaluate_run(spec, data, classifier, run_dir, evaluators, request.options, trained.device,
                               explicit=request.explicit)
    return rows, left_out + evaluations, warning
