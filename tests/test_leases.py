"""Shard leases (issue "No silent wrong results"): two runners on one results folder train every shard once.

Unit tests of bench.results.lease (claim, refusal, release by the owner only, stale by a dead process and by an old
heartbeat, racing take-overs), then real `clbench run` processes: two runners started together on one sweep, a
holder that stalls and is killed mid-training, a holder that stalls past the timeout and comes back, and
--overwrite beside a live holder.

The runners are forked by a small fork server (WRAPPER; it imports the heavy modules once, as in
tests/test_crash_safety.py) and can be given test hooks through their environment (see WRAPPER's `hooks`):
a file that counts training starts, a pause in each training (so that runners started together overlap), and a
signal the process sends itself right after its first epoch checkpoint lands (STOP: a holder that stalls,
alive; then the test kills or continues it). One CPU thread per runner: training is deterministic, so tables
of different runs compare equal (with a tolerance of 1e-6, as in the crash tests).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.results import lease, store
from bench.running.status import decide
from conftest import FAST, FIXTURE, ROOT, LineServer, kill_group, launch_env, process_state
IDENTITY = ["run_key", "method", "dataset", "encoder", "seed", "evaluator", "split", "metric", "label", "n"]
LAUNCH_TIMEOUT = 180

WRAPPER = r'''
import contextlib
import json
import os
import signal
import sys
import time
import traceback


def hooks():
    """Test hooks, idle unless a launch's environment arms them:
    LEASE_TEST_STARTS=FILE  append "<run key> <pid>" to FILE whenever this process starts training a shard
    LEASE_TEST_SLOW=S       then sleep S seconds first (runners started together overlap)
    LEASE_TEST_SIGNAL=SIG   send this process SIGSIG (STOP) right after its first checkpoint.pt has landed
    LEASE_TEST_TIMEOUT=S    bench.results.lease.TIMEOUT_SECONDS for this launch"""
    import bench.running.shard
    import bench.results.atomic

    train, atomic_path = bench.running.shard.train_and_evaluate, bench.results.atomic.atomic_path

    def counted_train(spec, *args, **kwargs):
        if os.environ.get("LEASE_TEST_STARTS"):
            with open(os.environ["LEASE_TEST_STARTS"], "a") as handle:
                handle.write(f"{spec.key} {os.getpid()}\n")
        time.sleep(float(os.environ.get("LEASE_TEST_SLOW", "0")))
        return train(spec, *args, **kwargs)

    @contextlib.contextmanager
    def signalling_atomic_path(path, run_dir=None):
        with atomic_path(path, run_dir) as tmp:
            yield tmp
        if path.name == "checkpoint.pt" and os.environ.get("LEASE_TEST_SIGNAL"):
            os.kill(os.getpid(), getattr(signal, "SIG" + os.environ.pop("LEASE_TEST_SIGNAL")))

    bench.running.shard.train_and_evaluate, bench.results.atomic.atomic_path = counted_train, signalling_atomic_path


def serve():
    """Requests on stdin, one JSON line each: {"argv", "env", "log"} forks a `bench` run in its own session and
    prints its pid; {"wait": pid} prints that run's exit code (negative: killed by that signal)."""
    import bench.cli.main, bench.results.lease, bench.running.runner, bench.reporting.summary  # noqa
    from transformers.models.bert import modeling_bert  # noqa

    hooks()
    for line in sys.stdin:
        request = json.loads(line)
        if "wait" in request:
            _, status = os.waitpid(request["wait"], 0)
            print(os.waitstatus_to_exitcode(status), flush=True)
            continue
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setsid()
                log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.environ.clear()
                os.environ.update(request["env"])
                if os.environ.get("LEASE_TEST_TIMEOUT"):
                    bench.results.lease.TIMEOUT_SECONDS = float(os.environ["LEASE_TEST_TIMEOUT"])
                code = bench.cli.main.main(request["argv"])
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        print(pid, flush=True)


if __name__ == "__main__":
    serve()
'''

# A process that holds a lease on argv[1] until its stdin closes, then releases it (or, with --vanish, exits
# without releasing: a holder that died).
HOLDER = textwrap.dedent("""
    import os, sys
    from bench.results import lease
    held = lease.acquire(sys.argv[1])
    print(held.token, flush=True)
    sys.stdin.read()
    if "--vanish" in sys.argv:
        os._exit(0)
    held.release()
""")


# ------------------------------------------------------------------------------------------------ helpers

def stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP)."""
    return process_state(pid) == "T"


def wait_for(condition, what: str, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Runners(LineServer):
    """The test's side of the fork server."""

    def __init__(self, folder: Path, data: Path):
        self.folder, self.data = folder, data
        wrapper = folder / "lease_bench.py"
        wrapper.write_text(WRAPPER)
        super().__init__([str(wrapper)], self.env(), "fork server")
        self.launches = 0
        self.running: set[int] = set()

    def env(self, **hooks: str) -> dict[str, str]:
        return launch_env(("BENCH_", "LEASE_TEST_"), **{f"LEASE_TEST_{k.upper()}": str(v) for k, v in hooks.items()})

    def start(self, results: Path, methods: str = "ce,cl", seeds: str = "1-2", extra: tuple[str, ...] = (),
              **hooks: str) -> tuple[int, Path]:
        """Fork `clbench run` on the tiny sweep; returns its pid and log file."""
        self.launches += 1
        log = self.folder / f"launch-{self.launches}.log"
        argv = ["run", "--methods", methods, "--datasets", str(self.data), "--seeds", seeds, *FAST,
                "--device", "cpu",  # tables are compared with the reference's: CPU training is reproducible
                "--results-dir", str(results), *extra]
        self.send({"argv": argv, "env": self.env(**hooks), "log": str(log)})
        pid = int(self.readline())
        self.running.add(pid)
        return pid, log

    def wait(self, pid: int) -> int:
        watchdog = threading.Timer(LAUNCH_TIMEOUT, kill_group, [pid])
        watchdog.start()
        try:
            self.send({"wait": pid})
            return int(self.readline())
        finally:
            watchdog.cancel()
            self.running.discard(pid)

    def run(self, results: Path, **kwargs) -> tuple[int, str]:
        pid, log = self.start(results, **kwargs)
        return self.wait(pid), log.read_text()

    def abandon(self) -> None:
        """Kill and reap what a failed test left running."""
        for pid in list(self.running):
            kill_group(pid, signal.SIGCONT)
            kill_group(pid)
            self.wait(pid)


@pytest.fixture(scope="module")
def runners(tmp_path_factory):
    if not Path("/proc/self/stat").exists() or not hasattr(os, "fork"):
        pytest.skip("these tests need Linux (fork, /proc)")
    folder = tmp_path_factory.mktemp("leases")
    data = folder / "tiny"
    import shutil

    shutil.copytree(FIXTURE, data)
    server = Runners(folder, data)
    yield server
    server.close()


@pytest.fixture
def fleet(runners):
    yield runners
    runners.abandon()


@pytest.fixture(scope="module")
def reference(runners) -> Path:
    """One uninterrupted runner: ce, cl x seeds 1-2."""
    results = runners.folder / "reference"
    code, log = runners.run(results)
    assert code == 0, log
    return results


def table(results: Path, keys: list[str] | None = None) -> pd.DataFrame:
    frame = pd.DataFrame(store.finished_rows(results))
    if keys is not None:
        frame = frame[frame["run_key"].isin(keys)]
    return frame[[*IDENTITY, "value"]].sort_values(IDENTITY, kind="stable").reset_index(drop=True)


def assert_same_table(results: Path, reference: Path, keys: list[str] | None = None) -> None:
    """Same rows and values as the reference (provenance columns -- times, host, pid -- left out)."""
    got, want = table(results, keys), table(reference, keys)
    assert not got[IDENTITY].duplicated().any(), "duplicate rows"
    pd.testing.assert_frame_equal(got[IDENTITY], want[IDENTITY])
    np.testing.assert_allclose(got["value"].to_numpy(float), want["value"].to_numpy(float), rtol=1e-6, atol=1e-9,
                               equal_nan=True)


def starts(path: Path) -> list[tuple[str, int]]:
    """(run key, pid) of every training start the hook counted."""
    if not path.exists():
        return []
    return [(key, int(pid)) for key, pid in (line.split() for line in path.read_text().splitlines())]


def holder(run_dir: Path, *flags: str) -> tuple[subprocess.Popen, str]:
    """Another process holding the lease on `run_dir`; returns it and its token."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir), *flags], cwd=ROOT,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return process, process.stdout.readline().strip()


def forge(run_dir: Path, age: float = 0.0, **fields) -> None:
    """A lease of a runner on another machine, whose heartbeat is `age` seconds old."""
    run_dir.mkdir(parents=True, exist_ok=True)
    record = {"host": "node-b", "pid": 4242, "machine": "other", "pid_start": "1", "slurm_job": "",
              "slurm_restart": 0, "token": "f" * 32, "started": time.time() - age, **fields}
    (run_dir / lease.LEASE).write_text(json.dumps(record))
    os.utime(run_dir / lease.LEASE, (time.time() - age, time.time() - age))


# ------------------------------------------------------------------------------------------------ unit tests

def test_a_lease_is_exclusive_and_released_by_its_holder_only(tmp_path):
    run_dir = tmp_path / "run"
    held = lease.acquire(run_dir)
    record = json.loads((run_dir / lease.LEASE).read_text())
    assert {"host", "pid", "token", "started", "machine", "pid_start"} <= set(record)
    assert record["pid"] == os.getpid() and record["token"] == held.token
    with pytest.raises(lease.Held, match=rf"being trained by {record['host']}:{os.getpid()} since .* UTC"):
        lease.acquire(run_dir)
    held.release()
    assert not (run_dir / lease.LEASE).exists()

    # another process holds it: refused; once it releases, free
    other, token = holder(run_dir)
    try:
        with pytest.raises(lease.Held) as refused:
            lease.acquire(run_dir)
        assert refused.value.info.token == token and f":{other.pid} " in str(refused.value)
    finally:
        other.communicate("")
    assert not (run_dir / lease.LEASE).exists()

    # a lease taken over (its file replaced) is neither refreshed nor removed by its former holder, whose writes
    # into the run folder stop with LeaseLost
    mine = lease.acquire(run_dir)
    try:
        lease.guard(run_dir / "rows.json")  # still mine: no-op
        forge(run_dir)
        with pytest.raises(lease.LeaseLost, match="lost the shard's lease"):
            lease.guard(run_dir / "rows.json")
        lease.guard(tmp_path / "elsewhere.json")  # outside the run folder: not guarded
    finally:
        mine.release()
    assert json.loads((run_dir / lease.LEASE).read_text())["token"] == "f" * 32


def test_the_heartbeat_refreshes_the_lease(tmp_path, monkeypatch):
    monkeypatch.setattr(lease, "HEARTBEAT_SECONDS", 0.05)
    held = lease.acquire(tmp_path)
    try:
        old = time.time() - 100
        os.utime(tmp_path / lease.LEASE, (old, old))
        wait_for(lambda: lease.read(tmp_path).age() < 5, "a heartbeat", 10)
    finally:
        held.release()


def test_a_lease_of_a_dead_process_is_taken_over_at_once(tmp_path):
    dead, token = holder(tmp_path, "--vanish")
    dead.communicate("")
    found = lease.read(tmp_path)
    assert found.token == token and lease.stale_reason(found) == "its process is gone"
    held = lease.acquire(tmp_path)
    assert lease.read(tmp_path).token == held.token != token
    held.release()
    assert not list(tmp_path.iterdir())  # no lease, no leftovers of the take-over


def test_a_lease_without_heartbeat_is_taken_over_after_the_timeout(tmp_path, monkeypatch):
    forge(tmp_path, age=lease.TIMEOUT_SECONDS - 60)  # another machine: only its heartbeat tells
    with pytest.raises(lease.Held, match=r"being trained by node-b:4242 .*heartbeat 9 min ago"):
        lease.acquire(tmp_path)
    forge(tmp_path, age=lease.TIMEOUT_SECONDS + 60)
    assert lease.stale_reason(lease.read(tmp_path)).startswith("no heartbeat for 11 min")
    lease.acquire(tmp_path).release()

    alive, _ = holder(tmp_path)  # alive on this machine but silent for too long (stalled): stale as well
    try:
        os.utime(tmp_path / lease.LEASE, (time.time() - 1000, time.time() - 1000))
        held = lease.acquire(tmp_path)
        held.release()
    finally:
        alive.communicate("")
    # a requeued SLURM job takes over the lease of its own earlier run at once, wherever that ran
    forge(tmp_path, slurm_job="77", slurm_restart=0)
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert "earlier run of SLURM job 77" in lease.stale_reason(lease.read(tmp_path))
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")
    assert lease.stale_reason(lease.read(tmp_path)) == ""


@pytest.mark.parametrize("contenders", [8])
def test_racing_take_overs_of_one_stale_lease_have_exactly_one_winner(tmp_path, monkeypatch, contenders):
    """Every contender has judged the lease stale before any of them moves it (a barrier at the start of the
    take-over), the worst case; threads race 10 times, then processes (real pids) 3 times."""
    barrier = threading.Barrier(contenders)
    take_over = lease._take_over
    waited = threading.local()

    def synchronised(path, info):
        if not getattr(waited, "done", False):  # each contender's first take-over starts together
            waited.done = True
            barrier.wait(timeout=10)
        return take_over(path, info)

    monkeypatch.setattr(lease, "_take_over", synchronised)
    for round_ in range(10):
        run_dir = tmp_path / f"round-{round_}"
        forge(run_dir, age=lease.TIMEOUT_SECONDS + 1)
        barrier.reset()
        results: list = [None] * contenders

        def contend(i: int) -> None:
            waited.done = False
            try:
                results[i] = lease.acquire(run_dir)
            except lease.Held as held:
                results[i] = held

        threads = [threading.Thread(target=contend, args=(i,)) for i in range(contenders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [r for r in results if isinstance(r, lease.Lease)]
        assert len(winners) == 1, results
        assert lease.read(run_dir).token == winners[0].token and winners[0].still_mine()
        assert sorted(p.name for p in run_dir.iterdir()) == [lease.LEASE]  # no markers or graves left
        winners[0].release()

    # separate processes (real pids), started together against one stale lease
    race = textwrap.dedent("""
        import sys, time
        from bench.results import lease
        while time.time() < float(sys.argv[2]):
            pass
        try:
            held = lease.acquire(sys.argv[1])
            print("won", flush=True)
        except lease.Held:
            print("held", flush=True)
        sys.stdin.read()
    """)
    for round_ in range(3):
        run_dir = tmp_path / f"processes-{round_}"
        forge(run_dir, age=lease.TIMEOUT_SECONDS + 1)
        at = str(time.time() + 1.5)
        processes = [subprocess.Popen([sys.executable, "-c", race, str(run_dir), at], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True) for _ in range(4)]
        said = [p.stdout.readline().strip() for p in processes]
        assert sorted(said) == ["held", "held", "held", "won"], said
        for p in processes:
            p.communicate("")


def test_status_names_the_holder_and_a_stale_lease(tmp_path):
    run_dir = tmp_path / "k"
    store.write_json(run_dir / store.SPEC, {})
    forge(run_dir, age=12)
    state = decide("k", run_dir, None, None)
    assert state.state == "running" and "node-b:4242" in state.reason and "heartbeat 12 s ago" in state.reason
    forge(run_dir, age=lease.TIMEOUT_SECONDS + 60)
    state = decide("k", run_dir, None, None)
    assert state.state == "interrupted" and state.reason.startswith("stale lease of node-b:4242 (no heartbeat")


# ------------------------------------------------------------------------------------------------ clbench run

@pytest.mark.slow
def test_two_runners_on_one_sweep_train_every_shard_once(fleet, reference, tmp_path):
    """Both runners get the whole sweep (ce, cl x seeds 1-2) at the same moment; each training takes a
    second longer than usual so that they overlap. Every shard is trained exactly once, both exit 0, the
    runner that met a held shard says so, and the table equals a single runner's."""
    results, counter = tmp_path / "results", tmp_path / "starts"
    first = fleet.start(results, starts=str(counter), slow="1")
    second = fleet.start(results, starts=str(counter), slow="1")
    codes = [fleet.wait(pid) for pid, _ in (first, second)]
    logs = [log.read_text() for _, log in (first, second)]
    assert codes == [0, 0], logs
    keys = sorted(p.name for p in reference.iterdir() if (p / store.ROWS).exists())
    trained = Counter(key for key, _ in starts(counter))
    assert trained == Counter(keys), (trained, logs)
    done = [line for log in logs for line in log.splitlines() if "] done " in line]
    held = [line for log in logs for line in log.splitlines() if "] held " in line]
    assert len(done) == len(keys) and held, logs  # they did overlap
    # the other runner is named, or (caught between its O_EXCL create and its write) said to be claiming it
    assert all("being trained by" in line or "its lease is being written" in line for line in held), held
    assert "held by another runner, not run here" in "".join(logs)
    assert_same_table(results, reference)
    pd.testing.assert_frame_equal(pd.read_parquet(results / store.TABLE), pd.DataFrame(store.finished_rows(results)))
    assert not list(results.glob(f"*/{lease.LEASE}")) and not list(results.glob("*/.*"))
    rows = store.finished_rows(results)
    assert {row["cpu_threads"] for row in rows} == {1}  # provenance: this process's CPU threads


def test_a_killed_holder_is_skipped_while_alive_and_taken_over_once_dead(fleet, reference, tmp_path, cli):
    """The holder stalls (SIGSTOP) right after its first epoch checkpoint: a second runner skips the shard
    as held (exit 0) and `clbench status` names the holder. The holder is then SIGKILLed: status says
    interrupted, stale lease; the next runner takes the shard over at once, resumes from the checkpoint and
    ends with the uninterrupted run's table."""
    results, counter = tmp_path / "results", tmp_path / "starts"
    pid, _ = fleet.start(results, methods="ce", seeds="1", starts=str(counter), signal="STOP")
    wait_for(lambda: stopped(pid), "the holder to stall after its first checkpoint")
    run_dir = next(results.glob("ce_*"))
    assert (run_dir / "checkpoint.pt").exists() and lease.read(run_dir).record["pid"] == pid

    code, log = fleet.run(results, methods="ce", seeds="1", starts=str(counter))
    assert code == 0, log
    assert f"] held    {run_dir.name}  being trained by " in log and f":{pid} since " in log, log
    assert "1 of 1 shard(s) held by another runner" in log
    _, out, _ = cli("status", "--results-dir", results)
    line = next(line for line in out.splitlines() if line.startswith(run_dir.name))
    assert " running " in line and f":{pid} since " in line and "heartbeat" in line, out

    kill_group(pid)
    assert fleet.wait(pid) == -signal.SIGKILL
    _, out, _ = cli("status", "--results-dir", results)
    line = next(line for line in out.splitlines() if line.startswith(run_dir.name))
    assert " interrupted " in line and "stale lease of " in line and f":{pid} (its process is gone)" in line, out
    assert "checkpoint present" in line

    code, log = fleet.run(results, methods="ce", seeds="1", starts=str(counter))
    assert code == 0, log
    assert "taking over the stale lease" in log and "] done " in log, log
    assert [p for _, p in starts(counter)][0] == pid and len(starts(counter)) == 2  # the killed one, the resume
    assert store.read_json(run_dir / store.TRAIN_LOG)["resumed_from_epoch"] == 1
    assert_same_table(results, reference, [run_dir.name])
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(p.name for p in (reference / run_dir.name).iterdir())


def test_a_holder_that_stalls_past_the_timeout_loses_the_shard_and_writes_nothing(fleet, reference, tmp_path):
    """A holder stalled (alive) for longer than the timeout is taken over; when it comes back, its next write
    into the run folder finds the lease gone and it stops (status held, exit 0) instead of overwriting the
    finished results of the runner that took over."""
    results = tmp_path / "results"
    pid, stalled_log = fleet.start(results, methods="ce", seeds="1", signal="STOP")
    wait_for(lambda: stopped(pid), "the holder to stall")
    run_dir = next(results.glob("ce_*"))
    old = time.time() - lease.TIMEOUT_SECONDS - 60
    os.utime(run_dir / lease.LEASE, (old, old))  # as if it had been stopped for 11 minutes

    code, log = fleet.run(results, methods="ce", seeds="1")
    assert code == 0 and "no heartbeat for 11 min" in log and "] done " in log, log
    finished = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}

    kill_group(pid, signal.SIGCONT)
    assert fleet.wait(pid) == 0
    log = stalled_log.read_text()
    assert "] held " in log and "lost the shard's lease" in log, log
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == finished
    assert not list(run_dir.glob(".*"))
    assert_same_table(results, reference, [run_dir.name])


def test_overwrite_leaves_a_shard_held_by_a_live_runner_alone(fleet, reference, tmp_path):
    """--overwrite of a finished shard that a live runner holds (say, evaluating it) skips it as held; a plain
    run reports it finished and leaves it to the holder too. Neither trains nor touches its files."""
    import shutil

    results, counter = tmp_path / "results", tmp_path / "starts"
    key = next(p.name for p in reference.glob("ce_*_s1_*"))
    shutil.copytree(reference / key, results / key)
    before = {p.name: p.read_bytes() for p in (results / key).iterdir() if p.is_file()}
    other, token = holder(results / key)
    try:
        code, log = fleet.run(results, methods="ce", seeds="1", starts=str(counter), extra=("--overwrite",))
        assert code == 0, log
        assert f"] held    {key}  being trained by " in log and f":{other.pid} since" in log, log
        code, log = fleet.run(results, methods="ce", seeds="1", starts=str(counter))
        assert code == 0 and f"] skipped {key}" in log, log
        assert lease.read(results / key).token == token
    finally:
        other.communicate("")
    assert not starts(counter)
    assert {p.name: p.read_bytes() for p in (results / key).iterdir() if p.is_file()} == before


def test_an_overwrite_reset_keeps_the_lease(tmp_path):
    run_dir = tmp_path / "run"
    held = lease.acquire(run_dir)
    try:
        store.write_json(run_dir / store.ROWS, [])
        store.write_json(run_dir / store.EVALS / "repr-1.json", {})
        (run_dir / ".model.pt.x.tmp").write_bytes(b"")
        store.reset_run(run_dir)
        assert sorted(p.name for p in run_dir.iterdir()) == [lease.LEASE] and held.still_mine()
    finally:
        held.release()
