"""Executors: SLURM submission through submitit (faked sbatch/sacct, or a mocked executor), the job callable and
its requeue, submitit's local executor, `clbench status`, `--resume` and `--shards-per-gpu`."""

import json
import os
import pickle
import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

submitit = pytest.importorskip("submitit")

from bench.results import store
from bench.cli.main import build_parser
from bench.cli.run_options import run_options
from bench.data.loading import DataRef
from bench.running.executors import ShardJob, ShardTask, pack, submit, task_of
from bench.running.slurm_options import SlurmOptions, load_profile, parse_gres_gpus, slurm_options
from bench.running.runner import Shard, plan, worker_gpus
from bench.spec import RunSpec
from bench.running.status import decide, query_states
from bench.errors import install_extra
from conftest import FAST

ONE_EPOCH = [*FAST, "--epochs", "1"]


def planned(tiny, results, *extra):
    """The shards `clbench run --methods ce --datasets TINY ...extra` would run."""
    opts = run_options(build_parser().parse_args(["run", "--methods", "ce", "--datasets", str(tiny), *ONE_EPOCH,
                                                  *extra]))
    return plan(opts.methods, opts.datasets, opts.encoders, opts.seeds, opts.overrides,
                opts.data_dir, opts.knobs, results, opts.request), opts


def values(run_dir):
    return [r["value"] for r in json.loads((run_dir / "rows.json").read_text())]


@pytest.fixture(autouse=True)
def no_real_scheduler(tmp_path, monkeypatch):
    """A machine with a real SLURM cluster (see test_slurm_cluster.py) must not answer these tests: `sinfo` and
    `sacct` here fail as where the scheduler cannot be asked (fake_slurm puts its own before them)."""
    bin_dir = tmp_path / "no-scheduler"
    bin_dir.mkdir()
    for name in ("sinfo", "sacct"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch, no_real_scheduler):
    """`sbatch`, `srun` and `sacct` stand-ins on PATH; write sacct's answer with `.sacct(text)`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    answer = tmp_path / "sacct.txt"
    partitions = tmp_path / "sinfo.txt"  # `%P %G` lines; the default partition is starred
    partitions.write_text("gpu* gpu:a100:4(S:0-1)\ncpu (null)\n")
    sinfo = (f'part=""; while [ $# -gt 0 ]; do [ "$1" = "-p" ] && part="$2"; shift; done\n'
             f'if [ -n "$part" ]; then grep -E "^$part\\*? " "{partitions}"; else cat "{partitions}"; fi; exit 0')
    scripts = {"sbatch": 'echo "Submitted batch job 4242"', "srun": "exit 0", "sacct": f'cat "{answer}"',
               "sinfo": sinfo}
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    answer.write_text("JobID|State|NodeList\n")
    return SimpleNamespace(bin=bin_dir, sacct=lambda text: answer.write_text("JobID|State|NodeList\n" + text))


@pytest.fixture
def one_thread(monkeypatch):
    """Train with one CPU thread here and in job processes (much faster on a busy machine; results compared
    within a test are all made this way)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    yield
    torch.set_num_threads(threads)


class FakeExecutor:
    """Records what bench.running.executors.submit asks of submitit; jobs come back at once with array ids
    (array 4242 for the first executor made, 4243 for the next...)."""

    def __init__(self, folder, cluster, array=4242):
        self.folder, self.cluster, self.parameters, self.calls, self.array = Path(folder), cluster, {}, [], array

    def update_parameters(self, **kwargs):
        self.parameters.update(kwargs)

    def map_array(self, fn, groups):
        self.calls.append((fn, list(groups)))
        return [SimpleNamespace(job_id=f"{self.array}_{i}",
                                paths=SimpleNamespace(stdout=self.folder / f"{self.array}_{i}_0_log.out",
                                                      stderr=self.folder / f"{self.array}_{i}_0_log.err"))
                for i in range(len(groups))]


@pytest.fixture
def mocked(monkeypatch):
    """Every submission goes to a FakeExecutor; returns the list of executors made."""
    made = []

    def factory(folder, cluster="slurm", max_timeouts=3):
        made.append(FakeExecutor(folder, cluster, 4242 + len(made)))
        made[-1].max_timeouts = max_timeouts
        return made[-1]

    monkeypatch.setattr("bench.running.executors.new_executor", factory)
    return made


def fake_spec(seed, method="ce"):
    return RunSpec(method, "tiny", "tiny-bert", seed, "f" * 12)


def fake_shard(seed, method="ce"):
    return Shard(fake_spec(seed, method), None, DataRef("/data/tiny"))


# ----------------------------------------------------------------------------------------------- the job


def test_slurm_job_reproduces_a_local_run(cli, tiny, tmp_path, fake_slurm, one_thread):
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    # both on the CPU (the local run and the submitted jobs, run below in this process): their rows are compared
    assert cli("run", "--methods", "ce", "--datasets", tiny, "--seeds", "1,2", *ONE_EPOCH, "--device", "cpu",
               "--results-dir", local)[0] == 0
    started = time.perf_counter()
    code, out, err = cli("run", "--methods", "ce", "--datasets", tiny, "--seeds", "1,2", *ONE_EPOCH,
                         "--device", "cpu",
                         "--results-dir", cluster, "--executor", "slurm", "--partition", "gpu", "--time-min", "30",
                         "--sbatch", "account=proj")
    assert code == 0, err
    assert time.perf_counter() - started < 10  # submitted, not run
    assert "4242_0" in out and "4242_1" in out and "logs:" in err and "clbench status" in err
    assert not list(cluster.glob("*/rows.json"))
    record_path = next(cluster.glob(".slurm/*/submitted.json"))
    record = json.loads(record_path.read_text())
    assert sorted(e["job_id"] for e in record["shards"].values()) == ["4242_0", "4242_1"]
    folder = record_path.parent
    script = next(folder.glob("*submission.sh")).read_text()
    assert "--partition=gpu" in script and "--account=proj" in script and "--time=30" in script
    assert "--array=0-1%2" in script and "--gpus-per-node=1" in script

    fake_slurm.sacct("4242_0|RUNNING|node1\n4242_1|PENDING|\n")
    code, out, _ = cli("status", "--results-dir", cluster)
    assert code == 0 and "1 running, 1 pending" in out

    # what the array tasks do on the nodes: unpickle the submitted callable and run it
    for job_id in ("4242_0", "4242_1"):
        delayed = submitit.helpers.DelayedSubmission.load(folder / f"{job_id}_submitted.pkl")
        assert isinstance(delayed.function, ShardJob)
        assert [o.status for o in delayed.result()] == ["done"]
    for run_dir in local.glob("ce_*"):
        assert values(cluster / run_dir.name) == values(run_dir)
    fake_slurm.sacct("4242_0|COMPLETED|node1\n4242_1|COMPLETED|node1\n")
    code, out, _ = cli("status", "--results-dir", cluster)
    assert code == 0 and "2 shard(s): 2 done" in out


@pytest.mark.slow
def test_submitit_local_executor_matches_a_local_run(cli, tiny, tmp_path, one_thread):
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    # both on the CPU (the jobs below are submitted with device "cpu"; precision auto is fp32 there): with a GPU
    # visible, `auto` would train the local run on it in bf16 and the two could differ for that reason alone
    assert cli("run", "--methods", "ce", "--datasets", tiny, "--seeds", "1,2", *ONE_EPOCH, "--device", "cpu",
               "--results-dir", local)[0] == 0
    shards, opts = planned(tiny, cluster, "--seeds", "1,2")
    submission = submit(shards, cluster, SlurmOptions(time_min=5, gpus_per_job=0), opts.request, "cpu",
                        cluster="local")  # one job per shard, run by submitit in its own processes
    outcomes = [o for job in submission.jobs for o in job.result()]
    assert [(o.key, o.status) for o in outcomes] == [(s.spec.key, "done") for s in shards]
    for shard in shards:
        assert values(cluster / shard.spec.key) == values(local / shard.spec.key)
    record = json.loads(submission.record_path.read_text())
    assert record["shards"][shards[0].spec.key]["job_id"] == str(submission.jobs[0].job_id)
    assert Path(record["jobs"][0]["stdout"]).is_file()  # the task's log


def preempted_job(tiny, results, monkeypatch):
    """A ShardJob (with overwrite) of one 2-epoch shard that SLURM preempted right after its first epoch's
    checkpoint; returns the job and its tasks."""
    from bench.training.trainer import Trainer
    from test_trainer import Killed

    shards, opts = planned(tiny, results, "--epochs", "2")
    tasks = [task_of(s) for s in shards]
    job = ShardJob(results, "cpu", overwrite=True, request=opts.request)
    original_save = Trainer.save

    def save_then_preempt(self, *a):
        original_save(self, *a)
        raise Killed

    monkeypatch.setattr(Trainer, "save", save_then_preempt)
    with pytest.raises(Killed):
        job(tasks)
    monkeypatch.setattr(Trainer, "save", original_save)
    return job, tasks


def test_requeued_job_resumes_the_same_shard(tiny, results, monkeypatch, one_thread):
    job, tasks = preempted_job(tiny, results, monkeypatch)
    run_dir = results / tasks[0].spec.key
    assert (run_dir / "checkpoint.pt").is_file() and not store.is_finished(run_dir)

    resubmission = job.checkpoint(tasks)  # what submitit requeues
    assert isinstance(resubmission, submitit.helpers.DelayedSubmission)
    assert isinstance(resubmission.function, ShardJob) and resubmission.args == (tasks,)
    assert resubmission.function.results_dir == job.results_dir
    assert resubmission.function.overwrite is False  # a requeue must not wipe the checkpoint
    resubmission = pickle.loads(pickle.dumps(resubmission))  # it travels through a pickle file
    (outcome,) = resubmission.result()
    assert outcome.status == "done"
    assert json.loads((run_dir / "train_log.json").read_text())["resumed_from_epoch"] == 1


def test_job_fails_a_shard_whose_data_changed(tiny, results):
    shards, opts = planned(tiny, results)
    (tiny / "train.jsonl").write_text((tiny / "train.jsonl").read_text().replace("won the match", "lost", 1))
    (outcome,) = ShardJob(results, "cpu", request=opts.request)([task_of(shards[0])])
    assert outcome.status == "failed" and "changed since submission" in outcome.message
    assert "changed since submission" in json.loads((results / shards[0].spec.key / "error.json").read_text())["reason"]


def test_data_ref_is_absolute_and_picklable(tiny, results, monkeypatch):
    monkeypatch.chdir(tiny.parent)
    shards, _ = planned(Path(tiny.name), results)
    assert shards[0].source == DataRef(str(tiny.resolve()), None, 0, 0.1)
    task = pickle.loads(pickle.dumps(task_of(shards[0])))
    assert task.data.load().fingerprint == task.spec.data_fingerprint


# ----------------------------------------------------------------------------------------------- options


def test_options_from_profile_config_and_flags(tmp_path, fake_slurm):
    profile = tmp_path / "cluster.yaml"
    profile.write_text("partition: small\ntime-min: 120\nmem_gb: 32\ncpus_per_task: 8\n"
                       "sbatch: {account: proj, qos: low}\n")
    config = tmp_path / "sweep.yaml"
    config.write_text("executor: slurm\nslurm_profile: cluster.yaml\npartition: big\narray_parallelism: 4\n"
                      "shards_per_gpu: 2\n")
    args = build_parser().parse_args(["run", "--config", str(config), "--time-min", "60", "--sbatch", "qos=high",
                                      "--gpus-per-job", "2"])
    opts = run_options(args)  # the profile is found next to the config file
    assert opts.executor == "slurm" and opts.shards_per_gpu == 2
    expected = {"name": "bench", "timeout_min": 60, "slurm_signal_delay_s": 90, "gpus_per_node": 2, "mem_gb": 32.0,
                "cpus_per_task": 8,
                "slurm_partition": "big", "slurm_array_parallelism": 4,
                "slurm_additional_parameters": {"account": "proj", "qos": "high"}}
    assert opts.slurm.parameters() == expected
    executor = submitit.AutoExecutor(tmp_path / "sub", cluster="slurm")  # real names: submitit accepts them
    executor.update_parameters(**expected)


def test_submission_returns_at_once_with_the_mapped_parameters(cli, tiny, results, mocked):
    code, out, err = cli("run", "--methods", "ce", "--datasets", tiny, "--seeds", "1-3", *ONE_EPOCH,
                         "--executor", "slurm", "--partition", "gpu", "--time-min", "90", "--mem-gb", "16",
                         "--cpus-per-task", "4", "--array-parallelism", "8", "--sbatch", "account=proj",
                         "--shards-per-gpu", "2", "--max-timeouts", "7")
    assert code == 0, err
    (executor,) = mocked
    assert executor.max_timeouts == 7
    assert executor.parameters == {"name": "bench", "timeout_min": 90, "slurm_signal_delay_s": 90, "gpus_per_node": 1,
                                   "mem_gb": 16.0,
                                   "cpus_per_task": 4, "slurm_partition": "gpu", "slurm_array_parallelism": 8,
                                   "slurm_additional_parameters": {"account": "proj"}}
    ((fn, groups),) = executor.calls
    assert isinstance(fn, ShardJob) and fn.shards_per_gpu == 2
    assert [len(g) for g in groups] == [2, 1] and all(isinstance(t, ShardTask) for g in groups for t in g)
    record = json.loads(next(results.glob(".slurm/*/submitted.json")).read_text())
    assert [e["job_id"] for e in record["shards"].values()] == ["4242_0", "4242_0", "4242_1"]
    assert record["folder"] == str(executor.folder) and "3 shard(s) as 2 array task(s)" in err
    assert not list(results.glob("*/rows.json")) and not list(results.glob("ce_*"))


@pytest.mark.parametrize("args,message", [
    (["--partition", "gpu"], "--partition applies to --executor slurm only"),
    (["--executor", "slurm", "--sbatch", "account"], "expected KEY=VALUE"),
    (["--executor", "slurm", "--sbatch", "partition=x"], "use --partition instead"),
    (["--executor", "slurm", "--time-min", "0"], "--time-min must be >= 1"),
    (["--executor", "slurm", "--max-timeouts", "-1"], "--max-timeouts must be >= 0"),
    (["--executor", "slurm", "--jobs", "2"], "--jobs is for local runs"),
    (["--wait"], "--wait applies to --executor slurm"),
    (["--resume", "--overwrite"], "contradict"),
    (["--shards-per-gpu", "0"], "--shards-per-gpu must be a whole number >= 1"),
])
def test_bad_executor_options_exit_with_one_line(cli, tiny, results, args, message):
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *ONE_EPOCH, *args)
    assert code == 2 and message in err and err.count("\n") == 1
    assert not results.exists()


def test_profile_errors_and_missing_tools(cli, tiny, tmp_path, monkeypatch):
    profile = tmp_path / "p.yaml"
    profile.write_text("partion: gpu\n")
    with pytest.raises(Exception, match=r"unknown key\(s\) \['partion'\]; known: partition"):
        load_profile(profile)
    code, _, err = cli("run", "--datasets", tiny, "--executor", "slurm", "--slurm-profile", profile)
    assert code == 2 and "unknown key(s) ['partion']" in err
    with pytest.raises(Exception, match="mem_gb must be a float"):
        slurm_options({"mem_gb": "lots"})
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *ONE_EPOCH, "--executor", "slurm")
    assert code == 2 and "no `sbatch`/`srun` on this machine" in err
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "submitit" else real(name, *a))
    code, _, err = cli("run", "--datasets", tiny, "--executor", "slurm")
    assert code == 2 and install_extra("slurm") in err


# ----------------------------------------------------------------------------------------------- status


def make_results(results, mocked):
    """Six shards: done, failed, interrupted (local), and three submitted ones (no files / a checkpoint)."""
    for seed, files in [(1, {"spec.json": "{}", "rows.json": "[]"}),
                        (2, {"spec.json": "{}", "error.json": json.dumps({"reason": "loss became nan"})}),
                        (3, {"spec.json": "{}", "checkpoint.pt": ""}),
                        (5, {"spec.json": "{}", "checkpoint.pt": ""})]:
        for name, text in files.items():
            path = results / fake_spec(seed).key / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    submit([fake_shard(4), fake_shard(5), fake_shard(6)], results, SlurmOptions())
    return {seed: fake_spec(seed).key for seed in range(1, 7)}


def status_lines(out):
    return {line.split()[0]: line for line in out.splitlines()[1:-1]}


def test_status_reports_every_state(cli, results, mocked, monkeypatch):
    keys = make_results(results, mocked)
    asked = []

    def sacct(job_ids):
        asked.append(sorted(job_ids))
        return {"4242_0": "PENDING", "4242_1": "RUNNING", "4242_2": "TIMEOUT"}

    monkeypatch.setattr("bench.running.status.query_states", sacct)
    code, out, _ = cli("status")
    assert code == 0
    lines = status_lines(out)
    assert set(lines) == set(keys.values())
    assert " done " in lines[keys[1]]
    assert " failed " in lines[keys[2]] and "loss became nan" in lines[keys[2]]
    assert " interrupted " in lines[keys[3]] and "checkpoint present" in lines[keys[3]]
    assert " pending " in lines[keys[4]] and "4242_0" in lines[keys[4]]
    assert " running " in lines[keys[5]] and "slurm RUNNING" in lines[keys[5]]
    assert " interrupted " in lines[keys[6]] and "ended TIMEOUT" in lines[keys[6]]
    assert out.splitlines()[-1] == "6 shard(s): 1 done, 1 running, 1 pending, 1 failed, 2 interrupted"
    assert asked == [["4242_0", "4242_1", "4242_2"]]  # one query, unfinished submitted shards only

    code, out, _ = cli("status", "ce_tiny_tiny-bert_s[12]_*")
    assert code == 0 and out.splitlines()[-1] == "2 shard(s): 1 done, 1 failed"
    code, _, err = cli("status", "nope_*")
    assert code == 2 and "no shard 'nope_*'" in err


def test_status_without_a_scheduler_says_unknown(cli, results, mocked, tmp_path, monkeypatch):
    keys = make_results(results, mocked)
    monkeypatch.setenv("PATH", str(tmp_path))  # no sacct
    assert query_states(["4242_0"]) is None
    code, out, _ = cli("status")
    assert code == 0
    lines = status_lines(out)
    for seed in (4, 5, 6):
        assert " unknown " in lines[keys[seed]] and "scheduler unreachable" in lines[keys[seed]]
    assert " failed " in lines[keys[2]] and " done " in lines[keys[1]]
    assert out.splitlines()[-1].endswith("1 done, 1 failed, 1 interrupted, 3 unknown")
    code, _, err = cli("status", "--results-dir", tmp_path / "empty")
    assert code == 0 and "no shards" in err


def test_sacct_answers_are_read_with_submitit(fake_slurm):
    fake_slurm.sacct("4242_0|RUNNING|n1\n4242_[1-2%4]|PENDING|\n4242_3|CANCELLED by 42|n2\n")
    assert query_states(["4242_0", "4242_1", "4242_2", "4242_3", "4242_9"]) == {
        "4242_0": "RUNNING", "4242_1": "PENDING", "4242_2": "PENDING", "4242_3": "CANCELLED", "4242_9": "UNKNOWN"}


def test_failure_after_submission_wins_over_an_unreachable_scheduler(tmp_path):
    run_dir = tmp_path / "k"
    run_dir.mkdir()
    (run_dir / "error.json").write_text(json.dumps({"reason": "boom"}))
    later = {"job_id": "1_0", "submitted_ts": time.time() + 60}
    earlier = {"job_id": "1_0", "submitted_ts": time.time() - 60}
    assert decide("k", run_dir, later, None).state == "unknown"  # resubmitted since it failed
    assert (decide("k", run_dir, earlier, None).state, decide("k", run_dir, earlier, None).reason) == ("failed", "boom")
    assert decide("k", run_dir, later, "RUNNING").state == "running"
    assert decide("k", None, later, "OUT_OF_MEMORY").state == "failed"


def test_a_cancelled_job_says_cancelled_and_how_to_go_on(tmp_path):
    run_dir = tmp_path / "k"
    run_dir.mkdir()
    (run_dir / "checkpoint.pt").write_text("")
    submitted = {"job_id": "1_0", "submitted_ts": time.time() - 60, "stdout": "log.out"}
    state = decide("k", run_dir, submitted, "CANCELLED")
    assert state.state == "cancelled" and "ended CANCELLED; checkpoint present" in state.reason
    assert "--resume --executor slurm" in state.reason
    assert decide("k", run_dir, submitted, "TIMEOUT").state == "interrupted"
    fresh = {**submitted, "submitted_ts": time.time() - 5}  # sacct lags behind sbatch: not yet "unknown"
    assert (decide("k", run_dir, fresh, "UNKNOWN").state, decide("k", run_dir, submitted, "UNKNOWN").state) == (
        "pending", "pending")
    old = {**submitted, "submitted_ts": time.time() - 600}
    assert decide("k", run_dir, old, "UNKNOWN").state == "unknown"


class Scripted:
    """A scheduler whose answers (job id -> state) are scripted per call; a fake clock advanced by `sleep`."""

    def __init__(self, answers, on_call=None):
        self.answers, self.calls, self.now, self.on_call = list(answers), 0, 0.0, on_call or (lambda n: None)

    def __call__(self, job_ids):
        self.on_call(self.calls)
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return None if answer is None else {j: answer.get(j, "UNKNOWN") for j in job_ids}

    def sleep(self, seconds):
        self.now += seconds


def test_follow_waits_until_every_shard_has_ended(results, mocked, capsys):
    from bench.running.follow import follow

    keys = make_results(results, mocked)  # seeds 4-6 submitted as 4242_0..2, seed 3 interrupted locally
    chosen = [keys[1], keys[2], keys[4], keys[5]]

    def finish(call):
        if call == 2:  # the pending shard's task finishes between the 2nd and 3rd look
            (results / keys[4]).mkdir(exist_ok=True)
            (results / keys[4] / "rows.json").write_text("[]")

    scheduler = Scripted([{"4242_0": "PENDING", "4242_1": "RUNNING"}, {"4242_0": "RUNNING", "4242_1": "RUNNING"},
                          {"4242_0": "COMPLETED", "4242_1": "CANCELLED"}], finish)
    statuses = follow(results, chosen, poll_seconds=15, progress=False, query=scheduler,
                      clock=lambda: scheduler.now, sleep=scheduler.sleep)
    assert [s.state for s in statuses] == ["done", "failed", "done", "cancelled"]
    assert scheduler.calls == 3 and scheduler.now == 30
    lines = capsys.readouterr().err.splitlines()  # one line per change of the counts
    assert lines == ["clbench: 1/4 done, 1 running, 1 pending, 1 failed (0 s)",
                     "clbench: 1/4 done, 2 running, 1 failed (15 s)",
                     "clbench: 2/4 done, 1 failed, 1 cancelled (30 s)"]


def test_follow_draws_a_bar_of_shards_done(results, mocked, capsys):
    from bench.running.follow import follow

    keys = make_results(results, mocked)

    def finish(call):
        if call == 1:
            (results / keys[4]).mkdir()
            (results / keys[4] / "rows.json").write_text("[]")

    scheduler = Scripted([{"4242_0": "RUNNING"}, {"4242_0": "COMPLETED"}], finish)
    follow(results, [keys[1], keys[4]], poll_seconds=1, progress=True, query=scheduler,
           clock=lambda: scheduler.now, sleep=scheduler.sleep)
    err = capsys.readouterr().err
    assert "shards" in err and "1/2" in err and "2/2" in err and "1 running" in err
    assert "clbench: " not in err  # the bar instead of lines


def test_follow_gives_up_on_shards_the_scheduler_never_knows(results, mocked, capsys):
    from bench.running.follow import UNKNOWN_GRACE_SECONDS, follow

    keys = make_results(results, mocked)
    scheduler = Scripted([None])  # unreachable, every time
    statuses = follow(results, [keys[4]], poll_seconds=60, progress=False, query=scheduler,
                      clock=lambda: scheduler.now, sleep=scheduler.sleep)
    assert statuses[0].state == "unknown" and scheduler.now == UNKNOWN_GRACE_SECONDS
    scheduler = Scripted([{}, {}, {"4242_0": "RUNNING"}, {"4242_0": "COMPLETED"}])  # known after a while
    statuses = follow(results, [keys[4]], poll_seconds=120, progress=False, query=scheduler,
                      clock=lambda: scheduler.now, sleep=scheduler.sleep)
    assert statuses[0].state == "interrupted" and scheduler.calls == 4  # the grace restarts once it is known


@pytest.mark.slow
def test_run_wait_follows_the_array_and_fails_when_a_shard_fails(cli, tiny, results, mocked, monkeypatch,
                                                                  one_thread):
    monkeypatch.setattr("bench.running.follow.POLL_SECONDS", 0.01)
    base = ["run", "--methods", "ce", "--datasets", tiny, "--seeds", "1,2", *ONE_EPOCH, "--executor", "slurm"]

    def scheduler(fail_second):
        def states(job_ids):
            (executor,) = mocked[-1:]
            (fn, groups), = executor.calls
            if not states.ran:  # the array tasks run on the cluster while bench follows them
                states.ran = True
                fn(groups[0])
                if not fail_second:
                    fn(groups[1])
                return {j: "RUNNING" for j in job_ids}
            return {j: "FAILED" if fail_second and j == "4242_1" else "COMPLETED" for j in job_ids}
        states.ran = False
        return states

    monkeypatch.setattr("bench.running.status.query_states", scheduler(fail_second=True))
    code, out, err = cli(*base, "--wait", "--results-dir", results)
    assert code == 1, err
    # the table of the shard that finished (one epoch of tiny-bert may collapse: then it says so instead of numbers)
    assert re.search(r"^\s*tiny\s+tiny-bert\s+ce\s+(1\s|0 collapsed)", out, re.M), out
    assert "1 of 2 shard(s) did not finish" in err
    assert "ended FAILED" in err and "1/2 done" in err

    other = results.parent / "all-done"
    monkeypatch.setattr("bench.running.status.query_states", scheduler(fail_second=False))
    code, out, err = cli(*base, "--wait", "--results-dir", other)
    assert code == 0, err
    assert "all 2 shard(s) done" in err
    collapsed = any(r["collapsed"] for path in other.glob("*/rows.json") for r in json.loads(path.read_text()))
    assert ("collapsed" in err) == collapsed  # a collapsed model is called out, as in a local run
    assert re.search(r"^\s*tiny\s+tiny-bert\s+ce\s+(2\s|0 collapsed)", out, re.M)  # the table: ce on tiny
    code, out, err = cli(*base, "--wait", "--results-dir", other)  # nothing left to submit: still a table
    assert code == 0 and "nothing to submit" in err and "all 2 shard(s) done" in err
    monkeypatch.setattr("bench.running.status.query_states", lambda ids: {i: "FAILED" for i in ids})
    code, out, _ = cli("status", "--wait", "--results-dir", results)
    assert code == 1 and re.fullmatch(r"2 shard\(s\): 1 done( \(1 collapsed: not a result\))?, 1 failed",
                                      out.splitlines()[-1])


@pytest.mark.parametrize("restarts,resumed", [("", 0), ("0", 0), ("1", 1)])
def test_a_requeued_run_resumes_even_when_the_submission_overwrote(tiny, results, monkeypatch, one_thread,
                                                                   restarts, resumed):
    """SLURM reruns the submitted pickle after `scontrol requeue` or a node failure: with --overwrite its first
    run starts afresh, a rerun (SLURM_RESTART_COUNT > 0) continues from the checkpoint."""
    job, tasks = preempted_job(tiny, results, monkeypatch)
    monkeypatch.setenv("SLURM_RESTART_COUNT", restarts)
    (outcome,) = pickle.loads(pickle.dumps(job))(tasks)  # the very pickle SLURM runs again
    assert outcome.status == "done"
    assert json.loads((results / tasks[0].spec.key / "train_log.json").read_text())["resumed_from_epoch"] == resumed


def test_a_task_trains_with_the_cpus_slurm_allocated(tiny, results, monkeypatch):
    import torch

    from bench.running.runner import cpu_count

    usable = cpu_count()
    monkeypatch.setenv("SLURM_CPUS_ON_NODE", "1")
    assert cpu_count() == 1
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", str(usable + 4))  # more than this machine has: what it has
    assert cpu_count() == usable
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    shards, opts = planned(tiny, results)
    threads = torch.get_num_threads()
    torch.set_num_threads(max(2, usable))
    try:
        (outcome,) = ShardJob(results, "cpu", request=opts.request)([task_of(shards[0])])
    finally:
        torch.set_num_threads(threads)
    assert outcome.status == "done"
    assert {r["cpu_threads"] for r in json.loads((results / shards[0].spec.key / "rows.json").read_text())} == {1}


def test_short_time_limits_get_an_early_enough_warning(tiny, results, fake_slurm):
    assert [SlurmOptions(time_min=t).signal_delay_s for t in (1, 2, 6, 240)] == [15, 30, 90, 90]
    shards, opts = planned(tiny, results)
    submission = submit(shards, results, SlurmOptions(time_min=1, partition="cpu"), opts.request)
    script = next(submission.folder.glob("*submission.sh")).read_text()
    assert "--signal=USR2@15" in script and "--time=1" in script and "gpus" not in script


# ----------------------------------------------------------------------------------------------- resume, packing


def test_resume_picks_exactly_the_unfinished_shards(cli, tiny, results, mocked, monkeypatch):
    shards, _ = planned(tiny, results, "--seeds", "1-4")
    keys = [s.spec.key for s in shards]
    (results / keys[0]).mkdir(parents=True)
    (results / keys[0] / "rows.json").write_text("[]")  # done
    (results / keys[1]).mkdir()
    (results / keys[1] / "error.json").write_text('{"reason": "x"}')  # failed
    submit(shards[2:], results, SlurmOptions())  # 4242_0 still running, 4242_1 timed out
    # 4242_0 still running; 4242_1 timed out, as do the tasks submitted below
    monkeypatch.setattr("bench.running.status.query_states",
                        lambda ids: {i: "RUNNING" if i == "4242_0" else "TIMEOUT" for i in ids})
    base = ["run", "--methods", "ce", "--datasets", tiny, "--seeds", "1-4", *ONE_EPOCH]

    code, _, err = cli(*base, "--executor", "slurm", "--resume")
    assert code == 0, err
    assert [t.spec.key for g in mocked[-1].calls[0][1] for t in g] == [keys[1], keys[3]]
    assert "skipping 1 shard(s) pending or running on SLURM" in err

    ran = []
    monkeypatch.setattr("bench.running.runner.execute", lambda shards, *a, **k: ran.extend(s.spec.key for s in shards) or [])
    assert cli(*base, "--resume")[0] == 0  # local: finished ones are skipped by run_shard itself
    assert ran == [keys[0], keys[1], keys[3]]
    monkeypatch.setattr("bench.running.status.query_states", lambda ids: None)
    ran.clear()
    code, _, err = cli(*base, "--resume")
    assert ran == keys and "scheduler unreachable" in err

    code, _, err = cli(*base, "--executor", "slurm")  # unreachable scheduler: submitted, with a warning
    assert [t.spec.key for g in mocked[-1].calls[0][1] for t in g] == keys[1:] and "may run twice" in err
    submissions = len(mocked)
    for answer in ({"PENDING"}, set()):  # pending, or just submitted and not yet in sacct (UNKNOWN)
        monkeypatch.setattr("bench.running.status.query_states", lambda ids: {i: s for i in ids for s in answer})
        code, _, err = cli(*base, "--executor", "slurm")  # a plain re-submission never queues a shard twice
        assert code == 0 and len(mocked) == submissions, answer
        assert "skipping 3 shard(s) pending or running" in err and "nothing to submit" in err


def test_shards_per_gpu_grouping(tiny, results):
    assert [len(g) for g in pack(list(range(7)), 2)] == [2, 2, 2, 1]
    assert [len(g) for g in pack(list(range(7)), 2, gpus_per_job=2)] == [4, 3]
    assert pack(list(range(3)), 1) == [[0], [1], [2]]
    assert worker_gpus(1, 2, 3) == [0, 1, 0, 1, 0, 1]  # 3 workers per GPU, dealt round-robin
    assert worker_gpus(1, 0, 2) == [None, None]  # CPU only: K workers
    assert worker_gpus(4, 1, 1) == [0, 0, 0, 0]  # --jobs 4 on one GPU, as before
    assert worker_gpus(8, 2, 2) == [0, 1] * 4  # --jobs beyond gpus x K wins
    assert worker_gpus(1, 4) == [0]  # sequential
    with pytest.raises(Exception, match="--shards-per-gpu must be >= 1"):
        pack([1], 0)


def test_gres_fields_give_gpus_per_node():
    assert parse_gres_gpus("gpu:a100:4(S:0-1)") == 4 and parse_gres_gpus("gpu:2,shard:8") == 2
    assert parse_gres_gpus("(null)") == 0 and parse_gres_gpus("gpu") == 1 and parse_gres_gpus("") == 0


def submission_script(results: Path) -> str:
    return next(results.glob(".slurm/*/*submission.sh")).read_text()


def test_gpus_are_asked_for_only_where_the_partition_has_them(cli, tiny, tmp_path, fake_slurm):
    common = ["run", "--methods", "ce", "--datasets", tiny, *ONE_EPOCH, "--executor", "slurm"]
    assert cli(*common, "--results-dir", tmp_path / "cpu", "--partition", "cpu")[0] == 0
    assert "--gpus-per-node" not in submission_script(tmp_path / "cpu")  # a CPU partition: no GPU request
    assert cli(*common, "--results-dir", tmp_path / "gpu")[0] == 0  # the default partition (gpu*) has GPUs
    assert "--gpus-per-node=1" in submission_script(tmp_path / "gpu")
    assert cli(*common, "--results-dir", tmp_path / "two", "--gpus-per-job", "2")[0] == 0
    assert "--gpus-per-node=2" in submission_script(tmp_path / "two")


@pytest.mark.parametrize("args,message", [
    (["--partition", "cpu", "--gpus-per-job", "1"], "partition cpu has no GPUs (GRES); ask for 0 or less"),
    (["--partition", "gpu", "--gpus-per-job", "8"], "partition gpu has 4 GPU(s) per node"),
    (["--partition", "gpux"], "SLURM has no such partition"),
])
def test_impossible_gpu_requests_are_refused_before_submitting(cli, tiny, results, fake_slurm, args, message):
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *ONE_EPOCH, "--executor", "slurm",
                       "--results-dir", results, *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) <= 2
    assert not (results / ".slurm").exists() or not any((results / ".slurm").iterdir())


def test_a_refused_submission_leaves_nothing_behind(cli, tiny, results, fake_slurm):
    (fake_slurm.bin / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: Invalid account' >&2\nexit 1\n")
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *ONE_EPOCH, "--executor", "slurm",
                       "--results-dir", results, "--partition", "cpu")
    assert code == 2 and "SLURM refused the submission" in err and "Invalid account" in err
    assert not (results / ".slurm").exists() or not any((results / ".slurm").iterdir())
