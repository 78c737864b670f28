"""What a researcher reads runs here, offline: docs/API.md's quick start runs as written against the checkout's
fixture (a tiny random encoder, one epoch and one seed in its place), no doc names one machine's absolute paths, and every
install hint is one that works from a checkout (clbench is not on the package index)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURE, ROOT

import bench.api
import clbench

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]  # not docs/results/**: stored logs
# a home, a root or a CI machine's folder, or a pytest temporary folder, written out in full
MACHINE_PATH = re.compile(r"(?<![\w.~$<>-])(?:/(?:home|root|Users|work)/|/tmp/pytest-)[^\s`'\"),;]*")
FAST = {"encoder": "tiny-bert", "epochs": 1, "lr": 5e-3, "batch_size": 8, "max_length": 32, "evaluators": "none"}


def quick_start() -> str:
    """The first Python block under docs/API.md's `## Quick start`."""
    text = (ROOT / "docs" / "API.md").read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "docs/API.md's quick start has no ```python block"
    return found.group(1)


def test_the_api_quick_start_runs_offline(tmp_path, monkeypatch, capsys):
    """Run from a checkout (here: a folder holding the fixture where the checkout has it), with the Hub off."""
    code = quick_start()
    assert "data_dir=" in code, "the quick start must read a local folder (data_dir=), not the Hub"
    shutil.copytree(FIXTURE, tmp_path / FIXTURE.relative_to(ROOT))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr("bench.evaluators.metrics.collapse_note", lambda *args: "")  # a healthy run whatever the CPU
    given = []

    def fast_run(**kwargs):  # the block's own arguments, but a tiny random encoder, one epoch, its first seed
        given.append(kwargs)
        return bench.api.run(**{**kwargs, **FAST, "seeds": kwargs["seeds"][:1]})

    monkeypatch.setattr(clbench, "run", fast_run)
    exec(compile(code, "docs/API.md (quick start)", "exec"), {"__name__": "__quickstart__"})
    out = capsys.readouterr().out
    assert given and given[0]["data_dir"] and given[0]["methods"] == ["ce", "clld"]
    assert "verdict" in out and "clld-adaptive" in out, out
    runs = list((tmp_path / "results").glob("*/rows.json"))  # conftest: $BENCH_RESULTS_DIR is tmp_path/results
    assert len(runs) == 2 and all("_tiny_tiny-bert_s1_" in p.parent.name for p in runs)


def test_no_doc_names_a_machines_absolute_path():
    found = [f"{page.relative_to(ROOT)}:{number}: {match}" for page in DOCS
             for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
             for match in MACHINE_PATH.findall(line)]
    assert not found, "write ~/..., <checkout>/... or a placeholder instead of:\n" + "\n".join(found)


@pytest.mark.parametrize("line, bad", [
    ("error: dataset card /home/me/cards/x.yaml: ...", True), ("ok python 3.11 (/root/.pyenv/bin/python)", True),
    ("see /tmp/pytest-of-me/pytest-3/test0/results", True), ("at /Users/ann/data", True),
    ("error: card ~/cards/x.yaml", False), ("https://example.org/work/x", False), ("<checkout>/bench", False),
    ("--results-dir /tmp/hfdemo", False), ("clbench doctor --results-dir /scratch/$USER/results", False),
])
def test_the_path_pattern(line, bad):
    assert bool(MACHINE_PATH.search(line)) is bad


def test_install_hints_work_from_a_checkout():
    """`pip install clbench[EXTRA]` finds nothing while clbench is not on the package index: hints say how to add
    an extra to a checkout's install (bench.errors.install_extra), in the docs and in the messages alike."""
    from bench.errors import install_extra

    assert install_extra("perf") == 'pip install -e ".[perf]" (in the clbench checkout)'
    pages = [p for p in DOCS if "clbench[" in p.read_text(encoding="utf-8")]
    sources = [p for p in sorted((ROOT / "bench").rglob("*.py")) if p.name != "errors.py"
               and "clbench[" in p.read_text(encoding="utf-8")]
    assert not pages and not sources, [str(p.relative_to(ROOT)) for p in pages + sources]
