"""Scoring finished runs again with evaluators, from their saved models and without retraining (`bench
evaluate`): which runs can be scored, and scoring them one after another."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Iterator

from bench.data.loading import source_data_dir
from bench.errors import BenchError
from bench.evaluators.base import Evaluator
from bench.results import lease, modelfile, runfiles, store
from bench.running.evaluation import (EvalOutcome, data_for_run, evaluate_run, load_run_classifier,
                                     options_for_data)
from bench.running.outcome import ShardRequest
from bench.spec import RunSpec


def check_scorable(runs: list[Path]) -> None:
    """A BenchError, before anything is scored (a batch is never left half done), for runs that are not
    finished or have no saved model."""
    unfinished = [r.name for r in runs if not store.is_finished(r)]
    if unfinished:
        raise BenchError(f"run(s) not finished: {', '.join(unfinished[:5])}; finish them with `clbench run` first")
    modelless = [r for r in runs if not modelfile.has_model(r)]
    if modelless:
        more = f" and {len(modelless) - 5} more" if len(modelless) > 5 else ""
        why = modelfile.why_gone(modelless[0]) or "never saved (--keep-models none or --no-save-model)"
        keep = modelfile.KEEP if why.startswith(("not kept", "never saved")) else ""
        raise BenchError(f"run(s) without a saved model: {', '.join(r.name for r in modelless[:5])}{more} (the first: "
                         f"{why}); {modelfile.RETRAIN}{keep}, or leave them out")


def rescore(runs: list[Path], evaluators: list[Evaluator], request: ShardRequest, device: Any,
            data_dir: str | None = None, overwrite: bool = False) -> Iterator[tuple[RunSpec, list[EvalOutcome]]]:
    """Score each run with `evaluators` and refresh its results table; yields (run spec, its evaluations) as
    each run is done. Options left unset take the run's dataset card's defaults, as in `clbench run`; named sets
    (contrast, transfer attack) default to the run's own data folder."""
    for run_dir in runs:
        spec = RunSpec.from_json(runfiles.read_json(run_dir, store.SPEC))
        data = data_for_run(run_dir, spec, data_dir)
        options = options_for_data(request.options, data)  # the run's card fills the options left unset
        if not options.data_dir:
            options = dataclasses.replace(options, data_dir=source_data_dir(data.source))
        for evaluator in evaluators:
            evaluator.check(options, data, run_dir.parent)
        classifier = load_run_classifier(run_dir, spec, data, device)
        try:
            claim = lease.acquire(run_dir)  # one writer per run folder (its manifest is read, changed, rewritten)
        except lease.Held as held:
            raise BenchError(f"run {run_dir.name} is busy: {held.info.describe()}; score it once that ends") from None
        with claim:
            done = evaluate_run(spec, data, classifier, run_dir, evaluators, options, device, overwrite,
                                explicit=request.explicit)
        store.gather(run_dir.parent)
        yield spec, done
