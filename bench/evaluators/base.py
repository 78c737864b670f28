"""The evaluator interface: an evaluator scores a trained classifier and returns tidy records.

An evaluator never trains, and never writes into the run folder. It gets an `EvalContext` (the classifier
behind a text -> probabilities interface, the run's data, the run's folder to read and the user's evaluator
options) and returns an `Evaluation`: records `{"split", "metric", "value", "n", ...}`, to which the runner adds
the run's identity and provenance, and artefacts (per-example files), which the store writes into the run
folder. Extra scalar keys in a record (e.g. `test`, `capability`, attack parameters) become result columns.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bench.data.bounds import TextBound
from bench.data.loading import TextData
from bench.evaloptions import UNSET, EvalOptions, Unset, card_defaults, option  # noqa: F401  (imported from here too)
from bench.results.store import settings_text

class Classifier:
    """What evaluators see of a trained model: texts in, class probabilities or embeddings out.

    Implementations batch by length, use the GPU when present and count every text they score in `queries`.
    """

    label_names: list[str]
    queries: int = 0
    bound: TextBound | None = None  # what the model sees of a text (None: the run's max_length, characters only)

    def predict_proba(self, texts: list[str]) -> np.ndarray:
        """Class probabilities, shape (len(texts), num_labels), float32."""
        raise NotImplementedError

    def embed(self, texts: list[str], dropout: bool = False) -> np.ndarray:
        """Pooled sentence representations (the head's input), shape (len(texts), d), float32.

        `dropout=True` keeps dropout active (two calls give two dropout views of the same texts)."""
        raise NotImplementedError

    def predict(self, texts: list[str]) -> np.ndarray:
        """Predicted class indices."""
        return self.predict_proba(texts).argmax(1)


@dataclass
class EvalContext:
    """Everything an evaluator may use."""

    classifier: Classifier
    data: TextData
    run_dir: Path                      # this run's folder, to read (artefacts are returned, never written here)
    cache_dir: Path                    # shared across runs of a results folder (e.g. transfer attack sets)
    seed: int
    options: EvalOptions = field(default_factory=EvalOptions)
    run_key: str = ""
    results_dir: Path | None = None    # the results folder (to find other runs, e.g. an attack source)
    explicit: bool = True              # the user named the evaluators (False: the default "all that fit")
    bound: TextBound | None = None     # how `data`'s texts were cut to what the model sees (bench.data.bounds)

    @property
    def label_names(self) -> list[str]:
        return self.data.label_names

    def fit(self, texts: list[str]) -> list[str]:
        """Texts an evaluator reads from elsewhere (attack data, a contrast set) cut as the run's data was, to
        what the model sees: perturbed and scored like the test split."""
        return self.bound.cut(list(texts)) if self.bound is not None else list(texts)


@dataclass
class Evaluation:
    """What an evaluator returns: tidy records and artefacts, the files the store writes into the run folder.

    `artefacts` maps a file name (a constant of bench.results.store, one of those `Evaluator.artefacts` names)
    to its content: a JSON value for a `.json` name, a list of dict records for a `.jsonl.gz` name."""

    rows: list[dict[str, Any]]
    artefacts: dict[str, Any] = field(default_factory=dict)


def as_evaluation(result: Evaluation | list[dict[str, Any]]) -> Evaluation:
    """What `Evaluator.evaluate` returned, as an Evaluation (a plain list of records has no artefacts)."""
    return result if isinstance(result, Evaluation) else Evaluation(list(result))


class Evaluator:
    """Base class: subclasses set `name`, `option_names` and implement `evaluate` (and maybe `skip_reason`, with
    `skip_inputs` saying what it reads)."""

    name: ClassVar[str] = ""
    option_names: ClassVar[tuple[str, ...]] = ()   # options that change this evaluator's results
    version: ClassVar[int] = 1                      # bump when the evaluator's results would change
    needs_model: ClassVar[bool] = True  # scores the trained model (False: e.g. a reference trained on the data alone)

    def skip_reason(self, ctx: EvalContext) -> str | None:
        """Why this evaluator does not fit the run (one line), or None when it does.

        A skipped evaluator is recorded in the results with its reason; it is never an error."""
        return None

    def skip_inputs(self, options: EvalOptions, data_name: str, explicit: bool, device_type: str) -> dict[str, Any]:
        """What this evaluator's skip decision depends on besides its settings (which its file name already
        hashes): cheap to compute, no model needed. A stored skip is retried only when this differs from what
        was stored with it."""
        return {"explicit": explicit, "device": device_type}

    def artefacts(self, options: EvalOptions) -> tuple[str, ...]:
        """Files (names in the run folder) that these options ask for besides the rows, returned by `evaluate`
        as artefacts; a stored evaluation without them is recomputed."""
        return ()

    def check(self, options: EvalOptions, data: TextData, results_dir: Path) -> None:
        """Check the user's options against a dataset before any shard starts (raise BenchError on a
        problem the user must fix, e.g. a suite file that does not parse)."""

    def evaluate(self, ctx: EvalContext) -> Evaluation | list[dict[str, Any]]:
        """An `Evaluation`: tidy records (each has `split`, `metric`, `value`, `n` and any extra scalar columns)
        and the artefacts the store writes into the run folder. A plain list of records is accepted too (an
        evaluation without artefacts, as third-party plugin evaluators return)."""
        raise NotImplementedError

    def settings(self, options: EvalOptions) -> dict[str, Any]:
        """The settings that identify this evaluator's results (its version and relevant options)."""
        return {"evaluator": self.name, "version": self.version, **options.subset(self.option_names)}

    def settings_hash(self, options: EvalOptions) -> str:
        """Short hash of `settings` (names the stored evaluation file)."""
        return hash_settings(self.settings(options))


def hash_settings(settings: dict[str, Any]) -> str:
    """Short hash of an evaluator's settings dict."""
    return hashlib.sha256(settings_text(settings).encode()).hexdigest()[:8]


