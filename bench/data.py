"""Loading text-classification data from local folders, user files, the Hugging Face Hub or a generator,
checking it, and carving a stratified validation split where a dataset has none."""

from __future__ import annotations

import gzip
import hashlib
import importlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from bench.cards import Card
from bench.errors import BenchError
from bench.hub import hub_reachable
from bench.registry import DATASETS

log = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")
SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".csv", ".tsv")


@dataclass
class Split:
    """One split: parallel lists of example ids, texts and integer labels."""

    ids: list[str]
    texts: list[str]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, index: Iterable[int]) -> "Split":
        """The examples at the given positions, in that order."""
        index = list(index)
        return Split([self.ids[i] for i in index], [self.texts[i] for i in index], self.labels[index])


@dataclass
class TextData:
    """A loaded, checked dataset with train, validation and test splits."""

    name: str
    label_names: list[str]
    train: Split
    validation: Split
    test: Split
    source: str
    validation_source: str
    fingerprint: str
    warnings: list[str] = field(default_factory=list)

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    def require_fingerprint(self, expected: str, since: str, fix: str) -> None:
        """A BenchError when this is not the data whose fingerprint is `expected` (`since`: e.g. "run X")."""
        if self.fingerprint != expected:
            raise BenchError(f"the data of {self.name} changed since {since} (fingerprint {self.fingerprint} != "
                             f"{expected}); {fix}")

    def describe(self) -> dict[str, Any]:
        """Sizes and origin, for the run record."""
        return {
            "name": self.name,
            "source": self.source,
            "fingerprint": self.fingerprint,
            "label_names": self.label_names,
            "sizes": {s: len(getattr(self, s)) for s in SPLITS},
            "validation_source": self.validation_source,
            "warnings": self.warnings,
        }


# ----------------------------------------------------------------------------------------------- raw rows

def numbered_json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line of a JSON Lines file (optionally gzipped); a line
    that is not JSON raises a BenchError naming it. Read errors propagate to the caller."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise BenchError(f"malformed JSON on line {number} of {path}: {exc.msg}; "
                                 "each line must be one JSON object") from exc


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON Lines (optionally gzipped), CSV or TSV file, as dicts."""
    name = path.name.lower()
    try:
        if name.endswith((".csv", ".tsv")):
            import pandas as pd

            frame = pd.read_csv(path, sep="\t" if name.endswith(".tsv") else ",", dtype=str,
                                keep_default_na=False, encoding="utf-8")
            return frame.to_dict(orient="records")
        rows = []
        for number, row in numbered_json_lines(path):
            if not isinstance(row, dict):
                raise BenchError(f"line {number} of {path} is not a JSON object; "
                                 'each line must look like {"text": ..., "label": ...}')
            rows.append(row)
        return rows
    except BenchError:
        raise
    except (OSError, UnicodeDecodeError, EOFError, ValueError) as exc:
        raise BenchError(f"cannot read {path}: {exc.__class__.__name__}: {exc}") from exc


def find_split_file(folder: Path, split: str) -> Path | None:
    """The file holding `split` in `folder` (train.jsonl.gz, test.csv, ...), or None."""
    for suffix in SUFFIXES:
        candidate = folder / f"{split}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def rows_to_columns(rows: list[dict[str, Any]], text_field: str, label_field: str, where: str,
                    split: str) -> tuple[list[str], list[str], list[str]]:
    """Ids, texts and label strings from raw rows; bad rows raise a BenchError naming the first one."""
    ids, texts, labels = [], [], []
    empty = []
    for number, row in enumerate(rows, start=1):
        if text_field not in row or row[text_field] is None:
            raise BenchError(f"row {number} of {where} has no {text_field!r} field; every row needs "
                             f"{text_field!r} and {label_field!r}")
        if label_field not in row or row[label_field] is None or str(row[label_field]).strip() == "":
            raise BenchError(f"row {number} of {where} has no {label_field!r} value; every row needs a label")
        text = str(row[text_field])
        if not text.strip():
            empty.append(number)
        ids.append(str(row.get("id", f"{split}-{number - 1}")))
        texts.append(text)
        labels.append(str(row[label_field]).strip())
    if empty:
        raise BenchError(f"{len(empty)} row(s) of {where} have empty text (first: row {empty[0]}); "
                         "remove or fill them")
    return ids, texts, labels


# ----------------------------------------------------------------------------------------------- sources

def data_dirs(data_dir: str | None) -> list[Path]:
    """Folders searched for local copies: --data-dir, then $BENCH_DATA_DIR."""
    dirs = [data_dir, os.environ.get("BENCH_DATA_DIR")]
    return [Path(d).expanduser() for d in dirs if d]


FIXED_SAMPLE_SEED = 0  # evaluator samples depend on the data only, so every method and seed sees the same ones


def fixed_sample(size: int, n: int) -> list[int]:
    """The first n positions of a fixed permutation (seed FIXED_SAMPLE_SEED) of range(size), in ascending
    order; all positions when n <= 0 or n >= size."""
    if n <= 0 or n >= size:
        return list(range(size))
    return sorted(int(i) for i in np.random.default_rng(FIXED_SAMPLE_SEED).permutation(size)[:n])


def find_named(name_or_path: str, data_dir: str | None = None) -> Path | None:
    """An existing path, or `name_or_path` found under the data folders (--data-dir, $BENCH_DATA_DIR); None
    when neither exists (e.g. `imdb_contrast`, `textfooler_mr`)."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path
    return next((folder / name_or_path for folder in data_dirs(data_dir) if (folder / name_or_path).exists()), None)


def load_folder(folder: Path, text_field: str = "text", label_field: str = "label") -> dict[str, tuple]:
    """Raw (ids, texts, labels) per split from a folder of split files."""
    raw = {}
    for split in SPLITS:
        path = find_split_file(folder, split)
        if path is not None:
            raw[split] = rows_to_columns(read_rows(path), text_field, label_field, str(path), split)
    if "train" not in raw or "test" not in raw:
        found = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        raise BenchError(f"{folder} needs train and test files (train.jsonl[.gz]/.csv/.tsv and test.*; "
                         f"validation optional); found: {', '.join(found) or 'nothing'}")
    return raw


def load_hub(card: Card, dirs: list[Path]) -> dict[str, tuple]:
    """Raw (ids, texts, labels) per split from the Hugging Face Hub, as the card's `hub` entry says."""
    hub = card.hub or {}
    where = ", ".join(str(d) for d in dirs) or "no --data-dir given"
    alternative = (f"put a local copy under DIR/{card.name}/{{train,test}}.jsonl.gz and pass --data-dir DIR "
                   f"(or set BENCH_DATA_DIR); searched: {where}")
    if not hub.get("id"):
        raise BenchError(f"dataset {card.name!r} has no local copy and no Hub source: {alternative}")
    if not hub_reachable():
        raise BenchError(f"could not load {card.name!r} from the Hugging Face Hub ({hub['id']}): the Hub is "
                         f"unreachable. To run offline, {alternative}")
    try:
        import datasets as hf_datasets

        raw = {}
        for split, hub_split in (hub.get("splits") or {"train": "train", "test": "test"}).items():
            table = hf_datasets.load_dataset(hub["id"], hub.get("config"), split=hub_split)
            labels = list(table[hub["label_column"]])
            if labels and isinstance(labels[0], (list, tuple)):
                raise BenchError(f"the Hub source of {card.name!r} ({hub['id']}) has several labels per row "
                                 f"and needs the recipe in the card's note; {alternative}")
            names = hub.get("label_names")
            if names is None and hasattr(table.features[hub["label_column"]], "names"):
                names = table.features[hub["label_column"]].names
            if names is not None and labels and isinstance(labels[0], int):
                labels = [names[i] for i in labels]
            texts = list(table[hub["text_column"]])
            rows = [{"text": t, "label": l} for t, l in zip(texts, labels)]
            raw[split] = rows_to_columns(rows, "text", "label", f"hub:{hub['id']}[{hub_split}]", split)
        return raw
    except BenchError:
        raise
    except Exception as exc:  # network, missing dataset, schema drift: one clear line
        reason = str(exc).splitlines()[0][:200] if str(exc) else exc.__class__.__name__
        raise BenchError(f"could not load {card.name!r} from the Hugging Face Hub ({hub['id']}): {reason}. "
                         f"To run offline, {alternative}") from exc


def load_generated(card: Card, seed: int) -> dict[str, tuple]:
    """Raw splits from a generator function named in the card (`module:function`)."""
    module_name, function_name = card.generator.split(":")
    generate = getattr(importlib.import_module(module_name), function_name)
    return {split: rows_to_columns(rows, "text", "label", f"generator {card.generator}", split)
            for split, rows in generate(seed=seed).items()}


LOCAL = "local:"  # source of a card dataset found in a data folder: local:<data folder>/<card name>


def source_data_dir(source: str) -> str:
    """The data folder a `local:` dataset source was found in (named sets sit beside it), else ''."""
    return str(Path(source[len(LOCAL):]).parent) if source.startswith(LOCAL) else ""


def load_raw(name: str, data_dir: str | None, data_seed: int) -> tuple[str, Card | None, dict[str, tuple]]:
    """Find a dataset by card name or path and return (source description, card, raw splits)."""
    if name in DATASETS:
        card: Card = DATASETS.get(name)
        dirs = data_dirs(data_dir)
        for base in dirs:
            folder = base / card.name
            if folder.is_dir():
                return f"{LOCAL}{folder.resolve()}", card, load_folder(folder, card.text_field, card.label_field)
        if card.generator:
            return f"generated:{card.generator}(seed={data_seed})", card, load_generated(card, data_seed)
        return f"hub:{(card.hub or {}).get('id')}", card, load_hub(card, dirs)
    path = Path(name).expanduser()
    if path.is_dir():
        return f"folder:{path.resolve()}", None, load_folder(path)
    if path.exists():
        raise BenchError(f"{name} is a file; pass the folder that holds its train and test files")
    raise BenchError(DATASETS.unknown_message(name) + " (or give a path to a folder with train/test files)")


# ----------------------------------------------------------------------------------------------- checks

def label_order(train_labels: list[str]) -> list[str]:
    """Label names for a dataset without a card: sorted, numerically when all are integers."""
    unique = set(train_labels)
    if all(x.lstrip("-").isdigit() for x in unique):
        return sorted(unique, key=int)
    return sorted(unique)


def fingerprint(label_names: list[str], raw: dict[str, tuple]) -> str:
    """A short content hash of the labels and every split (identifies the data in run keys)."""
    digest = hashlib.sha256(json.dumps(label_names).encode())
    for split in SPLITS:
        if split in raw:
            digest.update(json.dumps([split, *raw[split]], ensure_ascii=False).encode())
    return digest.hexdigest()[:12]


def size_warnings(card: Card | None, raw: dict[str, tuple], source: str) -> list[str]:
    """Messages for split sizes that differ from the card's published sizes."""
    if card is None or source.startswith("generated"):
        return []
    notes = []
    for split, expected in card.sizes.items():
        if expected and split in raw and len(raw[split][0]) != expected:
            notes.append(f"{card.name}: {split} has {len(raw[split][0])} rows from {source}, "
                         f"the published size is {expected}; results may not be comparable to papers")
    return notes


def carve_validation(train: Split, fraction: float, seed: int) -> tuple[Split, Split]:
    """A stratified `fraction` of train as validation (classes with one example stay in train)."""
    from sklearn.model_selection import train_test_split

    counts = np.bincount(train.labels)
    eligible = np.flatnonzero(counts[train.labels] >= 2)
    n_val = max(int(round(fraction * len(eligible))), len(np.unique(train.labels[eligible])))
    if len(eligible) < 2 or n_val >= len(eligible):
        raise BenchError(f"train has too few examples ({len(train)}) to carve a validation split; "
                         "add a validation file or more training data")
    kept, held = train_test_split(eligible, test_size=n_val, random_state=seed,
                                  stratify=train.labels[eligible])
    kept = np.sort(np.concatenate([kept, np.flatnonzero(counts[train.labels] < 2)]))
    return train.subset(kept), train.subset(np.sort(held))


def load_dataset(name: str, data_dir: str | None = None, data_seed: int = 0,
                 val_fraction: float = 0.1) -> TextData:
    """Load, check and split a dataset given by card name or folder path."""
    source, card, raw = load_raw(name, data_dir, data_seed)
    display = card.name if card else Path(name).expanduser().resolve().name
    for split in ("train", "test"):
        if split not in raw or not raw[split][0]:
            raise BenchError(f"dataset {display!r} has an empty {split} split ({source})")
    label_names = list(card.labels) if card and card.labels else label_order(raw["train"][2])
    index = {label: i for i, label in enumerate(label_names)}
    train_labels = set(raw["train"][2])
    for split, (_, _, labels) in raw.items():
        absent = sorted(set(labels) - train_labels)
        if absent:
            raise BenchError(f"{display} {split}: label(s) {absent[:5]} never occur in train, so no model can "
                             "learn them; move such examples into train or drop them")
        unknown = sorted(set(labels) - set(index))
        if unknown:
            raise BenchError(f"{display} {split}: label(s) {unknown[:5]} are not among the known labels "
                             f"{label_names[:20]}; fix the data or the card")
    splits = {s: Split(list(ids), list(texts), np.array([index[l] for l in labels], dtype=np.int64))
              for s, (ids, texts, labels) in raw.items()}
    warnings = size_warnings(card, raw, source)
    if "validation" in splits and len(splits["validation"]):
        train, validation, val_source = splits["train"], splits["validation"], "validation split of the source"
    else:
        train, validation = carve_validation(splits["train"], val_fraction, data_seed)
        val_source = f"stratified {val_fraction:.0%} of train (data seed {data_seed})"
    for message in warnings:
        log.warning(message)
    return TextData(display, label_names, train, validation, splits["test"], source, val_source,
                    fingerprint(label_names, raw), warnings)
