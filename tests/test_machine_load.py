"""A busy machine (issue 45): the rule that calls it busy, the one line `clbench run` prints and the torch threads it
trains with, the load in every row, `clbench doctor`'s line and the HTML cost table's note."""

from __future__ import annotations

import gzip
import json
import os
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from bench.cli import doctor
from bench.reporting import htmlboard
from bench.reporting.resultsview import load_results
from bench.running import machine_load, provenance, runner
from bench.running.machine_load import advise
from bench.results import store
from conftest import FAST
from test_report import write_run

BUSY = "clbench: this machine is busy"
TIMINGS = {"build_seconds", "tokenize_seconds", "train_seconds", "test_seconds", "half_check_seconds", "wall_seconds",
           "finished_at",
           "load_avg_1m", "load_avg_end"}  # row fields that may differ between two runs of one command: when, how fast


@pytest.fixture
def machine(monkeypatch):
    """A fake machine: `machine(load, cores)` sets its load average and usable cores; OMP_NUM_THREADS unset,
    torch at 2 threads (its threads and the recorded load restored after)."""
    threads, load = torch.get_num_threads(), provenance.start_load()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    for name in ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"):
        monkeypatch.delenv(name, raising=False)
    torch.set_num_threads(2)

    def set_machine(load: float, cores: int = 2) -> None:
        monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)

    yield set_machine
    torch.set_num_threads(threads)
    provenance.mark_start(load)


# ----------------------------------------------------------------------------------------------- the rule

@pytest.mark.parametrize("threads,workers,load,cores,busy,use", [
    (2, 1, 0.3, 2, False, 2),     # idle: unchanged
    (2, 1, 1.0, 2, False, 2),     # one busy core of other work is within the slack
    (2, 1, 1.1, 2, True, 1),      # beyond it: the cores left free
    (2, 1, 5.8, 2, True, 1),      # never below one thread
    (16, 1, 3.9, 16, False, 16),  # the slack grows with the cores (a quarter)
    (16, 1, 6.0, 16, True, 10),
    (8, 2, 10.0, 16, True, 3),    # per worker
    (1, 4, 0.2, 2, False, 1),     # a run's own --jobs oversubscription is not a busy machine
    (1, 2, 5.8, 2, True, 1),      # busy, already the fewest threads
])
def test_the_rule(threads, workers, load, cores, busy, use):
    advice = advise(threads, workers, load, cores)
    assert (advice.busy, advice.recommended) == (busy, use)


def test_the_line_says_what_and_what_to_do():
    assert advise(2, 1, 5.8, 2).line() == ("clbench: this machine is busy (load 5.8 on 2 cores): training with 1 torch "
                                           "thread instead of 2 (--adapt-threads); close other work for honest "
                                           "timings")
    assert advise(2, 1, 5.8, 2).line(adapt=False) == (
        "clbench: this machine is busy (load 5.8 on 2 cores): training with 2 torch threads as on an idle machine, "
        "so the digits are the same; --adapt-threads would use 1, faster here (its digits may differ); close other "
        "work for honest timings")
    assert advise(1, 2, 5.8, 2).line() == ("clbench: this machine is busy (load 5.8 on 2 cores): training with 1 torch "
                                           "thread per worker, already the fewest; close other work or pass --jobs 1 "
                                           "for honest timings")


def test_load_and_cores_come_from_the_system(machine, monkeypatch):
    machine(5.8, cores=4)
    advice = advise(4)
    assert (advice.load, advice.cores, advice.busy, advice.recommended) == (5.8, 4, True, 1)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")  # SLURM's allocation caps the cores
    assert advise(1).cores == 1

    def no_load():
        raise OSError("no load average")

    monkeypatch.setattr(os, "getloadavg", no_load)
    assert machine_load.load_average() is None and not advise(4).busy


@pytest.mark.parametrize("value,threads", [("3", 3), ("", None), ("abc", None), ("0", None)])
def test_omp_num_threads_is_an_explicit_choice(monkeypatch, value, threads):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert machine_load.explicit_threads() == threads


# ----------------------------------------------------------------------------------------------- clbench run

def rows_of(results):
    return [row for path in sorted(results.glob("*/rows.json")) for row in json.loads(path.read_text())]


def predictions_of(results):
    """Every run's stored test predictions, byte for byte (decompressed), by run key."""
    return {path.parent.name: gzip.decompress(path.read_bytes()) for path in sorted(results.glob("*/" + store.PREDICTIONS))}


def test_a_busy_machine_gives_the_digits_of_an_idle_one_by_default(cli, tiny, results, machine):
    """Issue 52: the same command and seed give bit-identical rows and predictions under any load; the busy line is
    advice only."""
    machine(0.2)
    args = ("run", "--methods", "ce", "--datasets", tiny, "--seeds", "1", *FAST, "--epochs", "1", "--device", "cpu")
    code, _, err = cli(*args)
    assert code == 0 and BUSY not in err, err
    idle, idle_rows = predictions_of(results), rows_of(results)
    machine(5.8)
    seen, train = [], runner.run_shard

    def run_shard(*a, **kw):
        seen.append(torch.get_num_threads())
        return train(*a, **kw)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "run_shard", run_shard)
        code, _, err = cli(*args, "--overwrite")
    assert code == 0, err
    assert [line for line in err.splitlines() if BUSY in line] == [advise(2, 1, 5.8, 2).line(adapt=False)]
    assert seen == [2]
    assert predictions_of(results) == idle  # byte for byte
    busy_rows = rows_of(results)
    assert {r["threads_adapted"] for r in busy_rows} == {False} and {r["cpu_threads"] for r in busy_rows} == {2}
    differing = {k for busy, idle_row in zip(busy_rows, idle_rows) for k in busy.keys() | idle_row.keys()
                 if busy.get(k) != idle_row.get(k)}
    assert len(busy_rows) == len(idle_rows) and differing <= TIMINGS, differing - TIMINGS


def test_with_adapt_threads_a_busy_machine_trains_with_fewer_threads_and_says_so_once(cli, tiny, results, machine):
    machine(5.8)
    seen, train = [], runner.run_shard

    def run_shard(*args, **kwargs):
        seen.append(torch.get_num_threads())  # the threads each shard trains with
        return train(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "run_shard", run_shard)
        code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, "--seeds", "1,2", *FAST, "--epochs", "1",
                           "--device", "cpu", "--adapt-threads")
    assert code == 0, err
    assert [line for line in err.splitlines() if BUSY in line] == [
        "clbench: this machine is busy (load 5.8 on 2 cores): training with 1 torch thread instead of 2 "
        "(--adapt-threads); close other work for honest timings"]
    assert seen == [1, 1] and torch.get_num_threads() == 2  # both shards; the process's own threads come back
    rows = rows_of(results)
    assert {(r["cpu_threads"], r["load_avg_1m"], r["load_avg_end"], r["threads_adapted"]) for r in rows} == {
        (1, 5.8, 5.8, True)}
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, "--seeds", "1,2", *FAST, "--epochs", "1",
                       "--device", "cpu", "--adapt-threads")
    assert code == 0 and "skipped" in err and BUSY not in err  # nothing to train: nothing to say


def test_adapt_threads_in_a_config_file_must_be_true_or_false(cli, tiny, tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text("adapt_threads: maybe\n")
    code, _, err = cli("run", "--config", str(config), "--methods", "ce", "--datasets", tiny)
    assert code == 2 and "adapt_threads is true or false" in err


def test_an_idle_machine_or_omp_num_threads_changes_nothing(cli, tiny, results, machine, monkeypatch):
    machine(0.2)
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--epochs", "1", "--device", "cpu")
    assert code == 0 and BUSY not in err, err
    assert {(r["cpu_threads"], r["load_avg_1m"]) for r in rows_of(results)} == {(2, 0.2)}
    machine(5.8)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--epochs", "1", "--device", "cpu",
                       "--overwrite")
    assert code == 0 and BUSY not in err, err
    assert {(r["cpu_threads"], r["load_avg_1m"]) for r in rows_of(results)} == {(2, 5.8)}


def options(tmp_path, jobs=1, device="cpu", adapt=True):
    return SimpleNamespace(device=device, overwrite=False, results_dir=tmp_path, jobs=jobs, shards_per_gpu=1,
                           adapt_threads=adapt)


def shards(n):
    return [SimpleNamespace(spec=SimpleNamespace(key=f"k{i}")) for i in range(n)]


def test_pool_workers_share_the_free_cores(machine, tmp_path, capsys):
    machine(10.0, cores=16)
    assert runner.busy_threads(shards(2), options(tmp_path, jobs=2, adapt=False)) is None  # advice only
    assert "training with 8 torch threads per worker as on an idle machine" in capsys.readouterr().err
    assert not provenance.threads_adapted()
    assert runner.busy_threads(shards(2), options(tmp_path, jobs=2)) == 3  # (16 - 10) // 2 instead of 8 each
    assert "training with 3 torch threads per worker instead of 8" in capsys.readouterr().err
    assert provenance.start_load() == 10.0 and provenance.threads_adapted()  # the rows' load_avg_1m, threads_adapted
    machine(5.8)
    assert runner.busy_threads(shards(2), options(tmp_path, jobs=2)) is None  # 1 thread each already
    assert "already the fewest; close other work or pass --jobs 1" in capsys.readouterr().err
    assert runner.busy_threads(shards(2), options(tmp_path, device="cuda")) is None  # a GPU's CPU threads barely work
    assert capsys.readouterr().err == ""


def test_a_pool_worker_takes_its_threads_and_the_sweeps_load(machine):
    runner._init_worker(None, 1, None, False, 4.2, True)
    assert torch.get_num_threads() == 1 and provenance.start_load() == 4.2 and provenance.threads_adapted()


def test_every_row_records_the_load(machine):
    machine(3.5)
    provenance.mark_start(1.25)
    row = provenance.provenance(torch.device("cpu"))
    assert (row["cpu_threads"], row["load_avg_1m"], row["load_avg_end"]) == (2, 1.25, 3.5)


# ----------------------------------------------------------------------------------------------- clbench doctor

def test_doctor_shows_the_load(machine):
    machine(1.9)
    assert doctor.format_checks([doctor.load_check()]).splitlines()[0] == (
        "info  load  1.9 on 2 cores (busy: training on the CPU uses 2 torch threads as when idle, slowly; "
        "--adapt-threads would use 1)")
    machine(0.2)
    assert doctor.load_check().detail == "0.2 on 2 cores (training on the CPU uses 2 torch threads)"


# ----------------------------------------------------------------------------------------------- the HTML page

def runs(loads):
    """Clean test-accuracy rows, one per (method, load_avg_1m, load_avg_end, cpu_threads)."""
    return pd.DataFrame([{"run_key": f"{m}_{i}", "method": m, "evaluator": "clean", "split": "test",
                          "metric": "accuracy", "label": "", "load_avg_1m": start, "load_avg_end": end,
                          "cpu_threads": threads} for i, (m, start, end, threads) in enumerate(loads)])


def test_the_cost_table_notes_runs_timed_under_different_loads():
    frame = runs([("ce", 0.3, 2.2, 2), ("clld-adaptive", 5.1, 7.0, 2), ("clld-adaptive", 5.3, 7.1, 2)])
    (line,) = htmlboard.load_note(frame, frame["run_key"])
    assert line.startswith("timed under different machine loads (other work, median load average by method: "
                           "ce 0.3, clld-adaptive 5.2): the speeds are not comparable")
    idle = runs([("ce", 0.1, 2.0, 2), ("supcon", 0.8, 2.5, 2)])  # under one busy core: alike
    assert htmlboard.load_note(idle, idle["run_key"]) == []
    dropped = runs([("ce", 0.2, 7.0, 2), ("supcon", 0.2, 2.1, 2)])  # one sweep, the other work ended midway
    assert "ce 5.0, supcon 0.2" in htmlboard.load_note(dropped, dropped["run_key"])[0]
    older = runs([("ce", None, None, 2), ("supcon", 5.0, 7.0, 2)])  # rows stored before the load was recorded
    assert htmlboard.load_note(older, older["run_key"]) == []
    assert htmlboard.load_note(frame.drop(columns=["load_avg_1m", "load_avg_end"]), frame["run_key"]) == []


def test_the_page_shows_the_note_under_the_cost_table(tmp_path):
    results = tmp_path / "results"
    for method, seed, load in (("ce", 1, 0.3), ("ce", 2, None), ("clld-adaptive", 1, 5.1)):
        run = write_run(results, method, "mr", seed, [True, False] * 5)
        if load is not None:
            rows = store.read_json(run / store.ROWS)
            store.write_json(run / store.ROWS, [{**r, "load_avg_1m": load} for r in rows])
    section = htmlboard.cost_section(load_results(results), results, None)
    assert 'id="table-cost"' in section and "ce 0.3, clld-adaptive 5.1" in section.split("</table>")[1]
