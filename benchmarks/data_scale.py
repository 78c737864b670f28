"""`data-scale`: a large dataset of short texts (`--rows`, default 1,000,000 train rows and a tenth as many test
rows, JSON Lines gzipped) written to a temporary folder, then

- loaded as `clbench run` loads it (`load_dataset`) in a fresh process: seconds and peak RSS against the targets
  (30 s, 2 GB), and what the loaded data holds in memory;
- planned and started as a sweep (`plan` and `execute` of bench.running.runner: ce, tiny-bert, one epoch, 2 seeds
  in 2 spawned workers) in a fresh process, each worker stopped at its first training step: its RSS on starting,
  once the shard's data arrived and at that step, and how many copies of the data it holds then. Copies are
  counted as objects: 100 unique probe texts are planted in train, and a worker holds k copies when each probe
  text exists as k distinct string objects in its lists (one copy: every split, subset and list of the worker
  shares one object per text).

Workers start as spawned processes, which import this module (as `__mp_main__`): that is where the probe goes in
(`install_probe`, only when the sweep process asked for it), nowhere else.

    python -m benchmarks data-scale --rows 1000000

The children are `python -m benchmarks.data_scale load FOLDER` and `... sweep FOLDER RESULTS WORKERS BATCH LENGTH`
(one JSON line each on stdout).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LOAD_SECONDS_TARGET = 30.0
PEAK_RSS_TARGET_MB = 2048.0
WORKERS = 2
PROBES = 100  # unique texts planted in train, counted in each worker's memory
PROBE_ENV = "BENCH_DATA_SCALE_PROBES"  # the folder workers write their probe reports to (and the sweep's start)
WORDS = ("the a an this that my our your good bad great poor fast slow late early new old cheap costly small big "
         "box order item parcel refund price colour size shoe shirt phone case cable screen battery charger lamp "
         "desk chair bag book game toy came arrived broke works fits looks feels ships returned ordered wanted "
         "really very quite not never always again too still just so well soon").split()


def probe_text(number: int) -> str:
    """The `number`-th probe text: unique, and longer than any generated text, so no other row equals it."""
    digits = []
    for _ in range(12):
        number, digit = divmod(number, len(WORDS))
        digits.append(WORDS[digit])
    return "probe " + " ".join(digits)


def probe_count(rows: int) -> int:
    """How many probe texts a dataset of `rows` train rows holds."""
    return min(PROBES, max(1, rows // 10))


def write_dataset(folder: Path, rows: int, seed: int = 0) -> dict[str, Any]:
    """train.jsonl.gz (`rows` short texts, 3-10 words, 10 classes, the probe texts spread evenly among them) and
    test.jsonl.gz (a tenth as many, at least 20) in `folder`; their sizes."""
    rng = random.Random(seed)
    probes = probe_count(rows)
    every = max(1, rows // probes)
    sizes = {}
    for split, count in (("train", rows), ("test", max(20, rows // 10))):
        path = folder / f"{split}.jsonl.gz"
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as handle:
            lines = []
            for i in range(count):
                planted = split == "train" and i % every == 0 and i // every < probes
                text = probe_text(i // every) if planted else " ".join(rng.choices(WORDS, k=rng.randint(3, 10)))
                lines.append(f'{{"text": "{text}", "label": "c{rng.randrange(10)}"}}\n')
                if len(lines) == 10_000:
                    handle.write("".join(lines))
                    lines = []
            handle.write("".join(lines))
        sizes[path.name] = {"rows": count, "mb": round(path.stat().st_size / 2**20, 1)}
    return sizes


def memory() -> dict[str, float]:
    """This process's resident set size now and at its peak, in MB (Linux /proc)."""
    found = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                found["rss_mb" if line.startswith("VmRSS") else "peak_rss_mb"] = round(int(line.split()[1]) / 1024, 1)
    return found


def held_copies(probes: set[str]) -> dict[str, float]:
    """How many distinct string objects each probe text exists as in this process's lists and tuples (the texts
    of a loaded dataset live there): the copies of the data held, min and max over the probes."""
    objects: dict[str, set[int]] = {text: set() for text in probes}
    for holder in gc.get_objects():
        if type(holder) in (list, tuple):
            for item in holder:
                if type(item) is str and item in objects:  # noqa: E721
                    objects[item].add(id(item))
    counts = [len(ids) for ids in objects.values()]
    return {"min": min(counts), "max": max(counts)}


# ----------------------------------------------------------------------------------------------- the children

def load_child(folder: Path) -> dict[str, Any]:
    """Load the dataset as `clbench run` does and measure it (this process only loads)."""
    import sklearn.model_selection  # noqa: F401  (the carve's import: start-up, not loading)

    from bench.data.loading import load_dataset

    before = memory()
    started = time.perf_counter()
    data = load_dataset(str(folder))
    seconds = time.perf_counter() - started
    after = memory()
    return {"seconds": round(seconds, 2), "rss_before_mb": before["rss_mb"], "rss_after_mb": after["rss_mb"],
            "data_mb": round(after["rss_mb"] - before["rss_mb"], 1), "peak_rss_mb": after["peak_rss_mb"],
            "sizes": {s: len(getattr(data, s)) for s in ("train", "validation", "test")},
            "copies": held_copies({probe_text(i) for i in range(probe_count(len(data.train) + len(data.validation)))})}


def sweep_child(folder: Path, results: Path, workers: int, batch_size: int, max_length: int) -> dict[str, Any]:
    """Plan a sweep of `workers` shards over the dataset and run them in as many spawned workers (each stops at
    its first training step: `install_probe`)."""
    from bench.running.runner import execute, plan
    from bench.running.outcome import ShardRequest

    started = time.perf_counter()
    request = ShardRequest(evaluators=(), save_model=False)
    shards = plan(["ce"], [str(folder)], ["tiny-bert"], list(range(1, workers + 1)),
                  {"epochs": 1, "batch_size": batch_size, "max_length": max_length}, None, results_dir=results,
                  request=request)
    planned = time.perf_counter()
    after_plan = memory()
    outcomes = execute(shards, results, jobs=workers, device="cpu", progress=False, request=request)
    return {"plan_seconds": round(planned - started, 2), "main_rss_after_plan_mb": after_plan["rss_mb"],
            "main_peak_rss_mb": memory()["peak_rss_mb"], "outcomes": [o.status for o in outcomes]}


class FirstStep(Exception):
    """Raised at a worker's first training step: the probe has measured it, the shard stops there."""


def install_probe(reports: Path) -> None:
    """In a sweep worker: measure memory and data copies when a shard's data arrives (`run_shard` called) and
    at its first training step (`Trainer.step`), write them to `reports/<pid>.json`, and stop the shard."""
    import bench.running.runner as runner
    from bench.training.trainer import Trainer

    state: dict[str, Any] = {"rss_start_mb": memory()["rss_mb"]}
    probes: set[str] = set()
    original_run_shard = runner.run_shard

    def run_shard(spec: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        probes.update(probe_text(i) for i in range(probe_count(len(data.train) + len(data.validation))))
        state.update(rss_data_mb=memory()["rss_mb"], copies_on_arrival=held_copies(probes))
        return original_run_shard(spec, data, *args, **kwargs)

    def step(self: Any, batch: Any, optimizer: Any) -> Any:
        now = memory()
        state.update(rss_first_step_mb=now["rss_mb"], peak_rss_mb=now["peak_rss_mb"],
                     copies_at_first_step=held_copies(probes),
                     seconds_to_first_step=round(time.time() - float((reports / "started").read_text()), 1))
        (reports / f"{os.getpid()}.json").write_text(json.dumps(state))
        raise FirstStep("data-scale: stopped at the first training step")

    runner.run_shard = run_shard
    Trainer.step = step


def child(argv: list[str]) -> dict[str, Any]:
    """What `python -m benchmarks.data_scale load|sweep ...` runs."""
    if argv[0] == "load":
        return load_child(Path(argv[1]))
    return sweep_child(Path(argv[1]), Path(argv[2]), *(int(a) for a in argv[3:6]))


def run_child(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a child (a fresh Python) and return its JSON line, with its wall time."""
    from bench.errors import BenchError

    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "benchmarks.data_scale", *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    if done.returncode != 0 or not done.stdout.strip():
        last = (done.stderr.strip() or f"exit code {done.returncode}").splitlines()[-1]
        raise BenchError(f"data-scale: the {argv[0]} process failed: {last}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return {**report, "process_seconds": round(time.perf_counter() - started, 2)}


# ----------------------------------------------------------------------------------------------- the benchmark

def data_scale(args: argparse.Namespace) -> dict[str, Any]:
    """Write a `--rows` dataset, load it in one fresh process and start a 2-worker sweep over it in another
    (see the module docstring); the figures, the targets and whether they are met."""
    from bench.errors import BenchError
    from benchmarks.common import say

    rows = int(getattr(args, "rows", None) or 1_000_000)
    if rows < 20:
        raise BenchError(f"--rows must be >= 20, got {rows}")
    with tempfile.TemporaryDirectory(prefix="bench-data-scale-") as scratch:
        folder, results, reports = Path(scratch) / "data", Path(scratch) / "results", Path(scratch) / "probes"
        for path in (folder, reports):
            path.mkdir()
        say(args, f"writing {rows:,} train rows to {folder}")
        started = time.perf_counter()
        files = write_dataset(folder, rows)
        generate_seconds = time.perf_counter() - started
        say(args, "loading them in a fresh process")
        load = run_child(["load", str(folder)])
        say(args, f"loaded in {load['seconds']} s, peak RSS {load['peak_rss_mb']} MB; starting a sweep of "
                  f"{WORKERS} workers")
        (reports / "started").write_text(repr(time.time()))
        sweep = run_child(["sweep", str(folder), str(results), str(WORKERS), str(args.batch_size),
                           str(args.max_length)], {PROBE_ENV: str(reports)})
        workers = [json.loads(p.read_text()) for p in sorted(reports.glob("*.json"))]
    if len(workers) != WORKERS:
        raise BenchError(f"data-scale: {len(workers)} of {WORKERS} workers reached their first training step "
                         f"(shard outcomes: {', '.join(sweep['outcomes'])})")
    copies = max(w["copies_at_first_step"]["max"] for w in workers)
    return {
        "benchmark": "data-scale", "rows": rows, "files": files, "generate_seconds": round(generate_seconds, 1),
        "load": load,
        "sweep": {**sweep, "workers": workers, "encoder": "tiny-bert", "method": "ce", "batch_size": args.batch_size,
                  "max_length": args.max_length},
        "max_copies_per_worker": copies,
        "targets": {"load_seconds": LOAD_SECONDS_TARGET, "peak_rss_mb": PEAK_RSS_TARGET_MB, "copies_per_worker": 1,
                    "load_seconds_met": load["seconds"] <= LOAD_SECONDS_TARGET,
                    "peak_rss_met": load["peak_rss_mb"] <= PEAK_RSS_TARGET_MB, "copies_met": copies <= 1},
    }


if __name__ == "__mp_main__" and os.environ.get(PROBE_ENV):  # a sweep worker of the `sweep` child
    install_probe(Path(os.environ[PROBE_ENV]))

if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1:])))
