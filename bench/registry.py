"""One generic name -> object registry, used for methods, datasets, encoders and evaluators."""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
import pkgutil
import sys
from pathlib import Path
from typing import Callable, Generic, Iterator, Sequence, TypeVar

from bench.errors import BenchError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names (and aliases) to registered objects; unknown names fail with the known list."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str, *aliases: str) -> Callable[[T], T]:
        """Decorator: register the decorated object under `name` (and optional aliases)."""

        def decorate(obj: T) -> T:
            self.add(name, obj, *aliases)
            return obj

        return decorate

    def add(self, name: str, obj: T, *aliases: str) -> None:
        """Register `obj` under `name`; registering a taken name is a programming error."""
        for key in (name, *aliases):
            if key in self._entries or key in self._aliases:
                raise ValueError(f"{self.kind} {key!r} is registered twice")
        self._entries[name] = obj
        for alias in aliases:
            self._aliases[alias] = name

    def canonical(self, name: str) -> str:
        """The registered name for `name` or one of its aliases; BenchError if unknown."""
        if name in self._entries:
            return name
        if name in self._aliases:
            return self._aliases[name]
        raise BenchError(self.unknown_message(name))

    def get(self, name: str) -> T:
        """The object registered under `name` (or an alias of it)."""
        return self._entries[self.canonical(name)]

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def items(self) -> list[tuple[str, T]]:
        """(name, object) pairs sorted by name."""
        return sorted(self._entries.items())

    def aliases_of(self, name: str) -> list[str]:
        """The aliases that point at `name`."""
        return sorted(a for a, target in self._aliases.items() if target == name)

    def unknown_message(self, name: str, also: Sequence[str] = ()) -> str:
        """One line naming the unknown name, the closest match (among the known names and `also`, e.g. the
        user's dataset folders) and every known name."""
        known = sorted([*self._entries, *self._aliases])
        close = difflib.get_close_matches(name, [*known, *also], n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r}.{hint} Known {self.kind}s: {', '.join(known) or '(none)'}"


METHODS: Registry = Registry("method")
DATASETS: Registry = Registry("dataset")
ENCODERS: Registry = Registry("encoder")
EVALUATORS: Registry = Registry("evaluator")

PLUGIN_GROUPS = {"method": "clbench.methods", "evaluator": "clbench.evaluators"}  # entry-point groups


def import_members(package: str, path: Sequence[str], registry: str) -> None:
    """Import every module of `package` (its folder `path`) whose source names the registry variable `registry`
    (e.g. `METHODS.register`): each registers what it defines, so a new member is one new file and nothing
    else; helper modules (losses, model loading) are left to be imported when used, keeping imports light."""
    for info in pkgutil.iter_modules(path):
        source = Path(getattr(info.module_finder, "path", "")) / f"{info.name}.py"
        if info.ispkg or f"{registry}." in (source.read_text(encoding="utf-8") if source.is_file() else registry):
            importlib.import_module(f"{package}.{info.name}")


def plugins(kind: str) -> list[importlib.metadata.EntryPoint]:
    """The entry points installed packages declare for `kind` (group `clbench.methods` / `clbench.evaluators`),
    read once per import path (a scan of every installed distribution costs 15 ms; a report asked 25 times)."""
    return list(installed_plugins(kind, tuple(sys.path)))


@functools.lru_cache(maxsize=8)
def installed_plugins(kind: str, path: tuple[str, ...]) -> tuple[importlib.metadata.EntryPoint, ...]:
    """`plugins` for the import path `path`."""
    return tuple(sorted(importlib.metadata.entry_points(group=PLUGIN_GROUPS[kind]), key=lambda ep: ep.name))


def load_plugins(kind: str) -> None:
    """Import the modules third-party packages declare for `kind`; importing one registers its members
    (`METHODS.register(...)` as the built-in ones do). A plugin that fails to import is a BenchError naming it."""
    for entry_point in plugins(kind):
        try:
            entry_point.load()
        except Exception as exc:
            raise BenchError(f"{kind} plugin {entry_point.name!r} ({entry_point.value}, from package "
                             f"{entry_point.dist.name if entry_point.dist else '?'}) failed to load: "
                             f"{exc.__class__.__name__}: {exc}; fix or uninstall that package") from exc
