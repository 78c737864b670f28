"""An unchanged page is not built again: `clbench report --html` over results, options and code that are all as
they were for the page it would replace rewrites that page with the new time of generation and says its
warnings again, in a fraction of a second (a page of 193 runs cost 3 s to rebuild even with every figure
reused).

The key (`page_key`) is a SHA-256 of the page's options, the code (bench.codeversion: the package's files and
the libraries' versions), docs/METHODS.md (the page links into it), the working and home folders (the page
shortens paths to them), the verdicts' environment, and every file under the results folder but its hidden
entries, by path, size and modification time in nanoseconds: a run added, retrained, re-evaluated, repaired
or touched builds the page again. The keys live in `.pages.json` beside the pages, each with the SHA-256 of
the page written, so that a page edited or replaced by hand is built again, never trusted."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.codeversion import canonical, package_digest
from bench.reporting.datasetinfo import METHODS_DOC
from bench.reporting.verdicts import ASO_ENV
from bench.reporting.htmltemplate import render
from bench.results import store
from bench.results.atomic import write_json
from bench.results.sweeps import files_state

PAGES = ".pages.json"


def generated_text(when: datetime) -> str:
    """The page's `Generated` time as it shows it."""
    return when.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def generated_item(when: datetime) -> str:
    """The header item that holds the time (the one part of an unchanged page that changes)."""
    return render("generated", generated_text(when))


def results_state(source: Path) -> dict[str, Any]:
    """Every file under `source` but its hidden entries (.sweeps, .cache, locks), by path, size and time."""
    entries = sorted(e.name for e in os.scandir(source) if not e.name.startswith(".")) if source.is_dir() else []
    return {name: files_state(source / name) for name in entries}


def page_key(source: Path, target: Path, options: dict[str, Any]) -> str:
    """The key of the page `target` built from `source` with `options` (see the module docstring)."""
    state = {"options": canonical(options), "target": str(target.resolve()), "code": package_digest(),
             "methods_doc": files_state(METHODS_DOC), "folders": [os.getcwd(), str(Path.home())],
             "environment": os.environ.get(ASO_ENV), "results": results_state(Path(source))}
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()


def memo(target: Path) -> dict[str, Any]:
    """The keys of the pages in `target`'s folder ({} when none or unreadable)."""
    try:
        stored = json.loads((target.parent / PAGES).read_text(encoding="utf-8"))
        return stored if isinstance(stored, dict) else {}
    except (OSError, ValueError):
        return {}


def reused(target: Path, key: str, now: datetime) -> list[str] | None:
    """When `target` is the page of `key`, unedited: rewrite it generated `now` and return its warnings; else
    None (build it)."""
    entry = memo(target).get(target.name)
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    try:
        text = target.read_text(encoding="utf-8")
    except OSError:
        return None
    old = entry.get("generated", "")
    if hashlib.sha256(text.encode()).hexdigest() != entry.get("sha256") or text.count(old) != 1:
        return None
    remember(target, key, text.replace(old, generated_item(now)), now, list(entry.get("warnings", [])))
    return list(entry.get("warnings", []))


def remember(target: Path, key: str, text: str, now: datetime, warnings: list[str]) -> None:
    """Write the page `text` to `target` (atomically) and keep its key, digest, time item and warnings."""
    with store.atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    pages = memo(target)
    pages[target.name] = {"key": key, "sha256": hashlib.sha256(text.encode()).hexdigest(),
                          "generated": generated_item(now), "warnings": warnings}
    try:
        write_json(target.parent / PAGES, pages)
    except OSError:  # the page is written; only its reuse is lost
        return
