"""CheckList scoring semantics and the knobs that select CheckList's released-suite behaviour
(bench.evaluators.checklist_semantics): INV tolerance, DIR tolerance and score, neutral band, aggregation of
multi-example cases, and the settings hash. Every probability is set by hand; the classifier returns it as
float32, as real models do (the 1e-6 slack of the tolerances absorbs that rounding)."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from bench.cli.common import add_evaluator_options, eval_options
from bench.data.loading import Split, TextData
from bench.errors import BenchError
from bench.evaluators import checklist, checklist_builtin
from bench.evaluators.base import EvalContext, EvalOptions, hash_settings
from bench.evaluators.checklist import ChecklistEvaluator, run_suite
from bench.evaluators.checklist_semantics import NEUTRAL, Semantics, band_view, opposite, parse_band, semantics
from bench.evaluators.checklist_suite import Case
from scripted import FunctionClassifier

BINARY = ["negative", "positive"]
THREE = ["negative", "neutral", "positive"]
SST5 = ["very negative", "negative", "neutral", "positive", "very positive"]
TOPICS = ["sport", "food", "weather"]
BAND = (1 / 3, 2 / 3)


def table(probs: dict[str, list[float]], label_names: list[str] = BINARY) -> FunctionClassifier:
    return FunctionClassifier(label_names, lambda texts: np.array([probs[t] for t in texts], dtype=np.float64))


def pos(p: float) -> list[float]:
    """Binary probabilities (negative, positive) with P(positive) = p."""
    return [1 - p, p]


def outcomes(cases: list[Case], model, label_names=BINARY, **rules) -> list[str]:
    return [r["outcome"] for r in run_suite(model, cases, label_names, Semantics(**rules))]


def inv(*texts: str) -> Case:
    return Case("t", "c", "INV", "|".join(texts), texts)


def dir_case(*texts: str, label: str = "positive", accept: tuple[str, ...] = ()) -> Case:
    return Case("t", "c", "DIR", "|".join(texts), texts, label, accept)


# ------------------------------------------------------------------------------------------- INV

def test_inv_default_fails_any_flip_and_tolerance_passes_small_flips():
    """CheckList's Expect.inv(0.1): a flip passes when P(original label) moves by at most 0.1."""
    model = table({"o": pos(0.45), "exact": pos(0.55), "beyond": pos(0.5501), "same": pos(0.05),
                   "near": pos(0.52)})
    cases = [inv("o", "exact"), inv("o", "beyond"), inv("o", "same"), inv("o", "near", "exact"),
             inv("o", "near", "beyond")]
    # P(negative) 0.55 -> 0.45 (flip, moved exactly 0.1), -> 0.4499 (moved 0.1001), -> 0.95 (no flip)
    assert outcomes(cases, model) == ["failed", "failed", "passed", "failed", "failed"]
    assert outcomes(cases, model, inv_tolerance=0.1) == ["passed", "failed", "passed", "passed", "failed"]
    assert outcomes(cases, model, inv_tolerance=0.2) == ["passed"] * 5


def test_inv_tolerance_is_on_the_original_label_in_both_directions():
    """Three classes: the original label may gain probability and still be overtaken; |change| counts."""
    model = table({"o": [0.34, 0.33, 0.33], "small": [0.38, 0.42, 0.20], "rise": [0.46, 0.54, 0.0]},
                  THREE)
    cases = [inv("o", "small"), inv("o", "rise")]   # P(negative) 0.34 -> 0.38 (+0.04), -> 0.46 (+0.12)
    assert outcomes(cases, model, THREE) == ["failed", "failed"]
    assert outcomes(cases, model, THREE, inv_tolerance=0.1) == ["passed", "failed"]


# ------------------------------------------------------------------------------------------- DIR

def test_dir_tolerance_knob_moves_the_boundary():
    model = table({"o": pos(0.8), "d20": pos(0.6), "d2001": pos(0.5999), "d10": pos(0.7)})
    cases = [dir_case("o", "d10"), dir_case("o", "d20"), dir_case("o", "d2001"), dir_case("o", "d10", "d2001")]
    assert outcomes(cases, model) == ["passed", "failed", "failed", "failed"]
    assert outcomes(cases, model, dir_tolerance=0.2) == ["passed", "passed", "failed", "failed"]
    assert outcomes(cases, model, dir_tolerance=0.0) == ["failed"] * 4


def test_dir_margin_binary_counts_both_sides():
    """Binary: margin = 2 P(positive) - 1, so a 0.05 drop of P(positive) is a 0.1 drop of the margin."""
    model = table({"o": pos(0.7), "exact": pos(0.65), "beyond": pos(0.6499)})
    cases = [dir_case("o", "exact"), dir_case("o", "beyond"), dir_case("o", "exact", label="negative")]
    assert outcomes(cases, model) == ["passed", "passed", "passed"]
    assert outcomes(cases, model, dir_score="margin") == ["passed", "failed", "passed"]
    records = run_suite(model, cases[:1], BINARY, Semantics(dir_score="margin"))
    assert records[0]["margin"] == pytest.approx([0.4, 0.3])
    assert records[0]["accept_prob"] == pytest.approx([0.7, 0.65])
    assert "margin" not in run_suite(model, cases[:1], BINARY)[0]


def test_dir_margin_with_neutral_ignores_the_neutral_class():
    """CheckList's add-phrase tests: change of P(positive) - P(negative); mass moving to neutral counts only
    through the side it leaves."""
    model = table({"o": [0.1, 0.2, 0.7], "to_neutral": [0.05, 0.4, 0.55], "to_negative": [0.16, 0.2, 0.64],
                   "worse": [0.1, 0.35, 0.55]}, THREE)
    cases = [dir_case("o", "to_neutral"), dir_case("o", "to_negative"), dir_case("o", "worse"),
             dir_case("o", "to_neutral", label="negative")]
    # side P(positive): drops 0.15, 0.06, 0.15; margin 0.6 -> 0.5 (0.1), 0.48 (0.12), 0.45 (0.15);
    # negative expected: P(negative) drops 0.05, margin P(neg) - P(pos) -0.6 -> -0.5 rises
    assert outcomes(cases, model, THREE) == ["failed", "passed", "failed", "passed"]
    assert outcomes(cases, model, THREE, dir_score="margin") == ["passed", "failed", "failed", "passed"]


def test_opposite_side():
    assert opposite(("positive", "very positive"), SST5) == ["very negative", "negative"]
    assert opposite(("negative",), SST5) == ["positive", "very positive"]
    assert opposite(("positive",), THREE) == ["negative"]
    assert opposite(("neutral", "positive"), THREE) == ["negative"]   # mixed: every other label
    assert opposite(("sport",), TOPICS) == ["food", "weather"]


def test_dir_monotonic_leaves_cases_that_cannot_fail_unscored():
    """Expect.monotonic: an original side probability <= tolerance cannot drop by more: filtered (None)."""
    model = table({"low": pos(0.1), "just": pos(0.1001), "zero": pos(0.0), "same": pos(0.1001)})
    cases = [dir_case("low", "zero"), dir_case("just", "zero"), dir_case("just", "same", "zero"),
             dir_case("just", "same")]
    # "side": 0.1 -> 0 drops exactly the tolerance (passes), 0.1001 -> 0 drops more (fails)
    assert outcomes(cases, model) == ["passed", "failed", "failed", "passed"]
    assert outcomes(cases, model, dir_score="monotonic") == ["not_scorable", "failed", "failed", "passed"]
    assert outcomes(cases, model, dir_score="monotonic", dir_tolerance=0.2) == ["not_scorable"] * 4


def test_not_scorable_cases_leave_the_failure_rate_denominator():
    records = run_suite(table({"low": pos(0.05), "up": pos(0.85), "hi": pos(0.9), "down": pos(0.5)}),
                        [dir_case("low", "up"), dir_case("hi", "down"), dir_case("hi", "up")], BINARY,
                        Semantics(dir_score="monotonic"))
    rates = {r["metric"]: (r["value"], r["n"]) for r in checklist.summarise(records) if r["test"] == "t"}
    assert rates == {"failure_rate": (0.5, 2), "cases": (3, 3), "not_scorable": (1, 3)}


# ------------------------------------------------------------------------------------------- neutral band

def test_band_view_follows_checklists_binary_wrapper():
    p = np.array([0.5, 0.6, 0.4, 0.8, 0.1, 1 / 3, 2 / 3])
    out = band_view(np.stack([1 - p, p], 1), BINARY, BAND)   # columns: negative, positive, neutral
    assert out == pytest.approx(np.array([[0, 0, 1], [0, 0.3, 0.7], [0.3, 0, 0.7], [0.2, 0.8, 0],
                                          [0.9, 0.1, 0], [2 / 3, 1 / 3, 0], [1 / 3, 2 / 3, 0]]))
    flipped = band_view(np.stack([p, 1 - p], 1), ["positive", "negative"], BAND)  # label order kept
    assert flipped[1] == pytest.approx([0.3, 0, 0.7]) and flipped[3] == pytest.approx([0.8, 0.2, 0])
    wide = band_view(np.array([[0.3, 0.7], [0.7, 0.3], [0.85, 0.15]]), BINARY, (0.2, 0.9))   # asymmetric band
    assert wide == pytest.approx(np.array([[0, 0.25, 0.75], [1 / 3, 0, 2 / 3], [0.85, 0.15, 0]]))


@pytest.mark.parametrize("p, expected", [
    (0.25, "negative"), (0.25 + 1e-6, NEUTRAL), (0.5, NEUTRAL), (0.75 - 1e-6, NEUTRAL), (0.75, "positive"),
    (0.1, "negative"), (0.9, "positive")])
def test_band_boundaries(p, expected):
    """The band is open: P(positive) exactly at a bound is not neutral (bounds exact in float32 here)."""
    model = table({"x": pos(p)})
    case = Case("t", "c", "MFT", "1", ("x",), "positive")
    record, = run_suite(model, [case], BINARY, Semantics(neutral_band=(0.25, 0.75)))
    assert record["predictions"] == [expected]


def test_band_changes_mft_and_inv_like_a_three_class_model():
    model = table({"pos": pos(0.7), "mild": pos(0.6), "weak": pos(0.4), "strong": pos(0.9)})
    mft = [Case("t", "c", "MFT", "1", ("pos",), "positive"), Case("t", "c", "MFT", "2", ("mild",), "positive"),
           Case("t", "c", "MFT", "3", ("weak",), None, ("positive", NEUTRAL)),   # "not negative"
           Case("t", "c", "MFT", "4", ("strong", "mild"), "positive")]           # every text must pass
    banded = dict(neutral_band=BAND)
    assert outcomes(mft[:2] + mft[3:], model) == ["passed", "passed", "passed"]
    assert outcomes(mft, model, **banded) == ["passed", "failed", "passed", "failed"]
    invs = [inv("pos", "strong"), inv("pos", "mild"), inv("mild", "weak")]
    # banded: positive 0.7 -> 0.9; positive -> neutral with P(positive) 0.7 -> 0.3; neutral 0.7 -> 0.7
    assert outcomes(invs, model) == ["passed", "passed", "failed"]
    assert outcomes(invs, model, **banded) == ["passed", "failed", "passed"]
    assert outcomes(invs, model, inv_tolerance=0.1, **banded) == ["passed", "failed", "passed"]


def test_band_dir_uses_the_mapped_probabilities():
    model = table({"o": pos(0.7), "p6": pos(0.65)})
    case = [dir_case("o", "p6")]                 # P(positive) 0.7 -> 0.65 raw; 0.7 -> 0.45 in the band view
    assert outcomes(case, model) == ["passed"]
    assert outcomes(case, model, neutral_band=BAND) == ["failed"]


def test_band_applies_to_binary_sentiment_sets_only():
    rules = Semantics(neutral_band=BAND)
    assert rules.view(BINARY) == ["negative", "positive", NEUTRAL]
    assert rules.view(THREE) is None and rules.view(SST5) is None and rules.view(TOPICS) is None
    assert rules.view(["spam", "ham"]) is None and Semantics().view(BINARY) is None


def test_band_builtin_not_negative_accepts_neutral():
    data = make_data(BINARY)
    view = Semantics(neutral_band=BAND).view(BINARY)
    plain, _ = checklist_builtin.builtin_suite(data, 3)
    banded, _ = checklist_builtin.builtin_suite(data, 3, view)
    pick = lambda cases: next(c for c in cases if c.test == "negated negative adjectives")  # noqa: E731
    assert (pick(plain).label, pick(plain).accept) == ("positive", ("positive",))
    assert (pick(banded).label, pick(banded).accept) == (None, (NEUTRAL, "positive"))
    assert [c.texts for c in plain] == [c.texts for c in banded]


@pytest.mark.parametrize("text", ["", "  "])
def test_parse_band_empty(text):
    assert parse_band(text) is None


def test_parse_band_values_and_errors():
    assert parse_band("1/3,2/3") == BAND == parse_band(" 0.3333333333333333 , 0.6666666666666666 ")
    assert parse_band("0,1") == (0.0, 1.0)
    for bad in ("0.5,0.7", "0.3,0.5", "0.7,0.3", "0.3", "0.1,0.2,0.9", "a,b", "1/0,0.9", "-0.1,0.9", "0.2,1.1"):
        with pytest.raises(BenchError, match="checklist_neutral_band must be LOW,HIGH"):
            parse_band(bad)


# ------------------------------------------------------------------------------------------- evaluator

PLAIN = ["the train leaves at 9 .", "they walked home ."]


def make_data(label_names: list[str], texts: list[str] = PLAIN) -> TextData:
    split = Split([f"test-{i}" for i in range(len(texts))], list(texts), np.arange(len(texts)) % len(label_names))
    return TextData("t", list(label_names), split, split, split, "test", "test", "fp")


def test_evaluator_with_checklists_semantics_on_a_suite(tmp_path):
    """A binary model scored with CheckList's settings (INV 0.1, margin, band 1/3,2/3), outcomes by hand."""
    suite = tmp_path / "suite.jsonl"
    lines = [
        {"test": "m", "capability": "c", "type": "MFT", "case_id": 1, "texts": ["ok"], "label": "neutral"},
        {"test": "m", "capability": "c", "type": "MFT", "case_id": 2, "texts": ["good"], "label": "neutral"},
        {"test": "i", "capability": "c", "type": "INV", "case_id": 1, "texts": ["good", "fine"]},
        {"test": "d", "capability": "c", "type": "DIR", "case_id": 1, "texts": ["good", "fine"], "label": "positive"},
    ]
    suite.write_text("".join(json.dumps(line) + "\n" for line in lines))
    model = table({"ok": pos(0.55), "good": pos(0.9), "fine": pos(0.85)})
    options = dict(checklist_suite=str(suite), checklist_inv_tolerance=0.1, checklist_dir_score="margin",
                   checklist_neutral_band="1/3,2/3")
    ctx = EvalContext(model, make_data(BINARY), tmp_path / "run", tmp_path / "cache", 1, EvalOptions(**options))
    evaluation = ChecklistEvaluator().evaluate(ctx)
    records = evaluation.artefacts[checklist.CASES_FILE]
    # ok: neutral (pass); good: positive (fail); INV: no flip (pass); DIR margin 0.8 -> 0.7 (drop 0.1: pass)
    assert [r["outcome"] for r in records] == ["passed", "failed", "passed", "passed"]
    assert records[0]["predictions"] == [NEUTRAL]
    assert records[3]["margin"] == pytest.approx([0.8, 0.7])
    settings = evaluation.artefacts[checklist.INFO_FILE]["settings"]
    assert settings["checklist_neutral_band"] == list(BAND) and settings["checklist_dir_score"] == "margin"
    # without the band "neutral" is no label of the set
    with pytest.raises(BenchError, match="unknown label 'neutral'"):
        ChecklistEvaluator().check(EvalOptions(checklist_suite=str(suite)), make_data(BINARY), tmp_path)
    ChecklistEvaluator().check(EvalOptions(**options), make_data(BINARY), tmp_path)


def test_band_on_another_label_set_is_noted_and_ignored(tmp_path):
    model = FunctionClassifier(THREE, lambda texts: np.tile([0.2, 0.3, 0.5], (len(texts), 1)))
    ctx = EvalContext(model, make_data(THREE), tmp_path / "run", tmp_path / "cache", 1,
                      EvalOptions(checklist_n=2, checklist_neutral_band="1/3,2/3"))
    evaluation = ChecklistEvaluator().evaluate(ctx)
    assert "checklist_neutral_band ignored" in evaluation.artefacts[checklist.INFO_FILE]["notes"][-1]
    overall = [r for r in evaluation.rows if (r["test"], r["capability"]) == ("", "")]
    assert all("checklist_neutral_band ignored" in r["note"] for r in overall)


# ------------------------------------------------------------------------------------------- settings

OLD_DEFAULT_SETTINGS = {"evaluator": "checklist", "version": 2, "checklist_suite": "", "checklist_n": 500}


def test_default_settings_and_hash_are_unchanged():
    evaluator = ChecklistEvaluator()
    assert evaluator.settings(EvalOptions()) == OLD_DEFAULT_SETTINGS
    assert evaluator.settings_hash(EvalOptions()) == hash_settings(OLD_DEFAULT_SETTINGS) == "2f6af66f"  # README's
    explicit = EvalOptions(checklist_inv_tolerance=0, checklist_dir_tolerance=0.1, checklist_dir_score="side",
                           checklist_neutral_band="")
    assert evaluator.settings_hash(explicit) == evaluator.settings_hash(EvalOptions())


@pytest.mark.parametrize("knob, value, stored", [
    ("checklist_inv_tolerance", 0.1, 0.1), ("checklist_dir_tolerance", 0.2, 0.2),
    ("checklist_dir_score", "margin", "margin"), ("checklist_dir_score", "monotonic", "monotonic"),
    ("checklist_neutral_band", "1/3,2/3", [1 / 3, 2 / 3])])
def test_each_knob_changes_the_settings_hash(knob, value, stored):
    evaluator = ChecklistEvaluator()
    options = EvalOptions(**{knob: value})
    assert evaluator.settings(options) == {**OLD_DEFAULT_SETTINGS, knob: stored}
    assert evaluator.settings_hash(options) != evaluator.settings_hash(EvalOptions())
    assert knob in ChecklistEvaluator.option_names


def test_equivalent_band_spellings_share_a_hash():
    evaluator = ChecklistEvaluator()
    assert (evaluator.settings_hash(EvalOptions(checklist_neutral_band="1/3,2/3"))
            == evaluator.settings_hash(EvalOptions(checklist_neutral_band="0.3333333333333333,0.6666666666666666"))
            != evaluator.settings_hash(EvalOptions(checklist_neutral_band="0.3,0.7")))


@pytest.mark.parametrize("options, message", [
    (dict(checklist_inv_tolerance=-0.1), "checklist_inv_tolerance must be a probability"),
    (dict(checklist_dir_tolerance=1.5), "checklist_dir_tolerance must be a probability"),
    (dict(checklist_dir_score="sides"), "unknown checklist_dir_score 'sides'; use one of side, margin, monotonic"),
    (dict(checklist_neutral_band="2/3,1/3"), "checklist_neutral_band must be LOW,HIGH"),
])
def test_bad_knobs_are_reported_before_any_shard(tmp_path, options, message):
    with pytest.raises(BenchError, match=message):
        ChecklistEvaluator().check(EvalOptions(**options), make_data(BINARY), tmp_path)
    with pytest.raises(BenchError, match=message):
        semantics(EvalOptions(**options))
    evaluator = ChecklistEvaluator()
    assert evaluator.settings_hash(EvalOptions(**options)) != evaluator.settings_hash(EvalOptions())


def test_knobs_from_the_command_line_and_a_config_file():
    parser = argparse.ArgumentParser()
    add_evaluator_options(parser)
    args = parser.parse_args(["--checklist-inv-tolerance", "0.1", "--checklist-dir-score", "margin",
                              "--checklist-neutral-band", "1/3,2/3"])
    options = eval_options(args, {"checklist_dir_tolerance": 0}, None)
    assert (options.checklist_inv_tolerance, options.checklist_dir_score, options.checklist_neutral_band,
            options.checklist_dir_tolerance) == (0.1, "margin", "1/3,2/3", 0.0)
    assert isinstance(options.checklist_dir_tolerance, float)
    assert semantics(options) == Semantics(0.1, 0.0, "margin", BAND)


def test_a_bad_knob_stops_bench_run_even_without_checklist(cli, tiny, results):
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, "--encoder", "tiny-bert", "--evaluators",
                       "none", "--checklist-dir-score", "sides", "--results-dir", results)
    assert code == 2 and "unknown checklist_dir_score 'sides'" in err and len(err.strip().splitlines()) == 1
    assert not results.exists()
