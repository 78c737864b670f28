"""SIGTERM and SIGINT (issue 32): a real `clbench run` process signalled mid-training stops at a safe point --
its shards keep their last epoch checkpoint, release their leases, and the run says so in one line and exits
143 (SIGTERM) or 130 (SIGINT) -- and a re-run resumes them and ends with the predictions of an uninterrupted run.

Every run is a separate process on the tiny fixture with one CPU thread (training on a CPU with fixed seeds is
deterministic, tests/test_trainer.py), long enough (EPOCHS) to be mid-training when the signal comes: the signal
is sent as soon as the first epoch checkpoint exists. The unit tests below pin the safe points themselves.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.results import stopping, store
from conftest import FIXTURE, ROOT, launch_env

EPOCHS = 20
ARGS = ["--methods", "ce", "--datasets", str(FIXTURE), "--encoder", "tiny-bert", "--epochs", str(EPOCHS),
        "--patience", "1000", "--lr", "1e-3", "--batch-size", "8", "--max-length", "32", "--no-progress",
        "--evaluators", "none"]
TIMEOUT = 240
GO_ON = "`clbench run --resume` with the same arguments continues"


def launch(results: Path, *extra: str) -> subprocess.Popen:
    """`clbench run ARGS --results-dir RESULTS EXTRA` in its own process group (one CPU thread, offline)."""
    return subprocess.Popen([sys.executable, "-m", "bench", "run", *ARGS, "--results-dir", str(results), *extra],
                            cwd=ROOT, env=launch_env(("BENCH_",)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def finish(process: subprocess.Popen) -> tuple[int, str]:
    """Wait for a launch; its exit code and stderr."""
    try:
        _, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    return process.returncode, err


def wait_for_checkpoints(process: subprocess.Popen, results: Path, count: int) -> None:
    """Return once `count` run folders hold an epoch checkpoint (the run is mid-training)."""
    deadline = time.monotonic() + TIMEOUT
    while len(list(results.glob(f"*/{store.CHECKPOINT}"))) < count:
        if process.poll() is not None:
            pytest.fail(f"the run ended before it was signalled:\n{process.communicate()[1][-3000:]}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail("no checkpoint appeared")
        time.sleep(0.02)


def group_alive(group: int, within: float = 10.0) -> list[str]:
    """The processes (command lines) of a process group still alive after `within` seconds (multiprocessing's
    resource tracker ends a moment after the run)."""
    deadline = time.monotonic() + within
    while True:
        alive = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == group and fields[0] != "Z":
                    alive.append((stat.parent / "cmdline").read_text().replace("\0", " "))
            except (OSError, IndexError, ValueError):
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def predictions(run_dir: Path) -> list[dict]:
    with gzip.open(run_dir / store.PREDICTIONS, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def clean_values(run_dir: Path) -> list[tuple]:
    return [(r["split"], r["metric"], r["label"], r["value"]) for r in store.read_json(run_dir / store.ROWS)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """An uninterrupted run of seeds 1 and 2."""
    folder = tmp_path_factory.mktemp("reference")
    code, err = finish(launch(folder, "--seeds", "1,2"))
    assert code == 0, err[-3000:]
    return folder


def assert_stopped_cleanly(results: Path) -> list[Path]:
    """Every started shard kept its checkpoint and released its lease; nothing half-written is left."""
    runs = sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert runs
    for run in runs:
        assert (run / store.CHECKPOINT).is_file(), run.name
        assert not (run / "lease.json").exists(), f"{run.name} kept its lease"
        assert not (run / store.ROWS).exists()
    assert not list(results.rglob("*.tmp"))
    assert not (results / store.GATHER_LOCK / "lease.json").exists()
    return runs


@pytest.mark.slow
def test_sigterm_stops_a_real_run_at_a_safe_point_and_a_rerun_resumes_it(reference, tmp_path):
    results = tmp_path / "results"
    process = launch(results, "--seeds", "1")
    wait_for_checkpoints(process, results, 1)
    process.send_signal(signal.SIGTERM)
    code, err = finish(process)

    assert code == 143, err[-3000:]
    lines = [line for line in err.splitlines() if "stopped by" in line]
    assert len(lines) == 1, err[-3000:]
    said = re.fullmatch(rf"clbench: stopped by SIGTERM after epoch (\d+) \((\S+)\); {re.escape(GO_ON)} it", lines[0])
    assert said, lines[0]
    epoch, key = int(said.group(1)), said.group(2)
    assert 1 <= epoch < EPOCHS
    assert [p.name for p in assert_stopped_cleanly(results)] == [key]

    code, err = finish(launch(results, "--seeds", "1", "--resume"))
    assert code == 0, err[-3000:]
    assert f"resuming after epoch {epoch} from" in err
    assert store.read_json(results / key / store.TRAIN_LOG)["resumed_from_epoch"] == epoch
    assert not (results / key / store.CHECKPOINT).exists() and not (results / key / "lease.json").exists()
    assert predictions(results / key) == predictions(reference / key)
    assert clean_values(results / key) == clean_values(reference / key)


@pytest.mark.slow
def test_sigint_to_a_pool_of_workers_stops_every_shard_and_a_rerun_resumes_them(reference, tmp_path):
    """`kill -INT` to the main process alone: it passes the signal on to its worker processes (Ctrl-C in a
    terminal signals them all at once; the first signal counts)."""
    results = tmp_path / "results"
    process = launch(results, "--seeds", "1,2", "--jobs", "2")
    wait_for_checkpoints(process, results, 2)
    process.send_signal(signal.SIGINT)
    code, err = finish(process)

    assert code == 130, err[-3000:]
    lines = [line for line in err.splitlines() if "stopped by" in line]
    assert len(lines) == 1 and lines[0].startswith("clbench: stopped by SIGINT: ") and \
        lines[0].endswith(f"; {GO_ON} them"), err[-3000:]
    epochs = dict(re.findall(r"(ce_tiny_\S+) after epoch (\d+)", lines[0]))
    runs = assert_stopped_cleanly(results)
    assert sorted(epochs) == [p.name for p in runs] and len(runs) == 2
    assert not group_alive(process.pid), "a worker outlived the run"

    code, err = finish(launch(results, "--seeds", "1,2", "--resume"))
    assert code == 0, err[-3000:]
    for key, epoch in epochs.items():
        assert f"{key}: resuming after epoch {epoch} from" in err
        assert predictions(results / key) == predictions(reference / key)
        assert clean_values(results / key) == clean_values(reference / key)


# ------------------------------------------------------------------------------------------ the safe points

def test_a_signal_during_a_write_waits_for_the_write(tmp_path):
    """A stop signal inside an atomic write (the epoch checkpoint's, say) lets it finish, then stops."""
    path = tmp_path / "run" / "file.json"
    with stopping.handled(), stopping.armed(), pytest.raises(stopping.Stopped) as stop:
        with store.atomic_path(path) as tmp:
            os.kill(os.getpid(), signal.SIGTERM)
            tmp.write_text("complete", encoding="utf-8")
    assert stop.value.signum == signal.SIGTERM
    assert path.read_text(encoding="utf-8") == "complete"
    assert not list(path.parent.glob("*.tmp"))


def test_a_signal_while_a_lease_is_taken_reaches_its_holder_inside_the_lease(tmp_path, monkeypatch):
    """A stop signal in the middle of taking a lease waits until the caller holds it (and so releases it)."""
    from bench.results import lease

    create = lease._create

    def create_then_signal(path, record):
        made = create(path, record)
        os.kill(os.getpid(), signal.SIGTERM)
        return made

    monkeypatch.setattr(lease, "_create", create_then_signal)
    run = tmp_path / "run"
    with stopping.handled(), stopping.armed():
        claim = lease.acquire(run)
        with pytest.raises(stopping.Stopped), claim:
            assert (run / lease.LEASE).is_file()
            stopping.check()
    assert not (run / lease.LEASE).exists()


def test_outside_a_shard_a_signal_only_stops_the_sweep(tmp_path):
    """Between shards (or in a pool's main process) a signal raises nothing: the next shard is cancelled, the
    exit code is 128 + the signal, and the previous handlers come back."""
    from bench.running.runner import plan, stop_report

    shard = plan(["ce"], [str(FIXTURE)], ["tiny-bert"], [1], {"epochs": 1}, None, results_dir=tmp_path)[0]
    before = signal.getsignal(signal.SIGINT)
    with stopping.handled():
        os.kill(os.getpid(), signal.SIGINT)
        assert stopping.pending()
        from bench.running.shard import run_shard

        outcome = run_shard(shard.spec, shard.data, tmp_path)
    assert outcome.status == "cancelled" and not (tmp_path / shard.spec.key).exists()
    assert signal.getsignal(signal.SIGINT) is before
    assert stop_report([outcome], 1) == (130, "clbench: stopped by SIGINT between shards (1 of 1 not run); "
                                              f"{GO_ON} the sweep")
    assert not stopping.pending()
