"""Shared fixtures: a tiny dataset folder, an isolated results folder, an in-process CLI runner, and the tiny
WordNet every test reads unless it asks for the machine's own (`real_wordnet`)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# A developer's own dataset cards (BENCH_CARDS_DIR, read when bench.data.cards is imported) stay out of the
# suite: the registry the tests see is the shipped one. Tests of user cards set it themselves.
os.environ.pop("BENCH_CARDS_DIR", None)
# In-process runs keep torch's own thread count whatever the machine's load (an explicit OMP_NUM_THREADS turns off
# `clbench run`'s busy-machine adjustment, bench.running.machine_load): results compared within a test never
# depend on the load at that moment. tests/test_machine_load.py unsets it where it tests the adjustment.
os.environ.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                             else os.cpu_count() or 1))

from bench.cli.main import main  # noqa: E402
from tinywordnet import write_tiny_wordnet

ROOT = Path(__file__).resolve().parent.parent
# Every test reads the tiny WordNet of tests/tinywordnet.py (the same everywhere, installed or not); the few that
# test against the real one take the `real_wordnet` fixture. BENCH_WORDNET_DIR as this run was started is what
# they get: `BENCH_WORDNET_DIR=none python -m pytest` runs the suite as on a machine without WordNet.
WORDNET_ENV = "BENCH_WORDNET_DIR"
REAL_WORDNET = os.environ.get(WORDNET_ENV)
TINY_WORDNET = write_tiny_wordnet(Path(tempfile.mkdtemp(prefix="clbench-tests-wordnet-")))
atexit.register(shutil.rmtree, TINY_WORDNET.parents[1], True)
os.environ[WORDNET_ENV] = str(TINY_WORDNET)
# The suite's shards train for a second or two, under the default's 30 s between resume checkpoints: they write
# one after every epoch, so that the tests of resuming, stopping and leases have one (tests of the default drop it).
CHECKPOINT_ENV = "BENCH_CHECKPOINT_EVERY_S"
os.environ[CHECKPOINT_ENV] = "0"
FIXTURE = ROOT / "datasets" / "fixtures" / "tiny"
# A tiny random BERT that learns the fixture in a few epochs on CPU (evaluators are tested on their own).
FAST = ["--encoder", "tiny-bert", "--epochs", "2", "--lr", "1e-3", "--batch-size", "8", "--no-progress",
        "--max-length", "32", "--evaluators", "none"]


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch, tmp_path):
    """No test sees the developer's data or results folders, or reaches the Hub."""
    monkeypatch.delenv("BENCH_DATA_DIR", raising=False)
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.hookimpl(tryfirst=True)  # before `-m` selects
def pytest_collection_modifyitems(items):
    """Mark the tests that read the real WordNet (`-m real_wordnet` selects them, `-m "not real_wordnet"` not)."""
    for item in items:
        if "real_wordnet" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real_wordnet)


@pytest.fixture
def real_wordnet(monkeypatch):
    """The machine's own WordNet instead of the tiny one; the test is skipped, with the install hint, without it."""
    from bench.data.wordnet import load_wordnet
    from bench.errors import BenchError

    if REAL_WORDNET:
        monkeypatch.setenv(WORDNET_ENV, REAL_WORDNET)
    else:
        monkeypatch.delenv(WORDNET_ENV, raising=False)
    try:
        return load_wordnet()
    except BenchError as exc:
        pytest.skip(f"the real WordNet is not installed here: {exc}")


@pytest.fixture(params=["tiny", pytest.param("real", marks=pytest.mark.real_wordnet)])
def wn(request):
    """A WordNet reader: the tiny one, then the machine's own (skipped where there is none); a test taking it
    runs on both."""
    from bench.data.wordnet import load_wordnet

    return request.getfixturevalue("real_wordnet") if request.param == "real" else load_wordnet()


@pytest.fixture
def tiny(tmp_path) -> Path:
    """A writable copy of the tiny fixture folder (train.jsonl, test.jsonl)."""
    target = tmp_path / "tiny"
    shutil.copytree(FIXTURE, target)
    return target


@pytest.fixture
def results(tmp_path) -> Path:
    return tmp_path / "results"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """Write rows as JSON Lines (creating folders)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_sentiment_set(folder: Path) -> None:
    """A tiny two-class sentiment dataset (30 train texts, 10 test texts) in folder."""
    texts = {"positive": ["a good film", "great acting", "good fun", "a great story", "good and great"],
             "negative": ["a bad film", "awful acting", "bad fun", "an awful story", "bad and awful"]}
    train = [{"text": t, "label": l} for l, ts in texts.items() for t in ts] * 3
    write_jsonl(folder / "train.jsonl", train)
    write_jsonl(folder / "test.jsonl", train[:10])


def evaluate_and_store(evaluator, ctx) -> list[dict]:
    """Run an evaluator directly and have the store write its artefacts into ctx.run_dir, as the runner does;
    returns its rows."""
    from bench.evaluators.base import as_evaluation
    from bench.running.evaluation import write_artefacts

    evaluation = as_evaluation(evaluator.evaluate(ctx))
    write_artefacts(ctx.run_dir, evaluation.artefacts)
    return evaluation.rows


def read_fixture(split: str) -> list[dict]:
    """Rows of the tiny fixture's split."""
    return [json.loads(line) for line in (FIXTURE / f"{split}.jsonl").read_text().splitlines()]


@pytest.fixture
def cli(capsys):
    """Run `bench ARGS` in-process; returns (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


# ------------------------------------------------------------------------- fork servers (crash safety, leases)

def launch_env(drop: tuple[str, ...], **extra: str) -> dict[str, str]:
    """The environment of a `bench` launch: this one without variables starting with `drop` (BENCH_ ...),
    offline, one CPU thread, the checkout importable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.setdefault(CHECKPOINT_ENV, "0")
    env.update(extra)
    return env


class LineServer:
    """A child Python process spoken to in lines: JSON requests on its stdin, one answer line each on its stdout
    (the fork servers that start `bench` launches without paying for imports each time)."""

    def __init__(self, argv: list[str], env: dict[str, str], name: str):
        self.name = name
        self.process = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)

    def send(self, request: dict) -> None:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def readline(self) -> str:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} died (exit {self.process.wait()})")
        return line

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send `sig` (SIGKILL) to every process in the launch's process group."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def process_state(pid: int) -> str:
    """The process's state letter in /proc (R, S, T stopped, Z zombie, ...); "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""
