"""What `run` prepares before a part's first step: the carried pack checked against the code, its archives (nltk,
MiniLM, WordNet, the data sets, the word vectors) unpacked into a scratch folder, the environment the steps inherit
(the MiniLM stand-in and nltk on PYTHONPATH, WordNet, offline Hub), and the placeholders' values (folders in the
scratch folder). A dry run without a pack gets toy word vectors instead."""

from __future__ import annotations

import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bench.errors import BenchError
from benchmarks.campaign import layout
from benchmarks.campaign.parts import TOY_DATASET, Part

TOY_DIM = 8  # toy vectors: few dimensions, so that a small vocabulary has neighbours above the cosine threshold


class Setup(NamedTuple):
    """The environment of every step, the placeholders' values and the pack's manifest (None without one)."""

    env: dict[str, str]
    placeholders: dict[str, str]
    manifest: dict[str, Any] | None


def prepare_run(part: Part, pack: Path | None, scratch: Path | None, repo: Path, dry_run: bool) -> Setup:
    """Check the pack, unpack what the part carries into a new scratch folder (under `scratch` when given), and
    set the steps' environment up (see the module). Nothing is written before the checks pass."""
    if pack is None and not dry_run:
        raise BenchError("run needs the carried pack: give --pack DIR (made by `bash scripts/gpu-campaign.sh pack "
                         "DIR`), or --dry-run to try the part on this machine at toy scale")
    pack = pack.resolve() if pack is not None else None  # the steps' arguments name absolute folders
    manifest = check_pack(part, pack, repo) if pack is not None else None
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"clbench-campaign-{part.name.replace(':', '-')}-", dir=scratch))
    env = dict(os.environ, PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    values = {"data": "", "vectors": "", "results": str(scratch / "results"), "reports": str(scratch / "reports")}
    if pack is not None:
        unpack_archives(part, pack, scratch)
        on_path = [str(p) for p in (scratch / layout.MINILM, scratch / layout.BASE / layout.SITE) if p.is_dir()]
        if on_path:
            env["PYTHONPATH"] = os.pathsep.join(p for p in (*on_path, env.get("PYTHONPATH", "")) if p)
        wordnet = scratch / layout.WORDNET / layout.WORDNET_DICT
        if wordnet.is_dir():
            env["BENCH_WORDNET_DIR"] = str(wordnet)
        if part.dataset:
            folder = scratch / layout.paper_folder(part.dataset)
            values["data"], values["vectors"] = str(folder / layout.DATA), str(folder / layout.VECTORS)
        elif (scratch / layout.DATA_PERF).is_dir():
            values["data"] = str(scratch / layout.DATA_PERF / layout.DATA)
    if not dry_run:  # the device: nothing may reach the network, caches stay in the scratch folder
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
                   BENCH_CACHE_DIR=str(scratch / "cache"))
    if dry_run and not Path(values["vectors"]).is_file():
        values["vectors"] = str(toy_vectors(repo / TOY_DATASET, scratch / "toy-vectors.txt"))
    return Setup(env, values, manifest)


def check_pack(part: Part, pack: Path, repo: Path) -> dict[str, Any]:
    """The pack's manifest, after checking that it was built from this code and that the part's folders are
    there (BenchError naming the fix otherwise)."""
    manifest = layout.read_manifest(pack)
    if manifest.get("source_sha256") != layout.source_hash(repo):
        raise BenchError(f"the pack at {pack} was built from other code than this working tree (clbench changed "
                         f"since {manifest.get('created', '?')}); make it again with "
                         f"`bash scripts/gpu-campaign.sh pack {pack}`")
    missing = [name for name in part.carry if not (pack / name).is_dir()]
    if missing:
        raise BenchError(f"part {part.name} needs the pack folders {', '.join(part.carry)}; missing here: "
                         f"{', '.join(missing)} (carry them: {', '.join(str(pack / m) for m in missing)})")
    return manifest


def unpack_archives(part: Part, pack: Path, scratch: Path) -> None:
    """Extract each .tar.xz of the part's folders into scratch/<folder>."""
    for name in part.carry:
        for archive in sorted((pack / name).glob("*.tar.xz")):
            with tarfile.open(archive, "r:xz") as tar:
                if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: nothing outside the target folder
                    tar.extractall(scratch / name, filter="data")
                else:
                    tar.extractall(scratch / name)


def toy_vectors(dataset: Path, path: Path) -> Path:
    """A text vectors file over the toy data set's words (random, seeded), for a dry run's TextFooler step."""
    from bench.data.loading import load_dataset
    from bench.data.words import split_token

    data = load_dataset(str(dataset), None)
    words = sorted({split_token(t)[1].lower() for text in data.train.texts + data.test.texts
                    for t in text.split()} - {""})
    rows = np.random.default_rng(0).standard_normal((len(words), TOY_DIM)).astype(np.float32)
    path.write_text("".join(f"{w} {' '.join(f'{x:.6f}' for x in row)}\n" for w, row in zip(words, rows)),
                    encoding="utf-8")
    return path
