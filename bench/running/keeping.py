"""Which trained models a sweep keeps (`--keep-models`, as the Hugging Face Trainer's `save_total_limit` bounds
its checkpoints): `all` (the default) keeps every run's model; `none` keeps none (each shard's evaluators score the
model while it is in memory; bench.running.shard); `best` keeps, per method x dataset (with its data regime) x
encoder, the run with the best clean validation accuracy (ties: the lowest seed), and drops the others' once the
whole sweep finished and its evaluators ran. A dropped model is noted in its run's manifest
(bench.results.modelfile), so `clbench evaluate` says why it is gone and how to retrain the run; its results,
predictions and evaluations stay.

Models are large: MiniLM 91 MB in float32, bert-base 440 MB; `model_bytes` estimates a sweep's before it starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.results import lease, modelfile
from bench.spec import REGIME_FIELDS

BEST = "best"
# parameters of the built-in encoders (bench.encoders.models), for the disk estimate before a sweep
PARAMETERS = {"minilm": 22_700_000, "bert-base": 109_500_000, "bert-base-random": 109_500_000,
              "roberta-base": 124_600_000, "tiny-bert": 4_400_000}
LARGE_BYTES = 10 * 1024 ** 3  # a sweep whose models would take more than this is told so before it starts


def group_of(row: dict[str, Any]) -> tuple:
    """A run's keep group: method, dataset, encoder and data regime (the task its runs are seeds of)."""
    return (row.get("method"), row.get("dataset"), row.get("encoder"),
            *(str(row.get(f, "")) for f in REGIME_FIELDS))


def validation_accuracy(rows: list[dict[str, Any]]) -> float:
    """A run's clean validation accuracy from its rows (-1 when it has none)."""
    return next((float(r["value"]) for r in rows if r.get("evaluator") == "clean" and r.get("split") == "validation"
                 and r.get("metric") == "accuracy" and not r.get("label")), -1.0)


def ranked_per_group(outcomes: list[Any]) -> dict[tuple, list[str]]:
    """Per keep group of the finished shards (`outcomes` with rows): their run keys, best first (clean validation
    accuracy, then the lowest seed)."""
    groups: dict[tuple, list[tuple[float, int, str]]] = {}
    for outcome in outcomes:
        clean = [r for r in outcome.rows if r.get("evaluator") == "clean"]
        if clean:
            groups.setdefault(group_of(clean[0]), []).append(
                (-validation_accuracy(clean), int(clean[0].get("seed", 0)), outcome.key))
    return {group: [key for _, _, key in sorted(runs)] for group, runs in groups.items()}


def apply_keep_policy(results_dir: Path, outcomes: list[Any], policy: str) -> str:
    """Under `best`, drop the models of every run but its group's best once no shard of the sweep is unfinished;
    the line that says what was kept and freed ("" when nothing was to do)."""
    if policy != BEST:
        return ""
    unfinished = [o for o in outcomes if o.status not in ("done", "skipped")]
    if unfinished:
        return (f"clbench: --keep-models best keeps every model until the sweep's {len(unfinished)} unfinished "
                "shard(s) end (the best run of a group may be among them); run the sweep again then")
    best = ranked_per_group(outcomes)
    dropped, freed, busy = 0, 0, 0
    for ranked in best.values():  # the best run that still has its model is kept (an earlier sweep may have
        with_model = [key for key in ranked if modelfile.has_model(Path(results_dir) / key)]  # dropped another's)
        kept = with_model[0] if with_model else ""
        for key in with_model[1:]:
            run_dir = Path(results_dir) / key
            try:
                claim = lease.acquire(run_dir)
            except lease.Held:  # another runner is at this run (e.g. retraining it): leave its model alone
                busy += 1
                continue
            with claim:
                freed += modelfile.drop_model(run_dir, f"not kept: --keep-models best kept {kept}, the best of its "
                                                       "method x dataset x encoder on validation")
            dropped += 1
    if not dropped and not busy:
        return ""
    return (f"clbench: --keep-models best: kept the best model of each of {len(best)} method x dataset x encoder "
            f"group(s), dropped {dropped} other(s) ({freed / 1024 ** 3:.2f} GB freed)"
            + (f"; {busy} busy run(s) left as they were" if busy else ""))


def model_bytes(encoders: list[str], runs_per_encoder: dict[str, int]) -> int:
    """The disk the runs' models take in float32 (an upper bound: `auto` precision often halves it); encoders of
    unknown size count as bert-base."""
    return sum(4 * PARAMETERS.get(e, PARAMETERS["bert-base"]) * runs_per_encoder.get(e, 0) for e in encoders)


def disk_line(specs: list[Any], policy: str) -> str:
    """Before a sweep of these run specs: one line with the disk its models will take under `policy`, when that is
    large ("" else)."""
    runs_per_encoder: dict[str, int] = {}
    for spec in specs:
        runs_per_encoder[spec.encoder] = runs_per_encoder.get(spec.encoder, 0) + 1
    groups = len({(s.method, s.dataset, s.encoder, *(getattr(s.train, f) for f in REGIME_FIELDS)) for s in specs})
    total = model_bytes(list(runs_per_encoder), runs_per_encoder)
    if total < LARGE_BYTES or policy == "none":
        return ""
    runs = sum(runs_per_encoder.values())
    kept = total * (groups / runs if policy == BEST else 1.0)
    return (f"clbench: the models of these {runs} runs take up to {kept / 1024 ** 3:.0f} GB under --keep-models "
            f"{policy} (float32; float16 where it predicts the same: about half)"
            + (f"; --keep-models best would keep {groups} of them ({total * groups / runs / 1024 ** 3:.0f} GB), "
               "none keeps none" if policy == "all" else ""))
