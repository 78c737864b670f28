"""What version of the code a result was computed with, by content: the installed package's files (sources,
dataset cards, constraint lists) and the versions of the libraries that compute and draw. A memo keyed by it
(a finished sweep: bench.running.sweepmemo; an unchanged report page: bench.reporting.pagememo) is never reused
by other code; `canonical` writes the rest of such a key as plain JSON in one order. Imports nothing of the package."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

SUFFIXES = (".py", ".yaml", ".yml", ".json", ".txt", ".gz", ".md", ".j2", ".css", ".js")
LIBRARIES = ("numpy", "pandas", "pyarrow", "scipy", "matplotlib", "seaborn", "torch", "transformers")


@functools.lru_cache(maxsize=1)
def package_digest() -> str:
    """SHA-256 of every file of the installed package and of the dataset cards beside it and in $BENCH_CARDS_DIR
    (paths and contents), and of the libraries' versions; about 10 ms."""
    package = Path(__file__).resolve().parent
    folders = [package, package.parent / "datasets"]
    folders += [Path(d).expanduser() for d in os.environ.get("BENCH_CARDS_DIR", "").split(os.pathsep) if d]
    digest = hashlib.sha256()
    for folder in folders:
        for root, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            for name in sorted(names):
                if name.endswith(SUFFIXES):
                    path = os.path.join(root, name)
                    digest.update(path.encode() + b"\0")
                    with open(path, "rb") as handle:
                        digest.update(handle.read())
    for library in LIBRARIES:
        try:
            digest.update(f"{library} {version(library)}".encode())
        except PackageNotFoundError:
            continue
    return digest.hexdigest()


def canonical(value: Any) -> Any:
    """`value` as plain JSON data in one order whatever the process (sets sorted, dataclasses as dicts)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in sorted(value.items(), key=lambda item: str(item[0]))}
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)
