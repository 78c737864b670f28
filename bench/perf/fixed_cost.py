"""`shard-cost`: the fixed cost of one real shard. It runs one shard with `clbench run` in a fresh process (into a
temporary results folder) and splits its wall time, from the files the shard writes, into start-up, the fixed
phases (build, prepare, tokenize, test), training epochs, validation, writing and evaluators. The baseline is the
shard's own wall time (`fixed_share_of_wall`); the parts that `estimate` does not count in FLOPs become a suggested
--shard-overhead-s."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.errors import BenchError
from bench.perf.common import device_name, say


def shard_cost(args: argparse.Namespace) -> dict:
    """Run one real shard (`clbench run`, a fresh process, into a temporary results folder) and split its wall
    time by its files: start-up, the fixed phases, training epochs, validation, writing, evaluators."""
    method = args.method_list[0]
    with tempfile.TemporaryDirectory(prefix="bench-shard-cost-") as folder:
        results = Path(folder)
        command = [sys.executable, "-m", "bench", "run", "--methods", method, "--datasets", args.dataset,
                   "--encoder", args.encoder, "--seeds", str(args.seed), "--results-dir", str(results),
                   "--device", args.device, "--precision", args.precision, "--no-progress"]
        for flag, value in (("--data-dir", args.data_dir), ("--epochs", args.epochs),
                            ("--batch-size", args.batch_size), ("--max-length", args.max_length),
                            ("--evaluators", args.evaluators), ("--length-bucket", args.length_bucket)):
            if value is not None:
                command += [flag, str(value)]
        if args.compile:
            command.append("--compile")
        say(args, "running " + " ".join(command[1:]))
        launched = time.time()
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        finished = time.time()
        if not getattr(args, "quiet", False):
            sys.stderr.write(done.stdout)
        runs = [p for p in results.iterdir() if (p / "spec.json").is_file()]
        if len(runs) != 1 or not (runs[0] / "rows.json").is_file():
            reason = ""
            if runs and (runs[0] / "error.json").is_file():
                reason = json.loads((runs[0] / "error.json").read_text()).get("reason", "")
            last = (reason or done.stdout.strip() or f"exit code {done.returncode}").splitlines()[-1]
            raise BenchError(f"the shard did not finish: {last}")
        return shard_breakdown(runs[0], launched, finished, args, " ".join(command[1:]).replace(folder, "TMP"))


def shard_breakdown(run: Path, launched: float, finished: float, args: argparse.Namespace, command: str) -> dict:
    """The parts of a finished shard's wall time, from its files (train_log.json phases and epoch times,
    rows.json wall time, evals/*.json evaluator times) and their modification times."""
    log = json.loads((run / "train_log.json").read_text())
    rows = json.loads((run / "rows.json").read_text())
    phases = {k: float(v) for k, v in log["phases"].items()}
    epochs = [float(h["seconds"]) for h in log["history"]]
    evaluators = {}
    for path in sorted((run / "evals").glob("*.json")) if (run / "evals").is_dir() else []:
        if path.name.endswith(".error.json"):
            continue
        stored = json.loads(path.read_text())
        evaluators[path.stem.rsplit("-", 1)[0]] = float(stored["rows"][0]["eval_seconds"]) if stored["rows"] else 0.0
    wall = finished - launched
    shard_wall = float(rows[0]["wall_seconds"])       # run_shard start -> test predictions done
    shard_start = (run / "spec.json").stat().st_mtime  # the first file a shard writes
    parts = {"startup_seconds": max(0.0, shard_start - launched),  # interpreter, imports, data, planning
             **phases,
             "train_seconds": sum(epochs),
             "validation_and_checkpoint_seconds": max(0.0, shard_wall - sum(phases.values()) - sum(epochs)),
             "write_seconds": max(0.0, (run / "rows.json").stat().st_mtime - shard_start - shard_wall),
             "evaluator_seconds": sum(evaluators.values())}
    parts["finish_seconds"] = max(0.0, wall - sum(parts.values()))  # evaluator bookkeeping, results table, exit
    warm_up = max(0.0, epochs[0] - statistics.median(epochs[1:])) if len(epochs) > 1 else None
    per_epoch = parts["train_seconds"] + parts["validation_and_checkpoint_seconds"]
    fixed = wall - per_epoch
    # `estimate` counts validation and the test pass in FLOPs, and a sweep starts Python once per worker
    overhead = (phases.get("build_seconds", 0.0) + phases.get("prepare_seconds", 0.0)
                + phases.get("tokenize_seconds", 0.0) + parts["write_seconds"] + parts["evaluator_seconds"]
                + (warm_up or 0.0))
    return {"benchmark": "shard-cost", "device": args.device, "device_name": device_name(args.device),
            "command": command, "run_key": run.name, "epochs": len(epochs), "compiled": log.get("compiled", ""),
            "length_bucket": log.get("length_bucket"),
            "wall_seconds": round(wall, 2),
            "parts": {k: round(v, 3) for k, v in parts.items()},
            "phases": {k: round(v, 3) for k, v in phases.items()},
            "epoch_seconds": [round(s, 3) for s in epochs],
            "first_epoch_extra_seconds": round(warm_up, 3) if warm_up is not None else None,
            "evaluators": {k: round(v, 2) for k, v in evaluators.items()},
            "fixed_seconds": round(fixed, 2), "fixed_share_of_wall": round(fixed / wall, 3),
            "suggested_shard_overhead_s": round(overhead, 1),
            "suggested_shard_overhead_is": "build + prepare + tokenize + writing + evaluators + the first epoch's "
                                           "extra time (warm-up, compilation): what `estimate` does not count in "
                                           "FLOPs; start-up is paid once per worker process, not per shard"}
