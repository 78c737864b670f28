"""A finished sweep answered without planning it again (bench.results.sweeps keeps the memo).

`digest` names everything a `clbench run`'s plan and its finished-shard check read besides the files the memo
stats: the command's planning options and shard request, the code (every file of the installed package and the
dataset cards, by content), what the registries hold at run time, the entries of the data folders, the working
folder, the machine (host name, whether it has an NVIDIA device, the environment variables that choose folders
and GPUs) and the Python version. A command the memo cannot answer for certain is never answered from it: an
--overwrite, a --resume (it asks SLURM what runs), the SLURM executor, installed plugins (their code lives
outside the package), a dataset from the Hub (its files live in a cache the memo does not watch). Imports no
torch."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from bench.codeversion import canonical, package_digest
from bench.registry import ENCODERS, EVALUATORS, METHODS, PLUGIN_GROUPS, plugins
from bench.results import runfiles, store, sweeps
from bench.running.options import RunOptions

ENVIRONMENT = ("BENCH_DATA_DIR", "BENCH_RESULTS_DIR", "BENCH_CARDS_DIR", "CUDA_VISIBLE_DEVICES", "HF_HOME",
               "HF_DATASETS_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
PLANNING = ("methods", "datasets", "encoders", "seeds", "overrides", "knobs", "grid", "sample", "grid_seed",
            "regimes", "data_dir", "strict_data", "device")
LOCAL_SOURCES = ("local:", "folder:")


def code_digest() -> str:
    """The code's version by content (bench.codeversion)."""
    return package_digest()


def machine() -> dict[str, Any]:
    """What a finished run's check can depend on outside the run: this machine and its settings."""
    return {"host": platform.node(), "nvidia": os.path.exists("/dev/nvidiactl"), "cwd": os.getcwd(),
            "python": sys.version, "environment": {k: os.environ.get(k) for k in ENVIRONMENT}}


def registered() -> dict[str, dict[str, Any]]:
    """What this process's registries hold (empty in a fresh `clbench`, which reads names from source): each
    entry's module, name, version and key names, so that a method registered or changed at run time (a script,
    a test) is not mistaken for the one the memo planned with."""
    return {registry.kind: {name: [getattr(obj, "__module__", ""), getattr(obj, "__qualname__", repr(obj)),
                                   canonical(getattr(obj, "version", None)),
                                   canonical(getattr(obj, "key_names", None))]
                            for name, obj in registry.items()}
            for registry in (METHODS, ENCODERS, EVALUATORS)}


def data_dir_entries(data_dir: str | None) -> dict[str, list[str]]:
    """The entries of the data folders (--data-dir, $BENCH_DATA_DIR) a dataset name may resolve to (folders
    marked with a trailing /): a folder added or removed there may change what a name means."""
    entries = {}
    for folder in (data_dir, os.environ.get("BENCH_DATA_DIR")):
        path = Path(folder).expanduser() if folder else None
        if path is not None and path.is_dir():
            entries[str(path)] = sorted(e.name + ("/" if e.is_dir() else "") for e in os.scandir(path))
    return entries


def digest(opts: RunOptions, request: dict[str, Any]) -> str | None:
    """The memo's name for this command (see the module docstring); None when it is not to be remembered."""
    if opts.overwrite or opts.resume or opts.executor != "local" or any(plugins(kind) for kind in PLUGIN_GROUPS):
        return None
    planning = {name: canonical(getattr(opts, name)) for name in PLANNING}
    planning["results_dir"] = str(opts.results_dir.resolve())
    state = {"planning": planning, "request": canonical(request), "code": code_digest(), "machine": machine(),
             "data_dirs": data_dir_entries(opts.data_dir), "registered": registered()}
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:32]


def finished_outcomes(opts: RunOptions, name: str | None) -> list[tuple[str, Any]] | None:
    """(method, outcome) of each shard of the remembered sweep `name`, each `skipped` with its rows, when the memo
    still holds (see bench.results.sweeps.recall); else None: plan and check as always."""
    from bench.running.outcome import ShardOutcome

    shards = sweeps.recall(opts.results_dir, name) if name else None
    if shards is None:
        return None
    return [(method, ShardOutcome(key, "skipped", "already finished",
                                  rows=runfiles.read_json(opts.results_dir / key, store.ROWS),
                                  shown=store.evaluation_rows(opts.results_dir / key, shown)))
            for key, method, shown in shards]


def remember_if_tended(name: str | None, opts: RunOptions, shards: list[Any], outcomes: list[Any]) -> bool:
    """After a sweep run here: remember it when every shard ended finished and would now be skipped untouched
    (healthy, nothing to tend, the gathered table current) and every dataset came from local files; whether it
    was remembered."""
    from bench.running.tending import plan_finished

    if name is None or len(outcomes) != len(shards) or any(o.status not in ("done", "skipped") for o in outcomes):
        return False
    if any(any(e.status not in ("done", "skipped") for e in o.evaluations) for o in outcomes):
        return False
    sources = [s.data.source for s in shards]
    if not all(source.startswith(LOCAL_SOURCES) or source.startswith("generated:") for source in sources):
        return False
    results_dir = opts.results_dir
    state = {s.spec.key: sweeps.files_state(results_dir / s.spec.key) for s in shards}  # before the check
    run_dirs = [results_dir / s.spec.key for s in shards]
    shown = {}
    for run_dir in run_dirs:
        folder = runfiles.check_folder(run_dir)
        plan = plan_finished(run_dir, folder.rows, opts.request, opts.device) if folder.healthy else None
        if plan is None or plan.needs_lease:
            return False
        shown[run_dir.name] = plan.shown
    recent = [d for d in run_dirs if store.table_is_stale(results_dir, d)]  # gathered within its time margin
    if recent and not store.table_holds(results_dir, recent):
        return False
    folders = sorted({source.split(":", 1)[1] for source in sources if source.startswith(LOCAL_SOURCES)})
    sweeps.remember(results_dir, name, [(s.spec.key, s.spec.method, shown[s.spec.key]) for s in shards], folders,
                    state)
    return True
