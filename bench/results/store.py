"""The result store: one folder per run, every file written atomically, and a gathered Parquet table.

A run is finished exactly when its `rows.json` exists; that file is written last.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from bench.results import faults, lease, stopping
from bench.errors import BenchError

log = logging.getLogger(__name__)

ROWS = "rows.json"
SPEC = "spec.json"
ERROR = "error.json"
TRAIN_LOG = "train_log.json"  # per-epoch history of a run
TABLE = "results.parquet"
STALE_SECONDS = 10.0  # see table_is_stale
EVALS = "evals"  # evaluator rows of a run: evals/<evaluator>-<settings hash>.json
CHECKPOINT = "checkpoint.pt"  # resume state of an unfinished run (removed once its rows are written)
MODEL = "model.pt"  # the trained weights, for `clbench evaluate`
PREDICTIONS = "predictions.jsonl.gz"  # per-example test predictions (paired statistics)
CONFUSION = "confusion.json"  # validation and test confusion matrices
METHOD_STATE = "method_state.json"  # what a method reports about its training (e.g. CLLD's label distances)
TSNE = "tsne.json"  # evaluator artefacts, one file each:
CONTRAST_PREDICTIONS = "contrast_predictions.jsonl.gz"
CHECKLIST_CASES = "checklist_cases.jsonl.gz"
CHECKLIST_INFO = "checklist.json"
TRANSFER_PREDICTIONS = "transfer_textfooler.jsonl.gz"
ADVERSARIAL = "adversarial_textfooler.jsonl.gz"
ADVERSARIAL_SETTINGS = "adversarial_textfooler.json"
DEFAULT_RESULTS = "results"


def results_dir(given: str | Path | None = None) -> Path:
    """The results folder: `given` (--results-dir or a config value), else $BENCH_RESULTS_DIR, else ./results."""
    return Path(given or os.environ.get("BENCH_RESULTS_DIR") or DEFAULT_RESULTS)


def check_results_dir(path: Path, given_as: str = "--results-dir") -> None:
    """A BenchError, before anything is loaded or written, unless `path` is a writable folder or can be created
    as one (tried for real: bench.results.folders); creates nothing. `given_as` says where the path came from
    (a flag, a config key, a variable)."""
    from bench.results.folders import check_folder

    fix = "choose another folder with --results-dir" if given_as == "--results-dir" else \
        f"choose another folder with --results-dir (or fix {given_as})"
    check_folder(path, "results folder", given_as, fix)


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path` in one rename. A stop signal waits
    until the write is done, and stops the shard right after it (bench.results.stopping); a folder that cannot
    take it (full, read-only) raises faults.WriteFailed, one line, with the temporary file removed and `path` as
    it was."""
    tmp = None
    with stopping.deferred():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(handle)
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results are meant to be shared
            yield Path(tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            lease.guard(path)  # a runner that lost its shard's lease to another must not overwrite its files
            os.replace(tmp, path)
        except Exception as exc:
            faults.remove_quietly(tmp)  # first: the free space is measured without it
            failure = faults.write_failure(exc, path)
            if failure is None or failure is exc:
                raise
            raise failure from exc
        finally:
            faults.remove_quietly(tmp)
    stopping.check()  # a safe point: the write is whole (a stop that came during it is raised here)


def link_or_copy(source: Path, target: Path) -> None:
    """Make `target` hold `source`'s content in one rename: a hard link (no copy; atomic writes replace files
    rather than change them, so the two never diverge by accident), or a copy across file systems."""
    with atomic_path(target) as tmp:
        os.remove(tmp)
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False, default=_jsonable), encoding="utf-8")


def write_jsonl_gz(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write gzip JSON Lines atomically."""
    with atomic_path(path) as tmp, gzip.open(tmp, "wt", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, default=_jsonable) + "\n")


ARTEFACT_KINDS = (".jsonl.gz", ".json")  # what write_artefact writes: a list of records, a JSON value


def check_artefact_name(name: str) -> None:
    """ValueError unless `name` can name an evaluator artefact: a plain file name (no folder) of a kind
    `write_artefact` writes."""
    if not name or name != Path(name).name or name.startswith("."):
        raise ValueError(f"artefact name {name!r} is not a plain file name; an artefact is one file directly in "
                         "the run folder (use a constant of bench.results.store, e.g. store.TSNE)")
    if not name.endswith(ARTEFACT_KINDS):
        raise ValueError(f"artefact {name!r} has an unknown kind; name it *.json (a JSON value) or *.jsonl.gz "
                         "(a list of records)")


def write_artefact(run_dir: Path, name: str, content: Any) -> Path:
    """Write an evaluator's artefact into a run folder, atomically, by its name's kind: a `.json` name holds a
    JSON value (`write_json`), a `.jsonl.gz` name a list of records (`write_jsonl_gz`); ValueError for any
    other name. Returns the file's path."""
    check_artefact_name(name)
    path = run_dir / name
    if name.endswith(".jsonl.gz"):
        write_jsonl_gz(path, content)
    else:
        write_json(path, content)
    return path


def remove_temporaries(folder: Path, name: str = "*") -> None:
    """Delete the temporary files of interrupted writes of `name` in `folder` (a process killed inside
    `atomic_path` leaves its `.<name>.<random>.tmp`). Only where no other process may be writing them: a run
    folder by the process running that shard, the gathered table under the lock."""
    for tmp in folder.glob(f".{name}.*.tmp"):
        tmp.unlink(missing_ok=True)


def read_json(path: Path) -> Any:
    """Read a JSON file."""
    return json.loads(path.read_text(encoding="utf-8"))


class _Recording:
    """A file that keeps the OSError of a failed write: torch.save reports a full disk only as `unexpected
    pos`."""

    def __init__(self, handle: Any):
        self.handle = handle
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        """Write `data`; a failure is kept in `error`, and raised."""
        try:
            return self.handle.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def flush(self) -> None:
        """Flush the file."""
        self.handle.flush()


def atomic_torch_save(obj: Any, path: Path) -> None:
    """torch.save atomically (a killed save leaves the previous checkpoint intact; a full disk is a
    faults.WriteFailed)."""
    import torch

    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        recording = _Recording(handle)
        try:
            torch.save(obj, recording)
        except RuntimeError:
            if recording.error is not None:
                raise recording.error from None
            raise


def _jsonable(value: Any) -> Any:
    """JSON fallback for NumPy scalars and arrays."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def is_finished(run_dir: Path) -> bool:
    """Whether the run's rows have been written."""
    return (run_dir / ROWS).is_file()


def reset_run(run_dir: Path) -> None:
    """Empty a run folder (used by --overwrite, by the holder of the shard's lease): everything but the lease."""
    if not run_dir.exists():
        return
    for entry in run_dir.iterdir():
        if lease.is_lease_file(entry.name):
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


def finished_rows(results_dir: Path) -> list[dict[str, Any]]:
    """Every row of every finished run under `results_dir`, ordered by run key."""
    rows: list[dict[str, Any]] = []
    for path in sorted(results_dir.glob(f"*/{ROWS}")):
        rows.extend(run_rows(path.parent))
    return rows


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


def run_rows(run_dir: Path) -> list[dict[str, Any]]:
    """A finished run's rows: training/clean rows, then each stored evaluation's rows (file-name order), these
    with `eval_version`, the evaluator's version from the evaluation's stored settings, and `eval_settings`
    (those settings as canonical JSON) where rows stored before it was written lack it. A clld-adaptive run's
    rows all carry `ldm_updates` (runs stored before the column get it from method_state.json)."""
    rows = list(read_json(run_dir / ROWS))
    updates = next((row["ldm_updates"] for row in rows if "ldm_updates" in row), None)  # the clean rows' count
    if updates is None and (run_dir / METHOD_STATE).is_file():  # stored before the column: count the updates
        updates = ldm_update_count(read_json(run_dir / METHOD_STATE))
    for evaluation in sorted((run_dir / EVALS).glob("*.json")):
        if not evaluation.name.endswith(".error.json"):
            stored = read_json(evaluation)
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
        frame = pd.DataFrame(finished_rows(results_dir))
        with atomic_path(target) as tmp:
            frame.to_parquet(tmp, index=False)
            os.utime(tmp, (started, started))  # the table is as of its reading (see table_is_stale)
    return target


def table_is_stale(results_dir: Path, run_dir: Path) -> bool:
    """Whether the gathered table may lack a finished run's current rows: it is missing, or it was read before
    the run's rows or evaluations were last written (the writer was killed before it gathered). A margin of
    STALE_SECONDS covers a rename that lands while another process gathers; at worst it costs a needless gather
    of a run that finished moments before the last one."""
    try:
        gathered = (results_dir / TABLE).stat().st_mtime
    except FileNotFoundError:
        return True
    written = [run_dir / ROWS, *(run_dir / EVALS).glob("*.json")]
    return max((p.stat().st_mtime for p in written if p.exists()), default=0.0) > gathered - STALE_SECONDS


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
