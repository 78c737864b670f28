"""A run folder's manifest (`manifest.json`): the size and SHA-256 of every file the suite wrote into the run,
recorded before each file lands (bench.results.atomic), checked when a file is read (bench.results.runfiles), and
the record of files found damaged and moved aside into the run's `damaged/` folder.

An entry keeps the previous content's size and hash (`was`) until the next write: a process killed between
recording a file and renaming it into place leaves the old content, which still verifies."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.errors import BenchError

MANIFEST = "manifest.json"
DAMAGED = "damaged"  # in a run folder: damaged/<UTC time>/<file>, damaged files moved aside (never deleted)
VERSION = 1
MISSING = "missing"  # how the damage of a listed file that is not there starts (`missing`)
CHUNK = 1 << 20


class Damaged(BenchError):
    """A file of a run folder is damaged: missing though listed, of another size or hash than its manifest
    records, or unreadable (not JSON, not a torch file). `name` is its path inside the run folder."""

    def __init__(self, run_dir: Path, name: str, what: str):
        super().__init__(f"{Path(run_dir).name}/{name} is damaged ({what})")
        self.run_dir = Path(run_dir)
        self.name = name
        self.what = what


def digest_bytes(data: bytes) -> tuple[int, str]:
    """The size and SHA-256 (hex) of `data`."""
    return len(data), hashlib.sha256(data).hexdigest()


def digest_file(path: Path) -> tuple[int, str, int]:
    """The size, SHA-256 (hex) and modification time (ns) of a file, read in chunks."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
        mtime = os.fstat(handle.fileno()).st_mtime_ns
    return size, digest.hexdigest(), mtime


def name_in(run_dir: Path, path: Path) -> str:
    """`path` relative to its run folder, with forward slashes (the manifest's key)."""
    return Path(os.path.relpath(path, run_dir)).as_posix()


def load(run_dir: Path) -> dict[str, Any] | None:
    """The run's manifest ({"files": {name: entry}, "moved": {name: note}}), None when it has none (written
    before manifests existed, or not begun); Damaged when it cannot be read."""
    path = Path(run_dir) / MANIFEST
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(raw.decode("utf-8"))
        if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
            raise ValueError("no file list")
    except (UnicodeDecodeError, ValueError) as exc:
        raise Damaged(run_dir, MANIFEST, f"not a manifest: {short(exc)}") from None
    record.setdefault("moved", {})
    return record


def short(exc: BaseException) -> str:
    """An exception as a short phrase (its type and the start of its message)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{exc.__class__.__name__}: {text[:100]}" if text else exc.__class__.__name__


def _write(run_dir: Path, record: dict[str, Any]) -> None:
    """Write the manifest atomically (the caller holds the shard's lease, or repairs a folder by hand)."""
    handle, tmp = tempfile.mkstemp(prefix=f".{MANIFEST}.", suffix=".tmp", dir=run_dir)
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(json.dumps(record, indent=0, sort_keys=True).encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, Path(run_dir) / MANIFEST)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _for_update(run_dir: Path) -> dict[str, Any]:
    """The manifest to add to: the stored one, a new one when there is none, and a new one when the stored one
    is damaged (that one is moved aside first)."""
    try:
        return load(run_dir) or {"version": VERSION, "files": {}, "moved": {}}
    except Damaged as damage:
        move_aside(run_dir, [MANIFEST], damage.what)
        return {"version": VERSION, "files": {}, "moved": {}}


def record(run_dir: Path, path: Path, size: int, sha256: str, mtime_ns: int = -1) -> None:
    """Record `path`'s new content (size, hash, modification time; -1: unknown, always read) in its run's manifest,
    keeping the previous entry as `was`."""
    run_dir = Path(run_dir)
    manifest = _for_update(run_dir)
    name = name_in(run_dir, path)
    entry: dict[str, Any] = {"size": size, "sha256": sha256, "mtime_ns": mtime_ns}
    old = manifest["files"].get(name)
    if old and (old.get("size"), old.get("sha256")) != (size, sha256):
        entry["was"] = {k: old.get(k) for k in ("size", "sha256", "mtime_ns")}
    manifest["files"][name] = entry
    manifest["moved"].pop(name, None)
    manifest.get("dropped", {}).pop(name, None)
    _write(run_dir, manifest)


def expected(entry: dict[str, Any]) -> list[tuple[int, str]]:
    """The (size, hash) pairs a file with this manifest entry may have: its content, or the previous one."""
    pairs = [(int(entry.get("size", -1)), str(entry.get("sha256", "")))]
    if isinstance(entry.get("was"), dict):
        pairs.append((int(entry["was"].get("size", -1)), str(entry["was"].get("sha256", ""))))
    return pairs


def check(run_dir: Path, name: str, manifest: dict[str, Any] | None, data: bytes) -> None:
    """Damaged unless the bytes `data` just read from the run file `name` agree with its manifest entry: its size
    and hash. A file the manifest does not list passes."""
    entry = (manifest or {}).get("files", {}).get(name)
    if entry is None:
        return
    pairs = expected(entry)
    if len(data) not in {s for s, _ in pairs}:
        raise Damaged(run_dir, name, f"{len(data)} bytes, {pairs[0][0]} expected")
    if hashlib.sha256(data).hexdigest() not in {h for _, h in pairs}:
        raise Damaged(run_dir, name, "its content differs from what was written (SHA-256 mismatch)")


def missing(run_dir: Path, name: str, entry: dict[str, Any]) -> Damaged:
    """The damage of a file its manifest lists that is not there."""
    return Damaged(run_dir, name, f"{MISSING}; its manifest lists {entry.get('size')} bytes")


def check_entry(run_dir: Path, name: str, entry: dict[str, Any], hash_it: bool, trust_stat: bool) -> None:
    """Damaged unless the run file `name` agrees with its manifest `entry`: its size (one stat) and, with
    `hash_it`, its hash -- not read when `trust_stat` and its size and modification time are those recorded.
    FileNotFoundError when it is missing (the caller knows whether that is damage)."""
    path = os.path.join(run_dir, name)
    found = os.stat(path)
    pairs = expected(entry)
    if found.st_size not in {size for size, _ in pairs}:
        raise Damaged(run_dir, name, f"{found.st_size} bytes, {pairs[0][0]} expected")
    if not hash_it or trust_stat and any(found.st_size == e.get("size") and found.st_mtime_ns == e.get("mtime_ns")
                                         for e in (entry, entry.get("was") or {})):
        return
    if digest_file(Path(path))[1] not in {sha for _, sha in pairs}:
        raise Damaged(run_dir, name, "its content differs from what was written (SHA-256 mismatch)")


def check_file(run_dir: Path, name: str, manifest: dict[str, Any] | None) -> None:
    """`check_entry` with the file's hash read from disk whatever its stat (`clbench verify`); a file the manifest
    does not list passes, a missing one is Damaged."""
    entry = (manifest or {}).get("files", {}).get(name)
    if entry is None:
        return
    try:
        check_entry(run_dir, name, entry, hash_it=True, trust_stat=False)
    except FileNotFoundError:
        raise missing(run_dir, name, entry) from None


def move_aside(run_dir: Path, names: list[str], what: str) -> str:
    """Move damaged files (or folders) of a run into `damaged/<UTC time>/` (same relative paths; never deleted), drop them
    from the manifest and note why; returns the folder (relative to the run) they went to."""
    run_dir = Path(run_dir)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    folder = Path(DAMAGED) / stamp
    moved = set()
    for name in names:
        source = run_dir / name
        if source.exists() or source.is_symlink():
            (run_dir / folder / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, run_dir / folder / name)
            moved.add(name)
    if names != [MANIFEST]:
        try:
            manifest = load(run_dir)
        except Damaged:
            manifest = None
        if manifest is not None:
            for name in names:
                for listed in [n for n in manifest["files"] if n == name or n.startswith(name + "/")]:
                    del manifest["files"][listed]  # a folder moved aside takes its files with it
                manifest["moved"][name] = f"{what}; " + (f"moved to {(folder / name).as_posix()}" if name in moved
                                                         else "dropped from the manifest (it was gone)")
            _write(run_dir, manifest)
    return folder.as_posix()


def forget(run_dir: Path, name: str) -> None:
    """Drop `name` from the run's manifest (a file deleted on purpose, like a finished run's checkpoint)."""
    try:
        manifest = load(run_dir)
    except Damaged:
        return
    if manifest is not None and name in manifest["files"]:
        del manifest["files"][name]
        _write(Path(run_dir), manifest)


def note_dropped(run_dir: Path, name: str, why: str) -> None:
    """Record that the run file `name` was deleted on purpose, and why (a model the keep policy did not keep)."""
    try:
        record = load(run_dir)
    except Damaged:
        return
    if record is not None:
        record["files"].pop(name, None)
        record.setdefault("dropped", {})[name] = why
        _write(Path(run_dir), record)
