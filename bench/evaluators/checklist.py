"""CheckList-style behavioural tests (after Ribeiro et al. 2020): MFT, INV and DIR cases, scored per test,
per capability and overall.

The cases come from a suite file (`options.checklist_suite`, see checklist_suite.py), run *instead of* the
built-in ones (a suite is a complete, deliberate test set; mixing in generated cases would make its numbers
depend on the dataset's test split), or else from the built-in generators (checklist_builtin.py).

Scoring (`score_case`, with the rules of checklist_semantics.py; the defaults first, each knob after):
- MFT: fails when the prediction for ANY of its texts is not an accepted label; no accepted label (null
  label) = not scorable. (As CheckList's MFT with Expect.eq and agg_fn "all".)
- INV: fails when any perturbation's predicted label differs from the prediction for `texts[0]`;
  `checklist_inv_tolerance` t > 0: a changed prediction still passes when the probability of the original
  prediction's label moved by at most t (CheckList's Expect.inv; its INV tests use t = 0.1).
- DIR: fails when the score drops by more than `checklist_dir_tolerance` (0.1) from `texts[0]` to any
  perturbation (a drop of exactly the tolerance passes; 1e-6 of slack absorbs float32 rounding); null label
  = not scorable. The score (`checklist_dir_score`): "side", the summed probability of the accepted labels;
  "margin", that minus the opposite sentiment side's (CheckList's "add positive/negative phrases" tests);
  "monotonic", "side" with cases whose original side probability is at most the tolerance (they cannot
  fail) not scorable (CheckList's Expect.monotonic).
- `checklist_neutral_band` LOW,HIGH: a binary sentiment set is scored as negative / neutral / positive, the
  prediction "neutral" when LOW < P(positive) < HIGH (CheckList's tutorial wrapper for binary models).
A case with several perturbations fails when any fails (CheckList's agg_fn "all_except_first").

Rows (split "checklist"; every row has test, capability and type, "" where they do not apply):
- `failure_rate`: failed / scored cases, n = scored cases; left out where nothing is scorable;
- `cases`: number of cases (value = n); `not_scorable`: cases without an expectation, only where nonzero;
- `sampled_texts` (built-in suite only, overall): test texts the generators were applied to.
Each comes per test (test, capability and type set), per capability (test and type "") and overall (all "").
The overall rows' `note` says why DIR/MFT tests are missing on a non-sentiment set, or that a neutral band
was ignored ("" otherwise).
Failure rates per capability and overall are over all scored cases (case-weighted, not a mean of test
rates). The artefacts: per-case outcomes (`checklist_cases.jsonl.gz`) and the suite's provenance (source,
sample size, notes; `checklist.json`), written by the store into the run folder.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import numpy as np

from bench.data.loading import TextData
from bench.errors import BenchError
from bench.evaluators.base import Classifier, EvalContext, EvalOptions, Evaluation, Evaluator
from bench.evaluators.checklist_builtin import builtin_suite, sample_indices
from bench.evaluators.checklist_semantics import FLOAT_SLACK, KNOBS, Semantics, band_view, opposite, semantics
from bench.evaluators.checklist_suite import Case, load_suite
from bench.registry import EVALUATORS
from bench.results import store

log = logging.getLogger(__name__)
_said: set[tuple[str, str]] = set()  # (dataset, note) already logged by this process

SPLIT = "checklist"
CASES_FILE = store.CHECKLIST_CASES
INFO_FILE = store.CHECKLIST_INFO


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


def _inv_outcome(table: np.ndarray, predicted: np.ndarray, tolerance: float) -> str:
    """INV: every perturbation keeps the original prediction, or (tolerance > 0) moves the probability of
    the original prediction's label by at most `tolerance`."""
    original = predicted[0]
    for row, label in zip(table[1:], predicted[1:]):
        if label != original and not (tolerance > 0 and
                                      abs(row[original] - table[0, original]) <= tolerance + FLOAT_SLACK):
            return "failed"
    return "passed"


def score_case(case: Case, probs: dict[str, np.ndarray], label_names: list[str],
               rules: Semantics = Semantics()) -> dict[str, Any]:
    """The outcome record of one case: its predictions and "passed", "failed" or "not_scorable".

    `label_names` name the columns of `probs` (with a neutral band, the binary set's two and "neutral")."""
    table = np.stack([probs[t] for t in case.texts])
    predicted = table.argmax(1)
    names = [label_names[i] for i in predicted]
    side = margin = None
    if case.type == "INV":
        outcome = _inv_outcome(table, predicted, rules.inv_tolerance)
    elif not case.accept:
        outcome = "not_scorable"
    elif case.type == "MFT":
        outcome = "failed" if any(n not in case.accept for n in names) else "passed"
    else:  # DIR
        side = table[:, [label_names.index(a) for a in case.accept]].sum(1)
        score = side
        if rules.dir_score == "margin":
            against = [label_names.index(o) for o in opposite(case.accept, label_names)]
            margin = score = side - table[:, against].sum(1)
        dropped = (score[0] - score[1:]) > rules.dir_tolerance + FLOAT_SLACK
        if rules.dir_score == "monotonic" and side[0] <= rules.dir_tolerance + FLOAT_SLACK:
            outcome = "not_scorable"   # cannot drop by more than the tolerance
        else:
            outcome = "failed" if dropped.any() else "passed"
    record = {"test": case.test, "capability": case.capability, "type": case.type, "case_id": case.case_id,
              "texts": list(case.texts), "label": case.label, "accept": list(case.accept), "predictions": names,
              "accept_prob": None if side is None else [round(float(s), 6) for s in side], "outcome": outcome}
    if margin is not None:
        record["margin"] = [round(float(m), 6) for m in margin]
    return record


def run_suite(classifier: Classifier, cases: list[Case], label_names: list[str],
              rules: Semantics = Semantics()) -> list[dict[str, Any]]:
    """Predict every text of `cases` in one batch and score each case (records as `score_case`).

    `label_names` are the dataset's; with a neutral band that applies to them, the probabilities are
    mapped to the three-class view (`band_view`) before scoring."""
    probs = predict_all(classifier, cases)
    view = rules.view(label_names)
    if view is not None and probs:
        texts = list(probs)
        mapped = band_view(np.stack([probs[t] for t in texts]), label_names, rules.neutral_band)
        probs, label_names = dict(zip(texts, mapped)), view
    return [score_case(case, probs, label_names, rules) for case in cases]


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


@EVALUATORS.register("checklist")
class ChecklistEvaluator(Evaluator):
    """Behavioural tests: a user suite file, or built-in INV (and, for sentiment sets, DIR and MFT) tests."""

    name = "checklist"
    option_names = ("checklist_suite", "checklist_n", *KNOBS)
    version = 2  # 2: the test sample is data.fixed_sample (was its own draw)

    def settings(self, options: EvalOptions) -> dict[str, Any]:
        """Base settings plus the suite file's content hash (an edited suite gives new results); of the
        scoring knobs only those that differ from the defaults (normalised, e.g. the band as [low, high]), so
        evaluations stored before the knobs existed keep their settings hash and are reused."""
        out = super().settings(options)
        for name in KNOBS:
            out.pop(name, None)
        try:
            out.update(semantics(options).settings())
        except BenchError:
            out.update({name: getattr(options, name) for name in KNOBS})  # reported by check() / evaluate()
        path = Path(options.checklist_suite).expanduser() if options.checklist_suite else None
        if path is not None and path.is_file():
            out["checklist_suite_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        return out

    def artefacts(self, options: EvalOptions) -> tuple[str, ...]:
        """The per-case outcomes and the suite's provenance, stored beside the rows."""
        return (CASES_FILE, INFO_FILE)

    def check(self, options: EvalOptions, data: TextData, results_dir: Path) -> None:
        """Before any shard: the scoring knobs are valid, and the suite file exists and parses against the
        dataset's labels (plus "neutral" where a neutral band applies), or checklist_n is positive."""
        labels = semantics(options).view(data.label_names) or data.label_names
        if options.checklist_suite:
            load_suite(Path(options.checklist_suite).expanduser(), labels)
        else:
            sample_indices(len(data.test), options.checklist_n)

    def evaluate(self, ctx: EvalContext) -> Evaluation:
        """Build or load the cases, predict them in one batch: tidy rows, and per-case outcomes and the
        suite's provenance as artefacts."""
        options = ctx.options
        rules = semantics(options)
        view = rules.view(ctx.label_names)
        labels = view or ctx.label_names
        if options.checklist_suite:
            path = Path(options.checklist_suite).expanduser()
            cases = load_suite(path, labels)
            info: dict[str, Any] = {"source": str(path), "notes": []}
        else:
            cases, info = builtin_suite(ctx.data, options.checklist_n, labels)
        if rules.neutral_band is not None and view is None:
            info["notes"].append("checklist_neutral_band ignored: not a binary sentiment label set")
        for note in info["notes"]:
            if (ctx.data.name, note) not in _said:  # once per dataset and process (a sweep's shards share it)
                _said.add((ctx.data.name, note))
                log.info("checklist: %s", note)
        records = run_suite(ctx.classifier, cases, ctx.label_names, rules)
        info.update(cases=len(cases), settings=self.settings(options))
        note = "; ".join(info["notes"])
        rows = summarise(records, note)
        if info.get("source") == "builtin":
            rows.append(_row("sampled_texts", info["sample_size"], info["sample_size"], note=note))
        return Evaluation(rows, {CASES_FILE: records, INFO_FILE: info})
