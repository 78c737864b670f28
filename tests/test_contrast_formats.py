"""Contrast sets in other formats: the default kind mapping (counterfactually-augmented data's
`counterfactual`, `revised`, ...), `--contrast-kinds` to map other kinds, several edited texts per original,
and the settings hash that follows the mapping. Tiny sets are written in each test; the model is a keyword
classifier with hand-computed predictions, or a tiny BERT end to end through the CLI."""

from __future__ import annotations

import gzip
import json

import pytest

from bench.data.loading import load_dataset
from bench.errors import BenchError, SkipEvaluator
from bench.evaluators.base import EvalContext, EvalOptions, hash_settings
from bench.evaluators.contrast import ContrastSets, read_groups, read_pairs
from bench.evaluators.contrast_kinds import DEFAULT_KINDS, canonical_kinds, kind_map, parse_kinds
from scripted import KeywordClassifier
from bench.running.evaluation import evaluation_path
from conftest import FAST, write_jsonl, write_sentiment_set

SENTIMENT = ["negative", "positive"]
KEYWORDS = {"positive": {"good", "great"}, "negative": {"bad", "awful"}}


def row(pair: str, kind: str, text: str, label: str, number: int = 0) -> dict:
    return {"id": f"{pair}-{kind}-{number}", "text": text, "label": label, "pair_id": pair, "kind": kind}


def plain_pairs(original: str = "original", edited: str = "contrast") -> list[dict]:
    """The four pairs of test_evaluation's contrast set with the given kinds: the keyword model gets p0 fully
    right, p1 only the original, p2 only the edit, p3 neither (original 2/4, edited 3/4, consistency 1/4)."""
    pairs = [("a good film", "positive", "a bad film", "negative"),
             ("great fun", "positive", "not great fun", "negative"),
             ("plain but good", "negative", "a good and lively film", "positive"),
             ("awful but good", "positive", "good but awful", "negative")]
    return [r for i, (o, ol, c, cl) in enumerate(pairs)
            for r in (row(f"p{i}", original, o, ol), row(f"p{i}", edited, c, cl))]


def groups_rows() -> list[dict]:
    """Four originals with 2, 2, 1 and 3 edited texts, under several kind spellings. Keyword-model predictions:
    g0 all right; g1 original right, `not great fun` wrong, `awful fun` right; g2 original wrong (`plain but
    good` -> positive), its edit right; g3 all right."""
    return [row("g0", "Original", "a good film", "positive"),
            row("g0", "counterfactual", "a bad film", "negative", 1),
            row("g0", "CF", "an awful film", "negative", 2),
            row("g1", "orig", "great fun", "positive"),
            row("g1", "revised", "not great fun", "negative", 1),
            row("g1", "edited", "awful fun", "negative", 2),
            row("g2", "source", "plain but good", "negative"),
            row("g2", "perturbed", "a good and lively film", "positive", 1),
            row("g3", "factual", "bad", "negative"),
            row("g3", "rev", "good", "positive", 1),
            row("g3", "Counterfactual ", "great", "positive", 2),
            row("g3", "contrast", "good stuff", "positive", 3)]


@pytest.fixture
def sentiment_data(tmp_path):
    folder = tmp_path / "senti"
    rows = [{"text": t, "label": l} for t, l in [("good", "positive"), ("bad", "negative")] * 3]
    write_jsonl(folder / "train.jsonl", rows)
    write_jsonl(folder / "test.jsonl", rows)
    return load_dataset(str(folder))


def context(data, tmp_path, **options) -> EvalContext:
    run_dir = tmp_path / "results" / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    model = KeywordClassifier(SENTIMENT, KEYWORDS, default="negative")
    return EvalContext(model, data, run_dir, tmp_path / "results" / ".cache", 1, EvalOptions(**options), "run",
                       tmp_path / "results")


def metrics(ctx) -> dict[str, tuple[float, int]]:
    return {r["metric"]: (r["value"], r["n"]) for r in ContrastSets().evaluate(ctx).rows}


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


# ----------------------------------------------------------------------------------------------- kind mapping

def test_default_mapping_reads_counterfactual_kinds_as_original_and_contrast(tmp_path, sentiment_data):
    assert {k for k, r in DEFAULT_KINDS.items() if r == "original"} == {"original", "orig", "source", "factual"}
    assert {k for k, r in DEFAULT_KINDS.items() if r == "contrast"} == {
        "contrast", "counterfactual", "cf", "edited", "revised", "perturbed", "rev"}
    write_jsonl(tmp_path / "plain" / "test.jsonl", plain_pairs())
    write_jsonl(tmp_path / "cad" / "test.jsonl", plain_pairs("Factual", "COUNTERFACTUAL"))
    pairs = read_pairs(tmp_path / "cad", "test")
    assert [(o["text"], c["text"]) for o, c in pairs][:2] == [("a good film", "a bad film"),
                                                             ("great fun", "not great fun")]
    expected = {"original_accuracy": (2 / 4, 4), "contrast_accuracy": (3 / 4, 4), "consistency": (1 / 4, 4)}
    for name in ("plain", "cad"):  # the same set under other kinds scores the same, with no extra metric
        assert metrics(context(sentiment_data, tmp_path, contrast_set=str(tmp_path / name))) == expected


def test_unknown_kind_is_one_line_naming_kind_file_line_accepted_kinds_and_flag(tmp_path):
    rows = plain_pairs()
    rows[2]["kind"] = "cad"
    file = tmp_path / "cs" / "test.jsonl"
    file.parent.mkdir()
    file.write_text("\n" + "".join(json.dumps(r) + "\n" for r in rows))  # a blank first line: rows[2] on line 4
    with pytest.raises(BenchError) as info:
        read_groups(tmp_path / "cs", "test")
    message = one_line(str(info.value))
    assert message.startswith(f"line 4 of {file} has kind 'cad'")
    assert "original, orig, source, factual (original text)" in message
    assert "contrast, counterfactual, cf, edited, revised, perturbed, rev (edited text)" in message
    assert message.endswith("map it with --contrast-kinds contrast=cad (or original=cad)")
    assert len(read_groups(tmp_path / "cs", "test", "original=cad")) == 4  # the flag maps it (an original)

    tsv = tmp_path / "set.tsv"  # CSV/TSV sets: their data rows are counted
    tsv.write_text("id\ttext\tlabel\tpair_id\tkind\n1\ta good film\tpositive\tp\toriginal\n"
                   "2\ta bad film\tnegative\tp\tNew\n")
    with pytest.raises(BenchError, match=r"^row 2 of .*set\.tsv has kind 'New'.*--contrast-kinds contrast=new "):
        read_groups(tsv, "test")
    assert [len(edited) for _, edited in read_groups(tsv, "test", "contrast=new")] == [1]


def test_kinds_flag_syntax_and_canonical_form():
    assert parse_kinds("") == {}
    assert parse_kinds("original=orig,contrast=new,contrast=cad") == {"orig": "original", "new": "contrast",
                                                                     "cad": "contrast"}
    assert parse_kinds(" Original = Seed , contrast=CAD,") == {"seed": "original", "cad": "contrast"}
    assert kind_map("original=edited")["edited"] == "original"  # a default kind moved to the other role
    assert kind_map("")["revised"] == "contrast" and "seed" not in kind_map("")
    for bad in ("cad", "edit=cad", "original=", "=cad", "contrast=a=b", "original=x,contrast=X"):
        with pytest.raises(BenchError, match="--contrast-kinds") as info:
            parse_kinds(bad)
        one_line(str(info.value))
    assert canonical_kinds("contrast=counterfactual,original=ORIG") == ""  # repeats the defaults
    assert canonical_kinds(" contrast=CAD , original=seed,contrast=cf") == "contrast=cad,original=seed"


# ----------------------------------------------------------------------------- several edited texts per original

def test_several_edited_texts_per_original_match_hand_computed_metrics(tmp_path, sentiment_data):
    write_jsonl(tmp_path / "cs" / "test.jsonl", groups_rows()[::-1])  # any row order: grouped by pair_id
    ctx = context(sentiment_data, tmp_path, contrast_set=str(tmp_path / "cs"))
    evaluation = ContrastSets().evaluate(ctx)
    found = {r["metric"]: (r["value"], r["n"]) for r in evaluation.rows}
    assert found == {
        "original_accuracy": (pytest.approx(3 / 4), 4),   # g0, g1, g3 right; each original once
        "contrast_accuracy": (pytest.approx(7 / 8), 8),   # 2 + 1 + 1 + 3 of 2 + 2 + 1 + 3 edited texts
        "consistency": (pytest.approx(2 / 4), 4),         # groups with everything right: g0, g3
        "pair_consistency": (pytest.approx(6 / 8), 8),    # pairs both right: g0 2, g1 1, g2 0, g3 3
    }
    assert ctx.classifier.queries == 12  # every text once, in one call
    per_pair = evaluation.artefacts["contrast_predictions.jsonl.gz"]
    assert [p["pair_id"] for p in per_pair] == ["g0"] * 2 + ["g1"] * 2 + ["g2"] + ["g3"] * 3
    assert [p["contrast_predicted"] for p in per_pair[:4]] == ["negative", "negative", "negative", "positive"]
    assert [p["original_predicted"] for p in per_pair[4:6]] == ["positive", "negative"]  # g2 wrong, g3 right
    # read back in file order within a group (the rows were written reversed)
    assert [c["text"] for _, c in read_pairs(tmp_path / "cs", "test")][-3:] == ["good stuff", "great", "good"]


def test_groups_without_an_original_and_unknown_labels_fail_as_before(tmp_path, sentiment_data):
    rows = groups_rows()
    write_jsonl(tmp_path / "orphans" / "test.jsonl", [r for r in rows if r["id"] != "g1-orig-0"])
    with pytest.raises(BenchError, match=r"1 pair\(s\) lack an original or a contrast row \(first: 'g1'\)"):
        read_groups(tmp_path / "orphans", "test")
    write_jsonl(tmp_path / "bare" / "test.jsonl", [r for r in rows if r["pair_id"] != "g2" or r["kind"] == "source"])
    with pytest.raises(BenchError, match=r"lack an original or a contrast row \(first: 'g2'\)"):
        read_groups(tmp_path / "bare", "test")
    write_jsonl(tmp_path / "two" / "test.jsonl", rows + [row("g3", "orig", "good", "positive", 9)])
    with pytest.raises(BenchError, match=r"row 13 of .*: pair 'g3' has two original rows"):
        read_groups(tmp_path / "two", "test")
    write_jsonl(tmp_path / "labels" / "test.jsonl", rows + [row("g3", "cf", "meh", "neutral", 9)])
    ctx = context(sentiment_data, tmp_path, contrast_set=str(tmp_path / "labels"))
    with pytest.raises(SkipEvaluator, match=r"labels \['neutral'\] that the model"):
        ContrastSets().evaluate(ctx)


# ------------------------------------------------------------------------------------------------ settings hash

def test_settings_hash_follows_the_mapping_and_keeps_the_default(tmp_path):
    evaluator = ContrastSets()
    before = {"evaluator": "contrast", "version": 1, "contrast_set": "", "contrast_split": "test"}
    assert evaluator.settings(EvalOptions()) == before  # the settings from before --contrast-kinds existed
    assert evaluator.settings_hash(EvalOptions()) == hash_settings(before) == "90323ae8"
    same = EvalOptions(contrast_kinds="contrast=counterfactual")  # repeats the defaults: reuses the evaluation
    assert evaluator.settings_hash(same) == "90323ae8"
    cad = EvalOptions(contrast_kinds="original=seed,contrast=cad")
    assert evaluator.settings(cad)["contrast_kinds"] == "contrast=cad,original=seed"
    assert evaluator.settings_hash(cad) != "90323ae8"
    assert evaluator.settings_hash(cad) == evaluator.settings_hash(EvalOptions(contrast_kinds="Contrast=CAD, "
                                                                                            "original=seed"))
    assert evaluator.settings_hash(cad) != evaluator.settings_hash(EvalOptions(contrast_kinds="contrast=cad"))
    run_dir = tmp_path / "run"
    assert evaluation_path(run_dir, evaluator, cad) != evaluation_path(run_dir, evaluator, EvalOptions())


# -------------------------------------------------------------------------------------------- CLI end to end

def test_contrast_kinds_through_the_cli(cli, tmp_path, results):
    folder = tmp_path / "senti"
    write_sentiment_set(folder)
    rows = groups_rows()
    for r in rows:  # the set's own kinds: seed (original) and cad (edited)
        r["kind"] = "seed" if r["id"].endswith("-0") else "cad"
    write_jsonl(tmp_path / "cs" / "test.jsonl", rows)
    kinds = ("--contrast-kinds", "original=seed,contrast=cad")
    args = ["--methods", "ce", "--datasets", folder, *FAST]

    for bad in ("seed", "original=seed,edit=cad"):  # before any training, whichever evaluators are chosen
        code, _, err = cli("run", *args, "--contrast-kinds", bad)
        assert code == 2 and one_line(err).startswith(f"error: --contrast-kinds '{bad}': cannot read"), err
    assert not list(results.glob("*/rows.json"))
    code, _, err = cli("run", *args, "--evaluators", "contrast", "--contrast-set", tmp_path / "cs")
    assert code == 2 and "has kind 'seed'" in one_line(err) and "--contrast-kinds" in err
    assert not list(results.glob("*/rows.json"))

    code, _, err = cli("run", *args)
    assert code == 0, err
    (run_dir,) = [p.parent for p in results.glob("*/rows.json")]
    code, out, err = cli("evaluate", run_dir.name, "--evaluators", "contrast", "--contrast-set", tmp_path / "cs", *kinds)
    assert code == 0, err
    assert "pair_consistency" in out
    (stored,) = [json.loads(p.read_text()) for p in (run_dir / "evals").glob("contrast-*.json")]
    assert stored["status"] == "done" and stored["settings"]["contrast_kinds"] == "contrast=cad,original=seed"
    assert {r["metric"]: r["n"] for r in stored["rows"]} == {"original_accuracy": 4, "contrast_accuracy": 8,
                                                           "consistency": 4, "pair_consistency": 8}
    with gzip.open(run_dir / "contrast_predictions.jsonl.gz", "rt") as f:
        assert len(f.readlines()) == 8

    code, _, err = cli("evaluate", run_dir.name, "--evaluators", "contrast", "--contrast-set", tmp_path / "cs",
                       "--contrast-kinds", "Contrast=CAD,original=seed")  # the same mapping: reused
    assert code == 0 and len(list((run_dir / "evals").glob("contrast-*.json"))) == 1, err
    code, _, err = cli("evaluate", run_dir.name, "--evaluators", "contrast", "--contrast-set", tmp_path / "cs",
                       "--contrast-kinds", "original=seed,contrast=cad,contrast=new")  # another: stored beside
    assert code == 0 and len(list((run_dir / "evals").glob("contrast-*.json"))) == 2, err
    code, _, err = cli("evaluate", run_dir.name, "--evaluators", "contrast", "--contrast-kinds", "original")
    assert code == 2 and "cannot read 'original'" in one_line(err)
