"""Shard leases: one runner at a time trains a shard (and writes into its run folder).

A runner claims a shard by creating `<run folder>/lease.json` with O_CREAT|O_EXCL (atomic on local disks and on
NFS v3+ and the cluster file systems results folders live on, unlike flock). The file holds who claimed it:
host, pid, a unique token, when, and how to tell whether that process still lives (the machine's boot id and
pid namespace, the process's start time, its SLURM job). Its content never changes after it is written; the
*heartbeat* is the file's modification time, which a background thread of the holder refreshes (`os.utime`)
every HEARTBEAT_SECONDS: touching a file cannot clobber a lease that someone else has created meanwhile,
rewriting it could.

A lease is stale -- and may be taken over -- when its holder is gone for sure (same machine and the process
is dead, or an earlier run of the same SLURM job, requeued since), or when its heartbeat is older than
TIMEOUT_SECONDS (a holder on another machine, which cannot be asked). Taking over is race-free: of the
contenders that judged one lease stale, only the one that creates its take-over marker
(`.lease.json.<stale token>.takeover`, O_EXCL) goes on: it checks the stale lease is still there, renames it to
a name of its own, checks that what it moved is the very file it judged stale (else puts it back), deletes it
and removes the marker; then every contender competes with O_EXCL for the free name, and exactly one wins.

The holder releases the lease when the shard ends (done or failed); only a lease with its own token is
removed. While a process holds a lease, every atomic write into that run folder (`bench.results.store.atomic_path`)
first checks that the lease is still its own (`guard`): a holder that stalled past the timeout and lost the
shard to another runner stops with LeaseLost instead of overwriting that runner's files.

Light imports only (`clbench status` reads leases without torch).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.results import faults, stopping
from bench.results.processes import identity, process_alive

log = logging.getLogger(__name__)

LEASE = "lease.json"
HEARTBEAT_SECONDS = 30.0  # how often a holder refreshes its heartbeat (the lease file's modification time)
TIMEOUT_SECONDS = 600.0  # a lease whose heartbeat is older than this is stale, wherever its holder runs
GRAVE = ".stale"  # `.lease.json.<random>.stale`: a lease being removed (lives for microseconds)
MARKER = ".takeover"  # `.lease.json.<stale lease's token>.takeover`: who may remove that stale lease
GRAVE_AGE_SECONDS = 60.0  # a grave or marker older than this was left by a process killed mid-take-over: debris
WRITING_SECONDS = 2.0  # an unreadable lease older than this is damaged (writing one takes microseconds)
LOST_CHECKS = 3  # a missing lease file is re-read this often (50 ms apart) before it counts as lost


class Held(Exception):
    """The shard's lease is held by a live runner (`info`)."""

    def __init__(self, info: "LeaseInfo"):
        super().__init__(info.describe())
        self.info = info


class LeaseLost(Exception):
    """This process's lease was taken over by another runner (it stalled past the timeout)."""


@dataclass(frozen=True)
class LeaseInfo:
    """A lease as found on disk: its record (empty when unreadable: being written, or damaged), its heartbeat
    (modification time) and the identity of the file (inode and bytes) for the take-over check."""

    record: dict[str, Any]
    heartbeat: float
    inode: int
    raw: bytes

    @property
    def token(self) -> str:
        return str(self.record.get("token", ""))

    @property
    def holder(self) -> str:
        """`host:pid`, or `?` for an unreadable lease."""
        return f"{self.record['host']}:{self.record['pid']}" if self.record else "?"

    def age(self, now: float | None = None) -> float:
        """Seconds since the last heartbeat (never negative: clocks of two machines may differ a little)."""
        return max(0.0, (time.time() if now is None else now) - self.heartbeat)

    def describe(self, now: float | None = None) -> str:
        """`being trained by host:pid since 2025-01-31 12:00:00 UTC (heartbeat 4 s ago)`."""
        beat = f"heartbeat {format_age(self.age(now))} ago"
        if not self.record:
            return f"claimed by another runner (its lease is being written; {beat})"
        started = datetime.fromtimestamp(float(self.record.get("started", self.heartbeat)), timezone.utc)
        return f"being trained by {self.holder} since {started:%Y-%m-%d %H:%M:%S} UTC ({beat})"


def format_age(seconds: float) -> str:
    """`4 s`, `12 min`, `3.0 h`."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# ------------------------------------------------------------------------------------------ stale or not

def stale_reason(info: LeaseInfo, now: float | None = None) -> str:
    """Why a lease may be taken over ("" while its holder may be alive)."""
    age = info.age(now)
    timeout = f"no heartbeat for {format_age(age)} (timeout {format_age(TIMEOUT_SECONDS)})"
    record = info.record
    if not record:
        if age > WRITING_SECONDS:  # a lease is filled microseconds after it is created: this one is damaged
            return f"a damaged lease ({len(info.raw)} bytes, not a lease record), taken over at once"
        return ""
    me = identity()
    if record.get("slurm_job") and record.get("slurm_job") == me["slurm_job"] \
            and int(record.get("slurm_restart", 0)) < me["slurm_restart"]:
        return f"an earlier run of SLURM job {me['slurm_job']}, requeued since"
    if record.get("host") == me["host"] and record.get("machine", "") == me["machine"]:
        pid = int(record.get("pid", 0))
        if pid == me["pid"] and info.token not in _HELD_TOKENS:
            return "left behind by this process"
        if pid != me["pid"] and not process_alive(pid, str(record.get("pid_start", ""))):
            return "its process is gone"
    if age > TIMEOUT_SECONDS:
        return timeout
    return ""


# ------------------------------------------------------------------------------------------ the file

def lease_path(run_dir: Path) -> Path:
    return Path(run_dir) / LEASE


def read(run_dir: Path) -> LeaseInfo | None:
    """The lease of a run folder, or None when there is none."""
    return _read_info(lease_path(run_dir))


def _read_info(path: Path) -> LeaseInfo | None:
    try:
        with open(path, "rb") as handle:
            status = os.fstat(handle.fileno())
            raw = handle.read()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(raw.decode("utf-8"))
        if not isinstance(record, dict) or not {"host", "pid", "token"} <= set(record):
            record = {}
    except (UnicodeDecodeError, ValueError):
        record = {}  # being written (created, not yet filled) or damaged
    return LeaseInfo(record, status.st_mtime, status.st_ino, raw)


def _create(path: Path, record: dict[str, Any]) -> bool:
    """Create the lease file with O_EXCL; False when one exists. A folder that cannot take it (full, read-only)
    raises faults.WriteFailed and keeps no empty lease (which would hold the shard for the lease timeout)."""
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        return False
    try:
        os.write(handle, json.dumps(record, indent=1).encode("utf-8"))
        os.fsync(handle)
    except OSError:
        os.close(handle)
        faults.remove_quietly(path)
        raise
    os.close(handle)
    return True


def _remove_if_same(path: Path, info: LeaseInfo) -> bool:
    """Remove the lease file if it is still exactly `info` (same inode and bytes); race-free against a
    contender that replaced it meanwhile: the file is first moved to a name only this call uses, and moved
    back when it turns out to be another lease. True when `info`'s file was removed."""
    grave = path.with_name(f".{path.name}.{secrets.token_hex(8)}{GRAVE}")
    try:
        os.rename(path, grave)
    except FileNotFoundError:
        return False
    try:
        moved = _read_info(grave)
        if moved is not None and (moved.inode, moved.raw) == (info.inode, info.raw):
            return True
        try:  # another runner's lease: put it back (link: never over a lease created since)
            os.link(grave, path)
        except FileExistsError:
            pass  # that holder has lost its lease; it notices at its next check and stops
        return False
    finally:
        grave.unlink(missing_ok=True)


def _take_over(path: Path, info: LeaseInfo) -> None:
    """Remove the stale lease `info` unless another contender is removing it (its take-over marker exists):
    exactly one contender per stale lease moves files, and only after checking that the lease is still there."""
    marker = path.with_name(f".{path.name}.{info.token or info.inode}{MARKER}")
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except FileExistsError:
        try:  # a contender killed in the middle of its take-over left its marker: clear it for the next try
            if time.time() - marker.stat().st_mtime > GRAVE_AGE_SECONDS:
                marker.unlink(missing_ok=True)
        except FileNotFoundError:
            pass
        return
    try:
        now = _read_info(path)
        if now is not None and (now.inode, now.raw) == (info.inode, info.raw):
            _remove_if_same(path, info)
    finally:
        marker.unlink(missing_ok=True)


def remove_graves(run_dir: Path) -> None:
    """Delete what processes killed in the middle of a take-over or release left behind (old ones only: a
    young one may still be in use)."""
    for debris in [*Path(run_dir).glob(f".{LEASE}.*{GRAVE}"), *Path(run_dir).glob(f".{LEASE}.*{MARKER}")]:
        try:
            if time.time() - debris.stat().st_mtime > GRAVE_AGE_SECONDS:
                debris.unlink(missing_ok=True)
        except FileNotFoundError:
            pass


def is_lease_file(name: str) -> bool:
    """Whether a file name in a run folder belongs to the lease machinery (kept by an --overwrite reset)."""
    return name == LEASE or (name.startswith(f".{LEASE}.") and name.endswith((GRAVE, MARKER)))


# ------------------------------------------------------------------------------------------ holding one

_HELD: dict[str, "Lease"] = {}  # run folder (absolute path) -> the lease this process holds there
_HELD_TOKENS: set[str] = set()


class Lease:
    """A lease this process holds; refreshes its heartbeat in a daemon thread until released."""

    def __init__(self, run_dir: Path, record: dict[str, Any]):
        self.run_dir = Path(run_dir)
        self.path = lease_path(self.run_dir)
        self.record = record
        self.token = record["token"]
        self.lost = ""  # why the lease was lost ("" while it is held)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease {self.run_dir.name}", daemon=True)
        _HELD[os.path.abspath(self.run_dir)] = self
        self._thread.start()

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            if not self.still_mine():
                log.warning("%s: lease lost (%s)", self.run_dir.name, self.lost)
                return
            try:
                os.utime(self.path)
            except OSError:
                pass  # released or taken over meanwhile: the next check tells

    def still_mine(self) -> bool:
        """Whether the lease file is still this lease (a missing file is re-read a few times: a contender may
        have moved it for a moment, see _remove_if_same)."""
        if self.lost:
            return False
        for attempt in range(LOST_CHECKS):
            info = read(self.run_dir)
            if info is not None and info.token == self.token:
                return True
            if info is not None and info.raw:
                self.lost = f"now {info.describe()}" if info.record else "replaced by another runner's lease"
                return False
            if attempt + 1 < LOST_CHECKS:
                time.sleep(0.05)
        self.lost = "its lease file was removed"
        return False

    def check(self) -> None:
        """Raise LeaseLost unless the lease is still this process's."""
        if not self.still_mine():
            raise LeaseLost(f"this runner lost the shard's lease ({self.lost}): it was silent for longer than the "
                            f"lease timeout ({format_age(TIMEOUT_SECONDS)}) and another runner took the shard over; "
                            "left to it")

    def release(self) -> None:
        """Stop the heartbeat and remove the lease file if it is still this lease (a stop signal waits for it;
        a folder that refuses the removal, read-only, leaves it to be taken over once this process is gone)."""
        if self._stop.is_set():
            return
        with stopping.deferred():
            self._stop.set()
            if self._thread is not threading.current_thread():
                self._thread.join()
            _HELD.pop(os.path.abspath(self.run_dir), None)
            try:
                info = read(self.run_dir)
                if info is not None and info.token == self.token:
                    _remove_if_same(self.path, info)
            except OSError as exc:
                log.warning("%s: its lease could not be removed (%s); the next run takes it over", self.run_dir.name,
                            exc)
            _HELD_TOKENS.discard(self.token)


def acquire(run_dir: Path, attempts: int = 10) -> Lease:
    """Claim a shard: create its lease, taking over a stale one; raise Held when a live runner holds it, and
    faults.WriteFailed when the folder cannot take a lease (full, read-only). A stop signal waits for it
    (bench.results.stopping: the caller gets the lease, and releases it)."""
    with stopping.deferred():
        try:
            return _acquire(Path(run_dir), attempts)
        except OSError as exc:
            failure = faults.write_failure(exc, lease_path(run_dir))
            if failure is None:
                raise
            raise failure from exc


def release_all() -> None:
    """Release every lease this process holds (a stopped shard's: a stop may come between taking a lease and
    entering its `with`)."""
    for held in list(_HELD.values()):
        held.release()


def _acquire(run_dir: Path, attempts: int) -> Lease:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = lease_path(run_dir)
    record = {**identity(), "token": secrets.token_hex(16), "started": time.time()}
    record["started_at"] = datetime.fromtimestamp(record["started"], timezone.utc).isoformat()
    info = None
    _HELD_TOKENS.add(record["token"])  # before the file exists: this process's own live lease is never stale
    try:
        for attempt in range(attempts):
            if _create(path, record):
                return Lease(run_dir, record)
            info = read(run_dir)
            if info is None:
                continue  # released meanwhile
            reason = stale_reason(info)
            if not reason:
                raise Held(info)
            if attempt == 0:
                log.warning("%s: taking over %s (%s)", run_dir.name,
                            f"the stale lease of {info.holder}" if info.record else "a lease", reason)
            _take_over(path, info)  # or another contender does; then all compete for the free name
            time.sleep(0.01 * attempt)
        raise Held(read(run_dir) or info or LeaseInfo({}, time.time(), 0, b""))  # another contender is winning
    except BaseException:
        _HELD_TOKENS.discard(record["token"])
        raise


def guard(path: str | os.PathLike) -> None:
    """Raise LeaseLost when `path` lies in a run folder whose lease this process held and has lost (called by
    bench.results.store before each atomic write lands; free when no lease is held)."""
    if not _HELD:
        return
    target = os.path.abspath(path)
    for folder, lease in list(_HELD.items()):
        if target.startswith(folder + os.sep):
            lease.check()
