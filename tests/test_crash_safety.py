"""Crash safety (issue 6, "a sweep survives anything"): a local sweep whose processes are SIGKILLed at any
moment -- mid-epoch, mid-write, between writing a run's rows and tidying up, mid-evaluation, mid-gather, in one
process or with --jobs 2 -- and is then re-run ends with exactly the table of an uninterrupted sweep, and with a
store that holds no debris (temporary files, checkpoints of finished runs, a stale or unreadable table).

Every launch is a separate `clbench run` process (forked by a small fork server, see WRAPPER, which imports the
heavy modules once). One kill point per launch can be armed through the CHAOS_KILL environment variable: the
process SIGKILLs itself there, so a kill lands exactly in the chosen phase however busy the machine is. The
--jobs 2 test kills from outside instead, at seeded random moments: one pool worker, then the whole sweep.

Training on CPU with fixed seeds is deterministic here (tests/test_trainer.py: resume equals an uninterrupted
run) and every launch uses one CPU thread (OMP_NUM_THREADS=1; pool workers get cpu_count // jobs), so the
values come out identical; they are compared with a relative tolerance of 1e-6 only so that a bigger machine,
where pool workers use several threads, cannot fail the test on float noise.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
import pytest

from bench.results import store
from conftest import FAST, FIXTURE, LineServer, kill_group, launch_env as isolated_launch_env, process_state
IDENTITY = ["run_key", "method", "dataset", "encoder", "seed", "evaluator", "split", "metric", "label", "n"]
COLUMNS = [*IDENTITY, "value"]
# Files whose content does not depend on timing (train_log.json and rows.json carry seconds and timestamps).
DETERMINISTIC_FILES = ("confusion.json", "method_state.json")
LAUNCH_TIMEOUT = 240

# The launcher of every sweep. `python chaos_bench.py ARGS` runs `bench ARGS`; `python chaos_bench.py --zygote`
# imports the heavy modules once and then forks one child per request line ({"argv", "env", "log"} as JSON),
# prints its process id, waits for it and prints its exit code (negative: killed by that signal). Each child is
# a fresh `bench` process in its own session (kill its process group to kill the sweep, pool workers included);
# forking only skips the ~5-10 s of imports that a busy 2-core machine spends per launch.
# CHAOS_KILL in a launch's environment arms ONE kill point -- the process SIGKILLs itself there:
#   step:N           after the N-th optimiser step of this process (mid-epoch unless N is a multiple of the
#                    steps per epoch)
#   write:NAME:N     at the N-th atomic write of a file whose name matches NAME (a glob), its temporary file
#                    complete, not renamed
#   renamed:NAME:N   right after the N-th atomic write of a file matching NAME was renamed into place
#   eval:N           in the N-th evaluation, its rows computed but not written
# Spawned pool workers import this script as __mp_main__, so the kill point is armed in every worker too (each
# counts on its own).
WRAPPER = '''
import contextlib
import fnmatch
import json
import os
import signal
import sys

seen = {}


def die_at(kind, name=""):
    """SIGKILL this process when the armed kill point (kind, name, count) is reached."""
    want_kind, _, rest = os.environ.get("CHAOS_KILL", "").partition(":")
    pattern, _, count = rest.rpartition(":")
    if kind != want_kind or not fnmatch.fnmatchcase(name, pattern):
        return
    seen[kind] = seen.get(kind, 0) + 1
    if seen[kind] == int(count):
        os.kill(os.getpid(), signal.SIGKILL)


def arm():
    """Install the kill points (they do nothing unless CHAOS_KILL names them)."""
    from bench.results import atomic, store
    from bench.evaluators.representation import Representation
    from bench.training.trainer import Trainer

    atomic_path, step, evaluate = atomic.atomic_path, Trainer.step, Representation.evaluate

    @contextlib.contextmanager
    def killable_atomic_path(path, run_dir=None):
        with atomic_path(path, run_dir) as tmp:
            yield tmp
            die_at("write", path.name)
        die_at("renamed", path.name)

    def killable_step(self, *args, **kwargs):
        result = step(self, *args, **kwargs)
        die_at("step")
        return result

    def killable_evaluate(self, ctx):
        records = evaluate(self, ctx)
        die_at("eval")
        return records

    atomic.atomic_path = store.atomic_path = killable_atomic_path  # run files (bench.results.atomic), the table
    Trainer.step, Representation.evaluate = killable_step, killable_evaluate


def zygote():
    """Serve launch requests from stdin (see the test module)."""
    import bench.cli.main, bench.running.evaluation, bench.cli.plot, bench.cli.report, bench.running.runner, bench.reporting.summary  # noqa
    import transformers
    from transformers.models.bert import modeling_bert  # noqa

    arm()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setsid()
                log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.environ.clear()
                os.environ.update(request["env"])
                code = bench.cli.main.main(request["argv"])
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


if os.environ.get("CHAOS_KILL"):
    arm()  # a spawned pool worker of an armed launch
if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        zygote()
    else:
        from bench.cli.main import main

        sys.exit(main(sys.argv[1:]))
'''


def sweep_args(data: Path, results: Path, jobs: int, methods: str = "ce,cl", seeds: str = "1-3") -> list[str]:
    """By default a 6-shard sweep (ce and cl, seeds 1-3, 3 epochs) with the `repr` evaluator, so runs have an
    evaluation phase after their rows are written. On the CPU (--device cpu): every sweep is compared with the
    reference, and a GPU under `auto` is not bit-reproducible."""
    fast = [a for a in FAST if a not in ("--evaluators", "none", "--epochs", "2")]
    return ["run", "--methods", methods, "--datasets", str(data), "--seeds", seeds, *fast, "--epochs", "3",
            "--evaluators", "repr", "--results-dir", str(results), "--jobs", str(jobs), "--device", "cpu"]


def launch_env(kill: str = "") -> dict[str, str]:
    """The environment of a sweep: offline, one CPU thread, no BENCH_* settings from outside, the kill point."""
    return isolated_launch_env(("BENCH_", "CHAOS_"), **({"CHAOS_KILL": kill} if kill else {}))


class Zygote(LineServer):
    """The test's side of the fork server: start a launch, wait for its exit code."""

    def __init__(self, wrapper: Path):
        super().__init__([str(wrapper), "--zygote"], launch_env(), "chaos zygote")

    def start(self, argv: list[str], env: dict[str, str], log: Path) -> int:
        """Fork a launch; returns its process id (also its process group id)."""
        self.send({"argv": argv, "env": env, "log": str(log)})
        return int(self.readline())

    def wait(self, pid: int) -> int:
        """The launch's exit code (after LAUNCH_TIMEOUT seconds it is killed)."""
        watchdog = threading.Timer(LAUNCH_TIMEOUT, kill_group, [pid])
        watchdog.start()
        try:
            return int(self.readline())
        finally:
            watchdog.cancel()
            kill_group(pid)  # pool workers that outlived their parent


class Sweep:
    """The sweep into one results folder; each launch is a fresh `clbench run` process."""

    def __init__(self, zygote: Zygote, data: Path, results: Path, logs: Path, methods: str = "ce,cl",
                 seeds: str = "1-3"):
        self.zygote, self.data, self.results, self.logs = zygote, data, results, logs
        self.methods, self.seeds = methods, seeds
        self.launches = 0
        self.pending: int | None = None  # a launch started and not yet waited for

    def start(self, jobs: int, kill: str = "") -> int:
        """Launch the sweep (not waiting); returns the process id."""
        self.launches += 1
        logs = self.logs / f"launch-{self.launches}.log"
        argv = sweep_args(self.data, self.results, jobs, self.methods, self.seeds)
        self.pending = self.zygote.start(argv, launch_env(kill), logs)
        return self.pending

    def wait(self, pid: int) -> int:
        self.pending = None
        return self.zygote.wait(pid)

    def abandon(self) -> None:
        """Kill and reap a launch a failed test left running (keeps the fork server in step)."""
        if self.pending is not None:
            kill_group(self.pending)
            self.wait(self.pending)

    def run(self, jobs: int, kill: str = "") -> int:
        """Launch and wait; returns the exit code (-9: SIGKILLed)."""
        return self.wait(self.start(jobs, kill))

    def log(self) -> str:
        """The output of the latest launch (for failure messages)."""
        return (self.logs / f"launch-{self.launches}.log").read_text()[-4000:]


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie does not count)."""
    return process_state(pid) not in ("", "Z")


def pool_workers(parent: int) -> list[int]:
    """Process ids of the multiprocessing workers (spawned children) of `parent` (Linux /proc)."""
    workers = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and "spawn_main" in cmdline:
            workers.append(int(entry.name))
    return workers


def training_progress(results: Path) -> float:
    """When a checkpoint, a run's rows, an evaluation or the table was last written (0: never)."""
    newest = 0.0
    for pattern in ("*/checkpoint.pt", "*/rows.json", "*/evals/*.json", store.TABLE):
        for path in results.glob(pattern):
            try:
                newest = max(newest, path.stat().st_mtime)
            except FileNotFoundError:
                pass
    return newest


# ------------------------------------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def chaos_env(tmp_path_factory):
    """The fork server and a copy of the tiny fixture shared by every sweep of this module (same data path, so
    the reference and the chaos sweeps have identical run keys)."""
    if not Path("/proc/self/stat").exists() or not hasattr(os, "fork"):
        pytest.skip("the chaos tests need Linux (fork, /proc)")
    folder = tmp_path_factory.mktemp("chaos")
    wrapper = folder / "chaos_bench.py"
    wrapper.write_text(WRAPPER)
    data = folder / "tiny"
    shutil.copytree(FIXTURE, data)
    zygote = Zygote(wrapper)
    yield folder, zygote, data
    zygote.close()


@pytest.fixture(scope="module")
def reference(chaos_env) -> Path:
    """Results of the uninterrupted sweep (one process), the table every chaos sweep must end with."""
    folder, zygote, data = chaos_env
    logs = folder / "reference-logs"
    logs.mkdir()
    sweep = Sweep(zygote, data, folder / "reference", logs)
    assert sweep.run(jobs=1) == 0, sweep.log()
    return sweep.results


@pytest.fixture
def chaos(chaos_env, tmp_path) -> Iterator[Sweep]:
    """A sweep into a fresh results folder of this test."""
    _, zygote, data = chaos_env
    (tmp_path / "logs").mkdir()
    sweep = Sweep(zygote, data, tmp_path / "chaos", tmp_path / "logs")
    yield sweep
    sweep.abandon()


# ------------------------------------------------------------------------------------------------ checks

def table(frame: pd.DataFrame) -> pd.DataFrame:
    """The identity and value columns, in a canonical row order."""
    return frame[COLUMNS].sort_values(IDENTITY, kind="stable").reset_index(drop=True)


def files_of(run_dir: Path) -> set[str]:
    return {str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()}


def assert_same_results(results: Path, reference: Path) -> None:
    """The store at `results` holds exactly the reference's results, and nothing else."""
    expected = table(pd.DataFrame(store.finished_rows(reference)))
    finished = pd.DataFrame(store.finished_rows(results))
    gathered = pd.read_parquet(results / store.TABLE)  # readable: never a torn or stale table
    for frame in (finished, gathered):
        assert not frame[IDENTITY].duplicated().any(), "duplicate rows"
        got = table(frame)
        pd.testing.assert_frame_equal(got[IDENTITY], expected[IDENTITY])
        np.testing.assert_allclose(got["value"].to_numpy(float), expected["value"].to_numpy(float),
                                   rtol=1e-6, atol=1e-9, equal_nan=True)
    # the gathered table is exactly what the run folders say (the last gather saw every run and evaluation)
    pd.testing.assert_frame_equal(gathered.reset_index(drop=True), finished.reset_index(drop=True))

    runs = sorted(p.name for p in results.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert runs == sorted(p.name for p in reference.iterdir() if p.is_dir() and not p.name.startswith("."))
    # Shared caches (.cache/: token ids, augmented views) are written by several shards at once, so a killed
    # writer's temporary file there cannot be told from a live one and is left alone (harmless, small).
    leftovers = [str(p.relative_to(results)) for p in results.rglob(".*.tmp")
                 if ".cache" not in p.relative_to(results).parts]
    assert not leftovers, f"temporary files left behind: {leftovers}"
    for run in runs:
        run_dir, expected_dir = results / run, reference / run
        assert files_of(run_dir) == files_of(expected_dir), run  # no checkpoint.pt, error.json or strays
        for name in DETERMINISTIC_FILES:
            if (expected_dir / name).exists():
                assert store.read_json(run_dir / name) == store.read_json(expected_dir / name), (run, name)
        with gzip.open(run_dir / "predictions.jsonl.gz", "rt") as got, \
                gzip.open(expected_dir / "predictions.jsonl.gz", "rt") as want:
            assert [json.loads(line)["predicted"] for line in got] == \
                   [json.loads(line)["predicted"] for line in want], run


# ------------------------------------------------------------------------------------------------ tests

@pytest.mark.slow
def test_chaos_sweep_killed_in_every_phase_equals_uninterrupted_run(reference, chaos):
    """Guards resume after SIGKILL in one process, one launch per kill point in a seeded random order: killed
    mid-epoch; mid-write of the token cache, the spec, a checkpoint, the predictions, the model, an evaluation
    and the table (lock held); right after a checkpoint was renamed; right after a run's rows were written (checkpoint not
    yet removed, not evaluated, not gathered); mid-evaluation. A plain re-run then succeeds at once and the
    store equals the uninterrupted sweep's: same table, same files, no debris."""
    steps = store.read_json(next(reference.glob("*/train_log.json")))["history"][0]["steps"]
    rng = random.Random(6)
    kills = [f"step:{rng.choice([n for n in range(2, 3 * steps) if n % steps])}",
             "write:spec.json:1",
             f"write:checkpoint.pt:{rng.randint(1, 3)}",
             f"renamed:checkpoint.pt:{rng.randint(1, 3)}",
             "write:predictions.jsonl.gz:1",
             "write:model.safetensors:1",
             "renamed:rows.json:1",
             "eval:1",
             "write:repr-*.json:1",
             "write:results.parquet:1"]
    rng.shuffle(kills)
    kills.insert(0, "write:*.npz:2")  # the token cache: written only until the first shard has tokenised
    for kill in kills:  # each finishes at most one more run: all of them are reached
        code = chaos.run(jobs=1, kill=kill)
        assert code == -signal.SIGKILL, f"kill point {kill} was not reached (exit {code}):\n{chaos.log()}"
    assert chaos.run(jobs=1) == 0, chaos.log()
    assert_same_results(chaos.results, reference)


@pytest.mark.slow
def test_chaos_parallel_sweep_killed_at_random_moments_equals_uninterrupted_run(reference, chaos):
    """Guards --jobs 2, where shards train, evaluate and gather at the same time, against SIGKILLs from
    outside at seeded random moments once training is under way: first one worker (the pool breaks and the
    other worker is stopped too), then the whole sweep (parent and workers). A plain re-run then succeeds at
    once and ends with the uninterrupted sweep's table; the concurrently rebuilt results.parquet is readable
    and complete."""
    rng = random.Random(62)
    landed = []
    for target in ("worker", "sweep"):
        delay = rng.uniform(0.0, 1.0)
        pid = chaos.start(jobs=2)
        started = time.time()
        while alive(pid) and training_progress(chaos.results) < started:
            time.sleep(0.02)  # until this launch trains (its workers import torch first)
        time.sleep(delay)
        workers = pool_workers(pid)
        running = alive(pid)
        if target == "worker" and workers:
            os.kill(rng.choice(workers), signal.SIGKILL)  # the pool breaks; its shards go to a fresh pool: exit 0
        else:
            kill_group(pid)
        code = chaos.wait(pid)
        landed.append(running and (code != 0 or (target == "worker" and bool(workers))))
    assert any(landed), "no kill landed before the sweep finished"  # (a finished sweep's re-run ends at once)
    assert chaos.run(jobs=2) == 0, chaos.log()
    assert_same_results(chaos.results, reference)


# ------------------------------------------------------------------------------------------------ regressions
# Fast, in-process versions of states the chaos tests produced, each fixed in bench/running/shard.py or bench/results/store.py.

def test_run_killed_right_after_its_rows_leaves_no_debris_on_the_next_run(chaos):
    """Guards the tidy-up of a finished run: a process killed after writing rows.json but before removing the
    checkpoint, evaluating and gathering -- and temporary files that killed writers left in the run folder,
    its evals/ and beside the table -- are cleaned up by the next run, which evaluates and gathers the run
    without retraining it."""
    chaos.methods, chaos.seeds = "ce", "1"
    assert chaos.run(jobs=1, kill="renamed:rows.json:1") == -signal.SIGKILL, chaos.log()
    results = chaos.results
    run_dir = next(results.glob("ce_*"))
    assert store.is_finished(run_dir) and (run_dir / "checkpoint.pt").exists()
    assert not (results / store.TABLE).exists() and not (run_dir / store.EVALS).exists()
    (run_dir / store.EVALS).mkdir()
    debris = [run_dir / ".model.safetensors.k1ll3d.tmp", run_dir / store.EVALS / ".repr-0.json.k1ll3d.tmp",
              results / ".results.parquet.k1ll3d.tmp"]
    for path in debris:
        path.write_bytes(b"torn")
    assert chaos.run(jobs=1) == 0, chaos.log()
    assert "skipped" in chaos.log()
    assert not (run_dir / "checkpoint.pt").exists()
    assert not [p for p in debris if p.exists()]
    assert list((run_dir / store.EVALS).glob("repr-*.json"))
    pd.testing.assert_frame_equal(pd.read_parquet(results / store.TABLE),
                                  pd.DataFrame(store.finished_rows(results)))


def test_stale_table_is_gathered_again_when_every_shard_is_skipped(chaos):
    """Guards results.parquet against staying stale for good: the last shard of a sweep is killed while it
    gathers (after its rows and evaluation are stored); the next run skips every shard and must still rebuild
    the table so that it holds every finished run (and drop the torn table's temporary file)."""
    chaos.methods, chaos.seeds = "ce", "1,2"
    assert chaos.run(jobs=1, kill="write:results.parquet:2") == -signal.SIGKILL, chaos.log()
    results = chaos.results
    assert pd.read_parquet(results / store.TABLE)["seed"].unique().tolist() == [1]
    assert len(store.finished_rows(results)) > len(pd.read_parquet(results / store.TABLE))
    assert chaos.run(jobs=1) == 0, chaos.log()
    assert chaos.log().count("skipped") == 2
    table = pd.read_parquet(results / store.TABLE)
    pd.testing.assert_frame_equal(table, pd.DataFrame(store.finished_rows(results)))
    assert not list(results.glob(".*.tmp"))


def test_table_is_stale_only_when_it_was_read_before_the_runs_last_write(tmp_path):
    """Guards the cheap staleness test a skipped shard uses to decide whether to regather: a missing table,
    or one read before the run's rows or an evaluation was written (within a safety margin), is stale; a table
    gathered well after them is not (so re-running a finished sweep does not regather once per shard)."""
    run_dir = tmp_path / "run"
    store.write_json(run_dir / store.ROWS, [])
    store.write_json(run_dir / store.EVALS / "repr-1.json", {"rows": []})
    assert store.table_is_stale(tmp_path, run_dir)  # no table yet
    store.gather(tmp_path)
    now = time.time()
    for path in (run_dir / store.ROWS, run_dir / store.EVALS / "repr-1.json"):
        os.utime(path, (now - 100, now - 100))
    os.utime(tmp_path / store.TABLE, (now, now))
    assert not store.table_is_stale(tmp_path, run_dir)
    os.utime(run_dir / store.EVALS / "repr-1.json", (now - 1, now - 1))  # written just before (or while) reading
    assert store.table_is_stale(tmp_path, run_dir)
    os.utime(run_dir / store.EVALS / "repr-1.json", (now + 5, now + 5))  # an evaluation stored after the gather
    assert store.table_is_stale(tmp_path, run_dir)


def test_gather_sets_the_table_time_to_when_it_read_the_runs(tmp_path):
    """Guards the other half of the staleness test: the table's modification time is when gather started
    reading the run folders, not when it finished writing, so a run renamed into place during a gather is
    never mistaken for gathered."""
    store.write_json(tmp_path / "run" / store.ROWS, [{"run_key": "run", "value": 1.0}])
    before = time.time()
    store.gather(tmp_path)
    assert before - 1 <= (tmp_path / store.TABLE).stat().st_mtime <= time.time()


@pytest.mark.slow
def test_pool_workers_die_with_the_main_process(tmp_path):
    """A `--jobs` worker busy with a shard must not outlive a killed sweep (it would hold a GPU and race the
    re-run on the same shards)."""
    import textwrap

    script = tmp_path / "orphan.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing, os, sys, time
        from concurrent.futures import ProcessPoolExecutor
        from bench.running.runner import _init_worker

        def busy_shard(pid_file):
            with open(pid_file, "w") as handle:
                handle.write(str(os.getpid()))
            time.sleep(60)

        if __name__ == "__main__":
            parent = os.getpid() if sys.argv[2] == "fixed" else None
            pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_init_worker, initargs=(None, 1, parent))  # as runner.execute
            pool.submit(busy_shard, sys.argv[1])
            while not os.path.exists(sys.argv[1]):
                time.sleep(0.05)
            time.sleep(0.2)
            os.kill(os.getpid(), 9)
    """))

    def survives(mode: str) -> bool:
        pid_file = tmp_path / f"worker-{mode}.pid"
        subprocess.run([sys.executable, str(script), str(pid_file), mode], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120)  # no pipes: an orphan would hold them open
        worker = int(pid_file.read_text())
        for _ in range(30):
            try:
                os.kill(worker, 0)
            except ProcessLookupError:
                return False
            time.sleep(0.1)
        os.kill(worker, signal.SIGKILL)
        return True

    assert survives("unfixed")  # without the death signal a busy worker goes on alone (what the fix is for)
    assert not survives("fixed")


@pytest.mark.slow
def test_a_dead_worker_does_not_end_the_sweep(tmp_path, tiny):
    """A `--jobs` worker killed mid-shard (OOM killer, kill -9) breaks its process pool; the shards it took
    down go to a fresh pool (resuming checkpoints) and the sweep still finishes every shard with exit 0."""
    import textwrap

    hooks = tmp_path / "hooks"
    hooks.mkdir()
    marker = tmp_path / "killed-once"
    # sitecustomize runs at start-up of every spawned worker: the first worker to start the seed-2 shard dies.
    (hooks / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import os
        import bench.running.shard

        original = bench.running.shard.run_shard

        def run_shard(spec, *args, **kwargs):
            if spec.seed == 2 and not os.path.exists({str(marker)!r}):
                open({str(marker)!r}, "w").close()
                os._exit(137)
            return original(spec, *args, **kwargs)

        bench.running.shard.run_shard = run_shard
        import bench.running.runner
        bench.running.runner.run_shard = run_shard
    """))
    from conftest import FAST

    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": f"{hooks}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "bench.cli.main", "run", "--methods", "ce", "--datasets", str(tiny),
                           "--seeds", "1-3", "--jobs", "2", "--results-dir", str(results), *FAST],
                          env=env, capture_output=True, text=True, timeout=600)
    assert marker.exists(), done.stderr  # the hook fired: a worker really died
    assert done.returncode == 0, done.stderr
    assert "fresh pool" in done.stderr
    assert len(list(results.glob("*/rows.json"))) == 3
