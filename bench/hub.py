"""Whether the Hugging Face Hub can be reached and what its caches hold: offline machines (HF_HUB_OFFLINE=1,
or no answer) load Hub models and datasets from the caches and fail fast, in one line, when they are not there.

The cache folders are resolved here from the environment at call time, as huggingface_hub and datasets resolve
them at import time, and passed to them explicitly."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import time
from pathlib import Path
from typing import Iterable, Iterator
from urllib.parse import urlparse

from bench.errors import BenchError

OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
ANSWER_SECONDS = 60.0  # how long a process reuses the Hub's answer (a run asks before each model and dataset load)
_answers: dict[str, tuple[float, bool]] = {}  # host -> (time.monotonic() when asked, whether it answered)


def offline_flags() -> list[str]:
    """The offline switches set in the environment (HF_HUB_OFFLINE, HF_DATASETS_OFFLINE, TRANSFORMERS_OFFLINE)."""
    return [flag for flag in OFFLINE_FLAGS if os.environ.get(flag, "0").strip().lower() in ("1", "true", "yes", "on")]


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hub answers a TCP connection (False at once when an offline switch is set); the answer is
    reused for ANSWER_SECONDS, so a machine whose firewall drops the packets waits `timeout` once, not per load."""
    if offline_flags():
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    asked, answer = _answers.get(host, (-ANSWER_SECONDS, False))
    if time.monotonic() - asked < ANSWER_SECONDS:
        return answer
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        answer = True
    except OSError:
        answer = False
    _answers[host] = (time.monotonic(), answer)
    return answer


def offline_reason() -> str:
    """Why the Hub is not asked, for messages: the offline switches set, else that it did not answer."""
    flags = offline_flags()
    return f"{' and '.join(flags)} set" if flags else "no answer from the Hub"


def env_folder(variable: str, default: Path) -> Path:
    """The folder an environment variable names (~ and $VARS expanded), else `default`."""
    value = os.environ.get(variable)
    return Path(os.path.expandvars(os.path.expanduser(value))) if value else default


def hf_home() -> Path:
    """$HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface."""
    return env_folder("HF_HOME", env_folder("XDG_CACHE_HOME", Path.home() / ".cache") / "huggingface")


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps models: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub."""
    return env_folder("HF_HUB_CACHE", env_folder("HUGGINGFACE_HUB_CACHE", hf_home() / "hub"))


def datasets_cache_dir() -> Path:
    """Where the datasets library keeps prepared datasets: $HF_DATASETS_CACHE, else $HF_HOME/datasets."""
    return env_folder("HF_DATASETS_CACHE", hf_home() / "datasets")


def cached_model(repo_id: str) -> Path | None:
    """The snapshot folder of `repo_id` (the revision refs/main points at) in the Hub cache when it holds
    config.json, else None."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json", cache_dir=hub_cache_dir())
    except ValueError:  # not a valid repo id (huggingface_hub's HFValidationError)
        return None
    return Path(found).parent if isinstance(found, str) else None


def snake_case(name: str) -> str:
    """A dataset name as the datasets library names its cache folder (datasets.naming.camelcase_to_snakecase)."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z\d])([A-Z])", r"\1_\2", name).lower()


def cached_dataset(repo_id: str) -> Path | None:
    """The folder of the datasets cache holding prepared copies of Hub dataset `repo_id` (any config:
    <namespace>___<name>/<config>/<version>/<hash>, where datasets' offline loader looks), else None."""
    *namespace, name = repo_id.split("/")
    folder = datasets_cache_dir() / "___".join([*namespace, snake_case(name)])
    return folder if any(p.is_dir() for p in folder.glob("*/*/*")) else None


@contextlib.contextmanager
def datasets_offline() -> Iterator[None]:
    """The datasets library in offline mode for the duration (it reads HF_HUB_OFFLINE once, at import): it then
    reads prepared copies from its cache without a network attempt (and without its warnings that it does)."""
    import datasets.config

    logger = logging.getLogger("datasets")
    saved = datasets.config.HF_HUB_OFFLINE, datasets.config.HF_DATASETS_OFFLINE, logger.level
    datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = True
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, datasets.config.HF_DATASETS_OFFLINE, level = saved
        logger.setLevel(level)


def encoder_source(name: str, registered: Iterable[str]) -> tuple[str, str]:
    """Where encoder `name` loads from, decided without model code: ("registered", name); ("folder", path) for
    a local folder holding config.json; ("hub", name) when the Hub answers; else ("cache", snapshot folder)
    from the Hugging Face cache. A BenchError (one line: the cache folder and the fixes) when none holds it."""
    if name in registered:
        return "registered", name
    local = Path(name).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise BenchError(f"encoder folder {local.resolve()} has no config.json; pass a folder saved with "
                             "save_pretrained (config, weights and tokenizer)")
        return "folder", str(local)
    if hub_reachable():
        return "hub", name
    snapshot = cached_model(name)
    if snapshot is not None:
        return "cache", str(snapshot)
    raise BenchError(
        f"cannot load encoder {name!r}: it is not a registered short name ({', '.join(registered)}) nor a local "
        f"folder, the Hugging Face Hub is unreachable ({offline_reason()}) and it is not in the Hugging Face "
        f"cache {hub_cache_dir()}; download it into that cache on a machine with Hub access (`hf download {name}` "
        "with the same HF_HOME or HF_HUB_CACHE), pass a folder holding config.json and the weights, or use "
        "--encoder minilm")


def check_encoder_source(name: str, registered: Iterable[str]) -> bool:
    """Whether `name` still has to be looked up on the Hub (True) after the checks that need no model code
    (bench.hub.encoder_source: a BenchError when it can be loaded from nowhere)."""
    return encoder_source(name, registered)[0] == "hub"
