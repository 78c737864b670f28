"""The texts an attack runs on, and the adversarial examples of a run: the files' content (the store writes
them) and reading them back."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.results import store
from bench.attack.search import AttackResult
from bench.data.files import find_split_file, read_rows, rows_to_columns
from bench.data.loading import find_named, fixed_sample
from bench.errors import BenchError

ADVERSARIAL_FILE = store.ADVERSARIAL
SETTINGS_FILE = store.ADVERSARIAL_SETTINGS
sample_index = fixed_sample  # the attacked examples: they depend on the data only, never on a run's seed


def resolve_attack_data(name_or_path: str, data_dir: str = "") -> Path:
    """A file, or a folder with test.jsonl[.gz], given as a path or as a name under the data folders."""
    path = find_named(name_or_path, data_dir or None)
    if path is None:
        raise BenchError(f"attack data {name_or_path!r} not found (give --attack-data PATH to a .jsonl[.gz] "
                         "file or a folder with test.jsonl[.gz], or --data-dir with that folder)")
    if path.is_dir():
        file = find_split_file(path, "test")
        if file is None:
            raise BenchError(f"attack data folder {path} has no test file (test.jsonl[.gz])")
        return file
    return path


def fingerprint(path: Path, head: int | None = None) -> str:
    """Short sha256 of a file's size and content (only its first `head` bytes when given)."""
    digest = hashlib.sha256(str(path.stat().st_size).encode())
    with open(path, "rb") as handle:
        digest.update(handle.read() if head is None else handle.read(head))
    return digest.hexdigest()[:16]


def read_attack_data(path: Path, label_names: Sequence[str]) -> tuple[list[str], list[str], np.ndarray]:
    """Ids, texts and label indices of an attack-data file whose `label`s are names of label_names."""
    ids, texts, labels = rows_to_columns(read_rows(path), "text", "label", str(path), "attack")
    unknown = sorted(set(labels) - set(label_names))
    if unknown:
        raise BenchError(f"attack data {path} has labels {unknown[:5]} that the model does not predict "
                         f"(its labels: {list(label_names)}); use attack data of the same dataset")
    index = {name: i for i, name in enumerate(label_names)}
    return ids, texts, np.array([index[label] for label in labels], dtype=np.int64)


def adversarial_rows(ids: Sequence[str], results: Sequence[AttackResult],
                     label_names: Sequence[str]) -> list[dict[str, Any]]:
    """One stored row per attacked example (labels written as names)."""
    return [{"id": i, "gold": label_names[r.gold], "original": r.original_text, "adversarial": r.adversarial_text,
             "original_pred": label_names[r.original_pred], "final_pred": label_names[r.final_pred],
             "status": r.status, "words_changed": r.words_changed, "num_words": r.num_words,
             "queries": r.queries, "changes": [list(c) for c in r.changes]}
            for i, r in zip(ids, results)]


def adversarial_artefacts(rows: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    """A run's adversarial examples and the attack's settings, as the artefacts the store writes beside each
    other (file name -> content; `read_adversarial` reads them back)."""
    return {SETTINGS_FILE: settings, ADVERSARIAL_FILE: rows}


def require_source(source: str) -> None:
    """BenchError when transfer mode has no --attack-source."""
    if not source:
        raise BenchError("attack mode 'transfer' needs --attack-source (the run key whose adversarial examples "
                         "are replayed)")


def resolve_source(source: str, results_dir: Path | None) -> Path:
    """The adversarial file of a transfer source: a file, a run folder, or a run key under results_dir."""
    require_source(source)
    hint = f"run `clbench evaluate {source} --evaluators textfooler` first"
    path = Path(source).expanduser()
    if not path.exists() and results_dir is not None:
        path = Path(results_dir) / source
    if path.is_dir():
        path = path / ADVERSARIAL_FILE
    if not path.is_file():
        raise BenchError(f"no adversarial examples at {path}: {hint}")
    return path


def read_adversarial(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows of a stored adversarial file (checked) and the settings stored beside it ({} when absent)."""
    rows = read_rows(path)
    for number, row in enumerate(rows, start=1):
        missing = [k for k in ("gold", "original", "adversarial", "status") if k not in row]
        if missing:
            raise BenchError(f"row {number} of {path} lacks {', '.join(missing)}; is it a textfooler "
                             "adversarial file?")
    if not rows:
        raise BenchError(f"adversarial file {path} is empty")
    settings_path = path.parent / SETTINGS_FILE
    settings = store.read_json(settings_path) if settings_path.is_file() else {}
    return rows, settings if isinstance(settings, dict) else {}


def normalised(text: str) -> str:
    """Lower-cased letters and digits only: the same sentence tokenised differently compares equal."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def training_overlap(texts: Sequence[str], training_texts: Sequence[str]) -> np.ndarray:
    """Which of `texts` occur (after `normalised`) among the texts a model was trained or validated on."""
    seen = {normalised(t) for t in training_texts}
    return np.array([normalised(t) in seen for t in texts], dtype=bool)
