"""`demo`: what a new user's first command costs. It runs `clbench run` with no arguments (`make demo` without the
install) in a fresh process and an empty temporary folder (`--rounds` times: the README quotes the median and
range), and reports its wall and CPU time against the
3-minute budget, the time of each shard and of the start-up, evaluators and reports around them, the accuracy
of each method (that the comparison means something: methods differ, none collapsed) and the files written."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.errors import BenchError
from benchmarks.common import say

BUDGET_SECONDS = 180.0


def demo(args: argparse.Namespace) -> dict:
    """Run the demo `--rounds` times (each in a fresh process and an empty temporary folder) and time it: the
    report of the last round, with the wall time of every round, their median and range (see the docstring)."""
    rounds = max(1, int(getattr(args, "rounds", 1) or 1))
    walls, report = [], {}
    for round_ in range(1, rounds + 1):
        say(args, f"demo round {round_}/{rounds}")
        report = demo_once(args)
        walls.append(report["wall_s"])
    ordered = sorted(walls)
    return {**report, "rounds": rounds, "wall_s_rounds": walls, "wall_s_median": round(statistics.median(walls), 1),
            "wall_s_range": [ordered[0], ordered[-1]], "within_budget": ordered[-1] <= BUDGET_SECONDS}


def demo_once(args: argparse.Namespace) -> dict:
    """Run the demo once in a temporary folder and time it."""
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as folder:
        say(args, f"running `clbench run` (the demo) in {folder}")
        env = {k: v for k, v in os.environ.items() if k not in ("BENCH_RESULTS_DIR", "BENCH_DATA_DIR")}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "bench", "run"], cwd=folder, env=env, capture_output=True,
                              text=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if not getattr(args, "quiet", False):
            sys.stderr.write(done.stderr)
        if done.returncode != 0:
            raise BenchError(f"the demo exited {done.returncode}: {(done.stderr.strip() or '?').splitlines()[-1]}")
        return demo_report(Path(folder), wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
                           done.stdout)


def demo_report(folder: Path, wall: float, cpu: float, stdout: str) -> dict:
    """The measurements of a finished demo in `folder` (its results/ and reports/)."""
    shards = {}
    for rows_file in sorted((folder / "results").glob("*/rows.json")):
        rows = json.loads(rows_file.read_text())
        clean = {r["metric"]: r["value"] for r in rows if r["split"] == "test" and r["label"] == ""}
        evals = [json.loads(p.read_text()) for p in (rows_file.parent / "evals").glob("*.json")]
        eval_seconds = sum(float(e["rows"][0].get("eval_seconds", 0)) for e in evals if e.get("rows"))
        shards[rows[0]["method"]] = {"wall_s": rows[0]["wall_seconds"], "train_s": rows[0]["train_seconds"],
                                     "evaluators_s": round(eval_seconds, 2), "accuracy": clean.get("accuracy"),
                                     "macro_f1": clean.get("macro_f1"), "collapsed": bool(rows[0]["collapsed"])}
    in_shards = sum(s["wall_s"] + s["evaluators_s"] for s in shards.values())
    reports = sorted(str(p.relative_to(folder)) for p in (folder / "reports").glob("*") if p.suffix in (".md", ".png"))
    accuracies = [s["accuracy"] for s in shards.values()]
    return {
        "benchmark": "demo", "command": "clbench run (no arguments, empty folder)",
        "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "budget_s": BUDGET_SECONDS,
        "share_of_budget": round(wall / BUDGET_SECONDS, 3), "within_budget": wall <= BUDGET_SECONDS,
        "outside_shards_s": round(wall - in_shards, 1),  # start-up, planning, predictions, reports
        "shards": shards, "methods_differ": len(set(accuracies)) > 1,
        "any_collapsed": any(s["collapsed"] for s in shards.values()), "reports": reports,
        "stdout_lines": len(stdout.splitlines()),
    }
