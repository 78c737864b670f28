"""Output folders checked before a command starts: a folder that cannot be created or written (a file in the way,
no permission, /proc, a read-only or full file system) is one BenchError line naming the folder, the operating
system's reason and the fix, found by trying for real, and nothing is left behind."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from bench.errors import BenchError

PROBE = ".clbench-probe-"  # the prefix of the folder a check makes and removes at once


def check_folder(path: str | Path, noun: str, given_as: str, fix: str) -> None:
    """A BenchError unless `path` is a folder that files and folders can be written into, or can be created as
    one. Tried for real: a uniquely named folder is made in `path` (or, when it does not exist yet, in its
    nearest existing parent) and removed again, so the check creates nothing and two runners never meet.
    `noun` names the folder ("results folder"), `given_as` where it came from ("--results-dir"), `fix` what
    to do instead ("choose another folder with --results-dir")."""
    path = Path(path).expanduser()
    head = f"{noun} {path} ({given_as})"
    try:
        existing = nearest_existing(path, head, fix)
        try_writing(existing)
    except OSError as exc:
        raise BenchError(os_error_line(head, path, exc, fix)) from None


def nearest_existing(path: Path, head: str, fix: str) -> Path:
    """`path` or its nearest parent that exists, checked to be a folder this user may write to (a BenchError
    for a file in the way, a broken symbolic link or a folder without write permission)."""
    for existing in (path, *path.absolute().parents):
        if existing.is_symlink() and not existing.exists():
            raise BenchError(f"{head} cannot be created: {existing} is a broken symbolic link; {fix}")
        if not existing.exists():
            continue
        if not existing.is_dir():
            where = "is a file, not a folder" if existing == path else f"cannot be created: {existing} is a file"
            raise BenchError(f"{head} {where}; {fix}")
        if not os.access(existing, os.W_OK | os.X_OK):
            try_writing(existing)  # the system's own reason when it refuses too (EROFS, EACCES)
            where = "is not writable" if existing == path else f"cannot be created: {existing} is not writable"
            raise BenchError(f"{head} {where}; {fix}, or give yourself write permission on {existing}")
        return existing
    raise BenchError(f"{head} cannot be created: none of its parent folders exists; {fix}")


def try_writing(folder: Path) -> None:
    """Make a uniquely named folder in `folder` and remove it (an OSError when the file system refuses)."""
    probe = tempfile.mkdtemp(prefix=PROBE, dir=folder)
    shutil.rmtree(probe, ignore_errors=True)


def os_error_line(head: str, path: Path, exc: OSError, fix: str) -> str:
    """The one line for an OSError met while trying `path`: what failed where, the system's reason (its errno
    name and message) and the fix, with the extra step a full or read-only disk or a permission needs."""
    where = Path(exc.filename).parent if exc.filename else path
    name = errno.errorcode.get(exc.errno, "error") if exc.errno else "error"
    reason = f"{name}: {exc.strerror or exc}"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        reason += f", {free_megabytes(where)} MB free"
    state = "is not writable" if os.path.isdir(path) else "cannot be created"
    extra = {errno.ENOSPC: f"free space there, or {fix}", errno.EDQUOT: f"free space in your quota, or {fix}",
             errno.EACCES: f"{fix}, or give yourself write permission on {where}",
             errno.EPERM: f"{fix}, or give yourself write permission on {where}"}.get(exc.errno or 0, fix)
    return f"{head} {state}: {where} refuses new folders ({reason}); {extra}"


def free_megabytes(folder: Path) -> int:
    """The space left on `folder`'s file system in MB (0 when it cannot be asked)."""
    try:
        return shutil.disk_usage(folder).free // 2**20
    except OSError:
        return 0
