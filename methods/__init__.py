"""Training objectives. Each module registers one or more methods in `bench.registry.METHODS`."""

from methods import ce  # noqa: F401  (registration by import)
from methods.base import Method, Progress

__all__ = ["Method", "Progress"]
