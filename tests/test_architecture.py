"""The import contracts of pyproject.toml ([tool.importlinter], docs/ARCHITECTURE.md) hold, and they have teeth:
an upward import planted in a copy of the tree breaks them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

pytest.importorskip("importlinter")

LINT = ("import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")


def lint(tree: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the packages under `tree` (found there first: PYTHONPATH precedes the install)."""
    return subprocess.run([sys.executable, "-c", LINT], cwd=tree, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "HOME": str(tree)})


def copy_tree(target: Path) -> Path:
    """The packages and pyproject.toml of the checkout, copied to `target`."""
    for name in ("bench", "methods"):
        shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", target)
    return target


def test_the_import_contracts_hold(tmp_path):
    result = lint(copy_tree(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    for contract in ("No import circles", "Running -> training", "Reporting reads results only",
                     "Methods never reach", "The command line is the top"):
        assert f"{contract}" in result.stdout


@pytest.mark.parametrize("module,planted,broken", [
    ("bench/data.py", "import bench.runner", "Running -> training -> methods -> encoders -> data BROKEN"),
    ("bench/tables.py", "import bench.trainer", "Reporting reads results only BROKEN"),
    ("methods/ce.py", "import bench.shard", "Methods never reach running or the command line BROKEN"),
    ("bench/store.py", "import bench.cli", "The command line is the top: only the programs import it BROKEN"),
    ("bench/registry.py", "import bench.catalog", "No import circles BROKEN"),
])
def test_a_planted_import_breaks_its_contract(tmp_path, module, planted, broken):
    tree = copy_tree(tmp_path)
    path = tree / module
    path.write_text(path.read_text() + f"\n{planted}  # planted by the test\n")
    result = lint(tree)
    assert result.returncode != 0 and broken in result.stdout, result.stdout[-3000:]
