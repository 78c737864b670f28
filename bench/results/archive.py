"""Finished runs packed into one archive to share or to keep beside a paper (`clbench results --archive OUT.tar.xz`).

Each run folder goes in without what a reader of its results never needs: model weights, the checkpoint, the
lease, files moved aside as damaged. Its gzip files are stored at level 0 (the same lines once read, so that xz
compresses the text rather than gzip's output: the SST-2 archive of issue 30 took 4.6 MB as .tar.gz, 2.2 MB so),
and its manifest is updated to match: the repacked files' sizes and hashes, the weights left out noted as dropped.
So an unpacked archive verifies clean (`clbench verify`) and every table reads it as it read the runs. A run with
a damaged file stays out and is named; the others go in. The same runs give the same bytes (names sorted, times
and owners fixed); the archive lands atomically.
"""

from __future__ import annotations

import gzip
import lzma
import shutil
import tarfile
import tempfile
from pathlib import Path

from bench.errors import BenchError
from bench.results import manifest, runfiles, store

LEFT_OUT = ("lease.json", "checkpoint.pt", "model.pt", "model.safetensors", "hf", manifest.DAMAGED, ".*.tmp")
DROPPED = "not in the archive (clbench results --archive keeps results, not models)"
PRESET = 9 | lzma.PRESET_EXTREME  # xz -9e


def pack(run_dirs: list[Path], out: Path) -> list[str]:
    """Write the finished runs `run_dirs` (folders of one results folder) to the tar.xz `out`, as the module
    docstring says; returns one line per run left out for a damaged file (its name and the fix)."""
    skipped = []
    with tempfile.TemporaryDirectory(prefix=".archive-", dir=out.parent) as staging:
        folder = Path(staging) / "runs"
        folder.mkdir()
        for run_dir in sorted(run_dirs, key=lambda p: p.name):
            try:
                check(run_dir)
            except manifest.Damaged as damage:
                skipped.append(f"{run_dir.name} left out: {damage} (`clbench verify --repair`, then run it again)")
                continue
            copy_run(run_dir, folder / run_dir.name)
        if skipped and len(skipped) == len(run_dirs):
            raise BenchError(f"no run to archive: every one has a damaged file; {skipped[0]}")
        store.gather(folder)  # the gathered table, so that the unpacked folder is whole
        with store.atomic_path(out) as tmp:
            with tarfile.open(tmp, "w:xz", preset=PRESET) as tar:
                for path in sorted(folder.rglob("*")):
                    if any(part.startswith(".") for part in path.relative_to(folder).parts):
                        continue  # the gather lock's folder
                    tar.add(path, arcname=str(path.relative_to(folder)), recursive=False, filter=plain)
    return skipped


def check(run_dir: Path) -> None:
    """Damaged unless every file of the run that goes into the archive agrees with its manifest."""
    record = runfiles.manifest_or_none(run_dir)
    for name in sorted((record or {}).get("files", {})):
        if Path(name).parts[0] not in LEFT_OUT and not name.endswith(runfiles.WEIGHTS):
            manifest.check_file(run_dir, name, record)


def copy_run(run_dir: Path, copy: Path) -> None:
    """Copy one run folder without the LEFT_OUT files, its gzip files repacked at level 0, its manifest to match."""
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns(*LEFT_OUT))
    record = manifest.load(copy)
    for path in sorted(copy.rglob("*.gz")):
        packed = gzip.compress(gzip.decompress(path.read_bytes()), 0, mtime=0)
        path.write_bytes(packed)
        if record is not None:  # no modification time: an unpacked file has another, so it is always read
            manifest.record(copy, path, *manifest.digest_bytes(packed))
    if record is not None:
        for name in sorted(manifest.load(copy)["files"]):
            if not (copy / name).exists():  # weights left out, and anything else listed but not copied
                manifest.note_dropped(copy, name, DROPPED)


def plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A member without time, owner or host permissions: the same runs give the same archive bytes."""
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    info.mode = 0o755 if info.isdir() else 0o644
    return info
