"""Who runs where: this process's identity (host, machine and pid namespace, process start time, SLURM job) and
whether a process on this machine still lives -- what a shard lease records about its holder and how a stale
lease's holder is told from a live one."""

from __future__ import annotations

import functools
import os
import socket
from typing import Any


def _read(path: str) -> str:
    """The stripped text of a small file, "" when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return ""


@functools.lru_cache(maxsize=1)
def machine() -> str:
    """This machine and pid namespace (boot id / pid namespace on Linux, "" elsewhere): two processes with
    the same `machine()` and host name see the same process ids."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    boot = _read("/proc/sys/kernel/random/boot_id")
    return f"{boot}/{namespace}" if boot or namespace else ""


def _process_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), None when it cannot be read."""
    try:
        return _read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()
    except IndexError:
        return None


def process_start(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, Linux; "" when unknown): tells a live holder from a
    new process that got the same pid."""
    fields = _process_stat(pid)
    return fields[19] if fields and len(fields) > 19 else ""


def process_alive(pid: int, started: str = "") -> bool:
    """Whether process `pid` (on this machine) still runs -- not a zombie -- and is the one that started at
    `started`; when that cannot be told (no /proc, or it hides other users' processes) it counts as alive."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    except OverflowError:
        return False
    fields = _process_stat(pid)
    if not fields or len(fields) <= 19:
        return True
    return fields[0] not in ("Z", "X") and (not started or fields[19] == started)


def identity() -> dict[str, Any]:
    """The lease record of this process (without token and times)."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "machine": machine(), "pid_start": process_start(pid),
            "slurm_job": os.environ.get("SLURM_JOB_ID", ""),
            "slurm_restart": int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)}
