"""The data types every part shares: a split (ids, texts, integer labels) and a loaded, checked dataset. Loading
(bench.data.loading) makes them and the data regimes (bench.data.regimes) derive new ones from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from bench.errors import BenchError

SPLITS = ("train", "validation", "test")


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
    fingerprint: str  # of the source data, before any regime (bench.data.regimes) sampled or flipped it
    warnings: list[str] = field(default_factory=list)
    regime: dict[str, Any] = field(default_factory=dict)  # what bench.data.regimes did to it ({}: nothing)
    # texts cut to what the model sees (bench.data.bounds.bound_data), per split, and the max_length they were
    # cut to (0: not bounded yet); the fingerprint is of the data as loaded, so it never depends on the cut
    texts_cut: dict[str, int] = field(default_factory=dict)
    bounded_to: int = 0
    # what the checks of the texts found (bench.data.checks.CHECK_COLUMNS: leakage, duplicates, conflicting
    # labels), counted on the data as loaded, before any regime; every clean result row carries them
    checks: dict[str, int] = field(default_factory=dict)

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
            "checks": self.checks,
            "warnings": self.warnings,
            "regime": self.regime,
        }
