"""The gathered table's lock is a lease (O_EXCL file), not flock: it serialises writers, and a dead holder's lock
is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench.results import store


def test_the_lock_is_a_lease_file_not_flock(tmp_path, monkeypatch):
    import fcntl

    def no_flock(*args, **kwargs):
        raise AssertionError("flock is unreliable on cluster file systems")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    with store.locked(tmp_path):
        assert (tmp_path / store.GATHER_LOCK / "lease.json").is_file()
    assert not (tmp_path / store.GATHER_LOCK / "lease.json").exists()
    assert not (tmp_path / ".lock").exists()


def test_a_second_writer_waits_for_the_first(tmp_path):
    events: list[tuple[str, float]] = []

    def first():
        with store.locked(tmp_path):
            events.append(("first in", time.monotonic()))
            time.sleep(0.6)
            events.append(("first out", time.monotonic()))

    thread = threading.Thread(target=first)
    thread.start()
    while not events:
        time.sleep(0.01)
    with store.locked(tmp_path):
        events.append(("second in", time.monotonic()))
    thread.join()
    assert [name for name, _ in events] == ["first in", "first out", "second in"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_killed_holder_does_not_block_the_next_gather(tmp_path):
    code = ("import sys, time\nfrom pathlib import Path\nfrom bench.results import store\n"
            "with store.locked(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(store.__file__).parents[2])})
    assert holder.stdout.readline().strip() == "held"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    started = time.monotonic()
    (tmp_path / "run").mkdir()
    path = store.gather(tmp_path)
    assert path.is_file() and time.monotonic() - started < 10
    assert not (tmp_path / store.GATHER_LOCK / "lease.json").exists()
