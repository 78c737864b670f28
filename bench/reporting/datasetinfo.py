"""What the HTML report (`bench.reporting.html`) says about its datasets and methods: each dataset's sizes,
classes and source (from the runs' spec.json and the dataset card), and each method's section of
docs/METHODS.md as a relative link. No absolute path is ever shown: a local data folder is named by its last
component only.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from bench.reporting.tables import clean_accuracy
from bench.errors import BenchError
from bench.results import runfiles, store

METHODS_DOC = Path(__file__).resolve().parents[2] / "docs" / "METHODS.md"  # in a checkout; absent when installed
SPLITS = ("train", "validation", "test")
SHOWN_CLASSES = 6  # class names listed before "and N more"


# ----------------------------------------------------------------------------------------------- datasets

def source_text(source: str) -> str:
    """Where a run read its data, without any absolute path: `local:<folder>` -> `local copy (<name>)`,
    `folder:<path>` -> `folder <name>`, `hub:<id>` -> `Hugging Face Hub <id>`, anything else as recorded."""
    for prefix, shown in (("local:", "local copy"), ("folder:", "folder")):
        if source.startswith(prefix):
            name = Path(source[len(prefix):]).name
            return f"{shown} ({name})" if prefix == "local:" else f"{shown} {name}"
    if source.startswith("hub:"):
        return f"Hugging Face Hub {source[len('hub:'):]}"
    return "unrecorded" if not source else source


def spread(values: list[Any]) -> str:
    """Distinct values as `a` or `a–b` (numbers) / `a, b` (text); '' when there are none."""
    found = sorted({v for v in values if v is not None and v != ""}, key=lambda v: (isinstance(v, str), v))
    if not found:
        return ""
    if all(isinstance(v, (int, float)) for v in found):
        return f"{found[0]:,}" if len(found) == 1 else f"{found[0]:,}–{found[-1]:,}"
    return ", ".join(str(v) for v in found)


def card_of(name: str) -> Any:
    """The registered dataset card of `name`, or None."""
    from bench.data import cards  # noqa: F401  (registers the cards)
    from bench.registry import DATASETS

    return DATASETS.get(name) if name in DATASETS else None


def classes_text(names: list[str]) -> str:
    """`n: a, b, c` with at most SHOWN_CLASSES names."""
    shown = ", ".join(names[:SHOWN_CLASSES]) + (f" and {len(names) - SHOWN_CLASSES} more"
                                                 if len(names) > SHOWN_CLASSES else "")
    return f"{len(names)}: {shown}" if names else ""


def dataset_details(frame: pd.DataFrame, source: Path) -> pd.DataFrame:
    """One row per dataset (regime) of the clean test-accuracy rows: title and task (card), classes, the
    train / validation / test sizes the runs used (spec.json; a range when runs differ) beside the full sizes
    of the card, where the runs read the data, and how many runs."""
    runs = clean_accuracy(frame).drop_duplicates("run_key")
    records = []
    for dataset, group in runs.groupby("dataset", sort=True):
        base = str(group["base_dataset"].iloc[0]) if "base_dataset" in group else str(dataset)
        specs = [spec_data(Path(source) / str(key)) for key in group["run_key"]]
        card = card_of(base)
        labels = next((list(s["label_names"]) for s in specs if s.get("label_names")), list(card.labels) if card
                      else [])
        record = {"dataset": str(dataset), "title": card.title if card else "", "task": card.task if card else "",
                  "classes": classes_text([str(n) for n in labels])}
        for split in SPLITS:
            record[split] = spread([(s.get("sizes") or {}).get(split) for s in specs]) or "—"
        full = (card.sizes if card else {}) or {}
        record["full (card)"] = " / ".join(f"{full[s]:,}" if isinstance(full.get(s), int) else "—" for s in SPLITS) \
            if card else ""
        record["source"] = spread([source_text(str(s.get("source") or "")) for s in specs])
        hub = (card.hub or {}).get("id") if card else None
        record["card"] = f"datasets/{base}.yaml" + (f" (Hub {hub})" if hub else "") if card else "no card"
        record["runs"] = len(group)
        records.append(record)
    return pd.DataFrame(records)


def spec_data(run_dir: Path) -> dict[str, Any]:
    """The `data` block of a run's spec.json ({} when it is missing or unreadable)."""
    path = run_dir / store.SPEC
    try:
        return dict(runfiles.read_json(run_dir, store.SPEC).get("data") or {}) if path.is_file() else {}
    except (ValueError, AttributeError, BenchError):  # damaged: its data is unknown here
        return {}


# ----------------------------------------------------------------------------------------------- methods

def github_anchor(heading: str) -> str:
    """The anchor GitHub (and most Markdown viewers) give a heading: lower case, punctuation dropped, spaces
    as hyphens (`4. clld-static / clld-adaptive` -> `4-clld-static--clld-adaptive`)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.lru_cache(maxsize=4)
def method_anchors(doc: Path = METHODS_DOC) -> dict[str, str]:
    """Method name -> anchor of its `## N. name[ / name]` section in docs/METHODS.md ({} without the file)."""
    if not doc.is_file():
        return {}
    anchors: dict[str, str] = {}
    for line in doc.read_text(encoding="utf-8").splitlines():
        found = re.match(r"^## \d+\. (.+)$", line)
        if found:
            for name in found.group(1).split(" / "):
                if " " not in name.strip():  # method names only, not "Notation and shared pieces"
                    anchors.setdefault(name.strip(), github_anchor(line[3:]))
    return anchors


def method_href(method: str, page_dir: Path | None, doc: Path = METHODS_DOC) -> str:
    """A relative link from a page in `page_dir` to `method`'s section of docs/METHODS.md, or '' when the
    method has no section, the docs are not there, or the page lies outside the checkout (a link out of it
    would leak the folder layout and break for whoever gets the page)."""
    anchor = method_anchors(doc).get(method.split(":")[0])
    if not anchor or page_dir is None:
        return ""
    page_dir, root = Path(page_dir).resolve(), doc.resolve().parents[1]
    if root not in (page_dir, *page_dir.parents):
        return ""
    return Path(os.path.relpath(doc.resolve(), page_dir)).as_posix() + "#" + anchor
