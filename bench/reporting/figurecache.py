"""The HTML page's figures, drawn once per content: each inline figure carries a key (`data-key`), the SHA-256 of
what it was drawn from -- the builder, its arguments (a run folder by its manifest, or by its files' names, sizes
and modification times where it has none; a frame by its values), the caption, and the code that draws (the
sources of bench/reporting, matplotlib's and seaborn's versions). Rebuilding a page reads the page it replaces and
reuses every figure whose key is unchanged, so a page whose runs did not change redraws nothing (and imports no
plotting library); a changed run, caption or plotting code changes the key, so a stale figure is never shown.
Figures saved as files (a finished sweep's reports/: `saved`) are keyed the same way in the folder's
`.figures.json`, so re-running a finished demo rewrites none of them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import json
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from bench.errors import BenchError

INDEX = ".figures.json"  # in a reports folder: figure key -> the file names it was saved as
FIGURE = re.compile(r'<figure data-key="([0-9a-f]{64})".*?</figure>\n', re.S)
PREVIOUS: ContextVar[dict[str, str]] = ContextVar("previous_figures", default={})


@contextlib.contextmanager
def reusing(page: Path | str | None) -> Iterator[None]:
    """While a page is built: the keyed figures of the page at `page` (if any) are reused."""
    try:
        text = Path(page).read_text(encoding="utf-8") if page else ""
    except (OSError, UnicodeDecodeError):  # no page yet, or not one of ours: draw everything
        text = ""
    token = PREVIOUS.set({m.group(1): m.group(0) for m in FIGURE.finditer(text)})
    try:
        yield
    finally:
        PREVIOUS.reset(token)


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """A digest of the drawing code: bench/reporting's sources and the plotting libraries' versions."""
    from importlib.metadata import PackageNotFoundError, version

    digest = hashlib.sha256()
    for source in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(source.name.encode() + source.read_bytes())
    for package in ("matplotlib", "seaborn"):
        with contextlib.suppress(PackageNotFoundError):
            digest.update(f"{package} {version(package)}".encode())
    return digest.hexdigest()


def run_identity(run_dir: Path) -> str:
    """A run folder by content: its manifest (sizes and SHA-256 of its files) when it has one, else the names,
    sizes and modification times of its files."""
    manifest = run_dir / "manifest.json"
    if manifest.is_file():
        return "manifest " + hashlib.sha256(manifest.read_bytes()).hexdigest()
    try:
        files = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in run_dir.iterdir() if p.is_file())
    except OSError:
        files = []
    return json.dumps([str(run_dir.name), files])


def identity(value: Any) -> str:
    """An argument of a figure builder as text that changes whenever what it holds does."""
    if isinstance(value, Path):
        return run_identity(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Path) for v in value):
        return json.dumps([run_identity(v) for v in value])
    if hasattr(value, "to_json"):  # a frame
        return value.to_json(orient="split", date_format="iso", default_handler=str)
    return json.dumps(value, sort_keys=True, default=str)


def figure_key(builder: str, args: tuple, caption: str) -> str:
    """The key of the figure `builder(*args)` with this caption."""
    parts = [code_version(), builder, caption, *(identity(a) for a in args)]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def builder_named(builder: str) -> Callable[..., Any]:
    """`module:function` under bench.reporting (imported only when a figure must be drawn)."""
    module, name = builder.split(":")
    return getattr(importlib.import_module(f"bench.reporting.{module}"), name)


def attempt(builder: Callable[..., Any], *args: Any) -> tuple[Any, str]:
    """The plot, or None and the one-line reason it could not be drawn."""
    try:
        return builder(*args), ""
    except BenchError as exc:
        return None, str(exc)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # a damaged run file: say so, keep the page
        return None, f"could not be drawn ({type(exc).__name__}: {exc})"


def drawn(builder: str, args: tuple, caption: str) -> tuple[str, str]:
    """The <figure> of `builder(*args)` with `caption` -- the previous page's when its key is unchanged, else drawn
    now -- and '' ; or '' and the reason it could not be drawn."""
    key = figure_key(builder, args, caption)
    previous = PREVIOUS.get().get(key)
    if previous is not None:
        return previous, ""
    plot, reason = attempt(builder_named(builder), *args)
    if plot is None:
        return "", reason
    from bench.reporting.htmlparts import figure_html

    try:
        return figure_html(plot, caption, key), ""
    finally:
        plot.figure.clear()


def saved(builder: str, args: tuple, reports_dir: Path) -> list[Path]:
    """The PNG (and PDF) files of `builder(*args)` under `reports_dir`: those saved before when its key is
    unchanged and the files are there, else drawn and saved now (`figures.save_plot`); [] when it cannot be drawn.
    The folder's index forgets a key whose files another figure has since overwritten."""
    from bench.results import store

    reports_dir = Path(reports_dir)
    key = figure_key(builder, args, "")
    try:
        index = json.loads((reports_dir / INDEX).read_text(encoding="utf-8"))
        index = index if isinstance(index, dict) else {}
    except (OSError, ValueError):
        index = {}
    names = index.get(key)
    if isinstance(names, list) and names and all((reports_dir / str(n)).is_file() for n in names):
        return [reports_dir / str(n) for n in names]
    plot, _ = attempt(builder_named(builder), *args)
    if plot is None:
        return []
    from bench.reporting.figures import save_plot

    paths = save_plot(plot, reports_dir)
    plot.figure.clear()
    written = {p.name for p in paths}
    index = {k: v for k, v in index.items() if not (isinstance(v, list) and written & set(map(str, v)))}
    index[key] = sorted(written)
    store.write_json(reports_dir / INDEX, index)
    return paths
