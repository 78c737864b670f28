"""Training objectives: every module of this package that registers methods (its source names `METHODS.`) is
imported, which fills `bench.registry.METHODS`; then the methods of installed plugins (entry-point group
`clbench.methods`)."""

from bench.registry import import_members, load_plugins
from bench.methods.base import Method, PrepareContext, Progress

import_members(__name__, __path__, "METHODS")
load_plugins("method")

__all__ = ["Method", "PrepareContext", "Progress"]
