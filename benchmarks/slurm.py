"""slurm: what SLURM costs a sweep, measured on a real cluster -- the wall time of `clbench run --executor slurm` for
N shards (against one bare `sbatch` call, measured in the same run) and the overhead of a requeue (seconds from
`scontrol requeue` of a training task to the job running again, to its shard claimed again, and to its next epoch
checkpoint), with SLURM's own requeue hold and with the hold lifted after SETTLE_SECONDS (`scontrol update
StartTime=now`).

Also the helpers the real-cluster tests share (tests/test_slurm_cluster.py): whether a cluster answers, a
dataset slow enough to interrupt, the scheduler's view of array tasks. Light imports only (no torch).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from bench.results import store
from bench.errors import BenchError
from bench.results.lease import LEASE

SENTENCES = {  # three labels, as the tiny test fixture; `slow_dataset` varies them with a numbered word
    "sport": ["the team won the match again", "a late goal decided the final", "the coach praised the players"],
    "food": ["the new cafe served fresh bread", "this soup needs more salt", "the chef baked a lemon cake"],
    "tech": ["the phone update fixed the battery", "a faster chip runs the new model", "the app crashed twice"],
}


def slow_dataset(folder: Path, n_train: int, n_test: int = 60) -> Path:
    """A dataset folder (train.jsonl, test.jsonl) of `n_train` short texts in three classes: with tiny-bert, one
    epoch of 4000 takes about 4 s on one CPU thread of a 2-core machine -- long enough to interrupt a shard between
    epochs."""
    folder.mkdir(parents=True, exist_ok=True)
    pairs = [(label, text) for label, texts in SENTENCES.items() for text in texts]
    for split, n in (("train", n_train), ("test", n_test)):
        with (folder / f"{split}.jsonl").open("w", encoding="utf-8") as out:
            for i in range(n):
                label, text = pairs[i % len(pairs)]
                out.write(json.dumps({"id": f"{split}-{i}", "text": f"{text} w{i % 50}", "label": label}) + "\n")
    return folder


def cluster_problem() -> str:
    """Why no SLURM cluster can run jobs here ("" when one can): its commands, a node up, accounting."""
    missing = [c for c in ("sbatch", "srun", "sinfo", "sacct", "scontrol", "scancel", "squeue") if not shutil.which(c)]
    if missing:
        return f"no SLURM cluster here ({', '.join(missing)} not found); start one: bash scripts/start-local-slurm.sh"
    try:
        nodes = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=15)
        accounting = subprocess.run(["sacct", "-n", "-X", "-S", "now-1minutes"], capture_output=True, text=True,
                                    timeout=15)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"SLURM does not answer ({exc.__class__.__name__}); start it: bash scripts/start-local-slurm.sh"
    if nodes.returncode != 0 or not any(s.rstrip("*~#") in ("idle", "mixed", "allocated")
                                        for s in nodes.stdout.split()):
        return (f"SLURM has no node up (sinfo: {' '.join(nodes.stdout.split()) or nodes.stderr.strip()!r}); "
                "start it: bash scripts/start-local-slurm.sh")
    if accounting.returncode != 0:
        return f"SLURM accounting (sacct) does not answer: {accounting.stderr.strip()[:200]}"
    return ""


SETTLE_SECONDS = 10.0  # a requeued job started sooner can meet its previous run's revoked credential and fail


def hurry_requeued(stop: threading.Event, every: float = 1.0, settle: float = SETTLE_SECONDS) -> None:
    """Until `stop` is set: let every job held by its requeue BeginTime start once it has been held `settle`
    seconds (SLURM's own hold is about two minutes)."""
    held_since: dict[str, float] = {}
    while not stop.wait(every):
        held = held_by_begin_time()
        held_since = {job: held_since.get(job, time.monotonic()) for job in held}
        for job, since in held_since.items():
            if time.monotonic() - since >= settle:
                lift_hold(job)


def lift_hold(job: str) -> None:
    """Let a pending job start now (`scontrol update StartTime=now`)."""
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], capture_output=True, timeout=30)


def held_by_begin_time() -> list[str]:
    """Pending jobs whose reason is BeginTime (a requeued job's hold)."""
    out = subprocess.run(["squeue", "-h", "-t", "PD", "-o", "%i %r"], capture_output=True, text=True, timeout=30)
    return [line.split()[0] for line in out.stdout.splitlines() if line.split()[1:] == ["BeginTime"]]


def sacct_rows(job: str, duplicates: bool = False) -> list[dict[str, str]]:
    """sacct's allocation rows of `job` (an array or one task), every run of a requeued job with `duplicates`."""
    command = ["sacct", "-n", "-X", "-P", "-o", "JobID,State,Start,End", "-j", job]
    out = subprocess.run(command + (["-D"] if duplicates else []), capture_output=True, text=True, timeout=30)
    names = ("job", "state", "start", "end")
    return [dict(zip(names, line.split("|"))) for line in out.stdout.splitlines() if line.strip()]


def task_spans(array: str) -> dict[str, tuple[float, float]]:
    """(start, end) in epoch seconds of each finished task of an array, by task job id."""
    def stamp(text: str) -> float:
        return datetime.fromisoformat(text).timestamp()

    return {r["job"]: (stamp(r["start"]), stamp(r["end"])) for r in sacct_rows(array)
            if "_" in r["job"] and r["end"] not in ("", "Unknown", "None")}


def restarts(job: str) -> int:
    """How often SLURM requeued `job`: its runs that sacct kept (`--duplicates`) ended REQUEUED."""
    return sum(r["state"] == "REQUEUED" for r in sacct_rows(job, duplicates=True))


def job_state(job: str) -> str:
    """squeue's state of `job` (RUNNING, PENDING...), "" once it left the queue."""
    out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip().split("\n")[0] if out.returncode == 0 else ""


# ------------------------------------------------------------------------------------------- the benchmark

def bench_command(*args: str) -> list[str]:
    """`bench ARGS` as this Python runs it."""
    return [sys.executable, "-m", "bench", *args]


def timed_run(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Run `command`; (wall seconds, stdout). BenchError with its stderr when it fails."""
    start = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise BenchError(f"{' '.join(command[2:5])}... failed: {out.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - start, out.stdout


def wait_for(predicate, timeout: float, what: str, every: float = 0.1):
    """Poll until `predicate()` is truthy; BenchError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")


def submission_cost(work: Path, env: dict[str, str], shards: int, say) -> dict:
    """Wall time of submitting `shards` shards (tiny-bert, one epoch) vs one `sbatch --wrap true`."""
    data = slow_dataset(work / "tiny", 60)
    bare_start = time.perf_counter()
    bare = subprocess.run(["sbatch", "--parsable", "--hold", "--wrap", "true"], capture_output=True, text=True,
                          timeout=60)
    bare_s = time.perf_counter() - bare_start
    subprocess.run(["scancel", bare.stdout.strip().split(";")[0]], capture_output=True, timeout=60)
    say(f"slurm: submitting {shards} shards")
    wall, out = timed_run(bench_command("run", "--methods", "ce", "--datasets", str(data), "--encoder", "tiny-bert",
                                        "--seeds", f"1-{shards}", "--epochs", "1", "--evaluators", "none",
                                        "--no-progress", "--results-dir", str(work / "submit"), "--executor", "slurm",
                                        "--time-min", "10", "--sbatch", "begin=now+1hour"), env)
    arrays = {line.split()[0].split("_")[0] for line in out.splitlines() if line.startswith("  ")}
    for array in arrays:  # submitted to begin in an hour: nothing runs, nothing is left behind
        subprocess.run(["scancel", array], capture_output=True, timeout=60)
    return {"shards": shards, "submit_seconds": round(wall, 2), "per_shard_ms": round(1000 * wall / shards, 1),
            "bare_sbatch_seconds": round(bare_s, 3), "ratio_vs_bare_sbatch": round(wall / bare_s, 1)}


def requeue_cost(work: Path, env: dict[str, str], hurry: bool, say) -> dict:
    """Seconds from `scontrol requeue` of a training task to: the job running again, its shard claimed again
    (a new lease), its next epoch checkpoint; `hurry` lifts SLURM's requeue hold as soon as the job is pending."""
    name = "hurried" if hurry else "held"
    data = slow_dataset(work / f"slow-{name}", 4000)
    results = work / f"requeue-{name}"
    timed_run(bench_command("run", "--methods", "ce", "--datasets", str(data), "--encoder", "tiny-bert",
                            "--epochs", "40", "--patience", "40", "--lr", "1e-3", "--batch-size", "16",
                            "--max-length", "32", "--evaluators", "none", "--no-save-model", "--no-progress",
                            "--results-dir", str(results), "--executor", "slurm", "--time-min", "30"), env)
    submitted = json.loads(next(results.glob(".slurm/*/submitted.json")).read_text())
    (key, entry), = submitted["shards"].items()
    job, run_dir = entry["job_id"], results / key
    checkpoint, lease = run_dir / store.CHECKPOINT, run_dir / LEASE
    wait_for(checkpoint.is_file, 300, "the first checkpoint")
    first_lease = lease.stat().st_ino
    say(f"slurm: requeue ({name})")
    start = time.monotonic()
    subprocess.run(["scontrol", "requeue", job], check=True, capture_output=True, timeout=60)
    stamps: dict[str, float] = {}
    wait_for(lambda: job_state(job) == "PENDING", 120, "the requeued job to be pending")
    stamps["pending_s"] = time.monotonic() - start
    if hurry:
        wait_for(lambda: job in held_by_begin_time() or job_state(job) == "RUNNING", 60, "the requeue hold")
        time.sleep(SETTLE_SECONDS)
        lift_hold(job)
    wait_for(lambda: job_state(job) == "RUNNING", 600, "the requeued job to run", every=0.5)
    stamps["running_again_s"] = time.monotonic() - start
    before = checkpoint.stat().st_mtime if checkpoint.is_file() else 0.0
    wait_for(lambda: lease.is_file() and lease.stat().st_ino != first_lease, 300, "the shard claimed again")
    stamps["claimed_again_s"] = time.monotonic() - start
    wait_for(lambda: checkpoint.is_file() and checkpoint.stat().st_mtime > before, 300, "the next checkpoint")
    stamps["next_checkpoint_s"] = time.monotonic() - start
    subprocess.run(["scancel", job], capture_output=True, timeout=60)
    return {name: {k: round(v, 1) for k, v in stamps.items()}}


def slurm_bench(args: argparse.Namespace) -> dict:
    """The SLURM benchmark's report (see the module docstring)."""
    problem = cluster_problem()
    if problem:
        raise BenchError(problem)
    say = (lambda text: None) if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    work = Path(tempfile.mkdtemp(prefix="bench-perf-slurm-"))
    try:
        report = {"benchmark": "slurm", "submission": submission_cost(work, env, args.slurm_shards, say),
                  "requeue": {}}
        for hurry in (True, False) if args.requeue_hold else (True,):
            report["requeue"].update(requeue_cost(work, env, hurry, say))
        config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
        report["scheduler"] = {line.split("=")[0].strip(): line.split("=", 1)[1].strip()
                               for line in config.splitlines()
                               if line.split("=")[0].strip() in ("SLURM_VERSION", "SchedulerParameters", "KillWait")}
        report["device_name"] = "SLURM (no GPU involved)"
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)
