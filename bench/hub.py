"""Whether the Hugging Face Hub can be reached (so offline machines fail fast instead of retrying)."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse


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
