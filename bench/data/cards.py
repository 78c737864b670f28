"""Dataset cards: one YAML file per dataset under the project's `datasets/` folder, and the user's own cards
in the folders $BENCH_CARDS_DIR names."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from bench.errors import BenchError
from bench.registry import DATASETS

SOURCE_CARDS = Path(__file__).resolve().parents[2] / "datasets"  # a checkout or editable install
# (checked by a card file: beside an installed wheel, site-packages/datasets is Hugging Face's package)
CARDS_DIR = SOURCE_CARDS if (SOURCE_CARDS / "demo.yaml").is_file() else Path(__file__).resolve().parents[1] / "cards"
REQUIRED_KEYS = ("name", "title", "labels", "sizes")
HUB_KEYS = ("id", "config", "splits", "text_column", "label_column", "label_names", "note")  # what load_hub reads
USER_CARDS_ENV = "BENCH_CARDS_DIR"  # the user's card folders, separated by os.pathsep (":" on Linux)


@dataclass(frozen=True)
class Card:
    """What the project knows about a named dataset: sources, fields, labels, sizes, paper numbers."""

    name: str
    title: str
    labels: tuple[str, ...]
    sizes: dict[str, int | None]
    task: str = ""
    text_field: str = "text"
    label_field: str = "label"
    local_splits: tuple[str, ...] = ()
    hub: dict[str, Any] | None = None
    generator: str | None = None
    paper: dict[str, Any] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] = field(default_factory=dict)  # default robustness sets (contrast_set, attack_data)
    eval_defaults: dict[str, Any] = field(default_factory=dict)  # evaluator options unless the user sets them
    notes: str = ""
    path: str = ""


CARD_KEYS = tuple(f.name for f in fields(Card) if f.name != "path")


def check_keys(path: Path, given: dict, valid: tuple[str, ...], within: str = "") -> None:
    """A one-line BenchError for the first key of `given` that is not in `valid` (a typo would else be lost):
    the card file, the key, the closest valid key and every valid one."""
    unknown = [key for key in given if key not in valid]
    if unknown:
        key = str(unknown[0])
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
        hint = f" (did you mean {within}{close[0]}?)" if close else ""
        raise BenchError(f"dataset card {path}: unknown key {within}{key}{hint}; valid "
                         f"{within.rstrip('.') or 'card'} keys: {', '.join(valid)}")


SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's safe loader where built: 10x faster


def parse_card(path: Path) -> Card:
    """Read and check one card file."""
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except (OSError, yaml.YAMLError) as exc:
        raise BenchError(f"cannot read dataset card {path}: {' '.join(str(exc).split())}") from exc
    if not isinstance(raw, dict):
        raise BenchError(f"dataset card {path} is not a YAML mapping")
    check_keys(path, raw, CARD_KEYS)  # first: a misspelt required key is reported with its right spelling
    missing = [k for k in REQUIRED_KEYS if k not in raw]
    if missing:
        raise BenchError(f"dataset card {path} lacks {', '.join(missing)}")
    if not isinstance(raw.get("hub") or {}, dict):
        raise BenchError(f"dataset card {path}: hub must be a mapping ({', '.join(HUB_KEYS)}), got {raw['hub']!r}")
    check_keys(path, raw.get("hub") or {}, HUB_KEYS, within="hub.")
    if raw["name"] != path.stem:
        raise BenchError(f"dataset card {path} has name {raw['name']!r}; it must equal the file name {path.stem!r}")
    for key in ("defaults", "evaluation", "eval_defaults"):
        if not isinstance(raw.get(key) or {}, dict):
            raise BenchError(f"dataset card {path}: {key} must be a mapping (name: value), got {raw[key]!r}")
    return Card(
        name=raw["name"],
        title=raw["title"],
        labels=tuple(str(x) for x in raw["labels"] or ()),
        sizes=dict(raw["sizes"] or {}),
        task=raw.get("task") or "",
        text_field=raw.get("text_field") or "text",
        label_field=raw.get("label_field") or "label",
        local_splits=tuple(raw.get("local_splits") or ()),
        hub=raw.get("hub"),
        generator=raw.get("generator"),
        paper=dict(raw.get("paper") or {}),
        defaults=dict(raw.get("defaults") or {}),
        evaluation=dict(raw.get("evaluation") or {}),
        eval_defaults=dict(raw.get("eval_defaults") or {}),
        notes=raw.get("notes") or "",
        path=str(path),
    )


def register_cards(folder: Path = CARDS_DIR) -> None:
    """Register every `*.yaml` card in `folder` in the dataset registry (once)."""
    for path in sorted(folder.glob("*.yaml")):
        if path.stem not in DATASETS:
            DATASETS.add(path.stem, parse_card(path))


def user_card_dirs() -> list[Path]:
    """The folders $BENCH_CARDS_DIR names (separated by os.pathsep), in order."""
    return [Path(p).expanduser() for p in os.environ.get(USER_CARDS_ENV, "").split(os.pathsep) if p.strip()]


def register_user_cards(dirs: list[Path] | None = None) -> list[Card]:
    """Register the `*.yaml` / `*.yml` cards in the user's card folders ($BENCH_CARDS_DIR); a card whose name is
    taken (by a shipped card or an earlier user card) is an error, not an override. Returns the user's cards."""
    found = []
    for folder in user_card_dirs() if dirs is None else dirs:
        if not folder.is_dir():
            raise BenchError(f"{USER_CARDS_ENV} names {folder}, which is not a folder; point it at folders holding "
                             "dataset cards (NAME.yaml), separated by ':'")
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
            card = parse_card(path)
            taken = DATASETS.get(card.name) if card.name in DATASETS else None
            if taken is not None and Path(taken.path) != path:
                raise BenchError(f"dataset card {path} takes the name {card.name!r} of {taken.path}; a card cannot "
                                 f"replace another: give it a new name (file {card.name}_mine.yaml with name: "
                                 f"{card.name}_mine)")
            if taken is None:
                DATASETS.add(card.name, card)
            found.append(card)
    return found


register_cards()
register_user_cards()
