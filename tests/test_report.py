"""Tables, statistics, rendering and the `clbench results` / `clbench report` commands on a synthetic results folder
(rows and predictions written directly; nothing is trained)."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.contingency_tables import mcnemar

from bench import api as clbench
from bench.reporting import cellframes, render, stats, tables

from bench.results import store
from bench.errors import BenchError
from bench.cli.report import add_report_parser, add_results_parser, cmd_report, cmd_results
from bench.reporting.resultsview import apply_filters, load_results, mix_warnings

N_ITEMS = 20
LABELS = ("negative", "positive")


def right(n_right: int, n: int = N_ITEMS, start: int = 0) -> list[bool]:
    """n outcomes of which n_right are correct, the correct ones starting at `start` (cyclically)."""
    return [((i - start) % n) < n_right for i in range(n)]


def write_run(results, method, dataset, seed, correct, encoder="minilm", config="c0", commit="aaa",
              version="0.1.0", fingerprint=None, evals=(), method_version=None, extra=None):
    """A finished run folder: predictions, clean rows, and evaluator rows {(evaluator, hash): [records]}; `extra`:
    more columns on every row (e.g. the draw's data_seed)."""
    key = f"{method}_{dataset}_{encoder}_s{seed}_{config}"
    run_dir = results / key
    gold = [LABELS[i % 2] for i in range(len(correct))]
    predicted = [g if ok else LABELS[1 - LABELS.index(g)] for g, ok in zip(gold, correct)]
    store.write_jsonl_gz(run_dir / "predictions.jsonl.gz", [
        {"id": f"test-{i}", "gold": g, "predicted": p, "probabilities": [0.5, 0.5]}
        for i, (g, p) in enumerate(zip(gold, predicted))])
    base = {"run_key": key, "method": method, "dataset": dataset, "encoder": encoder, "seed": seed,
            "config_hash": config, "data_fingerprint": fingerprint or f"fp-{dataset}", "clbench_version": version,
            "git_commit": commit, "device": "cpu", "finished_at": "2026-01-01T00:00:00"}
    if method_version is not None:  # rows of older versions of clbench have no method_version
        base["method_version"] = method_version
    base.update(extra or {})
    accuracy = float(np.mean(correct))
    rows = [{**base, "evaluator": "clean", "split": "test", "metric": "accuracy", "label": "", "value": accuracy,
             "n": len(correct), "wall_seconds": 1.0},
            {**base, "evaluator": "clean", "split": "test", "metric": "macro_f1", "label": "", "value": accuracy,
             "n": len(correct), "wall_seconds": 1.0},
            {**base, "evaluator": "clean", "split": "test", "metric": "f1", "label": "positive", "value": 0.1,
             "n": 10, "wall_seconds": 1.0},
            {**base, "evaluator": "clean", "split": "validation", "metric": "accuracy", "label": "", "value": 0.2,
             "n": 10, "wall_seconds": 1.0}]
    store.write_json(run_dir / store.ROWS, rows)
    for (evaluator, eval_hash), records in dict(evals).items():
        store.write_json(run_dir / store.EVALS / f"{evaluator}-{eval_hash}.json", {"status": "done", "rows": [
            {**base, "evaluator": evaluator, "eval_hash": eval_hash, "label": "", "note": "", **r} for r in records]})
    return run_dir


def contrast(ori, rev, con):
    return [{"split": "contrast-test", "metric": m, "value": v, "n": 100, "contrast_set": "imdb_contrast"}
            for m, v in (("original_accuracy", ori), ("contrast_accuracy", rev), ("consistency", con))]


def attack(under, success, data="test"):
    columns = {"split": "attack", "n": 50, "attack_mode": "adaptive", "attack_data": data, "attack_source": ""}
    return [{**columns, "metric": "clean_accuracy", "value": 0.9},
            {**columns, "metric": "accuracy_under_attack", "value": under},
            {**columns, "metric": "attack_success_rate", "value": success}]


def transfer(acc):
    columns = {"split": "attack", "n": 50, "attack_mode": "transfer", "attack_data": "test", "attack_source": "src"}
    return [{**columns, "metric": "accuracy_under_attack", "value": acc},
            {**columns, "metric": "adversarial_accuracy", "value": acc / 2}]


def checklist(overall):
    row = {"split": "checklist", "type": ""}
    return [{**row, "metric": "failure_rate", "value": 0.9, "n": 10, "test": "typos", "capability": "Robustness"},
            {**row, "metric": "failure_rate", "value": 0.8, "n": 10, "test": "", "capability": "Robustness"},
            {**row, "metric": "failure_rate", "value": overall, "n": 20, "test": "", "capability": ""}]


SKIPPED = [{"split": "", "metric": "skipped", "value": math.nan, "n": 0, "note": "no contrast set for trec"}]


@pytest.fixture
def folder(tmp_path):
    """mr: ce seeds 1-2 (80%, 90%), clld-adaptive seed 1 (95%), cl seed 1 (70%); trec: ce seed 1 (60%),
    supcon seed 1; evaluator rows on mr; on trec a skipped contrast and a repr row (no robustness column)."""
    results = tmp_path / "results"
    write_run(results, "ce", "mr", 1, right(16), evals={
        ("contrast", "c1"): contrast(0.8, 0.6, 0.5), ("textfooler", "t1"): attack(0.2, 0.7),
        ("textfooler", "t2"): attack(0.1, 0.9, data="textfooler_mr"), ("textfooler", "x1"): transfer(0.3),
        ("checklist", "k1"): checklist(0.10)})
    write_run(results, "ce", "mr", 2, right(18), evals={
        ("contrast", "c1"): contrast(0.9, 0.7, 0.6), ("textfooler", "t1"): attack(0.4, 0.5),
        ("checklist", "k1"): checklist(0.20)})
    write_run(results, "clld-adaptive", "mr", 1, right(19), evals={
        ("contrast", "c1"): contrast(0.85, 0.8, 0.7), ("textfooler", "t1"): attack(0.5, 0.4),
        ("checklist", "k1"): checklist(0.05)})
    write_run(results, "cl", "mr", 1, right(14))
    write_run(results, "ce", "trec", 1, right(12), evals={
        ("contrast", "c9"): SKIPPED, ("repr", "r1"): [{"split": "test", "metric": "uniformity", "value": -1.5, "n": 9}]})
    write_run(results, "supcon", "trec", 1, right(13))
    return results


def cells_of(table):
    return {(r["row"], r["column"]): r for r in table.to_dict("records")}


# ----------------------------------------------------------------------------------------------- loading

def test_load_results_reads_runs_and_uses_a_current_table(folder):
    frame = load_results(folder)
    assert set(frame["run_key"].str.split("_").str[0]) == {"ce", "cl", "clld-adaptive", "supcon"}
    assert not (folder / store.TABLE).exists()  # reading never writes into the results folder
    store.gather(folder)
    assert len(load_results(folder)) == len(frame)
    write_run(folder, "cl", "trec", 1, right(10))  # newer than the gathered table: read from the folders
    assert "cl_trec_minilm_s1_c0" in set(load_results(folder)["run_key"])


def test_load_results_without_runs_says_what_to_do(tmp_path):
    with pytest.raises(BenchError, match=r"no finished runs under .*; run `clbench run` first"):
        load_results(tmp_path / "nothing")


def test_filters_select_canonicalise_and_fail_clearly(folder):
    frame = load_results(folder)
    picked = apply_filters(frame, ["method=clld,ce", "dataset=mr", "seed=1"])
    assert set(picked["method"]) == {"ce", "clld-adaptive"} and set(picked["seed"]) == {1}
    with pytest.raises(BenchError, match=r"no column 'colour'; columns: run_key, method"):
        apply_filters(frame, ["colour=red"])
    with pytest.raises(BenchError, match="must look like column=value"):
        apply_filters(frame, ["method"])
    with pytest.raises(BenchError, match="matches no rows.*values of dataset: mr, trec"):
        apply_filters(frame, ["dataset=sst2"])
    with pytest.raises(BenchError, match="unknown method 'nope'"):
        apply_filters(frame, ["method=nope"])


def test_mix_warnings_name_what_is_mixed_and_how_to_separate(folder):
    assert mix_warnings(tables.clean_accuracy(load_results(folder))) == []
    write_run(folder, "ce", "mr", 3, right(17), commit="bbb")
    write_run(folder, "ce", "mr", 1, right(15), config="c7", fingerprint="fp-other")
    warnings = mix_warnings(tables.clean_accuracy(load_results(folder)))
    assert len(warnings) == 3
    commits, configs, data = warnings
    assert "2 git commits (aaa, bbb)" in commits and "mr/minilm/ce/clean" in commits
    assert "--filter git_commit=aaa" in commits
    assert "2 configs (c0, c7)" in configs and "mr/minilm/ce/1" in configs and "--filter config_hash=c0" in configs
    assert "2 data fingerprints (fp-mr, fp-other)" in data and "--filter data_fingerprint=" in data
    settings = mix_warnings(tables.evaluator_rows(load_results(folder)))
    assert any("3 evaluator settings (t1, t2, x1)" in w and "--filter eval_hash=t1" in w for w in settings)


# ----------------------------------------------------------------------------------------------- tables

def test_paper_ii_cells_best_and_missing(folder):
    table = tables.paper_ii(load_results(folder))
    cells = cells_of(table)
    assert list(dict.fromkeys(table["column"])) == ["minilm ce", "minilm cl", "minilm clld-adaptive", "minilm supcon"]
    assert list(dict.fromkeys(table["row"])) == ["mr", "trec"]
    ce = cells[("mr", "minilm ce")]
    assert ce["text"] == "85.00 ± 7.07 (2)" and ce["n"] == 2 and ce["mean"] == pytest.approx(85.0)
    assert cells[("mr", "minilm clld-adaptive")]["text"] == "95.00 (1)"
    assert cells[("mr", "minilm clld-adaptive")]["best"] and not ce["best"]
    assert cells[("trec", "minilm supcon")]["best"] and cells[("trec", "minilm supcon")]["text"] == "65.00 (1)"
    missing = cells[("trec", "minilm clld-adaptive")]
    assert missing["text"] == "—" and missing["n"] == 0 and not missing["best"]
    assert len(table) == 8  # every dataset x column cell, missing ones included


def test_ablation_layout(folder):
    table = tables.ablation(load_results(folder))
    assert list(dict.fromkeys(table["row"])) == ["ce", "cl", "clld-static", "clld-adaptive"]
    assert list(dict.fromkeys(table["column"])) == ["mr", "trec"]
    cells = cells_of(table)
    assert cells[("clld-static", "mr")]["text"] == "—"
    assert cells[("clld-adaptive", "mr")]["best"] and cells[("ce", "trec")]["best"]
    assert "supcon" not in set(table["row"]) and "encoder minilm" in table.attrs["title"]


def test_robustness_columns_from_evaluator_rows(folder):
    table = tables.robustness(load_results(folder))
    assert list(dict.fromkeys(table["row"])) == ["ce", "clld-adaptive"]  # per dataset/encoder; trec has none
    assert list(dict.fromkeys(table["column"])) == [
        "Contrast Ori", "Contrast Rev", "Contrast Con",
        "TF acc under attack [attack_data=test]", "TF success rate [attack_data=test]",
        "TF acc under attack [attack_data=textfooler_mr]", "TF success rate [attack_data=textfooler_mr]",
        "TF transfer acc", "TF transfer adv-only acc", "CheckList failure rate"]
    cells = cells_of(table)
    assert cells[("ce", "Contrast Ori")]["text"] == "85.00 ± 7.07 (2)"
    assert cells[("ce", "TF acc under attack [attack_data=test]")]["text"] == "30.00 ± 14.14 (2)"
    assert cells[("ce", "TF acc under attack [attack_data=textfooler_mr]")]["text"] == "10.00 (1)"
    assert cells[("clld-adaptive", "TF transfer acc")]["text"] == "—"
    assert cells[("ce", "CheckList failure rate")]["text"] == "15.00 ± 7.07 (2)"  # overall rows only
    assert cells[("clld-adaptive", "CheckList failure rate")]["best"]             # lower is better
    assert cells[("clld-adaptive", "TF success rate [attack_data=test]")]["best"]
    assert cells[("clld-adaptive", "Contrast Rev")]["best"]
    notes = "\n".join(table.attrs["notes"])
    assert "contrast skipped on trec (ce): no contrast set for trec" in notes
    assert "textfooler t2: attack_mode=adaptive, attack_data=textfooler_mr" in notes


def test_robustness_tells_evaluator_versions_apart(folder):
    write_run(folder, "cl", "mr", 1, right(14), evals={("checklist", "k2"): checklist(0.30)})
    for run, key, version in (("ce_mr_minilm_s1_c0", "k1", 1), ("cl_mr_minilm_s1_c0", "k2", 2)):
        path = folder / run / store.EVALS / f"checklist-{key}.json"  # as stored: settings beside the rows
        stored = store.read_json(path)
        store.write_json(path, {**stored, "settings": {"evaluator": "checklist", "version": version}})
    rows = store.run_rows(folder / "ce_mr_minilm_s1_c0")
    assert {r.get("eval_version") for r in rows if r["evaluator"] == "checklist"} == {1}
    assert all("eval_version" not in r for r in rows if r["evaluator"] != "checklist")  # no stored settings
    table = tables.robustness(load_results(folder))
    cells = cells_of(table)
    assert cells[("cl", "CheckList failure rate [eval_version=2]")]["text"] == "30.00 (1)"
    assert cells[("ce", "CheckList failure rate [eval_version=1]")]["text"] == "15.00 ± 7.07 (2)"  # hash k1
    assert cells[("cl", "CheckList failure rate [eval_version=1]")]["text"] == "—"  # versions never averaged
    assert "checklist k2: eval_version=2" in table.attrs["notes"]


def test_robustness_without_evaluator_rows_is_an_error(folder):
    with pytest.raises(BenchError, match="clbench evaluate"):
        tables.robustness(apply_filters(load_results(folder), ["dataset=trec"]))


def test_compare_table_and_unpaired_seed(folder):
    frame = load_results(folder)
    keys = tables.clean_accuracy(frame)["run_key"]
    table = tables.compare(frame, stats.load_run_predictions(folder, keys), "ce", n_resamples=2000)
    cells = cells_of(table)
    assert list(dict.fromkeys(table["row"])) == ["mr minilm cl", "mr minilm clld-adaptive", "trec minilm supcon"]
    assert cells[("mr minilm clld-adaptive", "Δ acc")]["text"] == "+15.00"   # 95% - 80% on seed 1 only
    assert cells[("mr minilm clld-adaptive", "runs")]["text"] == "1 (1 unpaired)"
    assert cells[("mr minilm clld-adaptive", "verdict")]["text"] == "inconclusive"  # one run: never a verdict
    assert cells[("mr minilm clld-adaptive", "runs needed")]["text"] == "≥ 3 (+2)"
    assert "mr/minilm/clld-adaptive: seed 2: ce only, left out" in table.attrs["notes"]
    assert cells[("trec minilm supcon", "Δ acc")]["text"] == "+5.00"
    assert cells[("mr minilm clld-adaptive", "95% CI")]["text"] == "[—, —]"  # no interval over one run
    items = cells[("mr minilm clld-adaptive", "items CI ‡")]  # the secondary, item-level interval
    assert items["low"] <= 15.0 <= items["high"]
    assert cells[("mr minilm clld-adaptive", "McNemar p ‡")]["text"].startswith("s1 ")
    p = [cells[(r, "p")]["mean"] for r in dict.fromkeys(table["row"])]
    q = [cells[(r, "q (BH)")]["mean"] for r in dict.fromkeys(table["row"])]
    assert q == pytest.approx(list(stats.bh_adjust(p)), nan_ok=True)
    table = tables.compare(frame, stats.load_run_predictions(folder, keys), "cl", n_resamples=200)
    assert list(dict.fromkeys(table["row"])) == ["ce", "clld-adaptive"]
    assert "trec/minilm: no cl run, not compared" in table.attrs["notes"]
    with pytest.raises(BenchError, match="baseline 'lcl' has no finished runs"):
        tables.compare(frame, {}, "lcl")


def test_vs_paper_gaps_and_encoder_notes(folder):
    table = tables.vs_paper(load_results(folder))
    cells = cells_of(table)
    row = "mr minilm · clld_table2 bert"
    assert cells[(row, "ours")]["text"] == "ce" and cells[(row, "paper acc")]["text"] == "85.7"
    assert cells[(row, "gap")]["text"] == "-0.70" and cells[(row, "gap")]["mean"] == pytest.approx(-0.7)
    assert cells[(row, "note")]["text"] == "encoders differ: ours minilm, paper BERT"
    assert cells[("mr minilm · clld_table2 bert+clld", "gap")]["text"] == "+8.00"
    assert cells[("trec minilm · clld_table2 textcnn+clld", "ours acc")]["text"] == "—"
    papers = {"mr": {"clld_table2": {"bert": 90.0, "albert": 80.0, "bert+clld": 91.0},
                     "dcl_table1_glue": {"bert+da": 93.2}}}
    frame = load_results(folder)
    frame.loc[frame["dataset"] == "mr", "encoder"] = "bert-base-uncased"
    table = tables.vs_paper(frame, papers)
    assert list(dict.fromkeys(table["row"])) == ["mr bert-base-uncased · clld_table2 bert",
                                                 "mr bert-base-uncased · clld_table2 bert+clld"]
    assert cells_of(table)[("mr bert-base-uncased · clld_table2 bert", "note")]["text"] == \
        "same encoder family (BERT)"
    assert "left out: mr dcl_table1_glue bert+da" in table.attrs["notes"][-1]
    frame = load_results(folder)
    frame["dataset"] = frame["dataset"] + "[n=100]"  # a data regime: the cards' full-data numbers do not compare
    with pytest.raises(BenchError, match=r"no published numbers .* mr\[n=100\], trec\[n=100\]; cards with numbers: "
                       r"mr; the cards' numbers are for the full training sets, so none is comparable with a data "
                       r"regime \(mr\[n=100\]\): compare runs made without --train-size"):
        tables.vs_paper(frame, papers)


# ----------------------------------------------------------------------------------------------- statistics

def test_mcnemar_matches_statsmodels():
    a = np.array([1] * 10 + [1] * 7 + [0] * 2 + [0] * 11, dtype=bool)   # table [[10, 7], [2, 11]]
    b = np.array([1] * 10 + [0] * 7 + [1] * 2 + [0] * 11, dtype=bool)
    result = stats.mcnemar_test(a, b)
    assert (result.both, result.only_a, result.only_b, result.neither) == (10, 7, 2, 11)
    assert result.exact and result.pvalue == pytest.approx(mcnemar([[10, 7], [2, 11]], exact=True).pvalue)
    a = np.array([1] * 30 + [0] * 10, dtype=bool)
    b = np.array([0] * 30 + [1] * 10, dtype=bool)
    result = stats.mcnemar_test(a, b)
    expected = mcnemar([[0, 30], [10, 0]], exact=False, correction=True)
    assert not result.exact and result.pvalue == pytest.approx(expected.pvalue)
    assert result.statistic == pytest.approx(expected.statistic)
    assert stats.mcnemar_test(a, a).pvalue == 1.0


def test_paired_bootstrap_contains_the_difference_and_is_deterministic():
    rng = np.random.default_rng(7)
    per_seed = []
    for _ in range(3):   # the difference is exactly +0.05 in each seed: 150 items won, 50 lost of 2000
        d = np.zeros(2000)
        d[:150], d[150:200] = 1, -1
        per_seed.append(rng.permutation(d))
    first = stats.paired_bootstrap(np.array(per_seed))
    assert first.delta == pytest.approx(0.05) and first.low < 0.05 < first.high
    assert first.n_items == 2000 and first.n_resamples == 10_000 and first.pvalue < 0.001
    assert stats.paired_bootstrap(np.array(per_seed)) == first
    assert stats.paired_bootstrap(np.array(per_seed), seed=1) != first
    null = stats.paired_bootstrap(np.zeros((2, 50)), n_resamples=500)
    assert (null.low, null.high, null.pvalue) == (0.0, 0.0, 1.0)


def test_benjamini_hochberg_matches_hand_values():
    # sorted p 0.01, 0.03, 0.04 -> 0.01*3/1, 0.03*3/2, 0.04*3/3 = 0.03, 0.045, 0.04 -> monotone: 0.03, 0.04, 0.04
    assert list(stats.bh_adjust([0.01, 0.04, 0.03])) == pytest.approx([0.03, 0.04, 0.04])
    q = stats.bh_adjust([0.01, math.nan, 0.04, 0.03])
    assert math.isnan(q[1]) and list(q[[0, 2, 3]]) == pytest.approx([0.03, 0.04, 0.04])


def test_runs_pair_by_draw_and_two_draw_sets_pool_into_one_comparison(tmp_path):
    """Issue 52: data seed 0 with seeds 1-10 and data seed 1 with seeds 1-5 in one folder are 15 pairs (not 10 with
    5 seeds colliding); a run without its partner is counted in the table, not only in a note."""
    results = tmp_path / "results"
    rng = np.random.default_rng(0)
    for data_seed, seeds in ((0, range(1, 11)), (1, range(1, 6))):
        for seed in seeds:
            base = int(rng.integers(55, 65))
            # data seed 0 as the issue-41 archive wrote it (no data_seed column: read as 0); data seed 1 as now
            draw = {"data_seed": data_seed, "val_fraction": 0.1, "data_draw": "per-seed"} if data_seed else \
                {"data_draw": "per-seed"}
            write_run(results, "ce", "mr", seed, right(base, 200), config=f"c{data_seed}", extra=draw)
            write_run(results, "lcl", "mr", seed, right(base + 12, 200, start=3), config=f"l{data_seed}", extra=draw)
    write_run(results, "lcl", "mr", 6, right(70, 200), config="l1",
              extra={"data_seed": 1, "val_fraction": 0.1, "data_draw": "per-seed"})  # no ce on this draw
    frame = load_results(results)
    keys = tables.clean_accuracy(frame)["run_key"]
    table = tables.compare(frame, stats.load_run_predictions(results, keys), "ce", n_resamples=200)
    cells = cells_of(table)
    assert cells[("lcl", "runs")]["text"] == "15 (2 draw sets; 1 unpaired)"
    assert cells[("lcl", "McNemar p ‡")]["text"].startswith("d0 s1 ")
    assert " d1 s5 " in cells[("lcl", "McNemar p ‡")]["text"]
    assert "lcl: data seed 1, seed 6: lcl only, left out" in table.attrs["notes"]
    assert cells[("lcl", "verdict")]["text"] == "better"
    rows = clbench.compare(frame, results_dir=results, bootstrap=200)
    assert rows.loc[0, ["runs", "draw_sets", "unpaired"]].tolist() == [15, 2, 1]
    assert not [w for w in mix_warnings(frame) if "configs" in w]  # another draw is another shard, not a mix


def test_compare_predictions_reports_unpaired_seeds():
    def frame(correct):
        return pd.DataFrame({"id": [f"i{k}" for k in range(len(correct))], "gold": "x",
                             "predicted": ["x" if c else "y" for c in correct], "correct": correct})

    base = {1: frame(right(10)), 2: frame(right(10))}
    other = {1: frame(right(12)), 3: frame(right(15))}
    result = stats.compare_predictions(base, other, n_resamples=200, names=("ce", "cl"))
    assert result.pairs == [1] and result.unpaired == [2, 3]
    assert result.notes == ["seed 2: ce only, left out", "seed 3: cl only, left out"]
    assert result.delta == pytest.approx(0.1)


# ----------------------------------------------------------------------------------------------- rendering

@pytest.fixture
def small():
    cells = [cellframes.value_cell("a_1", "x", [0.5, 0.7]), cellframes.value_cell("a_1", "y", [0.9]),
             cellframes.value_cell("b", "x", [0.4])]
    cellframes.mark_best(cells, lambda c: c["column"])
    return cellframes.make_table(cells, "Acc 50% & more", "data", ["a note_1"])


def test_markdown_exact(small):
    assert render.to_markdown(small) == (
        "### Acc 50% & more\n"
        "\n"
        "| data | x | y |\n"
        "| :--- | ---: | ---: |\n"
        "| a_1 | **60.00 ± 14.14 (2)** | **90.00 (1)** |\n"
        "| b | 40.00 (1) | — |\n"
        "\n"
        "- a note_1\n")


def test_latex_exact_with_escaping(small):
    assert render.to_latex(small) == (
        "\\begin{table}[ht]\n"
        "\\centering\n"
        "\\caption{Acc 50\\% \\& more}\n"
        "\\begin{tabular}{lrr}\n"
        "\\toprule\n"
        "data & x & y \\\\\n"
        "\\midrule\n"
        "a\\_1 & \\textbf{60.00 $\\pm$ 14.14 (2)} & \\textbf{90.00 (1)} \\\\\n"
        "b & 40.00 (1) & --- \\\\\n"
        "\\bottomrule\n"
        "\\end{tabular}\n"
        "\\par\\smallskip\n"
        "{\\footnotesize\n"
        "a note\\_1\\par\n"
        "}\n"
        "\\end{table}\n")
    assert render.latex_escape("a_b 5% & c#") == "a\\_b 5\\% \\& c\\#"


def test_csv_exact(small):
    assert render.to_csv(small) == (
        "row,column,mean,std,n,text,best,note\n"
        "a_1,x,60,14.1421,2,60.00 ± 14.14 (2),True,\n"
        "a_1,y,90,,1,90.00 (1),True,\n"
        "b,x,40,,1,40.00 (1),False,\n")


def test_report_paths_and_atomic_write(small, tmp_path):
    assert render.report_path(tmp_path, "paper-ii", "latex").name == "paper-ii.tex"
    path = render.report_path(tmp_path, "ablation", "md", ["method=ce,clld", "dataset=mr"])
    assert path.name == "ablation-dataset-mr_method-ce+clld.md"
    written = render.write_report(small, "ablation", "csv", tmp_path / "reports", ["dataset=mr"])
    assert written == tmp_path / "reports" / "ablation-dataset-mr.csv"
    assert written.read_text(encoding="utf-8") == render.to_csv(small)
    assert [p.name for p in written.parent.iterdir()] == [written.name]


# ----------------------------------------------------------------------------------------------- commands

@pytest.fixture
def bench(capsys):
    """Run `results` / `report` through the argparse wiring of bench.cli.report; (code, stdout, stderr)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true")
    parser = argparse.ArgumentParser(prog="bench", parents=[common])
    sub = parser.add_subparsers(dest="command")
    add_results_parser(sub, common)
    add_report_parser(sub, common)

    def run(*argv):
        args = parser.parse_args([str(a) for a in argv])
        code = {"results": cmd_results, "report": cmd_report}[args.command](args)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_cli_report_writes_files(bench, folder, tmp_path):
    reports = tmp_path / "reports"
    code, out, err = bench("report", "--results-dir", folder, "--reports-dir", reports)
    assert code == 0 and "| mr | 85.00 ± 7.07 (2) |" in out
    assert (reports / "paper-ii.md").read_text(encoding="utf-8") == out
    assert f"wrote {reports / 'paper-ii.md'}" in err
    code, out, err = bench("report", "--table", "ablation", "--format", "latex", "--filter", "dataset=mr",
                           "--results-dir", folder, "--reports-dir", reports)
    assert code == 0 and "\\toprule" in out and (reports / "ablation-dataset-mr.tex").is_file()
    code, out, err = bench("report", "--table", "compare", "--bootstrap", "300", "--results-dir", folder,
                           "--reports-dir", reports)
    assert code == 0 and "Paired comparison with ce" in out and (reports / "compare.md").is_file()
    code, out, err = bench("report", "--table", "robustness", "--vs-paper", "--format", "csv",
                           "--results-dir", folder, "--reports-dir", reports)
    assert code == 0 and (reports / "robustness.csv").is_file() and (reports / "vs-paper.csv").is_file()
    assert err.index("warning: 3 evaluator settings") < err.index("wrote")  # warnings come first
    code, out, err = bench("report", "--table", "compare", "--baseline", "clld", "--bootstrap", "300",
                           "--results-dir", folder, "--reports-dir", reports)
    assert code == 0 and (reports / "compare-vs-clld-adaptive.md").is_file()


def test_cli_report_errors_are_bench_errors(bench, folder, tmp_path):
    with pytest.raises(BenchError, match="no column 'colour'"):
        bench("report", "--filter", "colour=red", "--results-dir", folder)
    with pytest.raises(BenchError, match="no finished runs"):
        bench("report", "--results-dir", tmp_path / "empty")
    with pytest.raises(BenchError, match="--bootstrap must be >= 1"):
        bench("report", "--table", "compare", "--bootstrap", "0", "--results-dir", folder)


def test_cli_results_prints_and_exports(bench, folder, tmp_path, monkeypatch):
    code, out, _ = bench("results", "--results-dir", folder, "--filter", "evaluator=contrast", "--long")
    assert code == 0 and "contrast_accuracy" in out and "skipped" in out and "no contrast set for trec" in out
    assert "nan" not in out.lower()   # a skip marker shows no number
    target = tmp_path / "out" / "rows.csv"
    code, _, err = bench("results", "--results-dir", folder, "--export", "csv", "--output", target)
    assert code == 0 and f"to {target}" in err
    exported = pd.read_csv(target)
    assert len(exported) == len(load_results(folder))
    assert {"run_key", "method", "metric", "value", "git_commit"} <= set(exported.columns)
    monkeypatch.chdir(tmp_path)
    code, _, _ = bench("results", "--results-dir", folder, "--export", "parquet", "--filter", "method=ce")
    assert code == 0 and set(pd.read_parquet(tmp_path / "reports" / "results-method-ce.parquet")["method"]) == {"ce"}
    with pytest.raises(BenchError, match="cannot tell the format"):
        bench("results", "--results-dir", folder, "--output", tmp_path / "rows.txt")


def test_mix_warnings_name_method_versions_old_rows_being_version_1(folder):
    write_run(folder, "ce", "mr", 3, right(17), config="c9", method_version=2)
    frame = load_results(folder)
    assert set(frame["method_version"]) == {1, 2}  # rows without the column read as version 1
    warnings = mix_warnings(tables.clean_accuracy(frame))
    assert any("2 method versions (1, 2)" in w and "mr/minilm/ce" in w and "--filter method_version=1" in w
               for w in warnings)
    assert set(apply_filters(frame, ["method_version=2"])["run_key"]) == {"ce_mr_minilm_s3_c9"}


def test_mix_warnings_shorten_commits_and_long_lists():
    from bench.reporting.resultsview import short_value

    commit = "3a2a51ef1b63a2b2d3bc775849386b8b4de2cf13"
    assert short_value(commit) == "3a2a51ef1b" and short_value(commit + "+dirty") == "3a2a51ef1b+dirty"
    assert short_value("0.3.0") == "0.3.0" and short_value("c7") == "c7"


def test_compare_verdicts_count_runs(tmp_path):
    """ce at 50-62% over 4 seeds; supcon 25 points above it on every seed (better); cl the same items as ce
    (100 items: inconclusive, more items needed); lcl ±10 points run to run (inconclusive, with runs needed); dcl up on 2 seeds only."""
    results = tmp_path / "results"
    n = 100
    for seed, base in zip((1, 2, 3, 4), (50, 56, 60, 62)):
        write_run(results, "ce", "mr", seed, right(base, n))
        write_run(results, "supcon", "mr", seed, right(base + 25, n))
        write_run(results, "cl", "mr", seed, right(base, n))
        write_run(results, "lcl", "mr", seed, right(base + (10 if seed % 2 else -8), n))
        if seed <= 2:
            write_run(results, "dcl", "mr", seed, right(base + 20, n))
    frame = load_results(results)
    keys = tables.clean_accuracy(frame)["run_key"]
    table = tables.compare(frame, stats.load_run_predictions(results, keys), "ce", n_resamples=200)
    cells = cells_of(table)
    assert cells[("supcon", "verdict")]["text"] == "better" and cells[("supcon", "runs")]["text"] == "4"
    # equal per-run differences are no proof of no spread: the interval is over runs and test items
    assert cells[("supcon", "runs-only CI ‡")]["text"] == "[—, —]"
    assert 0 < cells[("supcon", "95% CI")]["low"] < 25 < cells[("supcon", "95% CI")]["high"]
    # the same items as ce on every run, but 100 test items cannot show a gap under 3.6 points: never equivalent
    assert cells[("cl", "verdict")]["text"] == "inconclusive"
    assert cells[("cl", "runs needed")]["text"] == "more test items, not runs"
    assert cells[("lcl", "verdict")]["text"] == "inconclusive" and cells[("lcl", "runs needed")]["text"].startswith("≈")
    assert cells[("dcl", "verdict")]["text"] == "inconclusive"  # +20 on both runs: 2 runs are never a verdict
    assert cells[("dcl", "runs needed")]["text"].startswith("≈ 3 (3-")  # at least 3, and a range
    p = [cells[(r, "p")]["mean"] for r in dict.fromkeys(table["row"])]
    q = [cells[(r, "q (BH)")]["mean"] for r in dict.fromkeys(table["row"])]
    assert q == pytest.approx(list(stats.bh_adjust(p)), nan_ok=True)
    assert cells[("supcon", "items CI ‡")]["low"] > 0  # the secondary columns are still there
    notes = "\n".join(table.attrs["notes"])
    assert "secondary (‡), never deciding the verdict" in notes and "the test items held fixed" in notes


def test_a_one_seed_compare_table_has_no_benjamini_hochberg_note(tmp_path):
    """One seed a method: no comparison has a p-value (a Student t over runs needs 2 or more paired runs), so
    Benjamini-Hochberg has nothing to adjust: the notes say so instead of "over the 0 comparisons"; with a second
    seed for one method the note counts the comparisons that have a p-value."""
    results = tmp_path / "results"
    for method, n_right in (("ce", 12), ("supcon", 15), ("cl", 13)):
        write_run(results, method, "mr", 1, right(n_right))

    def notes() -> str:
        frame = load_results(results)
        keys = tables.clean_accuracy(frame)["run_key"]
        table = tables.compare(frame, stats.load_run_predictions(results, keys), "ce", n_resamples=50)
        return "\n".join(table.attrs["notes"])

    one_seed = notes()
    assert "0 comparisons" not in one_seed and "Benjamini-Hochberg over" not in one_seed
    assert "q: none, as no comparison has a p-value (a p-value needs 2 or more paired runs)" in one_seed
    write_run(results, "ce", "mr", 2, right(14))
    write_run(results, "supcon", "mr", 2, right(17))
    assert "q: Benjamini-Hochberg over the 1 of the 2 comparisons in this table that have a p-value (2 or more " \
           "paired runs)" in notes()


def test_draw_sets_of_one_combination_are_one_combination_to_the_page(tmp_path):
    """A run on data seed 1 records data_seed among its changed settings and another combo hash; reports read it as
    the same combination as the default draw's (as seeds of one draw set are), so the page does not leave it out."""
    from bench.reporting import htmlgrid

    results = tmp_path / "results"
    for data_seed in (0, 1):
        for seed in (1, 2, 3):
            for method, n in (("ce", 60), ("lcl", 66)):
                knobs = {"lcl.tau": 0.1} if method == "lcl" else {}
                extra = {"data_seed": data_seed, "data_draw": "per-seed", "combo": f"{method}{data_seed}",
                         "knobs": json.dumps({**knobs, **({"data_seed": 1} if data_seed else {})}, sort_keys=True,
                                             separators=(",", ":"))}
                write_run(results, method, "mr", seed, right(n + seed, 100), config=f"{method}{data_seed}", extra=extra)
    frame = load_results(results)
    assert htmlgrid.several_combinations(frame).empty
    assert set(frame.loc[frame["method"] == "lcl", "knobs"]) == {'{"lcl.tau":0.1}'}
    assert set(frame.loc[frame["method"] == "lcl", "combo"]) == {"lcl0"}
