"""Finished sweeps, remembered in the results folder so that re-running one costs what a listing costs.

When `clbench run` ends with every planned shard finished and nothing left to tend (each one would be skipped:
healthy, every requested evaluation stored, no debris, no lease, the gathered table current), it remembers the
sweep in `.sweeps/<digest>.json`. The digest names what the plan was computed from (the command's planning
options and shard request, the code and the machine: bench.running.sweepmemo). The file holds the planned run
keys with their methods and the stored evaluations a re-run shows, and the state of what the plan read and the
check found: the files of each data source, of each run folder and the gathered table, by path, size and
modification time (nanoseconds). The next `clbench run` with the same digest whose files all stat as remembered
is answered from the run folders' rows without planning, loading data or importing torch; any other state (a
file added, written, touched or removed, in a run or in the data) plans and checks everything again, as always.
With it, the re-run's own answer (what it printed, while the reports it wrote are
unchanged) is kept, to be said again. Nothing here decides a run key: the keys are the planner's own, stored."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bench.results.atomic import write_json
from bench.results.store import TABLE

SWEEPS = ".sweeps"
FORMAT = 1


def files_state(path: Path) -> list[list[Any]]:
    """Every file under `path` (or `path` itself, a file) as [relative path, size, mtime_ns], sorted; [] when
    it does not exist."""
    if path.is_file():
        stat = path.stat()
        return [["", stat.st_size, stat.st_mtime_ns]]
    found = []
    for folder, _, names in os.walk(path):
        for name in names:
            full = os.path.join(folder, name)
            try:
                stat = os.stat(full)
            except OSError:  # removed while listed
                continue
            found.append([os.path.relpath(full, path), stat.st_size, stat.st_mtime_ns])
    return sorted(found)


def memo_path(results_dir: Path, digest: str) -> Path:
    """Where the sweep of `digest` is remembered."""
    return Path(results_dir) / SWEEPS / f"{digest}.json"


def remember(results_dir: Path, digest: str, shards: list[tuple[str, str, list[str]]], sources: list[str],
             runs_state: dict[str, list[list[Any]]]) -> None:
    """Remember a finished sweep: `shards` as (run key, method, the stored evaluations a re-run shows) in plan
    order, the data `sources` (paths) it was
    planned from, and `runs_state` (run key -> files_state, taken before the check that found nothing to tend).
    A folder that takes no write keeps nothing: the next run plans again."""
    state = {"format": FORMAT, "shards": [list(s) for s in shards],
             "sources": {str(s): files_state(Path(s)) for s in sources}, "runs": runs_state,
             "table": files_state(Path(results_dir) / TABLE)}
    try:
        (Path(results_dir) / SWEEPS).mkdir(exist_ok=True)
        write_json(memo_path(results_dir, digest), state)
    except OSError:
        return


def recall(results_dir: Path, digest: str) -> list[tuple[str, str, list[str]]] | None:
    """The (run key, method, shown evaluations) of the remembered sweep of `digest` when every data source and run folder holds the
    files it held then (paths, sizes, modification times); else None (never remembered, unreadable, changed)."""
    path = memo_path(results_dir, digest)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        if state.get("format") != FORMAT:
            return None
        shards = [(str(key), str(method), [str(name) for name in shown]) for key, method, shown in state["shards"]]
        for source, files in state["sources"].items():
            if files_state(Path(source)) != files:
                return None
        if files_state(Path(results_dir) / TABLE) != state["table"]:
            return None
        runs = state["runs"]
        if sorted(runs) != sorted(key for key, _, _ in shards):
            return None
        for key, files in runs.items():
            if files_state(Path(results_dir) / key) != files:
                return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return shards


def remember_answer(results_dir: Path, digest: str, answer: dict[str, Any], reports: Path | None) -> None:
    """Keep with the remembered sweep `digest` what its re-run answered (`stdout`, `stderr`, `code`) and the state
    of the reports it wrote (None: none), so that the next re-run says it again without computing it."""
    path = memo_path(results_dir, digest)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        state["answer"] = {**answer, "reports": None if reports is None else files_state(Path(reports))}
        write_json(path, state)
    except (OSError, ValueError, TypeError):
        return


def recall_answer(results_dir: Path, digest: str, reports: Path | None) -> dict[str, Any] | None:
    """The answer kept with the sweep `digest` (call after `recall`: the runs are as they were) when the reports
    it wrote are as they were too; else None."""
    try:
        answer = json.loads(memo_path(results_dir, digest).read_text(encoding="utf-8")).get("answer")
        expected = None if reports is None else files_state(Path(reports))
        if not isinstance(answer, dict) or answer.get("reports") != expected:
            return None
        return {"stdout": str(answer["stdout"]), "stderr": str(answer["stderr"]), "code": int(answer["code"])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
