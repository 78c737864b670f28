"""Which `kind` values of a contrast set mean an original text and which an edited (contrast) text.

Contrast sets mark their rows in several ways: Gardner et al.'s `imdb_contrast` says `original` / `contrast`,
counterfactually-augmented data (Kaushik et al. 2020) says `counterfactual` or `revised`, others `orig` /
`edited` / `perturbed`. `DEFAULT_KINDS` maps the common ones to the two roles (matched case-insensitively,
surrounding spaces ignored); `--contrast-kinds ROLE=KIND[,ROLE=KIND...]` (ROLE `original` or `contrast`) adds
kinds or moves a default kind to the other role, e.g. `--contrast-kinds original=seed,contrast=cad`. Any other
kind is an error naming the row and the flag.

Only the changes a flag makes to `DEFAULT_KINDS` enter the contrast evaluator's settings (`canonical_kinds`), so
the default mapping, and a flag that repeats it, keep the settings hash of a set read without the flag.
"""

from __future__ import annotations

from bench.errors import BenchError

ORIGINAL, CONTRAST = "original", "contrast"
ROLES = (ORIGINAL, CONTRAST)
FLAG = "--contrast-kinds"
DEFAULT_KINDS: dict[str, str] = {
    **dict.fromkeys(("original", "orig", "source", "factual"), ORIGINAL),
    **dict.fromkeys(("contrast", "counterfactual", "cf", "edited", "revised", "perturbed", "rev"), CONTRAST),
}
SYNTAX = f"expected ROLE=KIND[,ROLE=KIND...] with ROLE original or contrast, e.g. {FLAG} original=seed,contrast=cad"


def normal_kind(kind: object) -> str:
    """A row's kind as it is matched: text, lower case, without surrounding spaces."""
    return str(kind).strip().lower()


def parse_kinds(text: str) -> dict[str, str]:
    """The kinds a `--contrast-kinds` value maps, kind -> role: `original=seed,contrast=CAD` -> {'seed':
    'original', 'cad': 'contrast'}; '' -> {}. A BenchError (one line) for anything else: a part without `=`, a
    role other than original/contrast, an empty kind, or one kind given both roles."""
    mapped: dict[str, str] = {}
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        role, equals, kind = part.partition("=")
        role, kind = role.strip().lower(), normal_kind(kind)
        if not equals or role not in ROLES or not kind or "=" in kind:
            raise BenchError(f"{FLAG} {text!r}: cannot read {part!r}; {SYNTAX}")
        if mapped.get(kind, role) != role:
            raise BenchError(f"{FLAG} {text!r}: kind {kind!r} is given both roles (original and contrast); "
                             "give it one")
        mapped[kind] = role
    return mapped


def check_kinds(text: str) -> None:
    """BenchError (one line) when a `--contrast-kinds` value does not parse; run before anything else."""
    parse_kinds(text)


def kind_map(text: str = "") -> dict[str, str]:
    """The kinds in force, kind -> role: `DEFAULT_KINDS` updated by a `--contrast-kinds` value."""
    return {**DEFAULT_KINDS, **parse_kinds(text)}


def canonical_kinds(text: str) -> str:
    """What a `--contrast-kinds` value changes in `DEFAULT_KINDS`, written one way (sorted `role=kind` parts,
    lower case): '' when it changes nothing, so that the settings hash stays that of the default mapping."""
    changed = {kind: role for kind, role in parse_kinds(text).items() if DEFAULT_KINDS.get(kind) != role}
    return ",".join(sorted(f"{role}={kind}" for kind, role in changed.items()))


def describe(mapping: dict[str, str]) -> str:
    """The accepted kinds by role, for error messages: `original, orig (original text); contrast, ... (edited
    text)`."""
    names = {ORIGINAL: "original text", CONTRAST: "edited text"}
    return "; ".join(f"{', '.join(k for k, r in mapping.items() if r == role)} ({names[role]})" for role in ROLES)


def unknown_kind(kind: object, where: str, mapping: dict[str, str]) -> BenchError:
    """The one-line error for a row whose kind is neither an original's nor an edited text's."""
    shown = normal_kind(kind) or "KIND"
    return BenchError(f"{where} has kind {kind!r}, which is not a contrast-set kind; accepted kinds: "
                      f"{describe(mapping)}; map it with {FLAG} contrast={shown} (or original={shown})")
