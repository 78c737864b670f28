"""A results folder that cannot take a write -- full, over quota, read-only, not permitted -- as one line.

bench.results.store and bench.results.lease turn such an OSError into `WriteFailed` (a BenchError): the shard
fails with "no space left on FOLDER (N MB free)" or "cannot write to FOLDER: read-only file system", and the
sweep runs no further shard into that folder (each would fail alike; bench.running.runner).
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from bench.errors import BenchError

FULL = (errno.ENOSPC, errno.EDQUOT)
REFUSED = {errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
           errno.EPERM: "operation not permitted"}
AFTER = "then re-run (finished shards are kept)"


class WriteFailed(BenchError):
    """A file could not be written into the results folder (disk full, read-only, no permission)."""


def free_mb(folder: Path) -> float:
    """Megabytes free for this user on the file system of `folder` (or of its nearest existing parent); NaN
    when it cannot be asked."""
    for existing in (Path(folder), *Path(folder).absolute().parents):
        try:
            return shutil.disk_usage(existing).free / 1e6
        except OSError:
            continue
    return float("nan")


def error_number(exc: BaseException) -> int | None:
    """The errno of an OSError, also when a library put it only in its message (pyarrow, torch)."""
    code = getattr(exc, "errno", None)
    if isinstance(code, int):
        return code
    text = str(exc)
    for number, words in ((errno.ENOSPC, "No space left on device"), (errno.EDQUOT, "Disk quota exceeded"),
                          (errno.EROFS, "Read-only file system")):
        if words in text:
            return number
    return None


def write_failure(exc: BaseException, path: Path) -> WriteFailed | None:
    """The one-line WriteFailed for an exception raised while writing `path`, when the folder cannot take the
    write (full, over quota, read-only, not permitted); None for any other exception."""
    if isinstance(exc, WriteFailed):
        return exc
    if not isinstance(exc, OSError):
        return None
    code = error_number(exc)
    folder = Path(path).parent
    if code in FULL:
        what = "no space left on" if code == errno.ENOSPC else "disk quota exceeded on"
        return WriteFailed(f"{what} {folder} ({free_mb(folder):.1f} MB free) writing {Path(path).name}; free some "
                           f"space (or choose another --results-dir), {AFTER}")
    if code in REFUSED:
        return WriteFailed(f"cannot write to {folder}: {REFUSED[code]} ({Path(path).name}); make it writable "
                           f"(or choose another --results-dir), {AFTER}")
    return None


def remove_quietly(path: str | os.PathLike | None) -> None:
    """Delete a file if it is there; a folder that refuses (read-only) keeps it for the next run's tidy-up."""
    if path is None:
        return
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError:
        pass  # removed by the next run of the shard (bench.running.tending.tidy)
