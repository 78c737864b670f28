"""Damaged files in a results folder: a run file emptied, cut short, overwritten with garbage or with one byte
flipped is found (its size and SHA-256 against the run's manifest.json, or because it does not parse), moved
aside into `<run>/damaged/<UTC stamp>/` (never deleted), and dealt with as bench/results/repair.py decides:
training files -> the shard alone is retrained; an evaluation file -> that evaluation is redone; the model ->
evaluations needing it are `no-model`; a resume checkpoint -> training starts afresh; a lease -> taken over.
`clbench status`, `clbench verify [--repair]` and the reports see the damage too.

One tiny sweep (ce and cl, seeds 1-2, 2 epochs, the `repr` evaluator, on the CPU) is trained once per module; each
test damages a copy of its results folder. CPU training with fixed seeds is deterministic (one torch thread here,
as in a --jobs worker), so a retrained shard gives the reference's values; they are compared with a relative
tolerance of 1e-6 only, as tests/test_crash_safety.py does.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bench.cli.main import main
from bench.results import lease, manifest, runfiles, store
from bench.results.manifest import Damaged
from conftest import FAST, FIXTURE

IDENTITY = ["run_key", "method", "dataset", "encoder", "seed", "evaluator", "split", "metric", "label", "n"]
COLUMNS = [*IDENTITY, "value"]
KINDS = ("emptied", "truncated", "garbage", "flipped")
STATUS_LINE = re.compile(r"^\[\d+/\d+\] (\w+)\s+(\S+)", re.MULTILINE)


# ------------------------------------------------------------------------------------------------ helpers

def damage(path: Path, kind: str) -> bytes:
    """Damage a file in place: `emptied` (0 bytes), `truncated` (its first half), `garbage` (random bytes of the
    same size) or `flipped` (the middle byte XOR 0xFF, size unchanged); returns the damaged content."""
    data = path.read_bytes()
    if kind == "emptied":
        bad = b""
    elif kind == "truncated":
        bad = data[:len(data) // 2]
    elif kind == "garbage":
        bad = random.Random(f"{path.name}-{len(data)}").randbytes(len(data))
    elif kind == "flipped":
        middle = len(data) // 2
        bad = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]
    else:
        raise ValueError(kind)
    assert bad != data
    path.write_bytes(bad)
    return bad


def sweep_args(data: Path, results: Path, *extra: str) -> list[str]:
    """`clbench run` of the module's sweep: ce and cl, seeds 1-2, tiny-bert for 2 epochs, `repr`, on the CPU."""
    fast = [a for a in FAST if a not in ("--evaluators", "none")]
    return ["run", "--methods", "ce,cl", "--datasets", str(data), "--seeds", "1,2", *fast, "--evaluators", "repr",
            "--results-dir", str(results), "--device", "cpu", *extra]


def run_folders(results: Path) -> list[Path]:
    return sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith("."))


def snapshot(run_dir: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of a run folder with its modification time and content (an untouched folder keeps both)."""
    return {p.relative_to(run_dir).as_posix(): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(run_dir.rglob("*")) if p.is_file()}


def live_files(run_dir: Path) -> set[str]:
    """A run folder's files, those moved aside under damaged/ left out."""
    return {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*")
            if p.is_file() and manifest.DAMAGED not in p.relative_to(run_dir).parts}


def moved_aside(run_dir: Path, name: str) -> list[Path]:
    """Where a damaged file `name` of a run was moved to (damaged/<stamp>/<name>)."""
    return sorted(run_dir.glob(f"{manifest.DAMAGED}/*/{name}"))


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """The identity and value columns, in a canonical row order."""
    return frame[COLUMNS].sort_values(IDENTITY, kind="stable").reset_index(drop=True)


def assert_same_table(got: pd.DataFrame, want: pd.DataFrame) -> None:
    got, want = table(got), table(want)
    pd.testing.assert_frame_equal(got[IDENTITY], want[IDENTITY])
    np.testing.assert_allclose(got["value"].to_numpy(float), want["value"].to_numpy(float), rtol=1e-6, atol=1e-9,
                               equal_nan=True)


def assert_same_results(results: Path, reference: Path) -> None:
    """The gathered table and the run folders at `results` hold the reference's results, and every run folder
    holds the reference's files (no checkpoint, error.json or temporary left over; damaged/ aside)."""
    want = pd.read_parquet(reference / store.TABLE)
    assert_same_table(pd.read_parquet(results / store.TABLE), want)
    assert_same_table(pd.DataFrame(store.finished_rows(results)), want)
    assert [p.name for p in run_folders(results)] == [p.name for p in run_folders(reference)]
    for run_dir in run_folders(results):
        assert live_files(run_dir) == live_files(reference / run_dir.name), run_dir.name


@dataclass
class Reference:
    data: Path
    results: Path


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Reference:
    """The undamaged sweep, trained once (one torch thread, restored afterwards)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("damage")
    data = folder / "tiny"
    shutil.copytree(FIXTURE, data)
    results = folder / "reference"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.delenv("BENCH_DATA_DIR", raising=False)
        assert main(sweep_args(data, results)) == 0
    assert len(list(results.glob(f"*/{store.ROWS}"))) == 4
    assert len(list(results.glob(f"*/{store.EVALS}/repr-*.json"))) == 4
    yield Reference(data, results)
    torch.set_num_threads(threads)


class Sweep:
    """A copy of the reference's results folder, and `clbench` commands on it (in this process)."""

    def __init__(self, reference: Reference, results: Path, capsys):
        self.reference, self.results, self.capsys = reference, results, capsys
        shutil.copytree(reference.results, results)

    def cli(self, *args: str | Path) -> tuple[int, str, str]:
        """`clbench ARGS`: exit code, stdout, stderr."""
        self.capsys.readouterr()
        code = main([str(a) for a in args])
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err

    def run(self, *extra: str) -> tuple[int, str]:
        """`clbench run` of the module's sweep into the copy: exit code and everything it printed."""
        code, out, err = self.cli(*sweep_args(self.reference.data, self.results, *extra))
        return code, out + err

    def verify(self, *extra: str) -> tuple[int, str, str]:
        return self.cli("verify", "--results-dir", self.results, *extra)

    def run_dir(self, method: str, seed: int) -> Path:
        found, = self.results.glob(f"{method}_*_s{seed}_*")
        return found

    def runs(self) -> list[Path]:
        return run_folders(self.results)


@pytest.fixture
def sweep(reference, tmp_path, capsys) -> Sweep:
    return Sweep(reference, tmp_path / "results", capsys)


def statuses(output: str) -> dict[str, str]:
    """Each shard's outcome as `clbench run` reported it (`[i/n] done    KEY ...`)."""
    return {key: status for status, key in STATUS_LINE.findall(output)}


def assert_retrained_alone(sweep: Sweep, victim: Path, name: str, kind: str) -> None:
    """Damage `name` of the finished run `victim`; a re-run retrains that shard alone (every other run folder
    untouched), moves the damaged file aside, and ends with the reference's results."""
    others = {d.name: snapshot(d) for d in sweep.runs() if d != victim}
    bad = damage(victim / name, kind)
    code, output = sweep.run()
    assert code == 0, output
    assert statuses(output) == {victim.name: "done", **{key: "skipped" for key in others}}, output
    assert {key: snapshot(sweep.results / key) for key in others} == others
    aside, = moved_aside(victim, name)
    assert aside.read_bytes() == bad
    assert f"{victim.name}/{name} is damaged" in output  # the repair note, with the shard's outcome
    assert_same_results(sweep.results, sweep.reference.results)


# ------------------------------------------------------------------------------------------------ clbench run

@pytest.mark.parametrize("kind", KINDS)
def test_damaged_rows_retrain_only_that_shard(sweep, kind):
    """Guards a finished run whose rows.json is damaged in any way: `clbench run` moves it aside, retrains that
    shard alone (the others are skipped, their folders untouched) and the table equals the undamaged sweep's."""
    assert_retrained_alone(sweep, sweep.run_dir("cl", 1), store.ROWS, kind)


@pytest.mark.parametrize("name, kind", [(store.SPEC, "garbage"), (store.PREDICTIONS, "flipped")])
def test_damaged_training_file_retrains_only_that_shard(sweep, name, kind):
    """Guards the other training files: a spec.json overwritten with garbage, a predictions file with one byte
    flipped (same size: only its hash tells) make `clbench run` retrain that shard alone."""
    assert_retrained_alone(sweep, sweep.run_dir("ce", 2), name, kind)


def test_damaged_evaluation_is_redone_without_retraining(sweep):
    """Guards a truncated evals/<evaluator>.json: `clbench run` moves it aside and redoes that evaluation from
    the saved model; the run is not retrained (rows.json, model.pt untouched), no other run is touched, and the
    table equals the undamaged sweep's."""
    victim = sweep.run_dir("ce", 2)
    others = {d.name: snapshot(d) for d in sweep.runs() if d != victim}
    kept = {name: snapshot(victim)[name] for name in (store.ROWS, store.MODEL, store.PREDICTIONS)}
    evaluation, = victim.glob(f"{store.EVALS}/repr-*.json")
    bad = damage(evaluation, "truncated")
    code, output = sweep.run()
    assert code == 0, output
    assert statuses(output) == {d.name: "skipped" for d in sweep.runs()}, output
    assert "repr: done" in output
    assert {name: snapshot(victim)[name] for name in kept} == kept
    assert {key: snapshot(sweep.results / key) for key in others} == others
    aside, = moved_aside(victim, f"{store.EVALS}/{evaluation.name}")
    assert aside.read_bytes() == bad
    assert runfiles.read_json(victim, f"{store.EVALS}/{evaluation.name}")["status"] == "done"
    assert_same_results(sweep.results, sweep.reference.results)


@pytest.mark.parametrize("kind", ["emptied", "flipped"])
def test_damaged_model_makes_evaluations_no_model(sweep, kind):
    """Guards a damaged model.pt when an evaluation the run lacks is asked for: the model is moved aside, the
    evaluation is `no-model` with a reason naming model.pt as damaged, the sweep exits 0 (no-model is not a
    failure: bench/cli/run.py fails only on failed shards or evaluations), the run is not retrained and the
    other shards are untouched; a second run says the same from the manifest's note."""
    victim = sweep.run_dir("cl", 2)
    for path in victim.glob(f"{store.EVALS}/repr-*"):  # the run was never evaluated with repr
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    store.gather(sweep.results)
    want = pd.read_parquet(sweep.results / store.TABLE)
    others = {d.name: snapshot(d) for d in sweep.runs() if d != victim}
    rows = snapshot(victim)[store.ROWS]
    bad = damage(victim / store.MODEL, kind)
    for attempt in (1, 2):
        code, output = sweep.run()
        assert code == 0, output
        assert statuses(output) == {d.name: "skipped" for d in sweep.runs()}, output
        line, = [line for line in output.splitlines() if "repr: no-model:" in line]
        assert store.MODEL in line and "damaged" in line, (attempt, line)
    aside, = moved_aside(victim, store.MODEL)
    assert aside.read_bytes() == bad and not (victim / store.MODEL).exists()
    assert "moved to damaged/" in manifest.load(victim)["moved"][store.MODEL]
    assert not list(victim.glob(f"{store.EVALS}/repr-*.json"))
    assert snapshot(victim)[store.ROWS] == rows
    assert {key: snapshot(sweep.results / key) for key in others} == others
    assert_same_table(pd.DataFrame(store.finished_rows(sweep.results)), want)


def test_damaged_model_keeps_the_run_in_the_gathered_table(sweep):
    """Guards the table against a damaged model.pt: the run's rows and evaluations do not need the model, so
    after a sweep that finds the model emptied (and gathers the table, here missing, from its first shard on) the
    gathered table still holds every run -- the reference's table."""
    victim = sweep.run_dir("cl", 2)  # the last shard: the table is gathered before it is repaired
    damage(victim / store.MODEL, "emptied")
    (sweep.results / store.TABLE).unlink()
    old = time.time() - 10 * store.STALE_SECONDS  # written well before this sweep, as results usually are
    for path in sweep.results.rglob("*"):
        os.utime(path, (old, old))
    code, output = sweep.run()
    assert code == 0, output
    assert len(moved_aside(victim, store.MODEL)) == 1
    assert set(pd.read_parquet(sweep.results / store.TABLE)["run_key"]) == {d.name for d in sweep.runs()}
    assert_same_table(pd.read_parquet(sweep.results / store.TABLE),
                      pd.read_parquet(sweep.reference.results / store.TABLE))


@pytest.mark.parametrize("kind", ["truncated", "flipped", "unlisted garbage"])
def test_damaged_checkpoint_is_moved_aside_and_training_starts_afresh(sweep, kind):
    """Guards the resume checkpoint of an unfinished run: one that fails its manifest (cut short, a byte
    flipped) or, unlisted (written before manifests), does not load, is moved aside and the shard trains from
    the start; the sweep ends with the undamaged sweep's results."""
    victim = sweep.run_dir("ce", 1)
    shutil.rmtree(victim)
    victim.mkdir()
    if kind == "unlisted garbage":
        bad = random.Random(1).randbytes(4000)
        (victim / store.CHECKPOINT).write_bytes(bad)
    else:
        runfiles.save_torch(victim, store.CHECKPOINT, {"epoch": 1, "model": {}, "weights": torch.arange(500.0)})
        bad = damage(victim / store.CHECKPOINT, kind)
    code, output = sweep.run()
    assert code == 0, output
    assert statuses(output)[victim.name] == "done", output
    assert output.count(f"{victim.name}/{store.CHECKPOINT} is damaged") == 1  # the trainer's note, said once
    aside, = moved_aside(victim, store.CHECKPOINT)
    assert aside.read_bytes() == bad
    assert not (victim / store.CHECKPOINT).exists()
    assert_same_results(sweep.results, sweep.reference.results)


def test_damaged_lease_is_taken_over_at_once(sweep):
    """Guards an unreadable lease.json older than lease.WRITING_SECONDS in an unfinished run: it is damaged
    (not one being written), so the next run takes it over at once and trains the shard (not `held`)."""
    victim = sweep.run_dir("cl", 1)
    shutil.rmtree(victim)
    victim.mkdir()
    path = victim / lease.LEASE
    path.write_bytes(random.Random(2).randbytes(64))
    info = lease.read(victim)
    assert lease.stale_reason(info, now=info.heartbeat + 1) == ""  # fresh: perhaps being written, left alone
    old = time.time() - 10 * lease.WRITING_SECONDS
    os.utime(path, (old, old))
    assert "damaged lease" in lease.stale_reason(lease.read(victim))
    code, output = sweep.run()
    assert code == 0, output
    assert statuses(output)[victim.name] == "done", output
    assert not path.exists()
    assert_same_results(sweep.results, sweep.reference.results)


@pytest.mark.slow
def test_parallel_sweep_with_a_damaged_shard_finishes_every_shard(sweep):
    """Guards --jobs 2: with one damaged finished run and two unfinished ones, the pool repairs and retrains the
    damaged shard, trains the others, and the sweep exits 0 with the undamaged sweep's results."""
    victim = sweep.run_dir("ce", 1)
    damage(victim / store.ROWS, "garbage")
    for method, seed in (("ce", 2), ("cl", 1)):
        shutil.rmtree(sweep.run_dir(method, seed))
    skipped = sweep.run_dir("cl", 2)
    code, output = sweep.run("--jobs", "2")
    assert code == 0, output
    assert statuses(output) == {**{d.name: "done" for d in sweep.runs()}, skipped.name: "skipped"}, output
    assert len(moved_aside(victim, store.ROWS)) == 1
    assert_same_results(sweep.results, sweep.reference.results)


def test_run_from_before_manifests_is_skipped_and_adopted(sweep):
    """Guards data written before manifests existed: a finished run without manifest.json is skipped by `clbench
    run` (not retrained, its folder untouched), `clbench verify` names it in its summary as without a manifest
    (not as a problem), and `verify --repair` gives it one listing its files."""
    legacy = sweep.run_dir("ce", 1)
    (legacy / manifest.MANIFEST).unlink()
    before = snapshot(legacy)
    code, output = sweep.run()
    assert code == 0, output
    assert statuses(output) == {d.name: "skipped" for d in sweep.runs()}, output
    assert snapshot(legacy) == before
    code, out, err = sweep.verify()
    assert code == 0 and out == "", err
    assert "no problems" in err and "1 finished run(s) have no manifest" in err
    code, out, err = sweep.verify("--repair")
    assert code == 0, out + err
    listing = manifest.load(legacy)
    assert listing is not None
    assert {store.ROWS, store.SPEC, store.MODEL, store.PREDICTIONS} <= set(listing["files"])
    assert any(name.startswith(f"{store.EVALS}/repr-") for name in listing["files"])
    code, out, err = sweep.verify()
    assert code == 0 and "no problems" in err and "no manifest" not in err, err


def test_damaged_evaluation_of_a_run_from_before_manifests_is_redone(sweep):
    """Guards a finished run without manifest.json whose evaluation file is cut short (it cannot be checked
    against a hash, only by reading it): `clbench run` redoes that evaluation -- the shard neither fails nor is
    retrained -- and the table equals the undamaged sweep's."""
    legacy = sweep.run_dir("cl", 2)
    (legacy / manifest.MANIFEST).unlink()
    rows = snapshot(legacy)[store.ROWS]
    evaluation, = legacy.glob(f"{store.EVALS}/repr-*.json")
    damage(evaluation, "truncated")
    code, output = sweep.run()
    assert code == 0, output
    assert statuses(output) == {d.name: "skipped" for d in sweep.runs()}, output
    assert len(moved_aside(legacy, f"{store.EVALS}/{evaluation.name}")) == 1
    assert snapshot(legacy)[store.ROWS] == rows
    assert_same_results(sweep.results, sweep.reference.results)


# ------------------------------------------------------------------------------------------------ status, report

def test_status_shows_a_damaged_run(sweep):
    """Guards `clbench status`: a finished run with a damaged rows.json is `damaged`, naming the file; the
    others are `done`."""
    victim = sweep.run_dir("ce", 2)
    damage(victim / store.ROWS, "garbage")
    code, out, err = sweep.cli("status", "--results-dir", sweep.results)
    assert code == 0, err
    lines = {line.split()[0]: line for line in out.splitlines()[1:] if line.split() and
             line.split()[0] in {d.name for d in sweep.runs()}}
    assert set(lines) == {d.name for d in sweep.runs()}, out
    assert lines[victim.name].split()[1] == "damaged" and store.ROWS in lines[victim.name], out
    assert all(line.split()[1] == "done" for key, line in lines.items() if key != victim.name), out


def test_report_leaves_a_damaged_run_out_with_a_warning(sweep, tmp_path, caplog):
    """Guards the reports: `clbench report` on a folder with a damaged run succeeds, warns naming the run, and
    the rows the reports read (and `clbench results --export`) lack that run."""
    from bench.reporting.resultsview import load_results

    victim = sweep.run_dir("cl", 1)
    damage(victim / store.ROWS, "flipped")
    caplog.set_level("WARNING")
    # collapsed runs included: two epochs of tiny-bert collapse some runs, which the tables leave out by default
    code, out, err = sweep.cli("report", "--results-dir", sweep.results, "--reports-dir", tmp_path / "reports",
                               "--filter", "collapsed=0,1")
    assert code == 0, err
    assert victim.name in err + caplog.text, err  # logged warnings reach caplog in this process
    assert out.strip()
    frame = load_results(sweep.results)
    assert victim.name not in set(frame["run_key"])
    assert set(frame["run_key"]) == {d.name for d in sweep.runs()} - {victim.name}
    exported = tmp_path / "rows.csv"
    code, out, err = sweep.cli("results", "--results-dir", sweep.results, "--export", "csv", "--output", exported)
    assert code == 0, err
    assert set(pd.read_csv(exported)["run_key"]) == {d.name for d in sweep.runs()} - {victim.name}


# ------------------------------------------------------------------------------------------------ clbench verify

def test_verify_clean_folder(sweep):
    """Guards `clbench verify` on an undamaged folder: exit 0, no problem lines, `no problems`."""
    code, out, err = sweep.verify()
    assert code == 0 and out == "", out + err
    assert "verified 4 run(s)" in err and "no problems" in err


VERIFY_CASES = [*[("cl", 1, store.ROWS, kind) for kind in KINDS],
                ("ce", 2, store.SPEC, "garbage"),
                ("ce", 2, store.PREDICTIONS, "flipped"),
                ("ce", 1, f"{store.EVALS}/repr-*.json", "truncated"),
                ("cl", 2, store.MODEL, "emptied"),
                ("cl", 2, store.MODEL, "flipped"),
                ("ce", 1, manifest.MANIFEST, "garbage")]


@pytest.mark.parametrize("method, seed, pattern, kind", VERIFY_CASES,
                         ids=[f"{p.split('/')[-1]}-{k}" for _, _, p, k in VERIFY_CASES])
def test_verify_finds_and_repairs_damage(sweep, method, seed, pattern, kind):
    """Guards `clbench verify` against each kind of damage to each kind of run file: exit 1 and a line naming
    `<run>/<file>`; `--repair` exits 0 with the file moved aside (a run whose training files were damaged is
    left unfinished, for the next `clbench run`); a following verify finds no problems."""
    victim = sweep.run_dir(method, seed)
    path, = victim.glob(pattern)
    name = path.relative_to(victim).as_posix()
    bad = damage(path, kind)
    code, out, err = sweep.verify()
    assert code == 1, out + err
    lines = out.splitlines()
    assert any(line.startswith(f"{victim.name}/{name}: ") for line in lines), out
    # besides: the gathered table, which holds the damaged run (`verify --repair` gathers it again)
    assert all(line.startswith((f"{victim.name}/{name}: ", f"{store.TABLE}: ")) for line in lines), out
    assert f"{len(lines)} problem(s)" in err, err
    code, out, err = sweep.verify("--repair")
    assert code == 0, out + err
    assert "repaired" in out, out
    aside, = moved_aside(victim, name)
    assert aside.read_bytes() == bad
    if name in (store.ROWS, store.SPEC, store.PREDICTIONS):
        assert not runfiles.is_finished(victim)  # emptied, to be retrained
    if name == manifest.MANIFEST:
        assert store.ROWS in manifest.load(victim)["files"]  # a new one, adopted from the files that read whole
    code, out, err = sweep.verify()
    assert code == 0 and out == "", out + err
    assert "no problems" in err, err


def test_verify_finds_and_repairs_a_damaged_checkpoint_of_an_unfinished_run(sweep):
    """Guards `clbench verify` on an unfinished run whose checkpoint does not verify: reported (exit 1, a line
    naming it); `--repair` moves it aside (exit 0), as the next run would."""
    victim = sweep.run_dir("ce", 1)
    shutil.rmtree(victim)
    victim.mkdir()
    runfiles.save_torch(victim, store.CHECKPOINT, {"epoch": 1, "weights": torch.arange(500.0)})
    damage(victim / store.CHECKPOINT, "flipped")
    store.gather(sweep.results)  # the table holds the finished runs: only the checkpoint is wrong
    code, out, err = sweep.verify()
    assert code == 1 and f"{victim.name}/{store.CHECKPOINT}: " in out, out + err
    code, out, err = sweep.verify("--repair")
    assert code == 0, out + err
    assert len(moved_aside(victim, store.CHECKPOINT)) == 1
    code, out, err = sweep.verify()
    assert code == 0 and "no problems" in err, out + err


def test_verify_finds_and_removes_a_damaged_lease(sweep):
    """Guards `clbench verify` on an unreadable lease older than lease.WRITING_SECONDS: reported as stale
    (exit 1); `--repair` removes it (exit 0)."""
    victim = sweep.run_dir("cl", 2)
    path = victim / lease.LEASE
    path.write_bytes(b"\x00garbage\xff")
    old = time.time() - 60
    os.utime(path, (old, old))
    found_then_removed(sweep, f"{victim.name}/{lease.LEASE}", path)


def found_then_removed(sweep, where: str, path: Path) -> None:
    """`clbench verify` names `where` (exit 1); `--repair` removes `path` (exit 0); then nothing is left."""
    code, out, err = sweep.verify()
    assert code == 1 and f"{where}: " in out, out + err
    code, out, err = sweep.verify("--repair")
    assert code == 0 and not path.exists(), out + err
    code, out, err = sweep.verify()
    assert code == 0 and "no problems" in err, out + err


def test_verify_removes_leftover_temporary_files(sweep):
    """Guards the temporary file an interrupted write leaves in a run folder: reported, removed by --repair."""
    victim = sweep.run_dir("ce", 2)
    leftover = victim / ".rows.json.abc.tmp"
    leftover.write_bytes(b"[{\"torn")
    found_then_removed(sweep, f"{victim.name}/.rows.json.abc.tmp", leftover)


def test_verify_regathers_a_table_that_lacks_a_run(sweep):
    """Guards the gathered table against the run folders: a results.parquet that lacks a finished run is
    reported; --repair gathers it again, holding every run."""
    victim = sweep.run_dir("cl", 1)
    frame = pd.read_parquet(sweep.results / store.TABLE)
    frame[frame["run_key"] != victim.name].to_parquet(sweep.results / store.TABLE, index=False)
    code, out, err = sweep.verify()
    assert code == 1, out + err
    line, = out.splitlines()
    assert line.startswith(f"{store.TABLE}: ") and "lacks 1 finished run(s)" in line and victim.name in line
    code, out, err = sweep.verify("--repair")
    assert code == 0, out + err
    assert_same_table(pd.read_parquet(sweep.results / store.TABLE),
                      pd.read_parquet(sweep.reference.results / store.TABLE))
    code, out, err = sweep.verify()
    assert code == 0 and "no problems" in err, out + err


# ------------------------------------------------------------------------------------------------ manifest.py

def write(run_dir: Path, name: str, data: bytes) -> None:
    """Write a run file as bench.results.atomic does: record it, then put it in place."""
    manifest.record(run_dir, run_dir / name, *manifest.digest_bytes(data))
    (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
    (run_dir / name).write_bytes(data)


def test_record_keeps_the_previous_entry_as_was(tmp_path):
    """Guards `record`: a new content keeps the previous one's size and hash as `was` (and only the previous)."""
    write(tmp_path, "a.json", b"[1]")
    assert "was" not in manifest.load(tmp_path)["files"]["a.json"]
    write(tmp_path, "a.json", b"[1, 2]")
    entry = manifest.load(tmp_path)["files"]["a.json"]
    assert (entry["size"], entry["sha256"]) == manifest.digest_bytes(b"[1, 2]")
    assert (entry["was"]["size"], entry["was"]["sha256"]) == manifest.digest_bytes(b"[1]")
    write(tmp_path, "a.json", b"[1, 2, 3]")
    entry = manifest.load(tmp_path)["files"]["a.json"]
    assert (entry["was"]["size"], entry["was"]["sha256"]) == manifest.digest_bytes(b"[1, 2]")


def test_check_accepts_the_new_and_the_previous_content_only(tmp_path):
    """Guards `check`: a process killed between recording a file and renaming it leaves the previous content,
    which passes; the new content passes; another size, or the same size with another hash, is Damaged; a
    listed file that is missing is Damaged; an unlisted file passes."""
    write(tmp_path, "a.json", b'{"v": 1}')
    manifest.record(tmp_path, tmp_path / "a.json", *manifest.digest_bytes(b'{"v": 22}'))  # killed before the rename
    listing = manifest.load(tmp_path)
    assert runfiles.size_problems(tmp_path, listing) == []  # the old content, by size (a stat)
    manifest.check(tmp_path, "a.json", listing, b'{"v": 1}')
    manifest.check(tmp_path, "a.json", listing, b'{"v": 22}')
    manifest.check_file(tmp_path, "a.json", listing)
    with pytest.raises(Damaged, match="bytes"):
        manifest.check(tmp_path, "a.json", listing, b'{"v": 333}')
    with pytest.raises(Damaged, match="SHA-256"):
        manifest.check(tmp_path, "a.json", listing, b'{"v": 2}')
    (tmp_path / "a.json").write_bytes(b'{"v": 9}')
    with pytest.raises(Damaged, match="SHA-256") as caught:
        manifest.check_file(tmp_path, "a.json", listing)
    assert caught.value.name == "a.json" and caught.value.run_dir == tmp_path
    (tmp_path / "a.json").unlink()
    with pytest.raises(Damaged, match="missing"):
        manifest.check_file(tmp_path, "a.json", listing)
    assert ["missing" in d.what for d in runfiles.size_problems(tmp_path, listing)] == [True]
    manifest.check(tmp_path, "other.json", listing, b"[]")


def test_damaged_manifest_is_damaged_and_replaced_on_the_next_record(tmp_path):
    """Guards an unreadable manifest: `load` raises Damaged naming manifest.json; the next `record` moves it
    aside and starts a new one."""
    write(tmp_path, "a.json", b"[1]")
    damage(tmp_path / manifest.MANIFEST, "truncated")
    with pytest.raises(Damaged) as caught:
        manifest.load(tmp_path)
    assert caught.value.name == manifest.MANIFEST
    write(tmp_path, "b.json", b"[2]")
    assert set(manifest.load(tmp_path)["files"]) == {"b.json"}
    assert len(moved_aside(tmp_path, manifest.MANIFEST)) == 1


def test_move_aside_drops_entries_and_notes_them(tmp_path):
    """Guards `move_aside`: files (and a folder with its files) go to damaged/<stamp>/ under the same paths, their
    entries leave the manifest (a folder's files too), and `moved` notes why and where; other entries stay."""
    write(tmp_path, "rows.json", b"[]")
    write(tmp_path, "evals/x/a.json", b"[1]")
    write(tmp_path, "evals/x/b.jsonl.gz", b"gz")
    write(tmp_path, "evals/x.json", b"{}")
    write(tmp_path, "evals/xy.json", b"{}")
    folder = manifest.move_aside(tmp_path, ["evals/x.json", "evals/x"], "cut short")
    assert folder.startswith(f"{manifest.DAMAGED}/")
    for name in ("evals/x.json", "evals/x/a.json", "evals/x/b.jsonl.gz"):
        assert not (tmp_path / name).exists() and (tmp_path / folder / name).is_file(), name
    listing = manifest.load(tmp_path)
    assert set(listing["files"]) == {"rows.json", "evals/xy.json"}
    assert set(listing["moved"]) == {"evals/x.json", "evals/x"}
    assert "cut short" in listing["moved"]["evals/x"] and f"{folder}/evals/x" in listing["moved"]["evals/x"]
    write(tmp_path, "evals/x.json", b"{}")  # written again: no longer noted as moved
    assert set(manifest.load(tmp_path)["moved"]) == {"evals/x"}


def test_a_re_run_reads_only_files_whose_stat_changed_and_verify_reads_every_file(tmp_path):
    """Like git's index: a re-run trusts a file whose size and modification time are those recorded (any write
    changes them) and hashes the others; `clbench verify` (deep) hashes every file whatever its stat."""
    run = tmp_path / "run"
    runfiles.write_jsonl_gz(run, store.PREDICTIONS, [{"id": str(i)} for i in range(50)])
    path = run / store.PREDICTIONS
    written = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert [d.name for d in runfiles.problems(run)] == [store.PREDICTIONS]  # its stat changed: read, caught
    os.utime(path, ns=(written.st_atime_ns, written.st_mtime_ns))  # the stat it was written with...
    assert runfiles.problems(run) == []  # ...is trusted by a re-run
    assert [d.name for d in runfiles.problems(run, deep=True)] == [store.PREDICTIONS]  # verify reads it


def test_a_table_that_cannot_be_gathered_after_the_rows_were_stored_is_a_warning(cli, tiny, results, monkeypatch):
    """A folder that turns read-only after a shard's rows were written: the shard's results are safe in its run
    folder, so it is reported as done with a warning (exit 0), not as failed; the next gather picks it up."""
    from bench.results import faults

    def refused(folder):
        raise faults.WriteFailed(f"cannot write to {folder}: read-only file system (results.parquet)")

    monkeypatch.setattr(store, "gather", refused)
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--results-dir", results)
    assert code == 0, err
    assert "] done " in err and "the gathered table was not updated (cannot write to" in err
    assert "failed" not in err and len(list(results.glob(f"*/{store.ROWS}"))) == 1


@pytest.mark.parametrize("kind", ["emptied", "truncated", "garbage"])
def test_a_damaged_table_is_named_and_gathered_again_by_any_run(sweep, kind):
    """Guards issue 54's first case: a results.parquet emptied, cut or overwritten in a folder written well before
    (a fresh one is gathered anyway) is named by `status`, `results` and `verify` (whose hint is then true), and
    the next `clbench run` of the finished sweep gathers it again: every shard skipped, the reference's table."""
    old = time.time() - 10 * store.STALE_SECONDS
    for path in sweep.results.rglob("*"):
        os.utime(path, (old, old))
    damage(sweep.results / store.TABLE, kind)
    code, _, err = sweep.cli("status", "--results-dir", sweep.results)
    assert code == 0 and err.count("results.parquet is damaged") == 1 and "gathers it again" in err
    code, _, err = sweep.cli("results", "--results-dir", sweep.results)
    assert code == 0 and "results.parquet is damaged" in err
    code, out, _ = sweep.verify()
    assert code == 1 and "results.parquet" in out and "(or any `clbench run`) gathers it again" in out
    code, output = sweep.run()
    assert code == 0 and set(statuses(output).values()) == {"skipped"}, output
    assert_same_table(pd.read_parquet(sweep.results / store.TABLE),
                      pd.read_parquet(sweep.reference.results / store.TABLE))
    assert sweep.verify()[0] == 0


def test_a_foreign_file_in_evals_is_never_read_and_is_moved_aside(sweep):
    """Guards issue 54's second case: `evals/stray-00000000.json` holding `{"a": 1}` (not written by clbench) made
    every shard fail with KeyError: 'rows' and `clbench report` crash, while `verify` saw no problem. It is never
    read as an evaluation: reports hold every run, `verify` names it as foreign, and a re-run (or --repair) moves
    it aside without redoing or retraining anything."""
    victim = sweep.run_dir("ce", 1)
    stray = victim / store.EVALS / "stray-00000000.json"
    stray.write_text('{"a": 1}')
    code, out, err = sweep.cli("results", "--results-dir", sweep.results, "--long")
    assert code == 0 and "KeyError" not in err
    code, out, _ = sweep.verify()
    assert code == 1 and f"{victim.name}/evals/stray-00000000.json" in out and "foreign" in out
    others = {d.name: snapshot(d) for d in sweep.runs() if d != victim}
    code, output = sweep.run()
    assert code == 0 and set(statuses(output).values()) == {"skipped"}, output
    assert not stray.exists() and len(moved_aside(victim, "evals/stray-00000000.json")) == 1
    assert {key: snapshot(sweep.results / key) for key in others} == others
    assert_same_results(sweep.results, sweep.reference.results)
    assert sweep.verify()[0] == 0
    stray.write_text('{"a": 1}')
    code, out, _ = sweep.verify("--repair")
    assert "foreign" in out and not stray.exists() and sweep.verify()[0] == 0


def test_a_copied_run_folder_is_named_never_gathered_and_moved_aside(sweep):
    """Guards issue 54's third case: `cp -a <run> <other name>` counted as a finished run (its rows gathered twice,
    `verify` never clean). A folder whose name is not its spec's key is named by `status` and `verify`, left out
    of the table, and `verify --repair` moves it to .aside/ whole: verify is clean after."""
    victim = sweep.run_dir("ce", 1)
    copy = sweep.results / "ce_tiny_tiny-bert_s1_0000000001"
    shutil.copytree(victim, copy, copy_function=shutil.copy2)
    code, out, _ = sweep.cli("status", "--results-dir", sweep.results)
    assert copy.name in out and "misnamed" in out
    keys = set(pd.DataFrame(store.finished_rows(sweep.results))["run_key"])
    assert keys == {d.name for d in sweep.runs() if d != copy}  # never gathered
    code, output = sweep.run()
    assert code == 0 and set(statuses(output).values()) == {"skipped"}, output
    assert set(pd.read_parquet(sweep.results / store.TABLE)["run_key"]) == keys
    code, out, _ = sweep.verify()
    assert code == 1 and f"{copy.name}/" in out and "misnamed: the folder holds run " + victim.name in out
    code, out, _ = sweep.verify("--repair")
    assert not copy.exists() and len(list((sweep.results / ".aside").glob(f"*/{copy.name}/rows.json"))) == 1
    assert sweep.verify()[0] == 0
    assert_same_results(sweep.results, sweep.reference.results)


def flip_keeping_time(path: Path) -> None:
    """Flip the file's middle byte and restore its modification time: a stat-trusting check sees nothing."""
    before = path.stat()
    damage(path, "flipped")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_damage_only_a_read_finds_costs_its_run_and_its_message_is_true(sweep, tmp_path, caplog):
    """Guards issue 54's fourth case: a byte of predictions.jsonl.gz flipped with its time restored stopped the
    compare report with "`clbench run` retrains the run", which later runs never did (they trust the stat).
    The report now leaves that run out (one warning line, a note on the table) and names a fix that works:
    `clbench verify --repair`, then `clbench run` retrains that shard alone."""
    victim = sweep.run_dir("cl", 1)
    flip_keeping_time(victim / store.PREDICTIONS)
    code, out, err = sweep.cli("report", "--results-dir", sweep.results, "--reports-dir", tmp_path / "reports",
                               "--table", "compare", "--filter", "collapsed=0,1")
    assert code == 0, err
    err += caplog.text  # logged warnings reach caplog in this process
    assert "`clbench run` retrains the run" not in out + err
    assert err.count(f"{victim.name}/{store.PREDICTIONS} is damaged") == 1 and "verify --repair" in err, err
    assert "left out as damaged: 1 run(s)" in out and victim.name in out, out
    code, output = sweep.run()
    assert code == 0 and set(statuses(output).values()) == {"skipped"}, output  # as RUNNING.md says: trusted
    code, out, _ = sweep.verify("--repair")
    assert code == 0 and f"{victim.name}/{store.PREDICTIONS}" in out and "the run is retrained" in out, out
    code, output = sweep.run()
    assert code == 0 and statuses(output) == {d.name: "done" if d == victim else "skipped" for d in sweep.runs()}
    assert_same_results(sweep.results, sweep.reference.results)


def test_a_deleted_listed_file_is_named_with_its_cost(sweep):
    """Guards issue 54's fifth case (deleted files): an evaluation file and a model the manifest lists, deleted,
    were `no problems` to verify and `done` to status. Both name them with their cost; the runs stay in the
    table (their rows are whole); `--repair` drops them from the manifest; a run redoes the evaluation alone."""
    evaluated, modelled = sweep.run_dir("ce", 1), sweep.run_dir("cl", 2)
    evaluation, = (evaluated / store.EVALS).glob("repr-*.json")
    evaluation.unlink()
    (modelled / store.MODEL).unlink()
    code, out, _ = sweep.verify()
    lines = dict(line.split(": ", 1) for line in out.splitlines())
    assert code == 1 and set(lines) == {f"{evaluated.name}/{store.EVALS}/{evaluation.name}",
                                        f"{modelled.name}/{store.MODEL}"}, out
    assert all(line.startswith("missing") for line in lines.values()), out
    assert "the evaluation is redone" in lines[f"{evaluated.name}/{store.EVALS}/{evaluation.name}"]
    assert "no-model" in lines[f"{modelled.name}/{store.MODEL}"]
    code, out, _ = sweep.cli("status", "--results-dir", sweep.results)
    states = {line.split()[0]: line for line in out.splitlines()[1:-1]}
    assert states[evaluated.name].split()[1] == "damaged" and "missing" in states[evaluated.name], out
    assert states[modelled.name].split()[1] == "damaged" and store.MODEL in states[modelled.name], out
    from bench.reporting.resultsview import load_results

    assert set(load_results(sweep.results)["run_key"]) == {d.name for d in sweep.runs()}
    code, out, _ = sweep.verify("--repair")
    assert code == 0 and out.count("dropped from the manifest") == 2, out
    assert sweep.verify()[0] == 0
    code, output = sweep.run()
    assert code == 0 and set(statuses(output).values()) == {"skipped"}, output
    assert evaluation.is_file() and "repr: done" in output  # redone from the model, nothing retrained
    assert sweep.verify()[0] == 0


def test_status_keeps_listing_a_run_that_repair_emptied(sweep):
    """Guards issue 54's fifth case: after `verify --repair` emptied a run whose rows were damaged, status no
    longer listed it. It is `damaged` (emptied, to be retrained) until a run retrains it; then `done`."""
    victim = sweep.run_dir("cl", 1)
    damage(victim / store.ROWS, "garbage")
    assert sweep.verify("--repair")[0] == 0
    code, out, _ = sweep.cli("status", "--results-dir", sweep.results)
    line, = [line for line in out.splitlines() if line.startswith(victim.name)]
    assert line.split()[1] == "damaged" and "emptied" in line and "retrains it" in line, out
    assert sweep.run()[0] == 0
    code, out, _ = sweep.cli("status", "--results-dir", sweep.results)
    line, = [line for line in out.splitlines() if line.startswith(victim.name)]
    assert line.split()[1] == "done", out


def test_reports_name_a_damaged_run_on_the_table_and_the_page_and_say_it_once(sweep, tmp_path, caplog):
    """Guards issue 54's fifth case: a run left out as damaged was named on stderr only, and a sweep of other
    shards said `left out of the table` once per gather (4 times with --jobs 2). The run's end, the report and
    `clbench plot summary` say it in one line; the tables written and the page carry it as a note."""
    victim = sweep.run_dir("cl", 1)
    damage(victim / store.ROWS, "garbage")
    code, output = sweep.run("--methods", "ce", "--overwrite", "--jobs", "2")
    assert code == 0 and victim.name not in statuses(output), output
    assert output.count(f"{victim.name}/{store.ROWS} is damaged") == 1, output
    reports = tmp_path / "reports"
    caplog.clear()
    code, out, err = sweep.cli("report", "--results-dir", sweep.results, "--reports-dir", reports, "--html",
                               "--filter", "collapsed=0,1")
    err += caplog.text  # logged warnings reach caplog in this process
    assert code == 0 and err.count(f"{victim.name}/{store.ROWS} is damaged") == 1, err
    page = next(reports.glob("*.html")).read_text()
    assert "left out as damaged" in page and victim.name in page
    code, out, err = sweep.cli("report", "--results-dir", sweep.results, "--reports-dir", reports, "--table",
                               "paper-ii", "--filter", "collapsed=0,1")
    assert code == 0 and "left out as damaged: 1 run(s)" in out and victim.name in out, out
    code, _, err = sweep.cli("plot", "summary", "--results-dir", sweep.results, "--reports-dir", reports,
                             "--filter", "collapsed=0,1")
    assert code == 0 and err.count(f"{victim.name}/{store.ROWS} is damaged") == 1, err


def test_a_planned_shard_whose_folder_holds_another_run_is_retrained_under_its_own_key(sweep):
    """Guards issue 54's third case, from the planner's side: the folder of a planned shard holding another
    run's files (copied over it) is never that shard's result; `clbench run` moves them aside and retrains the
    shard under its own key, the others skipped, ending with the reference's results."""
    victim, other = sweep.run_dir("ce", 1), sweep.run_dir("cl", 2)
    shutil.rmtree(victim)
    shutil.copytree(other, victim, copy_function=shutil.copy2)
    code, output = sweep.run()
    assert code == 0 and statuses(output) == {d.name: "done" if d == victim else "skipped" for d in sweep.runs()}
    assert "misnamed" in output, output
    assert len(list(victim.glob(f"{manifest.DAMAGED}/*/{store.ROWS}"))) == 1  # the other run's files, aside
    assert_same_results(sweep.results, sweep.reference.results)


def test_rows_damaged_with_their_time_restored_are_retrained_by_the_next_run(sweep):
    """Guards the runner's one check of a run folder (runfiles.check_folder): it reads the rows it shows, verified,
    so a rows.json changed with its size and time kept (which the stat check passes) is damage the same run moves
    aside and retrains, that shard alone; before, the shard failed reading them."""
    victim = sweep.run_dir("ce", 2)
    flip_keeping_time(victim / store.ROWS)
    code, output = sweep.run()
    assert code == 0 and statuses(output) == {d.name: "done" if d == victim else "skipped" for d in sweep.runs()}
    assert f"{victim.name}/{store.ROWS} is damaged" in output and len(moved_aside(victim, store.ROWS)) == 1
    assert_same_results(sweep.results, sweep.reference.results)
