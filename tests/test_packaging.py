"""The wheel installs everything under the project's own package: the methods as `bench.methods` and the
dataset cards as `bench/cards`, with no top-level `methods` package that could collide with another one; beside it
only the module `clbench` (the Python API, bench.api, under the distribution's name)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the checkout (building in place would leave build/ in it)."""
    tree = tmp_path_factory.mktemp("tree")
    for name in ("bench", "methods", "datasets", "benchmarks"):  # benchmarks/ beside them: never in the wheel
        shutil.copytree(ROOT / name, tree / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "clbench.py"):
        shutil.copy(ROOT / name, tree)
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            str(tree), "-w", str(out)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    return next(out.glob("clbench-*.whl"))


def test_the_wheel_holds_only_the_bench_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"bench", "clbench.py", wheel.name.split("-py")[0] + ".dist-info"}
    methods = {Path(n).name for n in names if n.startswith("bench/methods/")}
    assert {p.name for p in (ROOT / "methods").glob("*.py")} <= methods
    assert {f"bench/cards/{p.name}" for p in (ROOT / "datasets").glob("*.yaml")} <= set(names)
    for part in ("cli", "data", "encoders", "evaluators", "reporting", "results", "running", "training"):
        assert f"bench/{part}/__init__.py" in names, part
    constraints = ROOT / "bench" / "attack" / "constraints"   # counter-fitting's data and its licence
    assert {f"bench/attack/constraints/{p.name}" for p in constraints.iterdir()} <= set(names)
    assert "bench/attack/constraints/LICENSE.txt" in names
    assert {f"bench/reporting/templates/{n}" for n in ("page.html.j2", "page.css", "page.js")} <= set(names)


def test_the_wheel_holds_no_benchmark_or_campaign_code(wheel):
    """Guards issue 55: the suite's own benchmarks and the GPU campaign (benchmarks/, run from a checkout) are not
    part of the installed product; no module of the wheel names them either."""
    archive = zipfile.ZipFile(wheel)
    modules = [n for n in archive.namelist() if n.endswith(".py")]
    assert not [n for n in modules if "perf" in Path(n).parts or n.startswith("benchmarks/") or "campaign" in n]
    importing = [n for n in modules if re.search(rb"^\s*(from|import) benchmarks\b", archive.read(n), re.M)]
    assert not importing


def test_after_installing_the_wheel_only_bench_methods_imports(wheel, tmp_path):
    target = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                                str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": str(target)}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def python(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=env, capture_output=True, text=True,
                              timeout=300)

    top_level = python("import methods")
    assert top_level.returncode != 0 and "No module named 'methods'" in top_level.stderr
    assert python("import clbench; print(clbench.run.__module__)").stdout.strip() == "bench.api"  # the Python API
    own = python("import bench.methods, bench.data.cards as c; from bench.registry import METHODS; "
                 "print(bench.methods.__file__); print(c.CARDS_DIR); print(sorted(name for name, _ in METHODS.items()))")
    assert own.returncode == 0, own.stderr[-2000:]
    methods_file, cards_dir, names = own.stdout.splitlines()
    assert Path(methods_file).is_relative_to(target) and Path(cards_dir).is_relative_to(target)
    assert (Path(cards_dir) / "demo.yaml").is_file()
    assert "clld-adaptive" in names and "ce" in names


def test_a_folder_named_clbench_beside_the_quick_start_is_one_line_naming_the_fix(tmp_path):
    """clbench is installed from a checkout (`pip install -e .`): setuptools' editable finder is asked after
    Python's own search of sys.path, which takes a folder named clbench beside the script (or in the current
    folder, in a notebook) for an empty namespace package. None of clbench's code runs then, so the package
    cannot say so (docs/API.md, "A folder named clbench"); the quick start checks it: one line, exit code 2."""
    (tmp_path / "clbench").mkdir()
    shutil.copy(ROOT / "docs" / "examples" / "api_quickstart.py", tmp_path)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    probe = subprocess.run([sys.executable, "-c", "import clbench; print(hasattr(clbench, 'run'))"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=120)
    if probe.stdout.strip() == "True":
        pytest.skip("the installed clbench is found before the folder (not an editable install)")
    done = subprocess.run([sys.executable, "api_quickstart.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"error: `import clbench` found the folder {tmp_path / 'clbench'}, not clbench's "
                               "module"), lines[0]
    assert "rename that folder or run from another one" in lines[0]
    assert not (tmp_path / "results-quickstart").exists()
