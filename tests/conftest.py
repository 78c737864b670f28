"""Shared fixtures: a tiny dataset folder, an isolated results folder and an in-process CLI runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.cli import main

FIXTURE = Path(__file__).resolve().parent.parent / "datasets" / "fixtures" / "tiny"
# A tiny random BERT that learns the fixture in a few epochs on CPU (evaluators are tested on their own).
FAST = ["--encoder", "tiny-bert", "--epochs", "2", "--lr", "1e-3", "--batch-size", "8", "--no-progress",
        "--max-length", "32", "--evaluators", "none"]


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch, tmp_path):
    """No test sees the developer's data or results folders, or reaches the Hub."""
    monkeypatch.delenv("BENCH_DATA_DIR", raising=False)
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


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
