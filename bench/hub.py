"""Whether the Hugging Face Hub can be reached (so offline machines fail fast instead of retrying)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Iterable
from urllib.parse import urlparse

from bench.errors import BenchError


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hub answers a TCP connection (False when HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is set)."""
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(flag, "0").lower() in ("1", "true", "yes"):
            return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def check_encoder_source(name: str, registered: Iterable[str]) -> bool:
    """Whether `name` still has to be looked up on the Hub (True) after the checks that need no model code: a
    registered short name passes, a local folder must hold config.json, anything else needs a reachable Hub
    (BenchError otherwise, naming the local alternative)."""
    if name in registered:
        return False
    local = Path(name).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise BenchError(f"encoder folder {local.resolve()} has no config.json; pass a folder saved with "
                             "save_pretrained (config, weights and tokenizer)")
        return False
    if not hub_reachable():
        raise BenchError(
            f"cannot load encoder {name!r}: it is not a registered short name ({', '.join(registered)}) "
            "nor a local folder, and the Hugging Face Hub is unreachable; pass a folder holding config.json "
            "and the weights, or use --encoder minilm")
    return True
