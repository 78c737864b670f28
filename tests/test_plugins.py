"""Registries discover their members: a new method file is all a new method needs, and installed packages add
methods and evaluators through entry points (`clbench.methods`, `clbench.evaluators`). Each case runs the real
`bench` in a subprocess (a fresh registry)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FAST, FIXTURE, ROOT

MY_METHOD = '''"""mymethod: cross-entropy with label smoothing (a method added as one file)."""

import torch.nn.functional as F

from bench.registry import METHODS
from bench.methods.base import Method


@METHODS.register("mymethod")
class MyMethod(Method):
    """Label-smoothed cross-entropy."""

    def loss(self, batch):
        return {"ce": F.cross_entropy(self.logits(batch).float(), batch["labels"], label_smoothing=0.1)}
'''

PLUGIN_METHOD = MY_METHOD.replace("mymethod", "toy")
PLUGIN_EVALUATOR = '''"""toyeval: the mean top-class probability on the test split (an evaluator from a plugin)."""

from bench.evaluators.base import Evaluator
from bench.registry import EVALUATORS


@EVALUATORS.register("toyeval")
class ToyEval(Evaluator):
    name = "toyeval"

    def evaluate(self, ctx):
        probabilities = ctx.classifier.predict_proba(ctx.data.test.texts)
        return [{"split": "test", "metric": "mean_confidence", "value": float(probabilities.max(1).mean()),
                 "n": len(ctx.data.test)}]
'''


def bench(*args: str, cwd: Path, pythonpath: str = "") -> subprocess.CompletedProcess:
    """`python -m bench ARGS` in a fresh process (with `pythonpath` first on its path)."""
    env = {**os.environ, "PYTHONPATH": pythonpath, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "bench", *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_new_method_file_is_all_it_takes(tmp_path):
    """methods/mymethod.py in a copy of the project: listed, runnable, in the report, with no other edit."""
    tree = tmp_path / "tree"
    for name in ("bench", "methods", "datasets"):
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"),
                        symlinks=True)  # bench/methods stays a link to the copy's methods/
    (tree / "methods" / "mymethod.py").write_text(MY_METHOD)
    listed = bench("list", "methods", cwd=tree, pythonpath=str(tree))
    assert listed.returncode == 0 and "mymethod" in listed.stdout, listed.stderr
    results = tmp_path / "results"
    ran = bench("run", "--methods", "ce,mymethod", "--datasets", FIXTURE, *FAST, "--results-dir", results,
                cwd=tree, pythonpath=str(tree))
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert list(results.glob("mymethod_tiny_*/rows.json"))
    # all runs shown: two epochs of tiny-bert may collapse, and a collapsed run is otherwise left out of the tables
    report = bench("report", "--results-dir", results, "--filter", "collapsed=0,1", cwd=tree, pythonpath=str(tree))
    assert report.returncode == 0 and "mymethod" in report.stdout, report.stderr[-2000:]


@pytest.mark.slow
def test_a_plugin_package_adds_a_method_and_an_evaluator(tmp_path):
    """A tiny installed distribution (a dist-info with entry points on the path) registers `toy` and `toyeval`."""
    site = tmp_path / "site"
    (site / "toyplug").mkdir(parents=True)
    (site / "toyplug" / "__init__.py").write_text("")
    (site / "toyplug" / "method.py").write_text(PLUGIN_METHOD)
    (site / "toyplug" / "evaluator.py").write_text(PLUGIN_EVALUATOR)
    info = site / "toyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[clbench.methods]\ntoy = toyplug.method\n\n"
                                           "[clbench.evaluators]\ntoyeval = toyplug.evaluator\n")
    methods = bench("list", "methods", cwd=tmp_path, pythonpath=str(site))
    evaluators = bench("list", "evaluators", cwd=tmp_path, pythonpath=str(site))
    assert "\ntoy: Label-smoothed" in methods.stdout, methods.stdout + methods.stderr
    assert "\ntoyeval: " in evaluators.stdout, evaluators.stdout + evaluators.stderr
    results = tmp_path / "results"
    fast = [a for a in FAST if a not in ("--evaluators", "none")]
    ran = bench("run", "--methods", "toy", "--datasets", FIXTURE, *fast, "--evaluators", "toyeval",
                "--results-dir", results, cwd=tmp_path, pythonpath=str(site))
    assert ran.returncode == 0, ran.stderr[-2000:]
    (run_dir,) = results.glob("toy_tiny_*")
    (stored,) = (run_dir / "evals").glob("toyeval-*.json")
    (row,) = json.loads(stored.read_text())["rows"]
    assert row["metric"] == "mean_confidence" and 1 / 3 <= row["value"] <= 1

    (site / "toyplug" / "method.py").write_text("raise ImportError('broken on purpose')\n")
    broken = bench("run", "--methods", "toy", "--datasets", FIXTURE, *fast, "--results-dir", results,
                   cwd=tmp_path, pythonpath=str(site))
    assert broken.returncode == 2 and "method plugin 'toy'" in broken.stderr and "toyplug" in broken.stderr
