"""What a finished run is given when its shard comes round again: whether it needs its lease at all (a requested
evaluation it lacks, debris of a killed process), the tidy-up, and the evaluations it lacks, scored from its saved
model; a run that collapsed is not scored by the evaluators that score the model unless they were asked for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.data.loading import TextData
from bench.errors import BenchError
from bench.evaluators.model import ModelClassifier
from bench.results import lease, manifest, modelfile, repair, runfiles, store
from bench.running.evaluation import (EvalOutcome, build_evaluators, evaluate_run, evaluation_name, evaluation_path,
                                      is_done, load_run_classifier, options_for_run,
                                      requested_device_type)
from bench.spec import RunSpec
from bench.training.setup import resolve_device

if TYPE_CHECKING:
    from bench.running.outcome import ShardRequest

CHECKPOINT = store.CHECKPOINT
COLLAPSED_SKIP = ("not run on a collapsed run (one class predicted whatever the input: not a result); give "
                  "--evaluators to score collapsed runs too")


@dataclass
class Finished:
    """What a finished, whole run needs when its shard comes round again (`plan_finished`): its lease (a requested
    evaluation it lacks or whose stored skip no longer holds, debris of a killed process, a lease), and its stored
    evaluations of the evaluators asked for, whose rows a re-run shows as the first run did (`shown_rows`)."""

    needs_lease: bool
    shown: list[str]  # evals/<evaluator>-<hash>.json names, in request order

    def shown_rows(self, run_dir: Path) -> list[dict[str, Any]]:
        """The rows of the shown evaluations."""
        return store.evaluation_rows(run_dir, self.shown)


def plan_finished(run_dir: Path, rows: list[dict[str, Any]], request: ShardRequest, device: str = "auto"
                  ) -> Finished:
    """The evaluation of a finished run decided in one place: whether it needs its lease, and what it shows (see
    `Finished`); `rows`: its rows, read already."""
    evaluators, _ = split_for_collapse(run_dir.name, rows, request, build_evaluators(list(request.evaluators)))
    options = options_for_run(request.options, run_dir)
    shown = [evaluation_name(path) for e in evaluators if (path := evaluation_path(run_dir, e, options)).is_file()]
    if has_debris(run_dir):
        return Finished(True, shown)
    device_type = requested_device_type(device)
    return Finished(any(not is_done(run_dir, e, request.options, explicit=request.explicit, device_type=device_type)
                        for e in evaluators), shown)


def has_debris(run_dir: Path) -> bool:
    """What a killed process leaves in a run folder (a checkpoint, a lease or its leftovers, temporary files)."""
    evals = run_dir / store.EVALS
    if (run_dir / CHECKPOINT).exists() or any(run_dir.glob(f".{lease.LEASE}*")) or (run_dir / lease.LEASE).exists():
        return True
    return any(run_dir.glob(".*.*.tmp")) or any(evals.glob(".*.*.tmp")) or any(evals.glob("*/.*.*.tmp"))


def unscored_collapse(rows: list[dict[str, Any]], request: ShardRequest) -> bool:
    """Whether a run's model-scoring evaluators are left out because it collapsed and evaluators were not asked
    for by name (`--evaluators`, `all` included, scores collapsed runs too)."""
    return bool(request.evaluators) and not request.asked and \
        any(store.is_collapsed_flag(row.get("collapsed")) for row in rows)


def split_for_collapse(key: str, rows: list[dict[str, Any]], request: ShardRequest, evaluators: list[Any]
                       ) -> tuple[list[Any], list[EvalOutcome]]:
    """The evaluators to run on the run, and the outcomes of those left out as it collapsed (`unscored_collapse`:
    the ones that score the model, each `skipped`, nothing stored: asking later scores it)."""
    if not unscored_collapse(rows, request):
        return evaluators, []
    return ([e for e in evaluators if not e.needs_model],
            [EvalOutcome(key, e.name, "skipped", COLLAPSED_SKIP) for e in evaluators if e.needs_model])


def tidy(run_dir: Path) -> None:
    """Remove what a process killed in this run left behind: temporary files of interrupted writes, the
    resume checkpoint of a finished run (killed between writing the rows and removing it), and old leftovers of
    lease take-overs. Only the holder of the shard's lease writes into its folder, and this runs while holding
    it, so none of these files can be in use."""
    evals = run_dir / store.EVALS
    for folder in (run_dir, evals, *(sorted(p for p in evals.glob("*") if p.is_dir()) if evals.is_dir() else [])):
        store.remove_temporaries(folder)
    lease.remove_graves(run_dir)
    if store.is_finished(run_dir):
        runfiles.forget(run_dir, CHECKPOINT)


def evaluate_finished(spec: RunSpec, data: TextData, run_dir: Path, device_name: str,
                      request: ShardRequest) -> list[EvalOutcome]:
    """The requested evaluations a finished run lacks, computed from its saved model (no retraining); a model
    file that fails verification is moved aside (`repair.model_damaged`) and the evaluations are `no-model`."""
    evaluators, left_out = split_for_collapse(spec.key, runfiles.read_json(run_dir, store.ROWS), request,
                                              build_evaluators(list(request.evaluators)))
    device_type = requested_device_type(device_name)
    missing = [e for e in evaluators
               if not is_done(run_dir, e, request.options, explicit=request.explicit, device_type=device_type)]
    if not missing:
        return left_out
    classifier = None  # evaluators that do not score the model need none
    if any(e.needs_model for e in missing):
        try:
            classifier = saved_classifier(spec, data, run_dir, device_name)
        except BenchError as exc:
            status = "failed" if modelfile.has_model(run_dir) else "no-model"
            return left_out + [EvalOutcome(spec.key, e.name, status, str(exc)) for e in missing]
    return left_out + evaluate_run(spec, data, classifier, run_dir, missing, request.options,
                                   resolve_device(device_name), explicit=request.explicit)


def saved_classifier(spec: RunSpec, data: TextData, run_dir: Path, device_name: str) -> ModelClassifier:
    """The run's classifier from its saved model; a BenchError saying why there is none (never saved, not kept by
    the keep policy, or moved aside as damaged: a model file that fails verification is moved aside now,
    `repair.model_damaged`)."""
    modelfile.require_model(run_dir)  # none: never saved, not kept, or moved aside as damaged (says which)
    try:
        return load_run_classifier(run_dir, spec, data, resolve_device(device_name))
    except manifest.Damaged as damage:
        raise BenchError(repair.model_damaged(run_dir, damage)) from None
