"""`clbench doctor`: one screen that says what this machine can run and why not, each problem with its fix
(the checks themselves are in bench.cli.checks)."""

from __future__ import annotations

import argparse
import json
import os
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from bench.cli import checks
from bench.cli.checks import FAIL, Check
from bench.cli.common import RESULTS_HELP
from bench.results.store import results_dir as resolve_results_dir

Lines = Callable[[], "Check | list[Check]"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The `clbench doctor` subcommand and its arguments."""
    doctor = sub.add_parser("doctor", parents=[common], help="what this machine can run and why not, with fixes",
                            description="Check Python, torch and the GPUs, WordNet, the packaged word vectors and "
                                        "MiniLM, the Hub, SLURM, the results folder and the optional extras; "
                                        "offline and in a few seconds. Exit 1 when a check fails (warnings "
                                        "allowed).")
    doctor.add_argument("--results-dir", default=None, help=RESULTS_HELP)
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON (name, status, detail, fix)")


def cmd_doctor(args: argparse.Namespace) -> int:
    """Run every check and print one line each (or JSON); 1 when any check fails, else 0."""
    given_as = "--results-dir" if args.results_dir else \
        "$BENCH_RESULTS_DIR" if os.environ.get("BENCH_RESULTS_DIR") else "the default"
    found = run_checks(resolve_results_dir(args.results_dir), given_as, debug=args.debug)
    print(json.dumps([asdict(c) for c in found], indent=1) if args.json else format_checks(found))
    return 1 if any(c.status == FAIL for c in found) else 0


def run_checks(results: Path, given_as: str, debug: bool = False) -> list[Check]:
    """Every check, in screen order; the Hub and SLURM checks (which wait on others) run in the background."""
    hub, slurm = in_background(checks.hub_check), in_background(checks.slurm_check)
    steps: list[tuple[str, Lines]] = [
        ("python", checks.python_check), ("clbench", checks.clbench_check), ("torch", checks.torch_checks),
        ("wordnet", checks.wordnet_check), ("glove", checks.glove_check),
        ("word-vectors", checks.word_vectors_check), ("minilm", checks.minilm_check), ("hub", hub),
        ("slurm", slurm), ("submitit", checks.submitit_check), ("load", load_check),
        ("disk", lambda: checks.disk_check(results)),
        ("results", lambda: checks.results_check(results, given_as)), ("textattack", checks.textattack_check),
        ("spacy", checks.spacy_check), ("accelerate", checks.accelerate_check)]
    return [line for name, check in steps for line in guarded(name, check, debug)]


def load_check() -> Check:
    """The machine's load against its usable cores, and the torch threads a CPU run would train with here."""
    from bench.running import machine_load

    cores, explicit = machine_load.cpu_count(), machine_load.explicit_threads()
    advice = machine_load.advise(explicit or default_threads(cores), 1, cores=cores)
    if advice.load is None:
        return Check("load", checks.INFO, f"unknown on {cores} cores (this system has no load average)")
    detail = f"{advice.load:.1f} on {cores} cores"
    if advice.busy and explicit:
        detail += f" (busy; OMP_NUM_THREADS={explicit} is kept: timings will be slow)"
    elif advice.busy and advice.recommended < advice.threads:
        detail += (f" (busy: training on the CPU uses {machine_load.thread_text(advice.threads)} as when idle, "
                   f"slowly; --adapt-threads would use {advice.recommended})")
    else:
        detail += f" ({'busy; ' if advice.busy else ''}training on the CPU uses {machine_load.thread_text(advice.threads)})"
    return Check("load", checks.INFO, detail)


def default_threads(cores: int) -> int:
    """The torch threads a run starts with (its CPU threads; the usable cores without torch)."""
    try:
        import torch
    except ImportError:
        return cores
    return torch.get_num_threads()


def guarded(name: str, check: Lines, debug: bool = False) -> list[Check]:
    """The check's lines; a check that crashes becomes one fail line (re-raised under --debug)."""
    try:
        found = check()
    except Exception as exc:
        if debug:
            raise
        return [Check(name, FAIL, f"the check itself failed: {exc.__class__.__name__}: {exc}",
                      "rerun with `clbench --debug doctor` for the traceback")]
    return found if isinstance(found, list) else [found]


def in_background(check: Lines) -> Lines:
    """Start check in a daemon thread; the function returned waits for its lines (or raises what it raised)."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["lines"] = check()
        except Exception as exc:
            box["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()

    def wait() -> Check | list[Check]:
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["lines"]

    return wait


def format_checks(found: list[Check]) -> str:
    """One line per check (status, name, detail, fix) and a last line with the counts."""
    width = max(len(c.name) for c in found)
    lines = [f"{c.status:<5} {c.name:<{width}}  {c.detail}" + (f"  fix: {c.fix}" if c.fix else "") for c in found]
    counts = {status: sum(c.status == status for c in found) for status in (checks.OK, checks.WARN, FAIL, checks.INFO)}
    verdict = "some checks fail: fix them before running bench" if counts[FAIL] else \
        "clbench can run here" + (" (see the warnings)" if counts[checks.WARN] else "")
    return "\n".join(lines + ["", ", ".join(f"{n} {s}" for s, n in counts.items()) + f": {verdict}"])
