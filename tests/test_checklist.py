"""The CheckList evaluator: scoring rules, metrics, suite files, built-in generators and batching
(bench.evaluators.checklist, checklist_suite, checklist_builtin, perturb)."""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from bench.data.loading import Split, TextData
from bench.errors import BenchError
from bench.evaluators import checklist, checklist_builtin, checklist_suite, lexicons, perturb
from bench.evaluators.base import EvalContext, EvalOptions
from bench.evaluators.checklist import ChecklistEvaluator, run_suite, summarise
from bench.evaluators.checklist_suite import Case, load_suite
from scripted import FunctionClassifier, KeywordClassifier
from bench.registry import EVALUATORS
from conftest import evaluate_and_store

SUITE = Path(__file__).resolve().parent / "fixtures" / "checklist" / "suite.jsonl"
BINARY = ["negative", "positive"]
SST5 = ["very negative", "negative", "neutral", "positive", "very positive"]
TOPICS = ["sport", "food", "weather"]
PLAIN = [  # sentiment-free texts: no keyword of the models below, so INV and DIR cases always pass
    "john went to london on 3 march .",
    "the train to paris leaves at 9 .",
    "it 's a film about mary and her 2 cats .",
    "the house is n't far from the station .",
    "they walked home after the match",
    "sarah moved to berlin in 1999 .",
]
COLUMNS = {"split", "metric", "value", "n", "test", "capability", "type", "note"}


def make_data(label_names: list[str], texts: list[str] = PLAIN) -> TextData:
    """A TextData whose three splits are `texts` (labels cycle through the label names)."""
    split = Split([f"test-{i}" for i in range(len(texts))], list(texts),
                  np.arange(len(texts)) % len(label_names))
    return TextData("t", list(label_names), split, split, split, "test", "test", "fp")


def make_ctx(tmp_path: Path, classifier, label_names: list[str], texts: list[str] = PLAIN, seed: int = 1,
             **options) -> EvalContext:
    return EvalContext(classifier, make_data(label_names, texts), tmp_path / "run", tmp_path / "cache", seed,
                       EvalOptions(**options))


def keyword_model(**extra) -> KeywordClassifier:
    """Positive adjectives vs negative adjectives and "not"; ties go to negative (so "not good" is negative)."""
    return KeywordClassifier(BINARY, {"positive": set(lexicons.POSITIVE_ADJECTIVES),
                                      "negative": set(lexicons.NEGATIVE_ADJECTIVES) | {"not"}},
                             default="negative", **extra)


def table(probs: dict[str, list[float]], label_names: list[str] = BINARY) -> FunctionClassifier:
    """A classifier returning the given probabilities per text."""
    return FunctionClassifier(label_names, lambda texts: np.array([probs[t] for t in texts]))


def rows_by(rows: list[dict], metric: str) -> dict[tuple[str, str, str], tuple[float, int]]:
    return {(r["test"], r["capability"], r["type"]): (r["value"], r["n"]) for r in rows if r["metric"] == metric}


def read_cases(run_dir: Path) -> list[dict]:
    with gzip.open(run_dir / checklist.CASES_FILE, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# ------------------------------------------------------------------------------------------- rules

def outcomes(cases: list[Case], classifier, label_names=BINARY) -> list[str]:
    return [r["outcome"] for r in run_suite(classifier, cases, label_names)]


def test_mft_rules():
    model = table({"good": [0.2, 0.8], "bad": [0.9, 0.1], "meh": [0.5, 0.5]})
    cases = [Case("t", "c", "MFT", "1", ("good",), "positive"),
             Case("t", "c", "MFT", "2", ("bad",), "positive"),
             Case("t", "c", "MFT", "3", ("good", "good", "bad"), "positive"),   # any mispredicted text fails
             Case("t", "c", "MFT", "4", ("good",), None)]                        # null label: not scorable
    assert outcomes(cases, model) == ["passed", "failed", "failed", "not_scorable"]


def test_inv_rule_compares_each_perturbation_with_the_original():
    model = table({"a": [0.6, 0.4], "b": [0.55, 0.45], "c": [0.4, 0.6]})
    cases = [Case("t", "c", "INV", "1", ("a", "b")), Case("t", "c", "INV", "2", ("a", "b", "c")),
             Case("t", "c", "INV", "3", ("c", "a"), "positive")]  # an INV label is ignored
    assert outcomes(cases, model) == ["passed", "failed", "failed"]


def test_dir_tolerance_boundary():
    model = table({"orig": [0.3, 0.7], "exact": [0.4, 0.6], "beyond": [0.4001, 0.5999], "up": [0.1, 0.9]})
    cases = [Case("t", "c", "DIR", "1", ("orig", "exact"), "positive"),           # drop of exactly 0.1 passes
             Case("t", "c", "DIR", "2", ("orig", "beyond"), "positive"),          # 0.1 + 1e-4 fails
             Case("t", "c", "DIR", "3", ("orig", "up", "beyond"), "positive"),    # any perturbation
             Case("t", "c", "DIR", "4", ("orig", "up"), "negative"),              # P(negative) drops 0.2
             Case("t", "c", "DIR", "5", ("orig", "beyond"), None)]                # null label: not scorable
    records = run_suite(model, cases, BINARY)
    assert [r["outcome"] for r in records] == ["passed", "failed", "failed", "failed", "not_scorable"]
    assert records[0]["accept_prob"] == pytest.approx([0.7, 0.6])


def test_dir_on_a_side_sums_its_labels():
    """sst5: mass moving from "very positive" to "positive" keeps the positive side; the label is "positive"."""
    sides = checklist_builtin.sentiment_sides(SST5)
    case = checklist_builtin.dir_cases(["x"], ["fine ."], sides, perturb.Style())[0]
    assert (case.label, case.accept) == ("positive", ("positive", "very positive"))
    probs = {case.texts[0]: [0, 0, 0.1, 0.1, 0.8]}
    probs.update({t: [0, 0.05, 0.1, 0.8, 0.05] for t in case.texts[1:]})  # side 0.9 -> 0.85
    assert outcomes([case], table(probs, SST5), SST5) == ["passed"]
    probs.update({t: [0.3, 0, 0.1, 0.5, 0.1] for t in case.texts[1:]})    # side 0.9 -> 0.6
    assert outcomes([case], table(probs, SST5), SST5) == ["failed"]


# ------------------------------------------------------------------------------------------- metrics

def test_suite_metrics_by_hand(tmp_path):
    """tests/fixtures/checklist/suite.jsonl with a keyword model: every outcome is known (see the comments)."""
    model = KeywordClassifier(BINARY, {"positive": {"good", "great"}, "negative": {"bad", "not"}},
                              default="negative")
    ctx = make_ctx(tmp_path, model, BINARY, checklist_suite=str(SUITE))
    rows = evaluate_and_store(ChecklistEvaluator(), ctx)
    assert all(set(r) == COLUMNS and r["split"] == "checklist" for r in rows)
    # simple: m1 pass, m2 fail, m3 fail ("a bad film"), m4 null. negation: "not good" tie -> negative (pass),
    # "not bad" -> negative (fail). typo: "godo" flips (fail), "flim" does not. add praise: d1 rises, d2 drops
    # from 0.88 to ~0.5 (fail), d3 null.
    assert rows_by(rows, "failure_rate") == {
        ("simple", "Vocabulary", "MFT"): (pytest.approx(2 / 3), 3),
        ("negation", "Negation", "MFT"): (0.5, 2),
        ("typo", "Robustness", "INV"): (0.5, 2),
        ("add praise", "Vocabulary", "DIR"): (0.5, 2),
        ("", "Vocabulary", ""): (pytest.approx(3 / 5), 5),     # case-weighted: 3 failures in 5 scored cases
        ("", "Negation", ""): (0.5, 2),
        ("", "Robustness", ""): (0.5, 2),
        ("", "", ""): (pytest.approx(5 / 9), 9),
    }
    assert rows_by(rows, "not_scorable") == {("simple", "Vocabulary", "MFT"): (1, 4),
                                             ("add praise", "Vocabulary", "DIR"): (1, 3),
                                             ("", "Vocabulary", ""): (2, 7), ("", "", ""): (2, 11)}
    cases = rows_by(rows, "cases")
    assert cases[("", "", "")] == (11, 11) and cases[("typo", "Robustness", "INV")] == (2, 2)
    assert not [r for r in rows if r["metric"] == "sampled_texts"]  # a suite replaces the built-in tests
    stored = read_cases(ctx.run_dir)
    assert [r["case_id"] for r in stored] == ["m1", "m2", "m3", "m4", "n1", "n2", "i1", "i2", "d1", "d2", "d3"]
    assert [r["outcome"] for r in stored][:4] == ["passed", "failed", "failed", "not_scorable"]
    assert stored[2]["predictions"] == ["positive", "positive", "negative"]


def test_builtin_negation_metrics_binary(tmp_path):
    """A keyword model that reads "not" as negative: "not good" is right, every "not bad" is wrong."""
    ctx = make_ctx(tmp_path, keyword_model(), BINARY)
    rows = ChecklistEvaluator().evaluate(ctx).rows
    rates = rows_by(rows, "failure_rate")
    per_test = len(lexicons.NEUTRAL_NOUNS) * len(lexicons.POSITIVE_ADJECTIVES)
    assert rates[("negated negative adjectives", "Negation", "MFT")] == (1.0, per_test)
    assert rates[("negated positive adjectives", "Negation", "MFT")] == (0.0, per_test)
    assert rates[("", "Negation", "")] == (0.5, 2 * per_test)
    for test in ("positive adjectives", "negative adjectives", "intensified positive adjectives",
                 "intensified negative adjectives"):
        assert rates[(test, "Vocabulary", "MFT")] == (0.0, per_test)
    # PLAIN texts hold no keyword: INV and DIR cases all pass, so the only failures are the "not bad" ones.
    total = rates[("", "", "")]
    assert total == (pytest.approx(per_test / total[1]), rows_by(rows, "cases")[("", "", "")][1])
    assert rates[("add positive phrase", "Vocabulary", "DIR")] == (0.0, len(PLAIN))
    assert rows_by(rows, "sampled_texts") == {("", "", ""): (len(PLAIN), len(PLAIN))}
    assert all(set(r) == COLUMNS for r in rows)


def test_builtin_negated_negative_with_neutral(tmp_path):
    """With a neutral label, "not bad" may be neutral or positive (label null, explicit accept)."""
    labels = ["negative", "neutral", "positive"]
    model = KeywordClassifier(labels, {"positive": set(lexicons.POSITIVE_ADJECTIVES),
                                       "negative": set(lexicons.NEGATIVE_ADJECTIVES), "neutral": {"not"}},
                              default="neutral")
    ctx = make_ctx(tmp_path, model, labels)
    rates = rows_by(evaluate_and_store(ChecklistEvaluator(), ctx), "failure_rate")
    assert rates[("negated negative adjectives", "Negation", "MFT")][0] == 0.0   # tie -> neutral: accepted
    assert rates[("negated positive adjectives", "Negation", "MFT")][0] == 1.0   # neutral is not negative
    record = next(r for r in read_cases(ctx.run_dir) if r["test"] == "negated negative adjectives")
    assert record["label"] is None and record["accept"] == ["neutral", "positive"]
    assert record["outcome"] == "passed"


# ------------------------------------------------------------------------------------------- suite files

def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = '{"test": "t", "capability": "c", "type": "MFT", "case_id": "1", "texts": ["x"], "label": "positive"}'


@pytest.mark.parametrize("bad, message", [
    ('{"test": "t", "capability": "c", "type": "MFT"', r"malformed JSON on line 3"),
    ('["a list"]', r"line 3: not a JSON object"),
    ('{"test": "t", "type": "MFT", "texts": ["x"]}', r"line 3: missing field\(s\) capability, case_id"),
    ('{"test": "t", "capability": "c", "type": "XYZ", "case_id": 1, "texts": ["x"]}',
     r"line 3: unknown type 'XYZ'; use one of MFT, INV, DIR"),
    ('{"test": "t", "capability": "c", "type": "INV", "case_id": 1, "texts": ["x"]}',
     r"line 3: a INV case needs at least 2 text\(s\)"),
    ('{"test": "t", "capability": "c", "type": "MFT", "case_id": 1, "texts": "x"}', r"line 3: texts must be"),
    ('{"test": "t", "capability": "c", "type": "MFT", "case_id": 1, "texts": ["x"], "label": "pos"}',
     r"line 3: unknown label 'pos'; the dataset's labels are: negative, positive"),
    ('{"test": "t", "capability": "c", "type": "DIR", "case_id": 2, "texts": ["x", "y"], "accept": ["neg"]}',
     r"line 3: unknown label 'neg'"),
    (GOOD, r"line 3: case_id '1' of test 't' repeats line 1"),
    ('{"test": "t", "capability": "c", "type": "MFT", "case_id": null, "texts": ["x"]}',
     r"line 3: case_id must be a string or an integer"),
])
def test_suite_errors_name_file_and_line(tmp_path, bad, message):
    path = write_lines(tmp_path / "suite.jsonl", [GOOD, "", bad])
    with pytest.raises(BenchError) as error:
        load_suite(path, BINARY)
    assert str(path) in str(error.value) and re.search(message, str(error.value)), str(error.value)


def test_suite_file_must_exist_and_hold_cases(tmp_path):
    ctx = make_ctx(tmp_path, keyword_model(), BINARY, checklist_suite=str(tmp_path / "missing.jsonl"))
    with pytest.raises(BenchError, match="missing.jsonl does not exist"):
        ChecklistEvaluator().evaluate(ctx)
    with pytest.raises(BenchError, match="has no cases"):
        load_suite(write_lines(tmp_path / "empty.jsonl", [""]), BINARY)


def test_suite_parsing_and_round_trip(tmp_path):
    cases = load_suite(SUITE, BINARY)
    assert len(cases) == 11
    assert cases[3] == Case("simple", "Vocabulary", "MFT", "m4", ("whatever",), None, ())
    assert cases[10].label is None and cases[10].accept == ()
    builtin, _ = checklist_builtin.builtin_suite(make_data(SST5), 10)
    for name in ("suite.jsonl", "suite.jsonl.gz"):
        checklist_suite.write_suite(tmp_path / name, builtin)
        assert load_suite(tmp_path / name, SST5) == builtin


# ------------------------------------------------------------------------------------------- built-in suite

def test_sentiment_detection():
    binary = checklist_builtin.sentiment_sides(BINARY)
    assert (binary.positive, binary.negative, binary.others) == (("positive",), ("negative",), ())
    assert binary.not_negative == ("positive",)
    sst5 = checklist_builtin.sentiment_sides(SST5)
    assert sst5.positive == ("positive", "very positive") and sst5.negative == ("very negative", "negative")
    assert (sst5.plain_positive, sst5.plain_negative, sst5.others) == ("positive", "negative", ("neutral",))
    assert sst5.not_negative == ("neutral", "positive", "very positive")
    assert checklist_builtin.sentiment_sides(["Very Positive", "Very Negative"]).plain_positive == "Very Positive"
    assert checklist_builtin.sentiment_sides(TOPICS) is None
    assert checklist_builtin.sentiment_sides(["positive", "other"]) is None


def test_non_sentiment_sets_get_inv_tests_only(tmp_path):
    model = KeywordClassifier(TOPICS, {"sport": {"match"}, "food": {"cats"}})
    ctx = make_ctx(tmp_path, model, TOPICS)
    rows = evaluate_and_store(ChecklistEvaluator(), ctx)
    assert {r["type"] for r in rows} == {"INV", ""}
    info = json.loads((ctx.run_dir / checklist.INFO_FILE).read_text())
    assert info["sentiment"] is False and "INV tests only" in info["notes"][0]
    assert info["sample_size"] == len(PLAIN)
    overall = [r for r in rows if (r["test"], r["capability"]) == ("", "")]
    assert overall and all("INV tests only" in r["note"] for r in overall)
    assert all(r["note"] == "" for r in rows if r not in overall)
    tests = {r["test"] for r in rows} - {""}
    assert tests == {"typos", "contractions", "punctuation", "change first names", "change locations",
                     "change numbers"}


def test_builtin_cases_are_deterministic_and_sampled_with_a_fixed_seed(tmp_path):
    data = make_data(SST5, PLAIN * 5 + [f"text number {i} about rome ." for i in range(40)])
    first, info = checklist_builtin.builtin_suite(data, 12)
    second, _ = checklist_builtin.builtin_suite(data, 12)
    assert first == second and info["sample_size"] == 12
    sampled = {c.texts[0] for c in first if c.type != "MFT"}
    assert len(sampled) <= 12
    # The run's seed does not matter: two runs store identical cases.
    stored = []
    for seed in (1, 2):
        ctx = make_ctx(tmp_path / str(seed), keyword_model(), BINARY, texts=data.test.texts, seed=seed,
                       checklist_n=12)
        evaluate_and_store(ChecklistEvaluator(), ctx)
        stored.append([r["texts"] for r in read_cases(ctx.run_dir)])
    assert stored[0] == stored[1]


def test_different_texts_get_different_perturbations():
    cases = checklist_builtin.inv_cases(["1", "2"], ["a wonderful evening in the garden", "a wonderful evening in the park"])
    typos = [c.texts[1:] for c in cases if c.test == "typos"]
    assert len(typos) == 2
    positions = [{next(i for i, (x, y) in enumerate(zip(c.texts[0], t)) if x != y) for t in c.texts[1:]}
                 for c in cases if c.test == "typos"]
    assert positions[0] != positions[1]


def test_mft_templates_follow_the_dataset_style():
    sides = checklist_builtin.sentiment_sides(BINARY)
    plain = checklist_builtin.mft_cases(sides, perturb.Style())
    lower = checklist_builtin.mft_cases(sides, perturb.detect_style(PLAIN))
    assert plain[0].texts == ("The movie is good.",) and lower[0].texts == ("the movie is good .",)
    negated = [c for c in plain if c.test == "negated positive adjectives"]
    assert negated[0].texts == ("The movie is not good.",) and negated[0].label == "negative"
    assert len({c.case_id for c in plain}) == len(plain)


# ------------------------------------------------------------------------------------------- generators

def rng(text: str = "") -> random.Random:
    return perturb.text_rng(0, "test", text)


def test_typo_swaps_two_adjacent_characters_of_one_word():
    text = "The remarkable performance carried this quiet film"
    copies = perturb.typos(text, rng(text), 3)
    assert len(copies) == 3 and len(set(copies)) == 3
    for copy in copies:
        changed = [(a, b) for a, b in zip(text.split(), copy.split()) if a != b]
        assert len(changed) == 1
        (word, typo), = changed
        assert len(word) >= 4 and sorted(word) == sorted(typo)
        diff = [i for i in range(len(word)) if word[i] != typo[i]]
        assert len(diff) == 2 and diff[1] == diff[0] + 1
    assert perturb.typos(text, rng(text), 3) == copies
    assert perturb.typos("a bb ccc", rng(), 3) == [] and perturb.typos("aaaa", rng(), 3) == []


def test_name_change_swaps_only_the_name():
    text = "Yesterday John said that John's sister liked it."
    copies = perturb.change_names(text, rng(text), 3)
    assert len(copies) == 3
    for copy in copies:
        other = re.match(r"Yesterday (\w+) said that (\w+)'s sister liked it\.$", copy).groups()
        assert other[0] == other[1] != "John" and other[0] in lexicons.MALE_NAMES
    lower = "i met mary and her dog ."
    for copy in perturb.change_names(lower, rng(lower), 3):
        name = re.match(r"i met (\w+) and her dog \.$", copy).group(1)
        assert name != "mary" and name.capitalize() in lexicons.FEMALE_NAMES
    assert perturb.change_names("I met mary.", rng(), 3) == []    # mixed-case text: only "Mary" is a name
    assert perturb.change_names("nothing here", rng(), 3) == []


def test_location_change_keeps_cities_and_countries_apart():
    text = "We flew from New York to Japan."
    copies = perturb.change_locations(text, rng(text), 3)
    assert len(copies) == 3
    for copy in copies:
        city, country = re.match(r"We flew from (.+) to (.+)\.$", copy).groups()
        assert ((city in lexicons.CITIES and country == "Japan")
                or (city == "New York" and country in lexicons.COUNTRIES))
        assert (city, country) != ("New York", "Japan")
    assert all(re.fullmatch(r"she lives in [a-z ]+ \.", c) and "rome" not in c
               for c in perturb.change_locations("she lives in rome .", rng("x"), 3))


def test_number_change_is_nearby_and_skips_non_integers():
    text = "It took 100 days."
    copies = perturb.change_numbers(text, rng(text), 3)
    assert len(copies) == 3
    values = [int(re.search(r"\d+", c).group()) for c in copies]
    assert all(80 <= v <= 120 and v != 100 for v in values)
    assert perturb.change_numbers("rated 3.5 by 1,000 fans on the 1st, agent 007", rng(), 3) == []
    assert all(c in ("it took 0 days", "it took 2 days") for c in perturb.change_numbers("it took 1 days", rng(), 3))


def test_contractions_expand_contract_and_round_trip():
    assert perturb.expand_contractions("It isn't what I'm used to.") == "It is not what I am used to."
    assert perturb.contract_expansions("It is not what I am used to.") == "It isn't what I'm used to."
    text = "They aren't sure it's over, and we can't wait."
    assert perturb.contract_expansions(perturb.expand_contractions(text)) == text
    ptb = "it is n't a film i ca n't watch , it 's long ."
    assert perturb.expand_contractions(ptb) == "it is not a film i cannot watch , it is long ."
    assert perturb.contract_expansions(perturb.expand_contractions(ptb)) == ptb
    assert perturb.contract_expansions("It's not over.".replace("It's", "It is")) == "It isn't over."
    assert perturb.expand_contractions("Isn't it great?") == "Isn't it great?"  # "is not it" is not English
    assert perturb.contractions("It is fine, isn't it?", rng(), 3) == ["It's fine, isn't it?"]
    assert perturb.contractions("Nothing to change here.", rng(), 3) == []
    mixed = "I'm sure it is."
    assert perturb.contractions(mixed, rng(), 3) == ["I am sure it is.", "I'm sure it's."]


def test_punctuation_adds_or_removes_the_final_mark():
    assert perturb.punctuation("A fine film!!", rng(), 3) == ["A fine film"]
    assert perturb.punctuation("a fine film .", rng(), 3) == ["a fine film"]
    assert perturb.punctuation("A fine film", rng(), 3) == ["A fine film."]
    assert perturb.punctuation("it 's fine", rng(), 3) == ["it 's fine ."]
    assert perturb.punctuation("?!", rng(), 3) == []


def test_style_helpers():
    assert perturb.detect_style(PLAIN) == perturb.Style(lower=True, tokenised=True)
    assert perturb.detect_style(["A Normal sentence.", "Another one."]) == perturb.Style()
    assert perturb.append_sentence("the plot", "I loved it.", perturb.Style(True, True)) == "the plot . i loved it ."
    assert perturb.append_sentence("The plot!", "I loved it.", perturb.Style()) == "The plot! I loved it."


# ------------------------------------------------------------------------------------------- evaluator

def test_one_batched_prediction_call(tmp_path):
    calls = []

    def fn(texts):
        calls.append(list(texts))
        return np.tile([0.5, 0.5], (len(texts), 1))

    ctx = make_ctx(tmp_path, FunctionClassifier(BINARY, fn), BINARY)
    evaluate_and_store(ChecklistEvaluator(), ctx)
    assert len(calls) == 1
    stored = read_cases(ctx.run_dir)
    assert len(calls[0]) == len(set(calls[0])) == len({t for r in stored for t in r["texts"]})


def test_registered_and_settings(tmp_path):
    assert EVALUATORS.get("checklist") is ChecklistEvaluator
    evaluator = ChecklistEvaluator()
    base = evaluator.settings(EvalOptions())
    assert base == {"evaluator": "checklist", "version": 2, "checklist_suite": "", "checklist_n": 500}
    suite = tmp_path / "suite.jsonl"
    suite.write_text(SUITE.read_text())
    before = evaluator.settings_hash(EvalOptions(checklist_suite=str(suite)))
    suite.write_text(SUITE.read_text().replace("whatever", "anything"))
    assert evaluator.settings_hash(EvalOptions(checklist_suite=str(suite))) != before
    with pytest.raises(BenchError, match="checklist_n must be at least 1"):
        evaluator.evaluate(make_ctx(tmp_path, keyword_model(), BINARY, checklist_n=0))


def test_summarise_rows_share_columns_and_skip_empty_rates():
    records = [{"test": "t", "capability": "c", "type": "MFT", "outcome": "not_scorable"}]
    rows = summarise(records)
    assert [r["metric"] for r in rows] == ["cases", "not_scorable"] * 3
    assert all(set(r) == COLUMNS for r in rows)
    assert summarise([]) == [{"split": "checklist", "metric": "cases", "value": 0.0, "n": 0, "test": "",
                              "capability": "", "type": "", "note": ""}]


def test_check_validates_options_before_any_shard(tmp_path):
    evaluator, data = ChecklistEvaluator(), make_data(BINARY)
    evaluator.check(EvalOptions(), data, tmp_path)
    evaluator.check(EvalOptions(checklist_suite=str(SUITE)), data, tmp_path)
    with pytest.raises(BenchError, match="unknown label 'positive'; the dataset's labels are: sport, food"):
        evaluator.check(EvalOptions(checklist_suite=str(SUITE)), make_data(TOPICS), tmp_path)
    with pytest.raises(BenchError, match="does not exist"):
        evaluator.check(EvalOptions(checklist_suite=str(tmp_path / "nope.jsonl")), data, tmp_path)
    with pytest.raises(BenchError, match="checklist_n must be at least 1"):
        evaluator.check(EvalOptions(checklist_n=0), data, tmp_path)
    assert evaluator.artefacts(EvalOptions()) == (checklist.CASES_FILE, checklist.INFO_FILE)


def test_the_sample_is_the_one_the_other_evaluators_use():
    from bench.data.loading import fixed_sample
    from bench.evaluators.checklist_builtin import sample_indices

    assert sample_indices(300, 40) == fixed_sample(300, 40) and len(sample_indices(300, 40)) == 40
    assert sample_indices(5, 40) == [0, 1, 2, 3, 4]
    with pytest.raises(BenchError, match="checklist_n must be at least 1"):
        sample_indices(5, 0)
