"""The evaluator interface: an evaluator scores a trained classifier and returns tidy records.

An evaluator never trains, and never writes into the run folder. It gets an `EvalContext` (the classifier
behind a text -> probabilities interface, the run's data, the run's folder to read and the user's evaluator
options) and returns an `Evaluation`: records `{"split", "metric", "value", "n", ...}`, to which the runner adds
the run's identity and provenance, and artefacts (per-example files), which the store writes into the run
folder. Extra scalar keys in a record (e.g. `test`, `capability`, attack parameters) become result columns.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bench.data.bounds import TextBound
from bench.data.loading import TextData
from bench.errors import BenchError
from bench.results.store import settings_text

if TYPE_CHECKING:
    from bench.data.cards import Card


class Unset:
    """The stand-in default of an EvalOptions field: the caller left the option out."""

    def __repr__(self) -> str:
        return "<unset>"


UNSET: Any = Unset()


def option(default: Any) -> Any:
    """An EvalOptions field whose built-in default is `default`."""
    return field(default=UNSET, metadata={"default": default})


@dataclass(frozen=True)
class EvalOptions:
    """User-facing evaluator options (`clbench run/evaluate --attack-n ...`).

    An option left out of the constructor takes its built-in default and is `unset`: on a dataset whose card
    has `eval_defaults`, the card's value replaces it (`for_card`; the demo card: CheckList on 100 texts). An
    option given keeps its value, even one equal to the built-in default (`--checklist-n 500` on the demo set is
    500). The command line gives exactly the options set by a flag or a config file. After
    `dataclasses.replace`, an option stays unset as long as it has its built-in default."""

    attack_n: int = option(500)          # examples attacked by textfooler (first n of the test split, seeded)
    attack_mode: str = option("adaptive")  # adaptive: attack each model | transfer: a fixed adversarial set
    attack_source: str = option("")      # transfer mode: run key (or folder) whose adversarial examples are used
    attack_backend: str = option("builtin")  # builtin | textattack (cross-check; it pins transformers < 5)
    attack_data: str = option("")        # optional folder/file of texts to attack instead of the test split
    word_vectors: str = option("counter-fitted")  # textfooler's synonym space: counter-fitted | glove | a file
    contrast_set: str = option("")       # folder with {validation,test}.jsonl[.gz] contrast pairs; default by card
    contrast_split: str = option("test")
    contrast_kinds: str = option("")     # ROLE=KIND,... added to the default kind mapping (contrast_kinds.py)
    checklist_suite: str = option("")    # JSON Lines suite file; built-in generators when empty
    checklist_n: int = option(500)       # test texts perturbed by the built-in generators
    checklist_inv_tolerance: float = option(0.0)  # INV: a flip passes if P(original label) moves <= this (0.1)
    checklist_dir_tolerance: float = option(0.1)  # DIR: the most the score may drop (CheckList's 0.1 too)
    checklist_dir_score: str = option("side")  # DIR score: side | margin (CheckList's suite) | monotonic
    checklist_neutral_band: str = option("")  # "LOW,HIGH": binary sentiment P(positive) inside = neutral
    tsne: bool = option(False)           # repr: store 2-D t-SNE coordinates of a test sample
    tsne_n: int = option(1000)
    data_dir: str = option("")           # where named resource sets (imdb_contrast, textfooler_mr) are looked up
    unset: frozenset[str] = frozenset()  # the options left out (not an option itself)

    def __post_init__(self) -> None:
        builtin = self.defaults()
        left_out = {name for name in builtin if getattr(self, name) is UNSET}
        for name in left_out:
            object.__setattr__(self, name, builtin[name])
        kept = {name for name in self.unset if name in builtin and getattr(self, name) == builtin[name]}
        object.__setattr__(self, "unset", frozenset(left_out | kept))

    def subset(self, names: tuple[str, ...]) -> dict[str, Any]:
        """The options named in `names` (what one evaluator depends on)."""
        return {n: getattr(self, n) for n in names}

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every option with its built-in default."""
        return {f.name: f.metadata["default"] for f in fields(cls) if "default" in f.metadata}

    @classmethod
    def field_names(cls) -> list[str]:
        """Every option name."""
        return list(cls.defaults())

    def for_card(self, card: Card | None) -> EvalOptions:
        """These options on a dataset with `card` (None: a folder without one): each option left out takes the
        card's `eval_defaults` value; a BenchError for a name that is no option or a value of another type."""
        given = card_defaults(card) if card is not None else {}
        chosen = {name: value for name, value in given.items() if name in self.unset}
        return replace(self, **chosen) if chosen else self


def card_defaults(card: Card) -> dict[str, Any]:
    """A dataset card's `eval_defaults`, checked against the options (a whole number where a float is expected
    becomes a float, so that its settings hash is the float's)."""
    builtin = EvalOptions.defaults()
    checked = {}
    for name, value in card.eval_defaults.items():
        if name not in builtin or name == "data_dir":
            raise BenchError(f"dataset card {card.path or card.name}: eval_defaults names {name!r}, which is no "
                             f"evaluator option; use one of {', '.join(n for n in builtin if n != 'data_dir')}")
        kind = type(builtin[name])
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not kind:
            raise BenchError(f"dataset card {card.path or card.name}: eval_defaults {name}: expected "
                             f"{kind.__name__} (like {builtin[name]!r}), got {value!r}")
        checked[name] = value
    return checked


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


def options_dict(options: EvalOptions) -> dict[str, Any]:
    """Options as a plain dict (the options only, not which were left out)."""
    return options.subset(tuple(options.field_names()))
