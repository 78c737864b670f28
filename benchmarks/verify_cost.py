"""`verify-cost`: what verifying stored files costs. One tiny shard is trained for real with an evaluator (so it
has every kind of file), then copied into N finished runs of a seed sweep (each rewritten through the run-file
writer, so every manifest is true). Timed, alternating rounds, each `clbench` command in a fresh process:

- `noop`: `clbench run` of the whole sweep again (every shard skipped), as it is: each finished run's manifest,
  sizes and small files verified;
- `noop_unverified`: the same with verification switched off (reads unchecked), the baseline;
- `verify`: `clbench verify` of the folder (every file hashed);
- `gather` and `gather_unverified`: rebuilding the gathered table once (what every finished shard does), with
  and without leaving damaged runs out.

The figure the issue asks for is (noop - noop_unverified) / noop_unverified (target under 10%); on a busy
machine the two processes' times swing by more than that, so `checks_s` also times the checks alone, in this
process, over every run (`checks_vs_noop_unverified`)."""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import say

TARGET = 0.10
OFF = ("from pathlib import Path\n"  # verification switched off: nothing read or checked for it
       "from bench.results import manifest, runfiles\n"
       "runfiles.problems = lambda run_dir, deep=False: []\n"
       "runfiles.size_problems = lambda run_dir, listing: []\n"
       "manifest.load = lambda run_dir: None\n"
       "runfiles.read_bytes = lambda run_dir, name, listing=None: (Path(run_dir) / name).read_bytes()\n")
UNVERIFIED = "import sys\n" + OFF + "from bench.cli.main import main\nraise SystemExit(main(sys.argv[1:]))\n"
GATHER = ("import sys; from pathlib import Path\n"
          "if sys.argv[2] == 'off':\n"
          + "".join(f"    {line}\n" for line in OFF.splitlines()) +
          "from bench.results import store\n"
          "store.gather(Path(sys.argv[1]))\n")


def sweep(args: argparse.Namespace, results: Path, seeds: str) -> list[str]:
    """The `clbench run` arguments of the sweep (`seeds`: e.g. 1 or 1-1000)."""
    return ["run", "--methods", "ce", "--datasets", args.dataset, "--encoders", "tiny-bert", "--seeds", seeds,
            "--epochs", "1", "--max-length", "32", "--batch-size", "8", "--evaluators", "repr", "--device", "cpu",
            "--results-dir", str(results), "--no-progress", "--yes"]


def timed(command: list[str]) -> float:
    """Seconds a command takes (it must succeed)."""
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1) or "Traceback" in done.stderr:
        raise RuntimeError(f"{' '.join(command[:4])} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def fill(args: argparse.Namespace, results: Path) -> int:
    """Train one shard, then make the sweep's other shards finished copies of it; returns the file count."""
    from bench.cli.main import build_parser
    from bench.cli.run_options import run_options
    from bench.results import runfiles, store
    from bench.running.runner import plan_sweep

    subprocess.run([sys.executable, "-m", "bench", *sweep(args, results, "1")], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    source = next(p.parent for p in results.glob(f"*/{store.ROWS}"))
    options = run_options(build_parser().parse_args(sweep(args, results, f"1-{args.runs}")), check_encoders=False)
    spec_json, rows = runfiles.read_json(source, store.SPEC), runfiles.read_json(source, store.ROWS)
    for shard in plan_sweep(options):
        target = results / shard.spec.key
        if target == source:
            continue
        shutil.copytree(source, target)
        runfiles.write_json(target, store.SPEC, {**spec_json, **shard.spec.to_json()})
        runfiles.write_json(target, store.ROWS, [{**row, "run_key": shard.spec.key, "seed": shard.spec.seed}
                                                 for row in rows])
    store.gather(results)
    return sum(1 for p in results.rglob("*") if p.is_file())


def checks_seconds(results: Path) -> float:
    """Seconds this process spends on what a no-op re-run checks of every finished run (`runfiles.problems`: the
    manifest, a stat per file, a hash where the stat changed), the files in the page cache as a re-run finds
    them."""
    from bench.results import runfiles, store

    runs = sorted(p.parent for p in results.glob(f"*/{store.ROWS}"))
    started = time.perf_counter()
    for run in runs:
        runfiles.problems(run)
    return time.perf_counter() - started


def verify_cost(args: argparse.Namespace) -> dict[str, Any]:
    """The no-op re-run with and without verification, and `clbench verify`, over a folder of `--runs` runs."""
    with tempfile.TemporaryDirectory(prefix="clbench-verify-") as folder:
        results = Path(folder) / "results"
        say(args, f"verify-cost: training one shard and copying it into {args.runs} finished runs")
        files = fill(args, results)
        command = sweep(args, results, f"1-{args.runs}")
        variants = {"noop": [sys.executable, "-m", "bench", *command],
                    "noop_unverified": [sys.executable, "-c", UNVERIFIED, *command],
                    "verify": [sys.executable, "-m", "bench", "verify", "--results-dir", str(results)],
                    "gather": [sys.executable, "-c", GATHER, str(results), "on"],
                    "gather_unverified": [sys.executable, "-c", GATHER, str(results), "off"]}
        checks = [checks_seconds(results) for _ in range(args.rounds)]
        seconds: dict[str, list[float]] = {name: [] for name in variants}
        for round_ in range(args.rounds):
            for name, argv in variants.items():
                seconds[name].append(timed(argv))
            say(args, f"  round {round_ + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in seconds.items()))
    median = {name: statistics.median(values) for name, values in seconds.items()}
    median["checks"] = statistics.median(checks)
    overhead = (median["noop"] - median["noop_unverified"]) / median["noop_unverified"]
    return {"runs": args.runs, "files": files, "rounds": args.rounds,
            "seconds": {k: [round(x, 2) for x in v] for k, v in seconds.items()},
            "median_s": {k: round(v, 2) for k, v in median.items()},
            "verification_overhead": round(overhead, 4), "target": TARGET, "met": overhead < TARGET,
            "verify_vs_noop": round(median["verify"] / median["noop"], 3),
            "checks_s": [round(x, 3) for x in checks],
            "checks_vs_noop_unverified": round(median["checks"] / median["noop_unverified"], 4),
            "gather_overhead": round((median["gather"] - median["gather_unverified"]) / median["gather_unverified"], 4)}
