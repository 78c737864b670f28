"""The result store: one folder per run, every file written atomically, and a gathered Parquet table.

A run is finished exactly when its `rows.json` exists; that file is written last.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

from bench.results import lease, manifest, runfiles
from bench.results.atomic import (atomic_path, atomic_torch_save, link_or_copy, remove_temporaries,  # noqa: F401
                                  write_json, write_jsonl_gz)
from bench.results.names import *  # noqa: F401,F403  (the file names, read as store.ROWS etc.)
from bench.results.names import EVALS, METHOD_STATE, ROWS, SPEC, TABLE
from bench.results.runfiles import is_finished  # noqa: F401
from bench.errors import BenchError

log = logging.getLogger(__name__)

STALE_SECONDS = 10.0  # see table_is_stale
PARQUET_MAGIC = b"PAR1"  # the first and last 4 bytes of a Parquet file
DEFAULT_RESULTS = "results"


def results_dir(given: str | Path | None = None) -> Path:
    """The results folder: `given` (--results-dir or a config value), else $BENCH_RESULTS_DIR, else ./results."""
    return Path(given or os.environ.get("BENCH_RESULTS_DIR") or DEFAULT_RESULTS)


def reports_dir(results: str | Path) -> Path:
    """The default reports folder of a results folder: beside it, `reports` for the default `results` (the
    demo's), else `reports-<name>` (results-mine -> reports-results-mine), so that two results folders never write
    into one reports folder. --reports-dir overrides it."""
    results = Path(results).resolve() if Path(results).name in ("", ".", "..") else Path(results)
    name = results.name
    return results.parent / ("reports" if name in ("", DEFAULT_RESULTS) else f"reports-{name}")


def check_results_dir(path: Path, given_as: str = "--results-dir") -> None:
    """A BenchError, before anything is loaded or written, unless `path` is a writable folder or can be created
    as one (tried for real: bench.results.folders); creates nothing. `given_as` says where the path came from
    (a flag, a config key, a variable)."""
    from bench.results.folders import check_folder

    fix = "choose another folder with --results-dir" if given_as == "--results-dir" else \
        f"choose another folder with --results-dir (or fix {given_as})"
    check_folder(path, "results folder", given_as, fix)


def read_json(path: Path) -> Any:
    """Read a JSON file that is not a run's (a run's files are read with bench.results.runfiles, verified)."""
    return json.loads(path.read_text(encoding="utf-8"))


def reset_run(run_dir: Path) -> None:
    """Empty a run folder (used by --overwrite and to retrain a damaged run, by the holder of the shard's lease):
    everything but the lease and the damaged files moved aside."""
    if not run_dir.exists():
        return
    for entry in run_dir.iterdir():
        if lease.is_lease_file(entry.name) or entry.name == manifest.DAMAGED:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink(missing_ok=True)


GATHER_LOCK = ".gather"  # the folder whose lease serialises writers of the gathered table
GATHER_WAIT_SECONDS = 0.2


@contextlib.contextmanager
def locked(results_dir: Path) -> Iterator[None]:
    """An exclusive lock on the results folder (serialises writers of the gathered table): a lease on its
    `.gather` folder, the O_EXCL file that shard leases use (flock is unreliable on cluster file systems);
    waits while a live process holds it, takes over the lease of a dead one."""
    results_dir.mkdir(parents=True, exist_ok=True)
    told = False
    while True:
        try:
            held = lease.acquire(results_dir / GATHER_LOCK)
            break
        except lease.Held as busy:
            if not told:
                log.info("waiting for the results table's lock (%s)", busy.info.describe())
                told = True
            time.sleep(GATHER_WAIT_SECONDS)
    with held:
        yield


LEFT_OUT = "left_out"  # the gathered table's attrs (kept in the Parquet file): damaged run key -> why
LEFT_OUT_FIX = ("`clbench verify --repair` moves the damaged files aside (and the next `clbench run` of a shard whose "
                "results they held retrains it)")


def finished_rows(results_dir: Path, left_out: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every row of every finished run under `results_dir`, ordered by run key; a run whose results are damaged
    (`runfiles.damages_results`) is left out and added to `left_out` (run key -> its first damaged file): the
    caller says so, once (`left_out_line`)."""
    rows: list[dict[str, Any]] = []
    for path in sorted(results_dir.glob(f"*/{ROWS}")):
        try:
            listing = manifest.load(path.parent)
        except manifest.Damaged:
            listing = None  # verifies nothing; the files are still parsed
        found = [d for d in runfiles.size_problems(path.parent, listing) if runfiles.damages_results(d)]
        found = found or [d for d in [runfiles.misnamed(path.parent, listing)] if d]  # another run's folder, copied
        try:
            if not found:  # the files it reads are verified as they are read
                rows.extend(run_rows(path.parent, listing))
        except manifest.Damaged as damage:
            found = [damage]
        if found and left_out is not None:
            left_out[path.parent.name] = str(found[0])
    return rows


def left_out_line(left_out: dict[str, str], results_dir: Path, where: str = "the gathered table") -> str:
    """One line (to print after `warning: `) naming the damaged runs `where` leaves out ('' for none), with the
    first one's damage and the fix."""
    if not left_out:
        return ""
    keys = sorted(left_out)
    more = f" and {len(keys) - 1} more" if len(keys) > 1 else ""
    return (f"{where} leaves out {len(keys)} damaged run(s): {left_out[keys[0]]}{more}; `clbench verify "
            f"--results-dir {results_dir}` names each, {LEFT_OUT_FIX}")


def table_left_out(results_dir: Path) -> dict[str, str]:
    """The damaged runs the gathered table left out when it was gathered (its attrs), {} when none or unreadable."""
    import pyarrow.parquet as pq

    try:
        attrs = json.loads(pq.read_schema(results_dir / TABLE).metadata[b"PANDAS_ATTRS"])
    except Exception:  # missing, damaged, or written before the table kept them
        return {}
    found = attrs.get(LEFT_OUT) if isinstance(attrs, dict) else None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def is_collapsed_flag(value: Any) -> bool:
    """Whether a row's `collapsed` value marks a collapsed run (the model predicts one class whatever the input):
    1, 1.0, "1", True do; missing, NaN, 0, "" do not. Every reader of the flag asks this."""
    try:
        return float(value) >= 1
    except (TypeError, ValueError):
        return False


def settings_text(settings: dict[str, Any]) -> str:
    """An evaluator's settings dict as canonical JSON (sorted keys): what its `eval_hash` is the hash of
    (bench.evaluators.base.hash_settings), and what every row of the evaluation carries as `eval_settings`."""
    return json.dumps(settings, sort_keys=True, default=str)


# A clld-adaptive run with fewer label-distance updates than this trained nearly as `cl` (uniform distances): the
# shard warns (bench.methods.clld) and every table notes it (bench.reporting.provenance_notes).
FEW_LDM_UPDATES = 2


def ldm_update_count(state: dict[str, Any]) -> int | None:
    """How many label-distance updates a clld-adaptive run made, from its method_state.json (`updates`); None for
    a method that stores none. An update with eps = 0 (version 2 made one at the last step) changed nothing and is
    not counted."""
    if not isinstance(state, dict) or not isinstance(state.get("updates"), list):
        return None
    return sum(1 for u in state["updates"] if not isinstance(u, dict) or float(u.get("eps", 1.0)) > 0)


def run_rows(run_dir: Path, listing: Any = runfiles.UNKNOWN) -> list[dict[str, Any]]:
    """A finished run's rows: training/clean rows, then each stored evaluation's rows (file-name order), these
    with `eval_version`, the evaluator's version from the evaluation's stored settings, and `eval_settings`
    (those settings as canonical JSON) where rows stored before it was written lack it. A clld-adaptive run's
    rows all carry `ldm_updates` (runs stored before the column get it from method_state.json)."""
    if listing is runfiles.UNKNOWN:
        listing = runfiles.manifest_or_none(run_dir)
    rows = list(runfiles.read_json(run_dir, ROWS, listing))
    updates = next((row["ldm_updates"] for row in rows if "ldm_updates" in row), None)  # the clean rows' count
    if updates is None and (run_dir / METHOD_STATE).is_file():  # stored before the column: count the updates
        updates = ldm_update_count(runfiles.read_json(run_dir, METHOD_STATE, listing))
    listed = (listing or {}).get("files")
    for evaluation in sorted((run_dir / EVALS).glob("*.json")):
        if listed is not None and f"{EVALS}/{evaluation.name}" not in listed:
            continue  # not written by clbench: never read as its own (`clbench verify` names it)
        if not evaluation.name.endswith(".error.json"):
            stored = runfiles.read_json(run_dir, f"{EVALS}/{evaluation.name}", listing)
            settings = stored.get("settings") or {}
            text = settings_text(settings) if settings else None
            for row in stored["rows"]:
                row = dict(row)
                if text is not None:
                    row.setdefault("eval_settings", text)
                if settings.get("version") is not None:
                    row["eval_version"] = settings["version"]
                rows.append(row)
    if updates is not None:
        rows = [{**row, "ldm_updates": row.get("ldm_updates", updates)} for row in rows]
    return rows


def gather(results_dir: Path) -> Path:
    """Rebuild `results.parquet` from all finished runs (under the lock, atomically); returns its path."""
    import pandas as pd

    target = results_dir / TABLE
    with locked(results_dir):
        remove_temporaries(results_dir, TABLE)  # of gathers killed while holding the lock
        started = time.time()
        left_out: dict[str, str] = {}
        frame = pd.DataFrame(finished_rows(results_dir, left_out))
        frame.attrs[LEFT_OUT] = left_out  # kept in the file: the run and the reports say it (`left_out_line`)
        with atomic_path(target) as tmp:
            frame.to_parquet(tmp, index=False)
            os.utime(tmp, (started, started))  # the table is as of its reading (see table_is_stale)
    return target


def table_damage(results_dir: Path) -> str:
    """Why the gathered table is not a whole Parquet file ('' when it is, or is missing): its magic at both ends
    and a footer that fits, checked in microseconds (an emptied, cut or overwritten table fails; a flipped byte
    inside is found when it is read: `clbench verify`)."""
    path = results_dir / TABLE
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            head = handle.read(4)
            handle.seek(max(0, size - 8))
            tail = handle.read(8)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if size < 12 or head != PARQUET_MAGIC or tail[4:] != PARQUET_MAGIC \
            or int.from_bytes(tail[:4], "little") + 12 > size:
        return f"damaged: not a whole Parquet file ({size} bytes: emptied, cut short or overwritten)"
    return ""


def table_warning(results_dir: Path) -> str | None:
    """One line for a damaged gathered table (None when it is whole or missing): what, and what gathers it."""
    damage = table_damage(results_dir)
    return (f"warning: {results_dir / TABLE} is {damage}; `clbench run` (any sweep on this folder) or `clbench "
            f"verify --repair --results-dir {results_dir}` gathers it again from the run folders") if damage else None


def table_is_stale(results_dir: Path, run_dir: Path) -> bool:
    """Whether the gathered table may lack a finished run's current rows: it is missing or damaged
    (`table_damage`), or it was read before the run's rows or evaluations were last written (the writer was killed
    before it gathered). A margin of STALE_SECONDS covers a rename that lands while another process gathers; at
    worst it costs a needless gather of a run that finished moments before the last one."""
    try:
        gathered = (results_dir / TABLE).stat().st_mtime
    except FileNotFoundError:
        return True
    if table_damage(results_dir):
        return True
    written = [run_dir / ROWS, *(run_dir / EVALS).glob("*.json")]
    return max((p.stat().st_mtime for p in written if p.exists()), default=0.0) > gathered - STALE_SECONDS


def evaluation_rows(run_dir: Path, names: list[str]) -> list[dict[str, Any]]:
    """The rows of the run's stored evaluations `names` (evals/<evaluator>-<hash>.json), in that order."""
    return [row for name in names for row in runfiles.read_json(run_dir, name)["rows"]]


def table_holds(results_dir: Path, run_dirs: list[Path]) -> bool:
    """Whether the gathered table holds exactly as many rows of each run as the run folder holds now: the check
    `table_is_stale` leaves to time (its margin keeps a table gathered moments after a run's last write stale)."""
    import pyarrow.parquet as pq

    try:
        keys = pq.read_table(results_dir / TABLE, columns=["run_key"]).column("run_key").to_pylist()
    except Exception:  # missing, unreadable, no run_key column: not known to hold anything
        return False
    counts: dict[str, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    try:
        return all(counts.get(run_dir.name, 0) == len(run_rows(run_dir)) for run_dir in run_dirs)
    except (OSError, ValueError, KeyError, TypeError, manifest.Damaged):  # a run unreadable now: not known
        return False


def find_runs(results_dir: Path, patterns: list[str]) -> list[Path]:
    """Run folders matching run keys, glob patterns (`ce_mr_*`) or folder paths; unknown ones are an error."""
    found: list[Path] = []
    for pattern in patterns:
        as_path = Path(pattern).expanduser()
        if (as_path / SPEC).is_file():
            found.append(as_path)
            continue
        matches = sorted(p.parent for p in results_dir.glob(f"{pattern}/{SPEC}"))
        if not matches:
            raise BenchError(f"no run {pattern!r} under {results_dir} (see `ls {results_dir}`; give "
                             "--results-dir if the runs are elsewhere)")
        found.extend(matches)
    return list(dict.fromkeys(found))
