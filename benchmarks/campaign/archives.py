"""The pack's archives: .tar.xz files whose LZMA2 settings suit what they hold, so that a device call carries as
little as it can (docs/GPU-CAMPAIGN.md, "The 64 MiB limit") while clbench reads the same text and numbers there.

- TEXT (data sets, WordNet): preset 9, one dictionary over all members (a data set's train and test share words).
- FP16 (MiniLM's weights): literals coded per byte of a 2-byte number (lp=1), so that the sign-and-exponent bytes
  and the mantissa bytes are modelled apart: 37.2 instead of 39.1 MiB.
- FP32 (word vectors): the same per byte of a 4-byte number (lp=2).
- A gzip member (`*.gz`) is stored as gzip of level 0 (same name, same bytes once read), so that xz compresses its
  text rather than gzip's output; a zip member (`*.npz`) is stored uncompressed for the same reason.
- WordNet's data files lose their glosses (definitions and examples): each is overwritten with spaces, so that every
  synset keeps its byte offset. clbench never reads a gloss (tests/test_campaign.py checks that no code asks for
  one); they are 2 of WordNet's 7.3 MiB.
"""

from __future__ import annotations

import gzip
import io
import lzma
import tarfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

TEXT = ({"id": lzma.FILTER_LZMA2, "preset": 9},)
FP16 = ({"id": lzma.FILTER_LZMA2, "preset": 6, "lc": 0, "lp": 1, "pb": 1},)
FP32 = ({"id": lzma.FILTER_LZMA2, "preset": 6, "lc": 0, "lp": 2, "pb": 2},)
GLOSS = b" | "  # in a WordNet data line: the synset's fields, then its gloss


def stored_gzip(data: bytes) -> bytes:
    """The gzip file `data` as gzip of level 0: the same text once decompressed."""
    return gzip.compress(gzip.decompress(data), compresslevel=0, mtime=0)


def stored_zip(data: bytes) -> bytes:
    """The zip file `data` (an .npz) with every member stored uncompressed: the same members once read."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            member = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            member.external_attr = info.external_attr
            target.writestr(member, source.read(info), compress_type=zipfile.ZIP_STORED)
    return out.getvalue()


def without_glosses(data: bytes) -> bytes:
    """A WordNet data file with every synset's gloss overwritten by spaces (same length, same offsets)."""
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        if not line.startswith(b"  ") and GLOSS in line:  # the licence lines at the top start with two spaces
            fields, _, gloss = line.partition(GLOSS)
            lines[i] = fields + GLOSS + b" " * len(gloss)
    return b"\n".join(lines)


def stored(name: str, data: bytes) -> bytes:
    """A member's bytes as an archive holds them: gzip and zip files stored uncompressed, the rest as they are."""
    if name.endswith(".gz"):
        return stored_gzip(data)
    if name.endswith(".npz"):
        return stored_zip(data)
    return data


def tree_members(root: Path, arcname: str) -> list[tuple[str, Path]]:
    """Every file under root, as (arcname/relative path, file), in sorted order."""
    return [(f"{arcname}/{p.relative_to(root).as_posix()}", p) for p in sorted(root.rglob("*")) if p.is_file()]


def write_tar_xz(archive: Path, members: Iterable[tuple[str, Path]], filters: tuple[dict, ...],
                 transform: Callable[[str, bytes], bytes] = stored) -> None:
    """Write the files as one .tar.xz under the names given, each through `transform` (see the module), with
    fixed owners and modes, the files' own modification times."""
    with lzma.open(archive, "wb", format=lzma.FORMAT_XZ, filters=list(filters)) as xz:
        with tarfile.open(fileobj=xz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, path in members:
                data = transform(name, path.read_bytes())
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), int(path.stat().st_mtime), 0o644
                tar.addfile(info, io.BytesIO(data))


def wordnet_transform(name: str, data: bytes) -> bytes:
    """`stored` for WordNet's dict files, and the glosses out of its data files."""
    return without_glosses(data) if Path(name).name.startswith("data.") else stored(name, data)
