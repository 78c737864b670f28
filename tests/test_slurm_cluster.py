"""Against a real SLURM cluster (marked `slurm`): job arrays of real shards through sbatch, sacct, scontrol and
scancel. Start one on this machine with `bash scripts/start-local-slurm.sh` (root; CI does); without a cluster
every test here is skipped with the reason (a failure instead when BENCH_REQUIRE_SLURM=1).

SLURM holds a requeued job for about two minutes before it may start again (its BeginTime); the tests bring that
start forward to 10 s after the requeue with `scontrol update StartTime=now` (the `hurried` fixture) -- what
happens after the hold is what they check.
`python -m benchmarks slurm` measures the real delays."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

pytest.importorskip("submitit")

from benchmarks.slurm import (cluster_problem, hurry_requeued, restarts, slow_dataset, task_spans,  # noqa: E402
                              wait_for)
from conftest import FAST  # noqa: E402

pytestmark = pytest.mark.slurm
ONE_EPOCH = [*FAST, "--epochs", "1"]
SLOW = ["--encoder", "tiny-bert", "--lr", "1e-3", "--batch-size", "16", "--max-length", "32", "--no-progress",
        "--evaluators", "none", "--no-save-model"]
# The array tasks run on this machine's SLURM node with its environment, GPU included (the local cluster has no
# GRES): tests that compare a task's rows with a local run's, or that need a shard to be still training when they
# requeue, cancel or race it (timed for one CPU thread), pin every run to the CPU.
CPU = ["--device", "cpu"]


@pytest.fixture(scope="module")
def cluster():
    """Skip (or fail, with BENCH_REQUIRE_SLURM=1) unless a SLURM cluster answers here."""
    problem = cluster_problem()
    if problem:
        if os.environ.get("BENCH_REQUIRE_SLURM") == "1":
            pytest.fail(f"BENCH_REQUIRE_SLURM=1 but {problem}")
        pytest.skip(problem)


@pytest.fixture
def one_thread(monkeypatch):
    """One CPU thread here and in the array tasks (they inherit the environment): equal results, less contention."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def hurried(cluster):
    """While a test runs: requeued jobs start as soon as SLURM allows, not after their two-minute hold."""
    stop = threading.Event()
    thread = threading.Thread(target=hurry_requeued, args=(stop,), daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=10)


def record(results: Path, index: int = -1) -> dict:
    """The submitted.json of the `index`-th submission under `results` (by folder name: time order)."""
    return json.loads(sorted(results.glob(".slurm/*/submitted.json"))[index].read_text())


def values(run_dir: Path) -> list[float]:
    return [r["value"] for r in json.loads((run_dir / "rows.json").read_text())]


def train_log(run_dir: Path) -> dict:
    return json.loads((run_dir / "train_log.json").read_text())


def epochs_lasting(cli, data: Path, seconds: float, least: int) -> int:
    """Epochs of `data` (with SLOW, on one CPU thread) that train for at least `seconds` on this machine, and never
    fewer than `least`: one epoch is timed locally first, so a test that must outlast a SLURM slot or KillWait holds
    on a machine of any speed (CI's trained an epoch of 2,000 in 0.6 s, this one in 2 s)."""
    import math

    timing = data.parent / f"{data.name}-timing"
    code, _, err = cli("run", "--methods", "ce", "--datasets", data, "--epochs", "2", "--patience", "2", *SLOW, *CPU,
                       "--results-dir", timing)
    assert code == 0, err
    (log,) = timing.glob("*/train_log.json")
    epoch = json.loads(log.read_text())["history"][-1]["seconds"]  # the second epoch: warmed up
    return max(least, math.ceil(seconds / epoch))


def states(cli, results: Path) -> dict[str, str]:
    """`clbench status` as {shard key: state}."""
    code, out, err = cli("status", "--results-dir", results)
    assert code == 0, err
    return {line.split()[0]: line.split()[1] for line in out.splitlines()[1:-1]}


def test_an_array_runs_to_the_table_of_a_local_run(cli, tiny, tmp_path, cluster, one_thread):
    """Four real shards as one array, one task at a time (%1): `clbench status` sees pending and running, then
    done; `--wait` ends with the table; the rows equal a local run's; SLURM never ran two tasks at once."""
    results, local = tmp_path / "cluster", tmp_path / "local"
    base = ["run", "--methods", "ce,cl", "--datasets", tiny, "--seeds", "1,2", *ONE_EPOCH, *CPU]
    code, out, err = cli(*base, "--results-dir", results, "--executor", "slurm", "--array-parallelism", "1",
                         "--time-min", "10")
    assert code == 0, err
    assert "as 4 array task(s)" in err and "(0 already finished)" in err
    keys = [line.split()[1] for line in out.splitlines() if line.startswith("  ")]
    assert len(keys) == 4

    seen: set[tuple[str, ...]] = set()

    def both_pending_and_running():
        now = states(cli, results)
        seen.add(tuple(sorted(set(now.values()))))
        return "pending" in now.values() and "running" in now.values()

    wait_for(both_pending_and_running, 120, "a running and a pending shard in `clbench status`", every=0.5)
    code, out, err = cli(*base, "--results-dir", results, "--executor", "slurm", "--wait")
    assert code == 0, err
    assert "nothing to submit" in err and "all 4 shard(s) done" in err
    assert "ce " in out and "cl " in out  # the results table
    assert set(states(cli, results).values()) == {"done"}

    array = record(results)["jobs"][0]["job_id"].split("_")[0]
    # sacct records a task's end a moment after its rows are written
    spans = sorted(wait_for(lambda: len(task_spans(array)) == 4 and task_spans(array), 60, "4 ended tasks in sacct",
                            every=0.5).values())
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:])), spans  # %1 held

    assert cli(*base, "--results-dir", local)[0] == 0
    for key in keys:
        assert values(results / key) == values(local / key), key
        row = json.loads((results / key / "rows.json").read_text())[0]
        assert row["slurm_job"].startswith(f"{array}_")  # provenance: which task made it


def test_a_requeued_task_resumes_from_its_checkpoint(cli, tmp_path, cluster, hurried, one_thread):
    """`scontrol requeue` of a task mid-training: SLURM kills it and starts it again, the shard resumes from its
    last epoch checkpoint and ends with the rows of an uninterrupted run."""
    data = slow_dataset(tmp_path / "slow", 4000)
    results, local = tmp_path / "cluster", tmp_path / "local"
    # submitit passes SLURM's SIGTERM by ("Bypassing signal SIGTERM"): a requeued or cancelled task trains on until
    # SLURM kills it KillWait (30 s) later. A shard that could finish in that time is done, not resumed: 90 s of
    # epochs (at least 25) leave far more than 30 s after the first checkpoint, whatever the machine's speed.
    epochs = str(epochs_lasting(cli, data, 90, 25))
    base = ["run", "--methods", "ce", "--datasets", data, "--epochs", epochs, "--patience", epochs, *SLOW, *CPU]
    code, out, err = cli(*base, "--results-dir", results, "--executor", "slurm", "--time-min", "10")
    assert code == 0, err
    (key,) = record(results)["shards"]
    job = record(results)["shards"][key]["job_id"]
    wait_for(lambda: (results / key / "checkpoint.pt").is_file(), 180, "the first epoch checkpoint")
    subprocess.run(["scontrol", "requeue", job], check=True)
    code, out, err = cli("status", "--results-dir", results, "--wait", "--no-progress")
    assert code == 0, err
    log = train_log(results / key)
    assert log["resumed_from_epoch"] >= 1, log
    assert restarts(job) >= 1

    assert cli(*base, "--results-dir", local)[0] == 0
    assert values(results / key) == values(local / key)


def test_a_task_at_its_time_limit_is_requeued_and_resumes(cli, tmp_path, cluster, hurried, one_thread):
    """A shard longer than its 2-minute limit: SLURM warns the task before the limit, submitit requeues it, the
    next run resumes from the last checkpoint, until the shard is done."""
    data = slow_dataset(tmp_path / "slow", 2000)
    results = tmp_path / "cluster"
    # slurmctld checks time limits every 30 s and warns a task once its remaining time is within the warning delay
    # (30 s for 2 minutes) plus that interval: a slot lasts 60-90 s, of which start-up takes 10-20 s. (With a
    # 1-minute limit a requeued task's slot locks to about 17 s, nearly all start-up: it may never reach an epoch's
    # end.) 150 s of epochs of 2,000 (at least 60; about 2 s each on one thread here, 0.6 s on CI's machine) outlast
    # any one slot and end within a few.
    epochs = epochs_lasting(cli, data, 150, 60)
    code, out, err = cli("run", "--methods", "ce", "--datasets", data, "--epochs", str(epochs), "--patience",
                         str(epochs), *SLOW, *CPU, "--results-dir", results, "--executor", "slurm", "--time-min", "2",
                         "--max-timeouts", "20", "--wait")
    assert code == 0, err
    (key,) = record(results)["shards"]
    job = record(results)["shards"][key]["job_id"]
    log = train_log(results / key)
    assert len(log["history"]) == epochs and log["resumed_from_epoch"] >= 1, log
    assert restarts(job) >= 1
    task_log = Path(record(results)["jobs"][0]["stdout"]).read_text()
    assert "this job is timed-out" in task_log


def test_a_cancelled_array_is_finished_by_a_resumed_submission(cli, tiny, tmp_path, cluster, one_thread):
    """scancel mid-array: status says cancelled; `--resume` submits only the unfinished shards, and the one
    cancelled mid-training resumes from its checkpoint."""
    slow = slow_dataset(tmp_path / "slow", 4000)
    results = tmp_path / "cluster"
    # 90 s of epochs (at least 25): far more than SLURM's 30 s KillWait of training left after the first checkpoint
    # (submitit passes the cancel's SIGTERM by, so a shard that could end within it would be done, not cancelled)
    epochs = str(epochs_lasting(cli, slow, 90, 25))
    base = ["run", "--methods", "ce", "--datasets", f"{tiny},{slow}", "--epochs", epochs, "--patience", epochs, *SLOW,
            *CPU, "--results-dir", results, "--executor", "slurm"]
    code, out, err = cli(*base, "--array-parallelism", "1", "--time-min", "10")
    assert code == 0, err
    first = record(results)
    fast_key, slow_key = list(first["shards"])
    assert fast_key.startswith("ce_tiny_") and slow_key.startswith("ce_slow_")
    wait_for(lambda: (results / slow_key / "checkpoint.pt").is_file(), 180, "the slow shard's first checkpoint")
    finished_at = (results / fast_key / "rows.json").stat().st_mtime
    subprocess.run(["scancel", first["jobs"][0]["job_id"].split("_")[0]], check=True)
    wait_for(lambda: states(cli, results).get(slow_key) == "cancelled", 60, "the cancelled state", every=0.5)
    code, out, _ = cli("status", "--results-dir", results)
    assert "--resume --executor slurm" in out

    code, out, err = cli(*base, "--resume", "--wait")
    assert code == 0, err
    assert "submitted 1 shard(s)" in err and list(record(results)["shards"]) == [slow_key]
    assert (results / fast_key / "rows.json").stat().st_mtime == finished_at  # not run again
    assert train_log(results / slow_key)["resumed_from_epoch"] >= 1


def test_a_local_run_beside_the_array_leaves_its_shards_alone(cli, tmp_path, cluster, one_thread):
    """A local `clbench run` of a shard an array task is training reports it held and trains nothing."""
    data = slow_dataset(tmp_path / "slow", 4000)
    results = tmp_path / "cluster"
    epochs = str(epochs_lasting(cli, data, 30, 6))  # still training when the local run starts, on any machine
    base = ["run", "--methods", "ce", "--datasets", data, "--epochs", epochs, "--patience", epochs, *SLOW, *CPU,
            "--results-dir", results]
    assert cli(*base, "--executor", "slurm", "--time-min", "10")[0] == 0
    (key,) = record(results)["shards"]
    wait_for(lambda: (results / key / "lease.json").is_file(), 120, "the array task's lease")
    code, out, err = cli(*base)
    assert code == 0, err
    assert "held by another runner" in err and "being trained by" in err
    code, _, err = cli("status", "--results-dir", results, "--wait", "--no-progress")
    assert code == 0, err
    rows = json.loads((results / key / "rows.json").read_text())
    assert rows[0]["slurm_job"] == record(results)["shards"][key]["job_id"]  # the array's result, not ours


def test_wait_exits_non_zero_when_a_shard_fails(cli, tiny, tmp_path, cluster, one_thread):
    """The second shard's data changes after submission: its task fails it, `--wait` reports it and exits 1."""
    other = tmp_path / "other"
    shutil.copytree(tiny, other)
    results = tmp_path / "cluster"

    def change_the_data_once_submitted():
        wait_for(lambda: list(results.glob(".slurm/*/submitted.json")), 60, "the submission record")
        train = other / "train.jsonl"
        train.write_text(train.read_text().replace("won the match", "lost", 1))

    changer = threading.Thread(target=change_the_data_once_submitted)
    changer.start()
    code, out, err = cli("run", "--methods", "ce", "--datasets", f"{tiny},{other}", *ONE_EPOCH,
                         "--results-dir", results, "--executor", "slurm", "--array-parallelism", "1", "--wait")
    changer.join()
    assert code == 1, err
    assert "1 of 2 shard(s) did not finish" in err and "changed" in err
    assert "tiny" in out  # the finished shard's table
