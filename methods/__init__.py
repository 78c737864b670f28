"""Training objectives. Each module registers one or more methods in `bench.registry.METHODS`."""

from methods import ce, clld, cline, dcl, lcl, supcon  # noqa: F401  (registration by import)
from methods.base import Method, PrepareContext, Progress

__all__ = ["Method", "PrepareContext", "Progress"]
