"""CheckList-style behavioural tests (after Ribeiro et al. 2020): MFT, INV and DIR cases, scored per test,
per capability and overall.

Where the cases come from:
- `options.checklist_suite` names a JSON Lines suite file: its cases are run *instead of* the built-in ones
  (a suite is a complete, deliberate test set; mixing in generated cases would make its numbers depend on
  the dataset's test split). Line format, one case per line:
  `{"test", "capability", "type": "MFT"|"INV"|"DIR", "case_id", "texts": [...], "label": name|null}`,
  optionally `"accept": [names]` (the label names that satisfy the expectation; default `[label]`).
  `label` may be left out (= null). INV and DIR need the original and at least one perturbation.
- Otherwise the built-in generators run on a fixed sample of `options.checklist_n` test texts (seed 0 for
  every run, so every method sees identical cases): INV tests on any dataset, plus DIR and MFT tests on
  sentiment sets (label names containing "positive" and "negative").

Scoring (`score_case`):
- MFT: fails when the prediction for ANY of its texts is not an accepted label; no accepted label (null
  label) = not scorable.
- INV: fails when any perturbation's predicted label differs from the prediction for `texts[0]`.
- DIR: fails when the summed probability of the accepted labels drops by more than 0.1 from `texts[0]` to
  any perturbation (a drop of exactly 0.1 passes; 1e-6 of slack absorbs float32 rounding); null label =
  not scorable.

Sentiment sides: the positive side is every label whose lower-cased name contains "positive" (sst5's "very
positive" too), the negative side likewise. Built-in DIR and MFT cases expect a side: `label` is the plain
"positive" / "negative" label when it exists (else the side's first label) and `accept` the whole side.
"Not bad"-style cases expect the positive side on sets made only of the two sides, and anything but the
negative side where other labels (e.g. "neutral") exist; such cases have label null and an explicit accept.

Rows (split "checklist"; every row has test, capability and type, "" where they do not apply):
- `failure_rate`: failed / scored cases, n = scored cases; left out where nothing is scorable;
- `cases`: number of cases (value = n); `not_scorable`: cases without an expectation, only where nonzero;
- `sampled_texts` (built-in suite only, overall): test texts the generators were applied to.
Each comes per test (test, capability and type set), per capability (test and type "") and overall (all "").
The overall rows' `note` says why DIR/MFT tests are missing on a non-sentiment set ("" otherwise).
Failure rates per capability and overall are over all scored cases (case-weighted, not a mean of test
rates). Per-case outcomes go to `checklist_cases.jsonl.gz` in the run folder, the suite's provenance
(source, sample size, notes) to `checklist.json`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from bench.data.loading import FIXED_SAMPLE_SEED, Split, TextData, fixed_sample, numbered_json_lines
from bench.errors import BenchError
from bench.evaluators import lexicons, perturb
from bench.evaluators.base import Classifier, EvalContext, EvalOptions, Evaluator
from bench.registry import EVALUATORS
from bench.results import store
from bench.results.store import write_json, write_jsonl_gz

log = logging.getLogger(__name__)

TYPES = ("MFT", "INV", "DIR")
SPLIT = "checklist"
CASES_FILE = store.CHECKLIST_CASES
INFO_FILE = store.CHECKLIST_INFO
SAMPLE_SEED = 0          # the same perturbations for every run (the sample itself is data.fixed_sample)
PER_TEXT = 3             # perturbations per original text and generator (at most)
DIR_TOLERANCE = 0.1      # allowed drop of the expected side's probability
FLOAT_SLACK = 1e-6       # float32 probabilities: 0.7 - 0.6 must count as a drop of exactly 0.1
REQUIRED = ("test", "capability", "type", "case_id", "texts")

# Built-in INV tests: (test name, capability, generator).
INV_TESTS: tuple[tuple[str, str, perturb.Generator], ...] = (
    ("typos", "Robustness", perturb.typos),
    ("contractions", "Robustness", perturb.contractions),
    ("punctuation", "Robustness", perturb.punctuation),
    ("change first names", "NER", perturb.change_names),
    ("change locations", "NER", perturb.change_locations),
    ("change numbers", "NER", perturb.change_numbers),
)


@dataclass(frozen=True)
class Case:
    """One test case: `texts[0]` is the original (or the only sentence of an MFT case).

    `accept` is the set of label names meeting the expectation (MFT: allowed predictions; DIR: labels whose
    probabilities are summed); it defaults to `(label,)`, and is empty (not scorable) when label is null."""

    test: str
    capability: str
    type: str
    case_id: str
    texts: tuple[str, ...]
    label: str | None = None
    accept: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.accept and self.label is not None:
            object.__setattr__(self, "accept", (self.label,))

    def to_json(self) -> dict[str, Any]:
        """The case as one suite-file line (what `load_suite` reads back)."""
        return {"test": self.test, "capability": self.capability, "type": self.type, "case_id": self.case_id,
                "texts": list(self.texts), "label": self.label, "accept": list(self.accept)}


# ------------------------------------------------------------------------------------------- sentiment

@dataclass(frozen=True)
class Sides:
    """A sentiment label set split into positive side, negative side and the other labels."""

    positive: tuple[str, ...]
    negative: tuple[str, ...]
    others: tuple[str, ...]

    @property
    def plain_positive(self) -> str:
        """The label reported for positive-side cases: "positive" itself when present."""
        return next((l for l in self.positive if l.strip().lower() == "positive"), self.positive[0])

    @property
    def plain_negative(self) -> str:
        """The label reported for negative-side cases: "negative" itself when present."""
        return next((l for l in self.negative if l.strip().lower() == "negative"), self.negative[0])

    @property
    def not_negative(self) -> tuple[str, ...]:
        """What "not bad" may be: the positive side on two-sided sets, anything but negative otherwise."""
        return self.positive if not self.others else (*self.others, *self.positive)


def sentiment_sides(label_names: list[str]) -> Sides | None:
    """The sentiment sides of a label set, or None when it is not a sentiment set.

    A label belongs to the positive (negative) side when its lower-cased name contains "positive"
    ("negative") and not the other word; a sentiment set has at least one label on each side."""
    positive, negative, others = [], [], []
    for name in label_names:
        low = name.lower()
        if "positive" in low and "negative" not in low:
            positive.append(name)
        elif "negative" in low and "positive" not in low:
            negative.append(name)
        else:
            others.append(name)
    if not positive or not negative:
        return None
    return Sides(tuple(positive), tuple(negative), tuple(others))


# ------------------------------------------------------------------------------------------- built-in

def sample_indices(size: int, n: int) -> list[int]:
    """`min(n, size)` positions out of `size` in ascending order: the project's fixed evaluation sample
    (`data.fixed_sample`), so CheckList perturbs texts the attack and representation metrics also use."""
    if n < 1:
        raise BenchError(f"checklist_n must be at least 1 (got {n}); it is how many test texts are perturbed")
    return fixed_sample(size, n)


def _slug(test: str) -> str:
    return test.replace(" ", "_")


def inv_cases(ids: list[str], texts: list[str], seed: int = SAMPLE_SEED) -> list[Case]:
    """INV cases of every built-in generator that applies to each text (original + up to 3 copies)."""
    cases = []
    for test, capability, generator in INV_TESTS:
        for case_id, text in zip(ids, texts):
            copies = generator(text, perturb.text_rng(seed, test, text), PER_TEXT)
            if copies:
                cases.append(Case(test, capability, "INV", f"{_slug(test)}:{case_id}", (text, *copies)))
    return cases


def dir_cases(ids: list[str], texts: list[str], sides: Sides, style: perturb.Style,
              seed: int = SAMPLE_SEED) -> list[Case]:
    """DIR cases: each text with clearly positive (negative) sentences appended must not lose more than
    0.1 of its positive (negative) side probability."""
    cases = []
    for test, phrases, label, accept in (
            ("add positive phrase", lexicons.POSITIVE_PHRASES, sides.plain_positive, sides.positive),
            ("add negative phrase", lexicons.NEGATIVE_PHRASES, sides.plain_negative, sides.negative)):
        for case_id, text in zip(ids, texts):
            chosen = perturb.text_rng(seed, test, text).sample(phrases, PER_TEXT)
            copies = tuple(perturb.append_sentence(text, p, style) for p in chosen)
            cases.append(Case(test, "Vocabulary", "DIR", f"{_slug(test)}:{case_id}", (text, *copies),
                              label, accept))
    return cases


def _templated(test: str, capability: str, template: Callable[[str, str, int], str],
               adjectives: tuple[str, ...], label: str | None, accept: tuple[str, ...],
               style: perturb.Style) -> list[Case]:
    """One MFT case per (noun, adjective): `template(noun, adjective, k)` written in the dataset's style."""
    cases = []
    for i, noun in enumerate(lexicons.NEUTRAL_NOUNS):
        for j, adjective in enumerate(adjectives):
            k = len(cases)
            sentence = perturb.apply_style(template(noun, adjective, i + j), style)
            cases.append(Case(test, capability, "MFT", f"{_slug(test)}:{k}", (sentence,), label, accept))
    return cases


def _plain(noun: str, adjective: str, k: int) -> str:
    return f"The {noun} is {adjective}." if k % 2 == 0 else f"This {noun} was {adjective}."


def _negated(noun: str, adjective: str, k: int) -> str:
    return f"The {noun} is not {adjective}." if k % 2 == 0 else f"This {noun} was not {adjective}."


def _intensified(noun: str, adjective: str, k: int) -> str:
    return f"The {noun} is {lexicons.INTENSIFIERS[k % len(lexicons.INTENSIFIERS)]} {adjective}."


def mft_cases(sides: Sides, style: perturb.Style) -> list[Case]:
    """MFT template cases: plain, intensified and negated positive/negative adjectives about neutral nouns."""
    pos, neg = lexicons.POSITIVE_ADJECTIVES, lexicons.NEGATIVE_ADJECTIVES
    positive = (sides.plain_positive, sides.positive)
    negative = (sides.plain_negative, sides.negative)
    not_negative = (sides.plain_positive if not sides.others else None, sides.not_negative)
    return [
        *_templated("positive adjectives", "Vocabulary", _plain, pos, *positive, style),
        *_templated("negative adjectives", "Vocabulary", _plain, neg, *negative, style),
        *_templated("intensified positive adjectives", "Vocabulary", _intensified, pos, *positive, style),
        *_templated("intensified negative adjectives", "Vocabulary", _intensified, neg, *negative, style),
        *_templated("negated positive adjectives", "Negation", _negated, pos, *negative, style),
        *_templated("negated negative adjectives", "Negation", _negated, neg, *not_negative, style),
    ]


def builtin_suite(data: TextData, n: int) -> tuple[list[Case], dict[str, Any]]:
    """The built-in cases for `data` (INV always; DIR and MFT on sentiment sets) and their provenance."""
    split: Split = data.test
    index = sample_indices(len(split), n)
    ids = [split.ids[i] for i in index]
    texts = [split.texts[i] for i in index]
    style = perturb.detect_style(texts)
    cases = inv_cases(ids, texts)
    sides = sentiment_sides(data.label_names)
    notes = []
    if sides is None:
        notes.append("not a sentiment label set (no labels containing 'positive' and 'negative'): "
                     "INV tests only, no DIR or MFT tests")
    else:
        cases += dir_cases(ids, texts, sides, style) + mft_cases(sides, style)
    info = {"source": "builtin", "sample_seed": FIXED_SAMPLE_SEED, "perturbation_seed": SAMPLE_SEED,
            "sample_size": len(texts), "checklist_n": n, "test_size": len(split), "sentiment": sides is not None,
            "style": {"lower": style.lower, "tokenised": style.tokenised}, "notes": notes}
    return cases, info


# ------------------------------------------------------------------------------------------- suite files

def _line_error(path: Path, number: int, problem: str) -> BenchError:
    return BenchError(f"CheckList suite {path}, line {number}: {problem}")


def parse_case(row: Any, label_names: list[str], path: Path, number: int) -> Case:
    """One validated suite line as a Case; BenchError naming the file, the line and the fix otherwise."""
    if not isinstance(row, dict):
        raise _line_error(path, number, 'not a JSON object; each line must look like {"test": ..., '
                                        '"capability": ..., "type": "MFT", "case_id": ..., "texts": [...], '
                                        '"label": ...}')
    missing = [k for k in REQUIRED if k not in row]
    if missing:
        raise _line_error(path, number, f"missing field(s) {', '.join(missing)}; every case needs "
                                        f"{', '.join(REQUIRED)} (and label, which may be null)")
    kind = str(row["type"]).upper()
    if kind not in TYPES:
        raise _line_error(path, number, f"unknown type {row['type']!r}; use one of {', '.join(TYPES)}")
    for key in ("test", "capability"):
        if not isinstance(row[key], str):
            raise _line_error(path, number, f"{key} must be a string")
    if not row["test"].strip():
        raise _line_error(path, number, "test must not be empty")
    if isinstance(row["case_id"], bool) or not isinstance(row["case_id"], (str, int)):
        raise _line_error(path, number, "case_id must be a string or an integer")
    texts = row["texts"]
    if not isinstance(texts, list) or not all(isinstance(t, str) and t.strip() for t in texts):
        raise _line_error(path, number, "texts must be a list of non-empty strings")
    least = 1 if kind == "MFT" else 2
    if len(texts) < least:
        raise _line_error(path, number, f"a {kind} case needs at least {least} text(s)"
                          + ("" if kind == "MFT" else ": the original, then its perturbations"))
    label = row.get("label")
    accept = row.get("accept") or []
    if not isinstance(accept, list):
        raise _line_error(path, number, "accept must be a list of label names")
    for name in ([label] if label is not None else []) + accept:
        if name not in label_names:
            raise _line_error(path, number, f"unknown label {name!r}; the dataset's labels are: "
                                            f"{', '.join(label_names)}")
    return Case(row["test"], row["capability"], kind, str(row["case_id"]), tuple(texts), label, tuple(accept))


def load_suite(path: Path, label_names: list[str]) -> list[Case]:
    """Every case of a JSON Lines suite file (optionally .gz), validated line by line."""
    path = Path(path)
    if not path.is_file():
        raise BenchError(f"CheckList suite {path} does not exist; give the checklist_suite option an existing "
                         "JSON Lines file, or leave it empty to use the built-in tests")
    cases: list[Case] = []
    seen: dict[tuple[str, str], int] = {}
    try:
        for number, row in numbered_json_lines(path):
            case = parse_case(row, label_names, path, number)
            key = (case.test, case.case_id)
            if key in seen:
                raise _line_error(path, number, f"case_id {case.case_id!r} of test {case.test!r} "
                                                f"repeats line {seen[key]}; case ids must be unique per test")
            seen[key] = number
            cases.append(case)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise BenchError(f"cannot read CheckList suite {path}: {exc.__class__.__name__}: {exc}") from exc
    if not cases:
        raise BenchError(f"CheckList suite {path} has no cases; write one JSON object per line")
    return cases


def write_suite(path: Path, cases: Iterable[Case]) -> None:
    """Write cases as a JSON Lines suite file (gzipped when the name ends in .gz), e.g. to edit the
    built-in suite and run it with checklist_suite."""
    if str(path).endswith(".gz"):
        write_jsonl_gz(Path(path), [c.to_json() for c in cases])
        return
    from bench.results.store import atomic_path

    with atomic_path(Path(path)) as tmp:
        tmp.write_text("".join(json.dumps(c.to_json(), ensure_ascii=False) + "\n" for c in cases),
                       encoding="utf-8")


# ------------------------------------------------------------------------------------------- scoring

def predict_all(classifier: Classifier, cases: list[Case]) -> dict[str, np.ndarray]:
    """Probabilities of every distinct text of `cases`, from one `predict_proba` call."""
    unique = list(dict.fromkeys(t for case in cases for t in case.texts))
    if not unique:
        return {}
    probs = np.asarray(classifier.predict_proba(unique), dtype=np.float64)
    if probs.shape[0] != len(unique):
        raise ValueError(f"predict_proba returned {probs.shape[0]} rows for {len(unique)} texts")
    return dict(zip(unique, probs))


def score_case(case: Case, probs: dict[str, np.ndarray], label_names: list[str]) -> dict[str, Any]:
    """The outcome record of one case: its predictions and "passed", "failed" or "not_scorable"."""
    table = np.stack([probs[t] for t in case.texts])
    predicted = table.argmax(1)
    names = [label_names[i] for i in predicted]
    side = None
    if case.type == "INV":
        outcome = "failed" if any(p != predicted[0] for p in predicted[1:]) else "passed"
    elif not case.accept:
        outcome = "not_scorable"
    elif case.type == "MFT":
        outcome = "failed" if any(n not in case.accept for n in names) else "passed"
    else:  # DIR
        columns = [label_names.index(a) for a in case.accept]
        side = table[:, columns].sum(1)
        dropped = (side[0] - side[1:]) > DIR_TOLERANCE + FLOAT_SLACK
        outcome = "failed" if dropped.any() else "passed"
    return {"test": case.test, "capability": case.capability, "type": case.type, "case_id": case.case_id,
            "texts": list(case.texts), "label": case.label, "accept": list(case.accept), "predictions": names,
            "accept_prob": None if side is None else [round(float(s), 6) for s in side], "outcome": outcome}


def run_suite(classifier: Classifier, cases: list[Case], label_names: list[str]) -> list[dict[str, Any]]:
    """Predict every text of `cases` in one batch and score each case (records as `score_case`)."""
    probs = predict_all(classifier, cases)
    return [score_case(case, probs, label_names) for case in cases]


def _row(metric: str, value: float, n: int, test: str = "", capability: str = "", kind: str = "",
         note: str = "") -> dict:
    return {"split": SPLIT, "metric": metric, "value": float(value), "n": int(n), "test": test,
            "capability": capability, "type": kind, "note": note}


def _group_rows(records: list[dict[str, Any]], test: str, capability: str, kind: str, note: str = "") -> list[dict]:
    """failure_rate (over scored cases, when any), cases, and not_scorable (when nonzero) of a group."""
    failed = sum(r["outcome"] == "failed" for r in records)
    unscorable = sum(r["outcome"] == "not_scorable" for r in records)
    scored = len(records) - unscorable
    rows = []
    if scored:
        rows.append(_row("failure_rate", failed / scored, scored, test, capability, kind, note))
    rows.append(_row("cases", len(records), len(records), test, capability, kind, note))
    if unscorable:
        rows.append(_row("not_scorable", unscorable, len(records), test, capability, kind, note))
    return rows


def summarise(records: list[dict[str, Any]], note: str = "") -> list[dict[str, Any]]:
    """Tidy rows: per test (test, capability, type set), per capability (test and type ""), overall (all "").

    Every row has split, metric, value, n, test, capability, type and note (`note` on the overall rows
    only, "" elsewhere); failure rates are case-weighted."""
    by_test: dict[tuple[str, str, str], list] = {}
    by_capability: dict[str, list] = {}
    for record in records:
        by_test.setdefault((record["test"], record["capability"], record["type"]), []).append(record)
        by_capability.setdefault(record["capability"], []).append(record)
    rows = []
    for (test, capability, kind), group in by_test.items():
        rows += _group_rows(group, test, capability, kind)
    for capability, group in by_capability.items():
        rows += _group_rows(group, "", capability, "")
    return rows + _group_rows(records, "", "", "", note)


# ------------------------------------------------------------------------------------------- evaluator

@EVALUATORS.register("checklist")
class ChecklistEvaluator(Evaluator):
    """Behavioural tests: a user suite file, or built-in INV (and, for sentiment sets, DIR and MFT) tests."""

    name = "checklist"
    option_names = ("checklist_suite", "checklist_n")
    version = 2  # 2: the test sample is data.fixed_sample (was its own draw)

    def settings(self, options: EvalOptions) -> dict[str, Any]:
        """Base settings plus the suite file's content hash (an edited suite gives new results)."""
        out = super().settings(options)
        path = Path(options.checklist_suite).expanduser() if options.checklist_suite else None
        if path is not None and path.is_file():
            out["checklist_suite_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        return out

    def artefacts(self, options: EvalOptions) -> tuple[str, ...]:
        """The per-case outcomes and the suite's provenance, written beside the rows."""
        return (CASES_FILE, INFO_FILE)

    def check(self, options: EvalOptions, data: TextData, results_dir: Path) -> None:
        """Before any shard: the suite file exists and parses against the dataset's labels, or checklist_n
        is positive."""
        if options.checklist_suite:
            load_suite(Path(options.checklist_suite).expanduser(), data.label_names)
        else:
            sample_indices(len(data.test), options.checklist_n)

    def evaluate(self, ctx: EvalContext) -> list[dict[str, Any]]:
        """Build or load the cases, predict them in one batch, store per-case outcomes, return tidy rows."""
        options = ctx.options
        if options.checklist_suite:
            path = Path(options.checklist_suite).expanduser()
            cases = load_suite(path, ctx.label_names)
            info: dict[str, Any] = {"source": str(path), "notes": []}
        else:
            cases, info = builtin_suite(ctx.data, options.checklist_n)
        for note in info["notes"]:
            log.info("checklist: %s", note)
        records = run_suite(ctx.classifier, cases, ctx.label_names)
        info.update(cases=len(cases), settings=self.settings(options))
        write_jsonl_gz(ctx.run_dir / CASES_FILE, records)
        write_json(ctx.run_dir / INFO_FILE, info)
        note = "; ".join(info["notes"])
        rows = summarise(records, note)
        if info.get("source") == "builtin":
            rows.append(_row("sampled_texts", info["sample_size"], info["sample_size"], note=note))
        return rows
