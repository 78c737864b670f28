"""`walk`: the path one shard takes through the package's modules (issue 55), measured, not read off the code.

One tiny shard (the test fixture `datasets/fixtures/tiny`, tiny-bert, one epoch, the `repr` evaluator) runs in this
process under `sys.setprofile`, then runs again (finished: checked and skipped). Every call from one module of a
part (cli, running, reporting, evaluators, attack, training, methods, encoders, data, results) into another is a
step (caller function -> callee function), in the order first taken (a loop's repeats are one step); calls into
the shared vocabulary (bench.spec, bench.registry, bench.errors, ...) and a value object's protocol (`__init__`,
`__len__`, `__bool__`, ...) are not steps. It reports, for each of the two runs, the modules entered, the steps,
the returns to a module already left and the climbs (a step into a higher layer of docs/ARCHITECTURE.md than the
caller's), then the shard's own calls from the running layer into the layers below it (how many, into how many
modules and layers); with --steps, the walk itself. Run from a checkout: `python -m benchmarks.walk [--steps]`."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "datasets" / "fixtures" / "tiny"
# docs/ARCHITECTURE.md's layers, top first; the shared vocabulary (errors, registry, spec, ...) is below them all
LAYERS = ("api", "cli", "running", "reporting", "evaluators", "attack", "training", "methods", "encoders", "data",
          "results")


def layer(module: str) -> int:
    """The layer of a bench module (0 = top); the shared vocabulary below every part."""
    part = module.split(".")[1] if module.count(".") else ""
    if part == "reporting":
        return LAYERS.index("running")  # running | reporting: one layer
    return LAYERS.index(part) if part in LAYERS else len(LAYERS)


PARTS = tuple(f"bench.{part}." for part in LAYERS)


def is_step(caller: str, callee: str, function: str) -> bool:
    """Whether a call from module `caller` into `function` of module `callee` is a step of the walk."""
    return caller != callee and caller.startswith(PARTS) and callee.startswith(PARTS) \
        and not (function.startswith("__") and function.endswith("__"))


def trace_shard(results: Path) -> dict[str, list[tuple[str, str, str, str]]]:
    """(caller module, caller function, callee module, callee function) of every step of one shard, in the order
    first taken: trained (`trained`), then run again finished (`finished`)."""
    from bench.data.loading import load_dataset
    from bench.running.outcome import ShardRequest
    from bench.running.runner import run_spec, train_config
    from bench.running.shard import run_shard
    from bench.spec import method_config

    data = load_dataset(str(FIXTURE))
    cfg = train_config(str(FIXTURE), {"epochs": 1, "batch_size": 8, "max_length": 32, "lr": 1e-3})
    spec = run_spec("ce", data, "tiny-bert", 1, cfg, method_config("ce", {}))
    request = ShardRequest(evaluators=("repr",))
    walks: dict[str, list[tuple[str, str, str, str]]] = {}
    for name in ("trained", "finished"):
        seen: dict[tuple[str, str, str, str], None] = {}

        def profile(frame, event, _arg):
            if event != "call" or frame.f_back is None:
                return
            callee, caller = frame.f_globals.get("__name__", ""), frame.f_back.f_globals.get("__name__", "")
            if is_step(caller, callee, frame.f_code.co_name):
                seen.setdefault((caller, frame.f_back.f_code.co_name, callee, frame.f_code.co_name), None)

        sys.setprofile(profile)
        try:
            outcome = run_shard(spec, data, results, device="cpu", progress=False, request=request)
        finally:
            sys.setprofile(None)
        if outcome.status != ("done" if name == "trained" else "skipped"):
            raise SystemExit(f"walk: the shard ended {outcome.status}: {outcome.message}")
        walks[name] = list(seen)
    return walks


def measure(edges: list[tuple[str, str, str, str]]) -> dict:
    """Modules entered, entries, returns to a module already left, climbs, and the walk (module per step)."""
    entered: list[str] = []
    returns = climbs = 0
    for caller, _, callee, _ in edges:
        if callee in entered:
            returns += 1
        else:
            entered.append(callee)
        climbs += layer(callee) < layer(caller)
    shard = [(caller, callee) for caller, _, callee, _ in edges if caller.startswith("bench.running.")
             and not callee.startswith("bench.running.")]  # the shard's own calls into the layers below it
    return {"modules": len(entered), "entries": len(edges), "returns": returns, "climbs": climbs,
            "shard_calls_down": len(shard), "shard_layers_down": len({c.split(".")[1] for _, c in shard}),
            "shard_modules_down": len({c for _, c in shard}),
            "walk": [f"{caller}.{f} -> {callee}.{g}" for caller, f, callee, g in edges]}


def main(argv: list[str] | None = None) -> int:
    """Trace one shard and print the walk's counts as JSON (with --steps, every step too)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.walk", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", action="store_true", help="print every step of the walk")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder = Path(tempfile.mkdtemp(prefix="bench-walk-"))
    try:
        found = {name: measure(edges) for name, edges in trace_shard(folder / "results").items()}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for walk in found.values():
        if not args.steps:
            walk.pop("walk")
    print(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
