"""The suite on a machine without WordNet: `BENCH_WORDNET_DIR=none` makes the loader see none, as a fresh machine
with only Python and pip; nothing may fail there. The tests that read the real WordNet skip with the install
hint, and the logic of the views and the attack still runs on the tiny WordNet of tests/tinywordnet.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT


def pytest_without_wordnet(*args: str) -> subprocess.CompletedProcess:
    """Run pytest on this checkout in a child process with WordNet hidden; returns the finished process."""
    env = {**os.environ, "BENCH_WORDNET_DIR": "none"}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


def counts(output: str) -> dict[str, int]:
    """The numbers of pytest's last summary line ({"passed": 3, "skipped": 2, ...})."""
    last = output.strip().splitlines()[-1]
    return {word: int(number) for number, word in re.findall(r"(\d+) (\w+)", last)}


@pytest.mark.slow
def test_whole_suite_collects_and_real_wordnet_tests_skip_without_wordnet():
    done = pytest_without_wordnet("tests", "-m", "real_wordnet")
    summary = counts(done.stdout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert not {"failed", "error", "errors"} & set(summary), done.stdout[-3000:]
    assert summary.get("skipped", 0) >= 10 and summary.get("passed", 0) == 0, summary
    assert "the real WordNet is not installed here" in done.stdout
    assert "apt-get install wordnet-base wordnet-sense-index" in done.stdout  # the skip says how to install it


def test_view_and_attack_logic_runs_on_the_tiny_wordnet_without_wordnet():
    done = pytest_without_wordnet("tests/test_augment.py", "tests/test_textfooler.py", "-k", "tiny or antonym")
    summary = counts(done.stdout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert summary.get("passed", 0) >= 15 and not {"failed", "error", "errors"} & set(summary), summary
