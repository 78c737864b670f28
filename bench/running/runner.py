"""Expand methods x datasets x encoders x seeds into shards and run them locally (in-process or in a
pool of worker processes, each pinned to one GPU; `shards_per_gpu` workers share each GPU).
SLURM submission is in bench.running.executors."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import bench.methods  # noqa: F401  (registers the methods)
from bench.results import stopping, store
from bench.data.loading import DataRef, TextData, data_ref, load_dataset
from bench.encoders.models import canonical_encoder, check_encoder
from bench.errors import BenchError
from bench.registry import DATASETS, METHODS
from bench.running import machine_load, provenance
from bench.running.grid import Axes, combinations
from bench.running.machine_load import cpu_count  # also imported from here (benchmarks, tests)
from bench.running.options import RunOptions
from bench.running.shard import CHECKPOINT, ShardOutcome, ShardRequest, run_shard
from bench.running.workers import _init_worker, pass_on, quiet_resource_tracker, worker_gpus  # noqa: F401 (tests)
from bench.spec import RunSpec, TrainConfig, method_config

log = logging.getLogger(__name__)
STOPPED = ("stopped", "cancelled")  # outcomes of a stop signal: said once, at the end (`stop_report`)


@dataclass
class Shard:
    """One unit of work: a spec, the loaded data it trains on, and how a job elsewhere reloads that data."""

    spec: RunSpec
    data: TextData
    source: DataRef | None = None


def train_config(dataset: str, overrides: dict[str, Any]) -> TrainConfig:
    """Settings for a dataset: TrainConfig defaults < the card's `defaults` < explicit overrides."""
    card_defaults = DATASETS.get(dataset).defaults if dataset in DATASETS else {}
    unknown = set(card_defaults) - set(TrainConfig.field_names())
    if unknown:
        raise BenchError(f"dataset card {dataset!r} has unknown defaults {sorted(unknown)}")
    return TrainConfig(**{**card_defaults, **overrides})


def run_spec(method: str, data: TextData, encoder: str, seed: int, cfg: TrainConfig,
             config: tuple[tuple[str, Any], ...]) -> RunSpec:
    """The spec of one shard, stamped with the method's current version."""
    cls = METHODS.get(method)
    return RunSpec(method, data.name, encoder, seed, data.fingerprint, cfg, config, cls.version,
                   tuple(sorted(cls.key_names.items())))


def plan(method_names: list[str], dataset_names: list[str], encoder_names: list[str], seeds: list[int],
         overrides: dict[str, Any], data_dir: str | None,
         method_knobs: dict[str, dict[str, Any]] | None = None, results_dir: Path = Path("results"),
         request: ShardRequest = ShardRequest(), grid: Axes = (), sample: int = 0, grid_seed: int = 0,
         regimes: Sequence[dict[str, Any]] = ({},), strict_data: bool = False) -> list[Shard]:
    """Check every name, load every dataset once (and each of its data regimes), and list the shards in a stable
    order: dataset, regime, method, knob combination, encoder, seed.

    `overrides` are training settings; `method_knobs` maps a method to its changed knobs; `grid` (with `sample`
    and `grid_seed`) adds each method's knob combinations (bench.running.grid), `regimes` the data regimes (few or
    noisy labels: bench.data.regimes); the evaluators in `request` check their options against each dataset
    before anything runs. `strict_data`: leakage in a dataset (bench.data.checks) is an error, not a warning.
    """
    from bench.data.loading import FOLDER
    from bench.data.regimes import apply_regime
    from bench.running.evaluation import build_evaluators

    if not (method_names and dataset_names and encoder_names and seeds):
        raise BenchError("nothing to run: give at least one method, dataset, encoder and seed")
    method_names = [METHODS.canonical(m) for m in method_names]
    method_knobs = method_knobs or {}
    combos = {m: combinations(grid, m, sample, grid_seed) for m in method_names}
    configs = {m: [method_config(m, {**method_knobs.get(m, {}), **knobs}) for _, knobs in combos[m]]
               for m in method_names}
    encoder_names = [canonical_encoder(e) for e in encoder_names]
    for encoder in encoder_names:
        check_encoder(encoder)
    evaluators = build_evaluators(list(request.evaluators))
    loaded: dict[tuple[Any, ...], tuple[TextData, str]] = {}

    def data_for(dataset: str, cfg: TrainConfig, seed: int) -> tuple[TextData, DataRef]:
        carve = (dataset, cfg.data_seed, cfg.val_fraction)
        if carve not in loaded:
            data = load_dataset(dataset, data_dir, cfg.data_seed, cfg.val_fraction, strict=strict_data)
            found = data.source[len(FOLDER):] if data.source.startswith(FOLDER) else dataset  # e.g. DIR/NAME
            loaded[carve] = (data, found)
            for evaluator in evaluators:
                evaluator.check(request.options, data, results_dir)
        data, found = loaded[carve]
        draw = cfg.draw(seed)  # per-seed draws: one sample per seed, shared by every method (paired)
        key = (*carve, tuple(sorted(cfg.regime().items())), draw)
        if key not in loaded:
            loaded[key] = (apply_regime(data, cfg.regime(), draw), found)
        return loaded[key][0], data_ref(found, data_dir, cfg.data_seed, cfg.val_fraction, cfg.regime(), draw)

    shards = []
    for dataset in dataset_names:
        for regime in regimes:
            for method in method_names:
                method_class = METHODS.get(method)
                for (train, _), config in zip(combos[method], configs[method]):
                    cfg = train_config(dataset, {**overrides, **regime, **train})
                    labels = data_for(dataset, cfg, seeds[0])[0].label_names  # the same for every draw
                    method_class.validate(method_class.Config(**dict(config)), labels, results_dir)
                    for encoder in encoder_names:
                        for seed in seeds:
                            data, source = data_for(dataset, cfg, seed)
                            shards.append(Shard(run_spec(method, data, encoder, seed, cfg, config), data, source))
    keys = [s.spec.key for s in shards]
    if len(set(keys)) != len(keys):
        raise BenchError("two requested shards have the same key (a name given twice?)")
    return shards


def in_process(jobs: int, shards_per_gpu: int, shards: int) -> bool:
    """Whether `execute` runs the shards in this process (else in a pool of worker processes)."""
    return max(jobs, shards_per_gpu) <= 1 or shards <= 1


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Any:
    """This process's torch threads set to `threads` for the block (None: unchanged)."""
    if not threads:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _run_in_worker(shard: Shard, results_dir: Path, device: str, overwrite: bool,
                   request: ShardRequest) -> ShardOutcome:
    return run_shard(shard.spec, shard.data, results_dir, device, overwrite, progress=False, request=request)


def execute(shards: list[Shard], results_dir: Path, jobs: int = 1, device: str = "auto",
            overwrite: bool = False, progress: bool = True,
            report: Callable[[int, int, ShardOutcome], None] | None = None,
            request: ShardRequest = ShardRequest(), shards_per_gpu: int = 1,
            handle_signals: bool = False, threads: int | None = None) -> list[ShardOutcome]:
    """Run shards (skipping finished ones unless `overwrite`); a failed shard never stops the others, except one
    that failed as the results folder takes no write (full, read-only): the shards after it are not run (failed,
    `not run: <why>`), as each would fail alike.

    Several workers (`jobs`, or `shards_per_gpu` per GPU) run in spawned processes, each pinned to one GPU.
    Every shard is claimed by `run_shard` itself (bench.results.lease), in whichever process runs it -- here, a pool
    worker or a SLURM array task (bench.running.executors calls this) -- so a shard that another live runner holds on
    the same results folder is left to it (outcome `held`), and one whose holder died is taken over.

    `handle_signals` (a local `clbench run`; never under SLURM, where submitit owns the signals): a SIGTERM or
    SIGINT stops the running shards at a safe point (bench.results.stopping; outcomes `stopped`, not reported)
    and starts no new one; `stop_report` then says so.

    `threads`: torch threads per shard (None: this process's own when it runs the shards, the cores shared among
    the workers of a pool).
    """
    with stopping.handled() if handle_signals else contextlib.nullcontext():
        return _execute(shards, results_dir, jobs, device, overwrite, progress, report or (lambda i, n, o: None),
                        request, shards_per_gpu, handle_signals, threads)


def _execute(shards: list[Shard], results_dir: Path, jobs: int, device: str, overwrite: bool, progress: bool,
             report: Callable[[int, int, ShardOutcome], None], request: ShardRequest, shards_per_gpu: int,
             handle_signals: bool, threads: int | None = None) -> list[ShardOutcome]:
    outcomes: list[ShardOutcome] = []
    if in_process(jobs, shards_per_gpu, len(shards)):
        unwritable = ""
        with torch_threads(threads):
            for i, shard in enumerate(shards, start=1):
                if stopping.pending():
                    break
                outcome = not_run(shard, unwritable) if unwritable else \
                    run_shard(shard.spec, shard.data, results_dir, device, overwrite, progress, request=request)
                unwritable = unwritable or (outcome.message if outcome.unwritable else "")
                outcomes.append(outcome)
                if outcome.status not in STOPPED:
                    report(i, len(shards), outcome)
        return outcomes
    import torch

    quiet_resource_tracker()
    context = multiprocessing.get_context("spawn")
    gpu_count = torch.cuda.device_count() if device in ("auto", "cuda") else 0
    slots = worker_gpus(jobs, gpu_count, shards_per_gpu)
    workers = min(len(slots), len(shards))
    gpu_ids = None
    if gpu_count:
        gpu_ids = context.Manager().Queue()
        for gpu in slots[:workers]:
            gpu_ids.put(gpu)
    threads = threads or max(1, cpu_count() // workers)
    worker_device = "cuda" if gpu_count else device
    pending, done_count = list(shards), 0
    unwritable = ""
    for attempt in range(2):  # a pool broken by a dead worker is replaced once; the retry resumes checkpoints
        broken: list[Shard] = []
        with ProcessPoolExecutor(max_workers=min(workers, len(pending)), mp_context=context,
                                 initializer=_init_worker,
                                 initargs=(gpu_ids, threads, os.getpid(), handle_signals,
                                           provenance.start_load(), provenance.threads_adapted())) as pool:
            futures = {pool.submit(_run_in_worker, shard, results_dir, worker_device,
                                   retry_overwrite(shard, results_dir, overwrite, attempt), request): shard
                       for shard in pending}
            stopping.forward_to(lambda signum: pass_on(pool, signum))
            if stopping.pending():  # came while the pool started
                pass_on(pool, stopping.received())
            cancelled = False
            for future in as_completed(futures):
                if future.cancelled():  # after a stop or an unwritable folder
                    outcome = not_run(futures[future], unwritable) if unwritable else None
                else:
                    try:
                        outcome = future.result()
                    except Exception as exc:  # the worker process itself died (killed, out of memory)
                        if stopping.pending():  # killed by the stop signal before it could handle it
                            outcome = ShardOutcome(futures[future].spec.key, "cancelled", f"worker ended: {exc}")
                        elif attempt == 0:
                            broken.append(futures[future])
                            continue
                        else:
                            outcome = ShardOutcome(futures[future].spec.key, "failed", f"worker died: {exc}")
                if outcome is not None and outcome.unwritable and not unwritable:
                    unwritable = outcome.message
                if (stopping.pending() or unwritable) and not cancelled:
                    for other in futures:
                        other.cancel()  # those no worker has taken yet
                    cancelled = True
                if outcome is None:
                    continue
                done_count += 1
                outcomes.append(outcome)
                if outcome.status not in STOPPED:
                    report(done_count, len(shards), outcome)
            stopping.forward_to(None)
        if not broken:
            break
        log.warning("a worker process died; %d shard(s) go to a fresh pool", len(broken))
        pending = broken
        if gpu_ids is not None:
            for gpu in slots[:min(workers, len(pending))]:
                gpu_ids.put(gpu)
    return outcomes


def not_run(shard: Shard, reason: str) -> ShardOutcome:
    """A shard not started because the results folder took no write (`reason`): failed, as each would be."""
    return ShardOutcome(shard.spec.key, "failed", f"not run: {reason}")


def stop_report(outcomes: list[ShardOutcome], planned: int) -> tuple[int, str] | None:
    """After a sweep a SIGTERM or SIGINT stopped: its exit code (128 + the signal: 143, 130) and one line saying
    where each running shard stopped and how to go on; None when no stop came, or came once every shard ended."""
    signum = stopping.received()
    stopped = [o for o in outcomes if o.status == "stopped"]
    ended = [o for o in outcomes if o.status not in STOPPED]
    if not signum or (not stopped and len(ended) >= planned):
        return None
    name = stopping.signal_name(signum)
    left = planned - len(ended) - len(stopped)
    unstarted = f" ({left} more shard(s) not started)" if left else ""
    go_on = "`clbench run --resume` with the same arguments continues"
    if len(stopped) == 1:
        where = stopped[0].message.removeprefix(f"stopped by {name} ")
        line = f"stopped by {name} {where} ({stopped[0].key}){unstarted}; {go_on} it"
    elif stopped:
        parts = ", ".join(f"{o.key} {o.message.removeprefix(f'stopped by {name} ')}" for o in stopped)
        line = f"stopped by {name}: {parts}{unstarted}; {go_on} them"
    else:
        line = f"stopped by {name} between shards ({left} of {planned} not run); {go_on} the sweep"
    return stopping.exit_code(), f"clbench: {line}"


def retry_overwrite(shard: Shard, results_dir: Path, overwrite: bool, attempt: int) -> bool:
    """Whether a shard is recomputed from scratch: as asked on the first attempt; on a retry never when it had
    started in this sweep (its checkpoint resumes it, or its rows are already there)."""
    if attempt == 0 or not overwrite:
        return overwrite
    run_dir = results_dir / shard.spec.key
    return not ((run_dir / CHECKPOINT).exists() or store.is_finished(run_dir))


def plan_sweep(options: RunOptions) -> list[Shard]:
    """`plan` for a checked `clbench run` (its request built)."""
    return plan(list(options.methods), list(options.datasets), list(options.encoders), list(options.seeds),
                options.overrides, options.data_dir, options.knobs, options.results_dir,
                options.request or ShardRequest(), options.grid, options.sample, options.grid_seed, options.regimes,
                strict_data=options.strict_data)


def execute_sweep(shards: list[Shard], options: RunOptions,
                  report: Callable[[int, int, ShardOutcome], None] | None = None,
                  handle_signals: bool = False) -> list[ShardOutcome]:
    """`execute` the planned shards of a checked `clbench run` here, as its options say (`handle_signals`: the
    command's SIGTERM and SIGINT stop it at a safe point, see `execute`)."""
    return execute(shards, options.results_dir, options.jobs, options.device, options.overwrite, options.progress,
                   report, options.request or ShardRequest(), shards_per_gpu=options.shards_per_gpu,
                   handle_signals=handle_signals, threads=busy_threads(shards, options))


def busy_threads(shards: list[Shard], options: RunOptions) -> int | None:
    """The torch threads per worker on a busy machine (bench.running.machine_load): the advice is said in one line,
    but the threads change only with `--adapt-threads` (a run's digits must not depend on the load); None (as
    usual) on a GPU, with OMP_NUM_THREADS set, with nothing to train, on an idle machine or without the flag.
    Records the load, measured before training, and whether the threads were changed, for the rows."""
    import torch

    load = machine_load.load_average()
    provenance.mark_start(load)
    on_cpu = options.device == "cpu" or (options.device == "auto" and not torch.cuda.is_available())
    to_train = options.overwrite or not all(store.is_finished(options.results_dir / s.spec.key) for s in shards)
    if not (on_cpu and to_train) or load is None or machine_load.explicit_threads():
        return None
    jobs = max(options.jobs, options.shards_per_gpu)
    workers = 1 if in_process(options.jobs, options.shards_per_gpu, len(shards)) else min(jobs, len(shards))
    threads = torch.get_num_threads() if workers == 1 else max(1, cpu_count() // workers)
    advice = machine_load.advise(threads, workers, load)
    adapt = options.adapt_threads
    if advice.busy:
        from tqdm import tqdm

        tqdm.write(advice.line(adapt), file=sys.stderr)  # above the sweep's bar, when it has one
    if not adapt or advice.recommended == threads:
        return None
    provenance.mark_start(load, threads_adapted=True)
    return advice.recommended
