"""Dataset cards: one YAML file per dataset under the project's `datasets/` folder."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.errors import BenchError
from bench.registry import DATASETS

SOURCE_CARDS = Path(__file__).resolve().parents[2] / "datasets"  # a checkout or editable install
# (checked by a card file: beside an installed wheel, site-packages/datasets is Hugging Face's package)
CARDS_DIR = SOURCE_CARDS if (SOURCE_CARDS / "demo.yaml").is_file() else Path(__file__).resolve().parents[1] / "cards"
REQUIRED_KEYS = ("name", "title", "labels", "sizes")


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


def parse_card(path: Path) -> Card:
    """Read and check one card file."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise BenchError(f"cannot read dataset card {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise BenchError(f"dataset card {path} is not a YAML mapping")
    missing = [k for k in REQUIRED_KEYS if k not in raw]
    if missing:
        raise BenchError(f"dataset card {path} lacks {', '.join(missing)}")
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


register_cards()
