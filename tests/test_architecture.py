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
    """The package (with bench/methods, a link to methods/, copied as a folder), the benchmarks beside it and
    pyproject.toml, copied to `target`."""
    for name in ("bench", "benchmarks"):
        shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", target)
    return target


def test_the_import_contracts_hold(tmp_path):
    result = lint(copy_tree(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    for contract in ("No import circles", "Parts import downward only", "Reporting reads results only",
                     "The shared vocabulary", "The command line is the top", "The installed package never imports"):
        assert f"{contract}" in result.stdout


@pytest.mark.parametrize("module,planted,broken", [
    ("bench/data/loading.py", "import bench.running.runner", "Parts import downward only, cli to results BROKEN"),
    ("bench/methods/ce.py", "import bench.running.shard", "Parts import downward only, cli to results BROKEN"),
    ("bench/encoders/models.py", "import bench.reporting.tables", "Parts import downward only, cli to results BROKEN"),
    ("bench/reporting/tables.py", "import bench.training.trainer", "Reporting reads results only BROKEN"),
    ("bench/spec.py", "import bench.data.loading", "The shared vocabulary (errors, registry, spec, catalog, hub) imports "
                                               "no part BROKEN"),
    ("bench/results/store.py", "import bench.cli.main", "The command line is the top: only the programs import it BROKEN"),
    ("bench/registry.py", "import bench.catalog", "No import circles BROKEN"),
    ("bench/running/tending.py", "import bench.running.shard", "No import circles BROKEN"),
    ("bench/running/status.py", "import benchmarks.answers", "The installed package never imports the benchmarks beside "
                                                            "it BROKEN"),
])
def test_a_planted_import_breaks_its_contract(tmp_path, module, planted, broken):
    tree = copy_tree(tmp_path)
    path = tree / module
    path.write_text(path.read_text() + f"\n{planted}  # planted by the test\n")
    result = lint(tree)
    assert result.returncode != 0 and broken in result.stdout, result.stdout[-3000:]


MAX_LINES = 400


def test_no_module_is_over_the_line_limit():
    """Small modules with one job each: none over MAX_LINES lines."""
    modules = sorted({p.resolve() for folder in ("bench", "methods") for p in (ROOT / folder).rglob("*.py")})
    assert len(modules) > 50
    long = {str(p.relative_to(ROOT)): n for p in modules if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines, split by job: {long}"
