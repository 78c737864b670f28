"""A results folder that fills up or turns read-only mid-sweep (issue 32) loses nothing: the shard that hit it
fails with one line ("no space left on FOLDER (N MB free)", "cannot write to FOLDER: read-only file system"),
the shards after it are not run, every earlier result and `results.parquet` stay byte for byte, no temporary
file is left, and a re-run once the folder takes writes again completes the sweep -- the unfinished shard
resuming from its last epoch checkpoint -- with the table of an uninterrupted sweep.

Each case runs twice: on a real small file system (a tmpfs, full or remounted read-only: skipped where this
process may not mount one) and with the fault injected into bench.results.store's atomic writes (always).
Shard 2 gets room for its first epoch checkpoint but not for the second one beside it (a checkpoint holds about
four copies of the weights: model, two AdamW moments, the best epoch's), so it fails in its last epoch.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import subprocess
from pathlib import Path
from typing import Iterator

import pandas as pd
import pytest

from bench.cli.main import main
from bench.results import atomic, faults, lease, modelfile, store
from conftest import FAST

SEEDS = "1,2,3"
COLUMNS = ["run_key", "split", "metric", "label", "value", "n"]
NO_SPACE = r"no space left on \S+ \(\d+\.\d MB free\) writing checkpoint\.pt"
READ_ONLY = r"cannot write to \S+: read-only file system \(checkpoint\.pt\)"


def sweep(cli, tiny: Path, results: Path, seeds: str) -> tuple[int, str]:
    """`clbench run` of ce on the tiny set, in this process; exit code and stderr."""
    code, _, err = cli("run", "--methods", "ce", "--datasets", str(tiny), *FAST, "--seeds", seeds,
                       "--results-dir", str(results))
    return code, err


def table(results: Path) -> pd.DataFrame:
    frame = pd.read_parquet(results / store.TABLE)[COLUMNS]
    return frame.sort_values(COLUMNS[:4]).reset_index(drop=True)


def files(results: Path) -> dict[str, bytes]:
    return {str(p.relative_to(results)): p.read_bytes() for p in sorted(results.rglob("*")) if p.is_file()}


def used(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> pd.DataFrame:
    """The table of an uninterrupted sweep (the same fixture data: run keys hash its content, not its path)."""
    from conftest import FIXTURE

    results = tmp_path_factory.mktemp("reference")
    assert main(["run", "--methods", "ce", "--datasets", str(FIXTURE), *FAST, "--seeds", SEEDS,
                 "--results-dir", str(results)]) == 0
    return table(results)


@pytest.fixture
def resumed(caplog):
    """The shards a run resumed, as its log says (`resuming after epoch N`)."""
    caplog.set_level(logging.INFO, logger="bench")
    return lambda: [r.getMessage() for r in caplog.records if "resuming after epoch" in r.getMessage()]


def first_shard(cli, tiny: Path, results: Path) -> tuple[dict[str, bytes], int]:
    """Run shard 1 alone; every file then, and the room shard 2 gets: its first checkpoint, not two."""
    assert sweep(cli, tiny, results, "1")[0] == 0
    run_dir = next(results.glob(f"*/{store.MODEL}")).parent
    model = (run_dir / store.MODEL).stat().st_size * (2 if modelfile.stored_dtype(run_dir) == "float16" else 1)
    return files(results), 6 * model  # `model`: the float32 weights' size, as a checkpoint holds them


def check_nothing_lost(results: Path, before: dict[str, bytes], err: str, message: str) -> None:
    """The faulted sweep: one line per shard, shard 3 not run, earlier files intact, no temporary file."""
    failed = [line.strip() for line in err.splitlines() if line.startswith("  ce_tiny")]
    assert len(failed) == 2, err
    assert re.fullmatch(rf"ce_tiny\S+_s2_\S+: {message}.*", failed[0]), failed[0]
    assert re.fullmatch(rf"ce_tiny\S+_s3_\S+: not run: {message}.*", failed[1]), failed[1]
    after = files(results)
    assert {name: after.get(name) for name in before} == before  # shard 1, the table and the caches
    assert not [name for name in after if name.endswith(".tmp")]
    assert not list(results.glob("*_s3_*"))
    assert not list(results.glob(f"*_s2_*/{store.ROWS}"))


def rerun_completes(cli, tiny: Path, results: Path, reference: pd.DataFrame, resumed) -> None:
    code, err = sweep(cli, tiny, results, SEEDS)
    assert code == 0, err
    pd.testing.assert_frame_equal(table(results), reference)
    assert not list(results.rglob("*.tmp")) and not list(results.glob(f"*/{lease.LEASE}"))


# ------------------------------------------------------------------------------------------ injected faults

@contextlib.contextmanager
def faulty_disk(monkeypatch, results: Path, room: int, code: int) -> Iterator[None]:
    """bench.results' atomic writes under `results` (bench.results.atomic: run files; store: the table), on a disk
    with `room` bytes more than it holds now:
    a write that would go past it fails with `code` after its temporary file is written (ENOSPC: a full disk;
    EROFS: a folder made read-only then, which refuses every later write too)."""
    real = atomic.atomic_path
    capacity = used(results) + room
    refusing = []  # a read-only folder refuses every write after the first refusal

    @contextlib.contextmanager
    def atomic_path(path: Path, run_dir: Path | None = None) -> Iterator[Path]:
        with real(path, run_dir) as tmp:
            yield tmp
            if Path(path).is_relative_to(results) and (refusing or used(results) > capacity):
                if code == errno.EROFS:
                    refusing.append(path)
                raise OSError(code, os.strerror(code), str(tmp))

    with monkeypatch.context() as patch:
        patch.setattr(store, "atomic_path", atomic_path)
        patch.setattr(atomic, "atomic_path", atomic_path)
        yield


@pytest.mark.slow
def test_a_disk_that_fills_mid_sweep_loses_nothing(cli, tiny, tmp_path, monkeypatch, reference, resumed):
    results = tmp_path / "results"
    before, room = first_shard(cli, tiny, results)
    with faulty_disk(monkeypatch, results, room, errno.ENOSPC):
        code, err = sweep(cli, tiny, results, SEEDS)
    assert code == 1
    check_nothing_lost(results, before, err, NO_SPACE)
    assert next(results.glob("*_s2_*/checkpoint.pt")).is_file()  # its first epoch, kept
    assert not list(results.glob(f"*/{lease.LEASE}"))
    rerun_completes(cli, tiny, results, reference, resumed)
    assert [m for m in resumed() if "_s2_" in m and "after epoch 1 " in m]


def test_a_folder_made_read_only_mid_sweep_loses_nothing(cli, tiny, tmp_path, monkeypatch, reference, resumed):
    results = tmp_path / "results"
    before, room = first_shard(cli, tiny, results)
    with faulty_disk(monkeypatch, results, room, errno.EROFS):
        code, err = sweep(cli, tiny, results, SEEDS)
    assert code == 1
    check_nothing_lost(results, before, err, READ_ONLY)
    assert not list(results.glob(f"*_s2_*/{store.ERROR}"))  # refused like every write after the first refusal
    rerun_completes(cli, tiny, results, reference, resumed)
    assert [m for m in resumed() if "_s2_" in m and "after epoch 1 " in m]


def test_a_checkpoint_that_does_not_fit_is_one_line(tmp_path, monkeypatch):
    """torch.save says only `unexpected pos` when its file cannot grow: the write's own OSError is reported."""
    import builtins

    import torch

    class Full:
        def __init__(self, handle):
            self.handle, self.left = handle, 1000

        def write(self, data):
            self.left -= len(data)
            if self.left < 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.handle.write(data)

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

    monkeypatch.setattr(atomic, "open", lambda *a, **k: Full(builtins.open(*a, **k)), raising=False)
    target = tmp_path / "checkpoint.pt"
    with pytest.raises(faults.WriteFailed, match=rf"^no space left on {re.escape(str(tmp_path))} \("):
        store.atomic_torch_save({"weights": torch.zeros(10_000)}, target)
    assert list(tmp_path.iterdir()) == []


def test_a_lease_that_does_not_fit_leaves_no_empty_lease(tmp_path, monkeypatch):
    """An empty lease file would hold its shard for the lease timeout (10 minutes)."""
    def full(handle, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch, pytest.raises(faults.WriteFailed, match="no space left on"):
        patch.setattr(lease.os, "write", full)
        lease.acquire(tmp_path / "run")
    assert not (tmp_path / "run" / lease.LEASE).exists()
    with lease.acquire(tmp_path / "run"):
        pass


# ------------------------------------------------------------------------------------------ a real tmpfs

@pytest.fixture
def tmpfs(tmp_path) -> Iterator[Path]:
    """A small tmpfs, mounted for the test (skipped where this process may not mount one)."""
    folder = tmp_path / "tmpfs"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_a_real_full_file_system_loses_nothing(cli, tiny, tmpfs, reference, resumed):
    results = tmpfs / "results"
    before, room = first_shard(cli, tiny, results)
    ballast = tmpfs / "ballast"
    with open(ballast, "wb") as handle:  # the disk fills: what is left is `room`
        os.posix_fallocate(handle.fileno(), 0, os.statvfs(tmpfs).f_bavail * os.statvfs(tmpfs).f_frsize - room)
    code, err = sweep(cli, tiny, results, SEEDS)
    assert code == 1
    check_nothing_lost(results, before, err, NO_SPACE)
    assert not list(results.glob(f"*/{lease.LEASE}"))
    ballast.unlink()  # space is freed
    rerun_completes(cli, tiny, results, reference, resumed)
    assert [m for m in resumed() if "_s2_" in m and "after epoch 1 " in m]


def test_a_real_file_system_remounted_read_only_mid_sweep_loses_nothing(cli, tiny, tmpfs, monkeypatch, reference,
                                                                          resumed):
    results = tmpfs / "results"
    before, _ = first_shard(cli, tiny, results)
    real = atomic.atomic_path

    def remount_at_second_checkpoint(path, run_dir=None):  # the file system turns read-only in shard 2's last epoch
        if path.name == store.CHECKPOINT and path.exists():
            subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
        return real(path, run_dir)

    with monkeypatch.context() as patch:
        patch.setattr(atomic, "atomic_path", remount_at_second_checkpoint)
        patch.setattr(store, "atomic_path", remount_at_second_checkpoint)
        code, err = sweep(cli, tiny, results, SEEDS)
    subprocess.run(["mount", "-o", "remount,rw", str(tmpfs)], check=True)
    assert code == 1
    check_nothing_lost(results, before, err, READ_ONLY)
    # its lease could not be removed from a read-only folder: the re-run takes it over (its holder is gone)
    rerun_completes(cli, tiny, results, reference, resumed)
    assert [m for m in resumed() if "_s2_" in m and "after epoch 1 " in m]
