"""The pack's layout, shared by `pack` (which writes it) and `run` (which reads it on the device): the folders a
device call carries and the archives in them (unpacked on the device into a scratch folder, one sub-folder per
pack folder), the manifest, and the fingerprint of the code the pack's wheel was built from."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from bench.errors import BenchError

MANIFEST = "manifest.json"      # in base/: what the pack holds and which code it was built from
BASE = "base"                   # the clbench wheel, the manifest and SITE_ARCHIVE
SITE_ARCHIVE = "site.tar.xz"    # in base/: site/, pure-Python packages every part needs that the device image lacks
SITE = "site"                   # inside site.tar.xz: a folder to put on PYTHONPATH
TEST_WHEELS = "test-wheels"     # the wheels only the test suite needs
MINILM = "minilm"               # minilm.tar.xz: the fp16 stand-in package of scripts/pack-minilm-fp16.py
WORDNET = "wordnet"             # wordnet.tar.xz: WORDNET_DICT/ with the dict files nltk reads
WORDNET_DICT = "corpora/wordnet"  # inside wordnet.tar.xz: nltk's layout, read in place once unpacked
DATA_PERF = "data-perf"         # data.tar.xz: the data sets of the perf part
PAPER_PREFIX = "paper-"         # paper-<dataset>/: data.tar.xz and vectors.tar.xz of the paper part on <dataset>
DATA_ARCHIVE = "data.tar.xz"    # in data-perf/ and paper-<dataset>/: DATA/<set>/ for each data set
DATA = "data"                   # inside data.tar.xz: one folder per data set, its files as in the data folder
VECTORS_ARCHIVE = "vectors.tar.xz"  # in paper-<dataset>/: VECTORS
VECTORS = "vectors.npz"         # inside vectors.tar.xz: the counter-fitted vectors cut to the attacked texts
FOLDER_LIMIT_MIB = 60           # each folder of the pack
CALL_LIMIT_MIB = 64             # everything one device call carries, the working tree included
SOURCE_PARTS = ("bench", "methods", "datasets", "pyproject.toml")  # what the wheel is built from


def paper_folder(dataset: str) -> str:
    """The pack folder of the paper part on `dataset`."""
    return f"{PAPER_PREFIX}{dataset}"


def source_hash(repo: Path) -> str:
    """SHA-256 over the files the clbench wheel is built from (names and bytes; caches left out)."""
    digest = hashlib.sha256()
    for part in SOURCE_PARTS:
        root = repo / part
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            if "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def read_manifest(pack: Path) -> dict[str, Any]:
    """The pack's manifest; a BenchError saying how to make the pack when it is missing."""
    path = pack / BASE / MANIFEST
    if not path.is_file():
        raise BenchError(f"no campaign pack at {pack} (no {BASE}/{MANIFEST}); make it with "
                         f"`bash scripts/gpu-campaign.sh pack {pack}` and carry its folders")
    return json.loads(path.read_text(encoding="utf-8"))


def folder_mib(folder: Path) -> float:
    """The size of the files under folder, in MiB."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20
