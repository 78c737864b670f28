"""Atomic file writes: every file under a results folder lands in one rename, or not at all. A write into a run
folder names that folder (`run_dir`): the file's size and SHA-256 are then recorded in its manifest
(bench.results.manifest) before the rename."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from bench.results import faults, lease, manifest, stopping


@contextlib.contextmanager
def atomic_path(path: Path, run_dir: Path | None = None) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path` in one rename. With `run_dir` (the
    run folder `path` lies in) the new content's size and hash go into the run's manifest first. A stop signal
    waits until the write is done, and stops the shard right after it (bench.results.stopping); a folder that
    cannot take it (full, read-only) raises faults.WriteFailed, one line, with the temporary file removed and
    `path` as it was."""
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
            if run_dir is not None:
                manifest.record(run_dir, path, *manifest.digest_file(Path(tmp)))
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


def link_or_copy(source: Path, target: Path, run_dir: Path | None = None) -> None:
    """Make `target` hold `source`'s content in one rename: a hard link (no copy; atomic writes replace files
    rather than change them, so the two never diverge by accident), or a copy across file systems."""
    with atomic_path(target, run_dir) as tmp:
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


def json_bytes(data: Any) -> bytes:
    """`data` as the JSON text the store writes (indented, UTF-8)."""
    return json.dumps(data, indent=1, ensure_ascii=False, default=_jsonable).encode("utf-8")


def write_json(path: Path, data: Any, run_dir: Path | None = None) -> None:
    """Write JSON atomically."""
    with atomic_path(path, run_dir) as tmp:
        tmp.write_bytes(json_bytes(data))


def write_jsonl_gz(path: Path, rows: list[dict[str, Any]], run_dir: Path | None = None) -> None:
    """Write gzip JSON Lines atomically; the same rows give the same bytes (no time or file name in the header)."""
    with atomic_path(path, run_dir) as tmp, open(tmp, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed:
        text = io.TextIOWrapper(packed, encoding="utf-8")
        for row in rows:
            text.write(json.dumps(row, ensure_ascii=False, default=_jsonable) + "\n")
        text.flush()
        text.detach()


def remove_temporaries(folder: Path, name: str = "*") -> None:
    """Delete the temporary files of interrupted writes of `name` in `folder` (a process killed inside
    `atomic_path` leaves its `.<name>.<random>.tmp`). Only where no other process may be writing them: a run
    folder by the process running that shard, the gathered table under the lock."""
    for tmp in folder.glob(f".{name}.*.tmp"):
        tmp.unlink(missing_ok=True)


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


def atomic_torch_save(obj: Any, path: Path, run_dir: Path | None = None) -> None:
    """torch.save atomically (a killed save leaves the previous checkpoint intact; a full disk is a
    faults.WriteFailed)."""
    import torch

    with atomic_path(path, run_dir) as tmp, open(tmp, "wb") as handle:
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
