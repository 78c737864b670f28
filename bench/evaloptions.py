"""The evaluators' options (`clbench run/evaluate --attack-n ...`) as one frozen value, apart from the evaluators
themselves: the command line builds its flags from these fields without importing every evaluator module
(bench.evaluators imports them all to register them). bench.evaluators.base re-exports every name here."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from bench.errors import BenchError

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
