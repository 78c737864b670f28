"""`answers`: what the commands that train nothing cost, in CPU seconds of a fresh process (the median of `--rounds`
runs), against issue 53's targets: the compare table of the issue41 archive, the HTML page of the issue30 archive
cold (no page before), warm (nothing changed: the page is reused whole, bench.reporting.pagememo) and rebuilt
(one run touched: built again, every figure reused), the page of a synthetic archive of 8 methods x 5 datasets x
5 seeds x 10 knob combinations (`--runs`, 2,000 by default) cold, and on the finished demo's results
(`--results-dir`, or the demo trained here first, ~3 minutes): the re-run, status, verify, results, the compare
table and a one-line error for an unknown method; then the re-run of a finished sweep of 100 tiny shards (trained
here first, ~3 minutes; `--no-hundred` leaves it out). The package is byte-compiled first, as an installed one
is (a checkout run with PYTHONDONTWRITEBYTECODE compiles every module in every process: ~0.5 s more per command).
CPU seconds, not wall: they hold on a busy machine. The archives are read from docs/results/*.tar.xz of a
checkout."""

from __future__ import annotations

import argparse
import compileall
import gzip
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

import bench
from bench.errors import BenchError
from benchmarks.common import say

ARCHIVES = Path(__file__).resolve().parents[1] / "docs" / "results"  # benchmarks/ sits in the checkout's root
TARGETS = {"compare_issue41": 2.5, "page_issue30_cold": 8.0, "page_issue30_warm": 3.0, "page_synthetic_cold": 30.0,
           "demo_rerun": 2.0, "demo_status": 2.0, "demo_verify": 2.0, "demo_results": 2.0, "demo_compare": 2.0,
           "bad_input": 1.0, "rerun_100_shards": 2.0}
HUNDRED = ["run", "--methods", "ce,supcon,lcl,clld", "--datasets", "demo", "--encoder", "tiny-bert", "--seeds", "1-25",
           "--epochs", "1", "--max-length", "32", "--evaluators", "none", "--no-progress"]
SYNTHETIC_DATASETS = ("sst2", "mr", "imdb", "demo", "cr")
SYNTHETIC_METHODS = ("ce", "cl", "supcon", "lcl", "clld-static", "clld-adaptive", "cline", "dcl")


def cpu_seconds(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    """CPU seconds (user + system) of `python -m bench ARGV` run to its end in `cwd`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "bench", *argv], cwd=cwd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in ok:
        tail = (done.stderr.strip() or "?").splitlines()[-1]
        raise BenchError(f"`clbench {' '.join(argv)}` exited {done.returncode}: {tail}")
    return round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2)


def median_of(rounds: int, measure) -> dict:
    """The median and range of `rounds` measurements (`measure()` returns CPU seconds)."""
    values = [measure() for _ in range(rounds)]
    return {"cpu_s": round(statistics.median(values), 2), "cpu_s_range": [min(values), max(values)]}


def extracted(name: str, into: Path) -> Path:
    """docs/results/<name>.tar.xz extracted under `into`; the folder of its runs."""
    archive = ARCHIVES / f"{name}.tar.xz"
    if not archive.is_file():
        raise BenchError(f"{archive} is missing: run the benchmark from a checkout of clbench")
    with tarfile.open(archive) as tar:
        tar.extractall(into / name, filter="data")
    return into / name


def synthetic_archive(folder: Path, template: Path, runs: int, items: int = 300) -> Path:
    """`runs` finished runs (methods x datasets x seeds x knob combinations, in that nesting) made from one real
    run folder: its files with the identity, knobs and predictions changed (a method effect, a seed effect and
    noise flip test items), rows and confusion recomputed from the predictions."""
    rng = np.random.default_rng(0)
    rows = json.loads((template / "rows.json").read_text())
    spec = json.loads((template / "spec.json").read_text())
    records = [json.loads(line) for line in gzip.decompress((template / "predictions.jsonl.gz").read_bytes())
               .decode().splitlines() if line][:items]
    labels = json.loads((template / "confusion.json").read_text())["labels"]
    gold = np.array([labels.index(r["gold"]) if r["gold"] in labels else int(r["gold"]) for r in records])
    combos = max(1, runs // (len(SYNTHETIC_METHODS) * len(SYNTHETIC_DATASETS) * 5))
    made = 0
    for m, method in enumerate(SYNTHETIC_METHODS):
        for dataset in SYNTHETIC_DATASETS:
            for seed in range(1, 6):
                for combo in range(combos):
                    if made == runs:
                        return folder
                    knobs = {f"{method}.knob": combo}
                    config = hashlib.sha256(f"{method}{dataset}{combo}".encode()).hexdigest()[:10]
                    key = f"{method}_{dataset}_minilm_s{seed}_{config}"
                    wrong = rng.random(items) < 0.2 - 0.01 * m + 0.005 * seed + 0.02 * rng.random()
                    predicted = np.where(wrong, (gold + 1) % len(labels), gold)
                    write_run(folder / key, rows, spec, records, labels, gold, predicted,
                              dict(run_key=key, method=method, dataset=dataset, seed=seed, config_hash=config,
                                   combo=f"c{combo:08d}", knobs=json.dumps(knobs, sort_keys=True)), knobs, template)
                    made += 1
    return folder


def write_run(run_dir: Path, rows: list[dict], spec: dict, records: list[dict], labels: list[str], gold: np.ndarray,
              predicted: np.ndarray, identity: dict, knobs: dict, template: Path) -> None:
    """One synthetic run folder (see synthetic_archive)."""
    run_dir.mkdir(parents=True)
    accuracy = float(np.mean(gold == predicted))
    recall = {name: float(np.mean(predicted[gold == i] == i)) if np.any(gold == i) else 0.0
              for i, name in enumerate(labels)}
    support = {name: int(np.sum(gold == i)) for i, name in enumerate(labels)}
    out = []
    for row in rows:
        value = row["value"]
        if row["metric"] == "accuracy" and not row["label"]:
            value, n = accuracy, len(gold)
        elif row["metric"] == "recall" and row["label"] in recall:
            value, n = recall[row["label"]], support[row["label"]]
        else:
            n = row.get("n")
        out.append({**row, **identity, "value": value, "n": n})
    (run_dir / "rows.json").write_text(json.dumps(out))
    (run_dir / "spec.json").write_text(json.dumps({**spec, "key": identity["run_key"], "method": identity["method"],
                                                   "dataset": identity["dataset"], "seed": identity["seed"],
                                                   "config_hash": identity["config_hash"],
                                                   "method_config": knobs}))
    lines = [json.dumps({**r, "predicted": labels[p] if isinstance(r["gold"], str) else int(p)})
             for r, p in zip(records, predicted)]
    (run_dir / "predictions.jsonl.gz").write_bytes(gzip.compress("\n".join(lines).encode(), mtime=0))
    counts = np.zeros((len(labels), len(labels)), dtype=int)
    np.add.at(counts, (gold, predicted), 1)
    (run_dir / "confusion.json").write_text(json.dumps({"labels": labels, "test": counts.tolist(),
                                                        "validation": None}))
    shutil.copy(template / "train_log.json", run_dir / "train_log.json")


def answers(args: argparse.Namespace) -> dict:
    """Measure every command of the module docstring; the report holds each one's median CPU seconds, range and
    target."""
    rounds = max(1, int(getattr(args, "rounds", 3) or 3))
    runs = int(getattr(args, "runs", 2000) or 2000)
    measured: dict[str, dict] = {}
    compileall.compile_dir(str(Path(bench.__file__).resolve().parent), quiet=1)  # the package the commands run
    with tempfile.TemporaryDirectory(prefix="bench-answers-") as temp:
        work = Path(temp)
        issue41 = extracted("issue41-sst2-draws", work)
        say(args, "compare on the issue41 archive")
        measured["compare_issue41"] = median_of(rounds, lambda: cpu_seconds(
            ["report", "--table", "compare", "--results-dir", str(issue41), "--reports-dir", str(work / "r41")],
            work))
        issue30 = extracted("issue30-sst2-minilm", work)
        page = ["report", "--html", "--select-by", "validation", "--selection-seeds", "1", "--results-dir",
                str(issue30), "--reports-dir", str(work / "r30")]

        def cold(argv: list[str], reports: Path):
            def measure() -> float:
                shutil.rmtree(reports, ignore_errors=True)
                return cpu_seconds(argv, work)
            return measure

        say(args, "the issue30 page, cold and warm")
        measured["page_issue30_cold"] = median_of(rounds, cold(page, work / "r30"))
        measured["page_issue30_warm"] = median_of(rounds, lambda: cpu_seconds(page, work))

        def touched() -> float:
            rows = next(issue30.glob("ce_sst2_minilm_s1_*")) / "rows.json"
            os.utime(rows)  # one run changed: the page is built again, its figures reused
            return cpu_seconds(page, work)

        measured["page_issue30_rebuilt"] = median_of(rounds, touched)
        template = next(issue30.glob("ce_sst2_minilm_s1_*"))
        say(args, f"writing a synthetic archive of {runs} runs")
        synthetic = synthetic_archive(work / "synthetic", template, runs)
        measured["page_synthetic_cold"] = median_of(1, cold(
            ["report", "--html", "--results-dir", str(synthetic), "--reports-dir", str(work / "rs")], work / "rs"))
        measured.update(demo_commands(args, work, rounds))
        if not getattr(args, "no_hundred", False):
            hundred = work / "hundred"
            hundred.mkdir()
            say(args, "training 100 tiny shards (about 3 minutes), then re-running them")
            cpu_seconds(HUNDRED, hundred)
            measured["rerun_100_shards"] = median_of(rounds, lambda: cpu_seconds(HUNDRED, hundred))
    for name, entry in measured.items():
        entry["target_cpu_s"] = TARGETS.get(name)  # None: shown, not a target
        entry["met"] = None if name not in TARGETS else entry["cpu_s"] <= TARGETS[name]
    return {"benchmark": "answers", "rounds": rounds, "synthetic_runs": runs, "measured": measured,
            "all_met": all(e["met"] for e in measured.values() if e["met"] is not None)}


def demo_commands(args: argparse.Namespace, work: Path, rounds: int) -> dict:
    """The commands on a finished demo's results: `--results-dir` (the folder `clbench run` was run in, holding
    results/), else the demo trained in `work/demo` first."""
    given = getattr(args, "results_dir", None)
    folder = Path(given).resolve() if given else work / "demo"
    if not given:
        folder.mkdir()
        say(args, "training the demo (about 3 minutes) for the commands that follow")
        cpu_seconds(["run"], folder)
    results = ["--results-dir", str(folder / "results")]
    say(args, "the finished demo: re-run, status, verify, results, compare, an error")
    return {"demo_rerun": median_of(rounds, lambda: cpu_seconds(["run"], folder)),
            "demo_status": median_of(rounds, lambda: cpu_seconds(["status", *results], folder)),
            "demo_verify": median_of(rounds, lambda: cpu_seconds(["verify", *results], folder)),
            "demo_results": median_of(rounds, lambda: cpu_seconds(["results", *results], folder)),
            "demo_compare": median_of(rounds, lambda: cpu_seconds(
                ["report", "--table", "compare", *results, "--reports-dir", str(work / "rd")], folder)),
            "bad_input": median_of(rounds, lambda: cpu_seconds(["run", "--methods", "nosuch", *results], folder,
                                                               ok=(2,)))}
