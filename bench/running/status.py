"""`clbench status`: the state of every shard under a results folder, from its files (its lease says which runner
trains it now, see bench.results.lease) and, for shards submitted to SLURM, the scheduler's job state (sacct, parsed by
submitit). Light imports only (no torch)."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bench.results import lease, manifest, repair, runfiles, store
from bench.errors import BenchError

SUBMISSIONS = ".slurm"  # under the results folder: one submitit folder per submission
SUBMITTED = "submitted.json"  # in each submission folder: shard key -> job
CHECKPOINT = store.CHECKPOINT
RUN_FILES = (store.ROWS, store.SPEC, store.ERROR, CHECKPOINT, lease.LEASE)
STATES = ("done", "evaluating", "damaged", "running", "pending", "failed", "cancelled", "interrupted", "unknown")
ENDED = ("done", "damaged", "failed", "cancelled", "interrupted")  # no runner will touch these shards again by itself
QUEUED = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
RUNNING = {"RUNNING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "RESIZING", "STOPPED"}
FAILED = {"FAILED", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL"}
UNREACHABLE = "scheduler unreachable"
COLLAPSED = "collapsed: the model predicts one class whatever the input; not a result (retrain it with another --lr)"
FRESH_SECONDS = 120.0  # a job submitted this recently that sacct does not know yet is pending, not unknown

StateQuery = Callable[[list[str]], "dict[str, str] | None"]


@dataclass
class ShardStatus:
    """One shard's state (one of STATES), why, its scheduler job when it was submitted, and whether a done shard
    collapsed (its rows carry `collapsed` = 1: done, but not a result)."""

    key: str
    state: str
    reason: str = ""
    job: str = ""
    collapsed: bool = False
    setting: str = ""  # the data regime and knobs that tell this shard from its siblings (`setting_of`)


def submissions(results_dir: Path) -> dict[str, dict[str, Any]]:
    """The latest submission of each shard key: its job id plus the record's folder, time and cluster."""
    latest: dict[str, dict[str, Any]] = {}
    for path in sorted((results_dir / SUBMISSIONS).glob(f"*/{SUBMITTED}")):
        try:
            record = store.read_json(path)
        except (OSError, ValueError):
            continue  # a record being written or damaged: the others still count
        logs = {job["job_id"]: job.get("stdout", "") for job in record.get("jobs", [])}
        for key, entry in record.get("shards", {}).items():
            entry = {**entry, "folder": record.get("folder", str(path.parent)), "cluster": record.get("cluster"),
                     "submitted_ts": float(record.get("submitted_ts", path.stat().st_mtime)),
                     "stdout": logs.get(entry["job_id"], "")}
            if key not in latest or entry["submitted_ts"] >= latest[key]["submitted_ts"]:
                latest[key] = entry
    return latest


def query_states(job_ids: list[str]) -> dict[str, str] | None:
    """SLURM states of jobs (`123_4` -> 'RUNNING', 'UNKNOWN' when sacct has no record), read with one sacct
    call and submitit's parser; None when the scheduler cannot be queried (no sacct, or it fails)."""
    if not job_ids:
        return {}
    if shutil.which("sacct") is None:
        return None
    try:
        from submitit.slurm.slurm import SlurmInfoWatcher
    except ImportError:
        return None
    command = ["sacct", "-o", "JobID,State,NodeList", "--parsable2"]
    for array_job in sorted({j.split("_")[0] for j in job_ids}):
        command += ["-j", array_job]
    try:
        output = subprocess.check_output(command, stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    info = SlurmInfoWatcher().read_info(output)
    return {j: (info.get(j, {}).get("State") or "UNKNOWN").split()[0].upper() for j in job_ids}


def run_folders(results_dir: Path) -> dict[str, Path]:
    """Run folders under `results_dir` (any with a spec, rows, error or checkpoint), by key."""
    if not results_dir.is_dir():
        return {}
    return {p.name: p for p in sorted(results_dir.iterdir())
            if p.is_dir() and not p.name.startswith(".")
            and (any((p / f).is_file() for f in RUN_FILES) or emptied(p))}


def decide(key: str, run_dir: Path | None, submitted: dict[str, Any] | None,
           scheduler: str | None) -> ShardStatus:
    """One shard's state from its files, its latest submission and the scheduler's state of that job
    (None: not submitted, or the scheduler could not be asked)."""
    has = (lambda name: run_dir is not None and (run_dir / name).is_file())
    job = submitted["job_id"] if submitted else ""
    if has(store.ROWS):
        collapsed = is_collapsed(run_dir)  # type: ignore[arg-type]
        holder = lease.read(run_dir)  # type: ignore[arg-type]
        if holder is not None and not lease.stale_reason(holder):  # trained; its evaluators run now (files land)
            return ShardStatus(key, "evaluating", f"trained; {holder.describe().replace('being trained', 'evaluated')}"
                               + ("; " + COLLAPSED if collapsed else ""), job, collapsed)
        found = runfiles.problems(run_dir)  # type: ignore[arg-type]
        if found:
            return ShardStatus(key, "damaged", damage_reason(found), job)
        return ShardStatus(key, "done", COLLAPSED if collapsed else "", job, collapsed)
    holder = lease.read(run_dir) if run_dir is not None else None
    stale = lease.stale_reason(holder) if holder is not None else ""
    if holder is not None and not stale:  # a live runner holds the shard (local, or a SLURM task)
        slurm = f"; slurm {scheduler}" if submitted and scheduler else ""
        return ShardStatus(key, "running", f"{holder.describe()}{slurm}", job)
    stale = f"stale lease of {holder.holder} ({stale}); " if holder is not None else ""
    if submitted and scheduler in QUEUED | RUNNING:
        state = "pending" if scheduler in QUEUED else "running"
        detail = "; will resume from its checkpoint" if state == "pending" and has(CHECKPOINT) else ""
        return ShardStatus(key, state, f"slurm {scheduler}{detail}", job)
    if has(store.ERROR):
        error_path = run_dir / store.ERROR  # type: ignore[operator]
        newer = not submitted or error_path.stat().st_mtime >= submitted["submitted_ts"]
        if newer:  # else it predates the latest submission, whose job never got as far as the shard
            return ShardStatus(key, "failed", error_reason(error_path), job)
    if submitted and scheduler is None:
        return ShardStatus(key, "unknown", f"{UNREACHABLE}; submitted as job {job}", job)
    if not submitted and not has(store.SPEC) and not has(CHECKPOINT) and (aside := emptied(run_dir)):
        return ShardStatus(key, "damaged", f"emptied after damage (its files are in {aside}/); the next "
                                           "`clbench run` of this shard retrains it")
    progress = ("checkpoint present" if has(CHECKPOINT) else
                "started, no checkpoint yet" if has(store.SPEC) else "not started")
    if submitted:
        log = f"; log: {submitted['stdout']}" if submitted.get("stdout") else ""
        if scheduler == "UNKNOWN":
            age = time.time() - float(submitted.get("submitted_ts", 0))
            if 0 <= age < FRESH_SECONDS:  # accounting lags a few seconds behind sbatch
                return ShardStatus(key, "pending", f"submitted {age:.0f} s ago; slurm has no record of it yet", job)
            return ShardStatus(key, "unknown", f"the scheduler has no record of job {job} ({progress})", job)
        state = "failed" if scheduler in FAILED else "cancelled" if scheduler == "CANCELLED" else "interrupted"
        again = "; `clbench run --resume --executor slurm` submits it again" if state != "failed" else ""
        return ShardStatus(key, state, f"slurm job ended {scheduler}; {stale}{progress}{again}{log}", job)
    if stale:
        return ShardStatus(key, "interrupted", f"{stale}{progress}; `clbench run --resume` continues it")
    return ShardStatus(key, "interrupted", f"{progress} (no runner holds it); "
                                           "`clbench run --resume` continues it")


def emptied(run_dir: Path | None) -> str:
    """The latest damaged/<UTC time> folder of a run folder that holds nothing else ('' when it holds more, or no
    damaged files): a run `clbench verify --repair` (or a killed retraining) left to be retrained."""
    if run_dir is None or not (run_dir / manifest.DAMAGED).is_dir():
        return ""
    if any(e.name != manifest.DAMAGED and not lease.is_lease_file(e.name) for e in run_dir.iterdir()):
        return ""
    stamps = sorted(p.name for p in (run_dir / manifest.DAMAGED).iterdir())
    return f"{manifest.DAMAGED}/{stamps[-1]}" if stamps else manifest.DAMAGED


def damage_reason(found: list[Any]) -> str:
    """The status line of a damaged run: its first damaged file, what that means, how many more, the fix."""
    more = f" (+{len(found) - 1} more damaged file(s))" if len(found) > 1 else ""
    what = repair.consequence(found[0].name, found[0].what)
    return (f"{found[0]}: {what}{more}; `clbench run` repairs it, or `clbench verify "
            "--repair`")


def is_collapsed(run_dir: Path) -> bool:
    """Whether a finished run's rows carry `collapsed` = 1 (set by bench.running.shard; the reports' policy on
    such runs is bench.reporting.collapsed)."""
    try:
        rows = runfiles.read_json(run_dir, store.ROWS)
    except (OSError, ValueError, BenchError):
        return False
    return any(isinstance(row, dict) and store.is_collapsed_flag(row.get("collapsed")) for row in rows)


def error_reason(path: Path) -> str:
    """The one-line reason stored in an error.json."""
    try:
        reason = str(store.read_json(path).get("reason", ""))
    except (OSError, ValueError):
        return "error.json unreadable"
    return " ".join(reason.split()) or "failed (no reason recorded)"


def shard_states(results_dir: Path, patterns: list[str] | tuple[str, ...] = (),
                 query: StateQuery | None = None) -> list[ShardStatus]:
    """Every shard under `results_dir` (run folders and submitted shards), filtered by run keys or glob
    patterns, with its state; the scheduler is asked once, about unfinished submitted shards only."""
    folders = run_folders(results_dir)
    submitted = submissions(results_dir)
    keys = sorted(set(folders) | set(submitted))
    if patterns:
        chosen: list[str] = []
        for pattern in patterns:
            name = Path(pattern).name if "/" in pattern else pattern
            matches = [k for k in keys if fnmatch.fnmatchcase(k, name)]
            if not matches:
                raise BenchError(f"no shard {pattern!r} under {results_dir} (give --results-dir if the runs are "
                                 "elsewhere; `clbench status` alone lists them all)")
            chosen.extend(matches)
        keys = list(dict.fromkeys(chosen))
    return states_of(results_dir, keys, query, folders, submitted)


def states_of(results_dir: Path, keys: list[str], query: StateQuery | None = None,
              folders: dict[str, Path] | None = None,
              submitted: dict[str, dict[str, Any]] | None = None) -> list[ShardStatus]:
    """The states of the shards `keys` (in that order; a key without files or submission is 'interrupted, not
    started'); the scheduler is asked once, about unfinished submitted shards only, before the files are read
    (a task that ends in between has then written its rows: done, not 'ended without rows')."""
    submitted = submissions(results_dir) if submitted is None else submitted
    ask = sorted({submitted[k]["job_id"] for k in keys
                  if k in submitted and not store.is_finished(results_dir / k)})
    states = (query or query_states)(ask) if ask else {}
    folders = run_folders(results_dir) if folders is None or ask else folders
    statuses = [decide(k, folders.get(k), submitted.get(k),
                       None if states is None or k not in submitted else
                       states.get(submitted[k]["job_id"], "UNKNOWN")) for k in keys]
    for status in statuses:
        status.setting = setting_of(folders.get(status.key))
    return statuses


def setting_of(run_dir: Path | None) -> str:
    """A shard's data regime and the knobs it changed from the defaults, from its spec.json (`n=100 ·
    supcon.tau=0.1`; '' without a spec, or for the whole data at the defaults)."""
    import json

    from bench.catalog import registry
    from bench.spec import RunSpec, changed_against_defaults, regime_label

    path = run_dir / store.SPEC if run_dir is not None else None
    if path is None or not path.is_file():
        return ""
    try:
        spec = RunSpec.from_json(runfiles.read_json(run_dir, store.SPEC))
        changed = changed_against_defaults(spec, registry("method"))
    except (ValueError, KeyError, TypeError, BenchError, json.JSONDecodeError):
        return ""
    knobs = ", ".join(f"{k}={v}" for k, v in sorted(changed.items()))
    return " · ".join(part for part in (regime_label(spec.train.regime()), knobs) if part)


def active_keys(results_dir: Path, keys: list[str], query: StateQuery | None = None) -> set[str] | None:
    """Which of `keys` SLURM reports as pending or running, or has no record of yet though submitted less than
    FRESH_SECONDS ago (so they must not run again); None when some of them were submitted but the scheduler
    cannot be queried."""
    submitted = submissions(results_dir)
    jobs = sorted({submitted[k]["job_id"] for k in keys
                   if k in submitted and not store.is_finished(results_dir / k)})
    if not jobs:
        return set()
    states = (query or query_states)(jobs)
    if states is None:
        return None

    def active(key: str) -> bool:
        state = states.get(submitted[key]["job_id"], "UNKNOWN")
        fresh = time.time() - float(submitted[key].get("submitted_ts", 0)) < FRESH_SECONDS
        return state in QUEUED | RUNNING or (state == "UNKNOWN" and fresh)  # sacct lags behind sbatch

    return {k for k in keys if k in submitted and active(k) and not store.is_finished(results_dir / k)}


def format_table(statuses: list[ShardStatus]) -> str:
    """A fixed-width table: shard, state, job, reason (one line each); a `setting` column (data regime and knobs
    changed) before the reason when some shard has one."""
    with_setting = any(s.setting for s in statuses)
    header = ("shard", "state", "job", *(("setting",) if with_setting else ()), "reason")
    rows = [(s.key, s.state, s.job or "-", *((s.setting or "-",) if with_setting else ()), s.reason)
            for s in statuses]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return "\n".join(("  ".join(f"{cell:{width}}" for cell, width in zip(r, widths)) + f"  {r[-1]}").rstrip()
                     for r in [header, *rows])


def summary_line(statuses: list[ShardStatus]) -> str:
    """`5 shard(s): 2 done (1 collapsed: not a result), 1 running, 1 failed, 1 pending` (states with a count
    only)."""
    counts = {state: sum(s.state == state for s in statuses) for state in STATES}
    parts = [f"{n} {state}" for state, n in counts.items() if n]
    collapsed = sum(s.state == "done" and s.collapsed for s in statuses)
    if collapsed:
        parts[0] += f" ({collapsed} collapsed: not a result)"  # done comes first
    return f"{len(statuses)} shard(s): " + (", ".join(parts) if parts else "none")
