"""`run PART`: the steps of one campaign part, each a subprocess with what is left of the part's time budget, the
part's JSON record rewritten atomically as each step ends (a part killed at the device's limit still returns what it
finished), stderr in one log beside it. With --dry-run the toy arguments of each step run on this machine."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from bench.errors import BenchError
from bench.results import store
from benchmarks.campaign import unpack
from benchmarks.campaign.parts import PAPER_CONFIG, Part, Step

RECORD_VERSION = 1
TAIL_CHARS = 6000            # of a step's stdout kept in the record when it is not JSON
KILL_GRACE_S = 15            # between SIGTERM and SIGKILL of a step that outran its time
LEFT_OUT_OF_ARCHIVE = {"model.pt", "checkpoint.pt", ".cache", "lease.json"}  # large or meaningless elsewhere
PROGRAMS = {"perf": ("-m", "benchmarks"), "clbench": ("-m", "bench"), "pytest": ("-m", "pytest")}
SHOWN_AS = {"perf": "python -m benchmarks", "clbench": "clbench", "pytest": "python -m pytest"}
SHOWN_PLACEHOLDERS = {"data": "DATA", "results": "RESULTS", "reports": "REPORTS", "vectors": "VECTORS",
                      "prefix": "OUT/PART"}


def slug(part: str) -> str:
    """The part's name as a file name prefix (`paper:mr` -> `paper-mr`)."""
    return part.replace(":", "-")


def shown(step: Step, dry_run: bool) -> str:
    """The step's command as a user would type it, with DATA, RESULTS, VECTORS... for the folders."""
    args = step.toy if dry_run else step.full
    return " ".join([SHOWN_AS[step.program], *(a.format(**SHOWN_PLACEHOLDERS) for a in args)])


def device_facts() -> dict[str, Any]:
    """Where the part runs: the GPU's name (or the CPU's), torch, CUDA, Python, cores and the date."""
    import torch

    from benchmarks.common import device_name

    cuda = torch.cuda.is_available()
    return {"device_name": device_name("cuda" if cuda else "cpu"), "gpu": cuda, "torch": torch.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version(), "cpu_count": os.cpu_count(),
            "host": platform.node()}


def run_step(argv: list[str], env: dict[str, str], cwd: Path, timeout: float, log) -> tuple[str, int | None, str]:
    """Run one command in its own process group: (status ok | failed | timeout, exit code, stdout). Past
    `timeout` seconds the whole group gets SIGTERM, then SIGKILL."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
                               start_new_session=True)
    try:
        stdout, _ = process.communicate(timeout=max(timeout, 1))
    except subprocess.TimeoutExpired:
        stdout = ""
        for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                stdout, _ = process.communicate(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            stdout, _ = process.communicate()
        return "timeout", process.returncode, stdout or ""
    return ("ok" if process.returncode == 0 else "failed"), process.returncode, stdout


def step_result(step: Step, stdout: str) -> dict[str, Any]:
    """What the record keeps of a step's stdout: a benchmark's JSON report, else the end of its text."""
    if step.program == "perf":
        try:
            return {"result": json.loads(stdout)}
        except ValueError:
            pass
    return {"output_tail": stdout[-TAIL_CHARS:]}


def junit_summary(path: Path) -> dict[str, Any]:
    """Counts, time and failing tests of a JUnit XML report (pytest's --junitxml)."""
    if not path.is_file():
        return {"junit": None}
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as exc:  # cut off: pytest was killed while it wrote the file
        return {"junit": path.name, "junit_error": f"unreadable JUnit XML: {exc}"}
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    failing = [f"{case.get('classname')}::{case.get('name')}" for case in root.iter("testcase")
               if case.find("failure") is not None or case.find("error") is not None]
    return {"junit": path.name, **counts, "passed": counts["tests"] - counts["failures"] - counts["errors"]
            - counts["skipped"], "test_seconds": round(sum(float(s.get("time", 0)) for s in suites), 1),
            "failing": failing[:50]}


def archive_results(results: Path, target: Path) -> dict[str, Any]:
    """The results folder as a .tar.gz without model weights, checkpoints and caches (so that `clbench report`
    can read it on another machine); counts of the runs inside."""
    if not results.is_dir():
        return {"archive": None}

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if LEFT_OUT_OF_ARCHIVE & set(Path(info.name).parts) else info

    with tarfile.open(target, "w:gz") as tar:
        tar.add(results, arcname="results", filter=keep)
    def runs(name: str) -> int:
        return sum(1 for p in results.rglob(name) if not LEFT_OUT_OF_ARCHIVE & set(p.relative_to(results).parts))

    return {"archive": target.name, "bytes": target.stat().st_size, "finished_runs": runs("rows.json"),
            "failed_runs": runs("error.json")}


def earlier_steps(path: Path, part: Part, dry_run: bool) -> dict[str, dict]:
    """The step entries of an earlier record of the same part (and kind of run) at `path`, by step name."""
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if earlier.get("part") != part.name or earlier.get("dry_run") != dry_run:
        return {}
    return {entry["name"]: entry for entry in earlier.get("steps", []) if "name" in entry}


def fill(args: tuple[str, ...], values: dict[str, str]) -> list[str]:
    """The step's arguments with the placeholders filled in."""
    return [a.format(**values) for a in args]


def run_part(part: Part, out: Path, repo: Path, dry_run: bool = False, pack: Path | None = None,
             budget_s: float = 540, only: list[str] | None = None, scratch: Path | None = None) -> int:
    """Run the part's steps (all, or those named in `only`) within `budget_s` seconds; the record goes to
    OUT/<part>.json after every step. Exit code 0 when every step ran to the end, 1 otherwise."""
    start = time.monotonic()
    if not (repo / PAPER_CONFIG).is_file():
        raise BenchError(f"{repo} is not the clbench repository (no {PAPER_CONFIG}); run from its root, as "
                         "scripts/gpu-campaign.sh does")
    steps = [s for s in part.steps if not only or s.name in only]
    unknown = sorted(set(only or ()) - {s.name for s in part.steps})
    if unknown:
        raise BenchError(f"part {part.name} has no step {', '.join(unknown)}; its steps: "
                         f"{', '.join(s.name for s in part.steps)}")
    setup = unpack.prepare_run(part, pack, scratch, repo, dry_run)  # checks first: nothing written on a mistake
    out.mkdir(parents=True, exist_ok=True)
    prefix = out / slug(part.name)
    values = {**setup.placeholders, "prefix": str(prefix)}
    record: dict[str, Any] = {
        "campaign": RECORD_VERSION, "part": part.name, "dry_run": dry_run, **device_facts(),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "finished": None,
        "budget_seconds": budget_s, "pack": setup.manifest, "setup_seconds": round(time.monotonic() - start, 1),
        "steps": []}
    path = prefix.with_suffix(".json")
    done = earlier_steps(path, part, dry_run)  # a part re-run with --only keeps the other steps' results
    record["steps"] = [done[s.name] for s in part.steps if s.name in done]
    store.write_json(path, record)
    ok = True
    with open(prefix.with_suffix(".log"), "a", encoding="utf-8") as log:
        for index, step in enumerate(steps):
            reserve = step.reserve_s if index < len(steps) - 1 else 0
            left = budget_s - (time.monotonic() - start) - reserve
            entry: dict[str, Any] = {"name": step.name, "command": shown(step, dry_run),
                                     "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
            if left < 5:
                entry.update(status="skipped", reason=f"the part's {budget_s:.0f} s budget was spent")
            else:
                argv = [sys.executable, *PROGRAMS[step.program], *fill(step.toy if dry_run else step.full, values)]
                if step.program == "pytest":  # a report left by an earlier run is not this one's
                    Path(f"{prefix}-junit.xml").unlink(missing_ok=True)
                print(f"\n=== {part.name} {step.name}: {' '.join(argv)}", file=log, flush=True)
                began = time.monotonic()
                status, code, stdout = run_step(argv, setup.env, repo, left, log)
                entry.update(status=status, exit_code=code, seconds=round(time.monotonic() - began, 1),
                             **step_result(step, stdout))
                if status == "timeout":
                    entry["reason"] = f"stopped after {left:.0f} s, what was left of the part's budget"
            if step.program == "pytest" and "exit_code" in entry:
                entry.update(junit_summary(Path(f"{prefix}-junit.xml")))
            ok = ok and entry["status"] == "ok"
            done[step.name] = entry
            record["steps"] = [done[s.name] for s in part.steps if s.name in done]
            store.write_json(path, record)
            took = f" in {entry['seconds']} s" if "seconds" in entry else ""
            print(f"[campaign {part.name}] {step.name}: {entry['status']}{took}", file=sys.stderr, flush=True)
    if part.dataset:
        record["archive"] = archive_results(Path(values["results"]), Path(f"{prefix}-results.tar.gz"))
    record["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    record["seconds"] = round(time.monotonic() - start, 1)
    store.write_json(path, record)
    return 0 if ok else 1
