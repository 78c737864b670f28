"""`clbench results`: by default one line per run and evaluator fitted to the terminal, collapsed runs marked;
`--long` the tidy long table as before; exports unchanged (every row and column). On a synthetic results folder
(rows written directly, as in test_report)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bench.cli.report import readable
from bench.reporting.compactview import compact_table, middle_cut, number, short_keys
from bench.reporting.resultsview import load_results
from bench.results import store
from test_report import attack, checklist, contrast, right, write_run

WORDY = [{"split": "attack", "n": 50, "attack_mode": "adaptive", "attack_data": "test", "attack_source": "",
          "metric": m, "value": v} for m, v in (("words_changed_pct", 12.5), ("queries_per_example", 140.0),
                                                 ("examples_per_second", 3.25), ("skipped_examples", 4.0))]
CONFIGS = {"ce_1": "a1b2c3d4e5", "ce_2": "b2c3d4e5f6", "clld": "c3d4e5f6a7", "cl": "d4e5f6a7b8", "supcon": "e5f6a7b8c9"}
EVALUATORS = {"ce_mr_minilm_s1_a1b2c3d4e5": 4, "ce_mr_minilm_s2_b2c3d4e5f6": 3,  # run -> evaluators (clean too)
              "clld-adaptive_mr_minilm_s1_c3d4e5f6a7": 2, "cl_mr_minilm_s1_d4e5f6a7b8": 1,
              "supcon_trec_bert-base-uncased_s1_e5f6a7b8c9": 2}


@pytest.fixture
def folder(tmp_path):
    """mr with minilm: ce seeds 1-2 (contrast, textfooler with every metric, checklist on seed 1), clld-adaptive
    (textfooler), cl (collapsed, clean only); trec with bert-base-uncased: supcon (a skipped contrast)."""
    results = tmp_path / "results"
    write_run(results, "ce", "mr", 1, right(16), config=CONFIGS["ce_1"], evals={
        ("contrast", "c1"): contrast(0.8, 0.6, 0.5), ("textfooler", "t1"): attack(0.2, 0.7) + WORDY,
        ("checklist", "k1"): checklist(0.10)})
    write_run(results, "ce", "mr", 2, right(18), config=CONFIGS["ce_2"], evals={
        ("contrast", "c1"): contrast(0.9, 0.7, 0.6), ("textfooler", "t1"): attack(0.4, 0.5) + WORDY})
    write_run(results, "clld-adaptive", "mr", 1, right(19), config=CONFIGS["clld"], evals={
        ("textfooler", "t1"): attack(0.5, 0.4) + WORDY})
    collapsed = write_run(results, "cl", "mr", 1, right(10), config=CONFIGS["cl"])
    write_run(results, "supcon", "trec", 1, right(13), encoder="bert-base-uncased", config=CONFIGS["supcon"], evals={
        ("contrast", "c9"): [{"split": "", "metric": "skipped", "value": float("nan"), "n": 0,
                              "note": "no contrast set for trec"}]})
    rows = json.loads((collapsed / store.ROWS).read_text())
    store.write_json(collapsed / store.ROWS, [{**row, "collapsed": 1} for row in rows])
    return results


def run_lines(out: str) -> dict[str, list[str]]:
    """Run key -> the table lines that show it (found by its short key)."""
    return {key: [line for line in out.splitlines() if f"  {key.rsplit('_', 1)[1][:6]}  " in f"{line}  "]
            for key in EVALUATORS}


@pytest.mark.parametrize("width", [80, 200])
def test_the_default_is_one_line_per_run_and_evaluator_within_the_terminal(cli, folder, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, err = cli("results", "--results-dir", folder)
    assert code == 0 and err == ""
    assert max(len(line) for line in out.splitlines()) <= width
    assert {key: len(lines) for key, lines in run_lines(out).items()} == EVALUATORS
    clean = next(line for line in run_lines(out)["clld-adaptive_mr_minilm_s1_c3d4e5f6a7"] if "95.00" in line)
    assert clean.split() == ["clld-adaptive", "mr", "minilm", "1", "c3d4e5", "95.00", "95.00", "20.00"]  # in %
    assert ("clean, split test: acc = accuracy (%), f1 = macro_f1 (%), val_acc = validation accuracy (%)"
            in " ".join(out.split()))
    assert "10.00" not in out.split("checklist")[0]  # the per-class f1 rows (0.1) are for --long
    left_out = "left out to fit 80 columns: contrast: consist, note; textfooler: changed%, queries, ex/s, skip_ex "
    if width == 80:
        assert left_out in " ".join(out.split()) and "--long" in out
        assert "ex/s" not in out.split("left out")[0]
    else:
        assert "left out" not in out and "words_changed_pct" in out and "  140  3.250" in out


def test_long_is_the_old_tidy_table(cli, folder, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("results", "--results-dir", folder, "--long")
    assert code == 0 and out == readable(load_results(folder)).to_string(index=False) + "\n"
    assert "f1" in out and "positive" in out  # breakdown rows are there
    assert err.startswith("warning: 1 collapsed run(s)") and "cl_mr_minilm_s1_d4e5f6a7b8" in err


def test_a_collapsed_run_is_marked_and_named(cli, folder, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = cli("results", "--results-dir", folder)
    (line,) = run_lines(out)["cl_mr_minilm_s1_d4e5f6a7b8"]
    assert line.split()[0] == "cl!"
    assert [line.split()[0] for lines in run_lines(out).values() for line in lines].count("cl!") == 1
    assert not any("!" in line.split()[0] for key, lines in run_lines(out).items() if not key.startswith("cl_")
                   for line in lines)
    footer = " ".join(out.split("\n! = ")[1].split())
    assert footer.startswith("1 collapsed run(s)") and "cl_mr_minilm_s1_d4e5f6a7b8" in footer
    assert "--filter collapsed=0" in footer
    code, out, _ = cli("results", "--results-dir", folder, "--filter", "collapsed=0")
    assert code == 0 and "!" not in out and "collapsed run" not in out


def test_skipped_evaluations_and_shared_columns(cli, folder, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = cli("results", "--results-dir", folder)
    (skipped,) = [line for line in run_lines(out)["supcon_trec_bert-base-uncased_s1_e5f6a7b8c9"] if "skipped" in line]
    assert "c9" in skipped and skipped.rstrip().endswith("no contrast set for trec")
    code, out, _ = cli("results", "--results-dir", folder, "--filter", "dataset=mr")
    assert out.startswith("every run: dataset mr, encoder minilm\n")
    assert "\nmethod         seed  key   " in out  # no dataset or encoder column then


def test_columns_pick_metric_columns(cli, folder, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = cli("results", "--results-dir", folder, "--columns", "accuracy_under_attack,acc")
    assert code == 0 and "att_acc" in out and "  acc" in out
    for hidden in ("val_acc", "  f1", "success", "orig_acc", "fail_rate", "left out"):
        assert hidden not in out, hidden
    code, _, err = cli("results", "--results-dir", folder, "--columns", "acc,colour")
    assert code == 2 and "--columns colour: no such metric column here" in err and "att_acc" in err


def test_exports_keep_every_row_and_column(cli, folder, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    frame = load_results(folder)
    code, _, _ = cli("results", "--results-dir", folder, "--export", "csv", "--output", tmp_path / "rows.csv")
    assert code == 0
    assert (tmp_path / "rows.csv").read_text() == frame.to_csv(index=False, lineterminator="\n")
    code, _, _ = cli("results", "--results-dir", folder, "--output", tmp_path / "rows.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "rows.parquet"), frame)
    for flag in (["--long"], ["--columns", "acc"]):
        code, _, err = cli("results", "--results-dir", folder, "--export", "csv", *flag)
        assert code == 2 and "--export writes every row and column" in err


def test_compact_table_pieces():
    assert short_keys(["ce_mr_x_s1_abcdef1234", "ce_mr_x_s1_abcdef9999", "cl_mr_x_s1_abcdef1234"]) == {
        "ce_mr_x_s1_abcdef1234": "abcdef12", "ce_mr_x_s1_abcdef9999": "abcdef99", "cl_mr_x_s1_abcdef1234": "abcdef12"}
    assert short_keys(["ce_mr_x_s1_abcdef1234"]) == {"ce_mr_x_s1_abcdef1234": "abcdef"}
    assert [number(v) for v in (0.8, 1.0, 12.5, 140.0, 1234.5, float("nan"), -1.5)] == \
        ["0.800", "1.000", "12.5", "140", "1234", "-", "-1.500"]
    assert middle_cut("sentence-transformers/all-MiniLM-L6-v2") == "sentence-tr…MiniLM-L6-v2"
    assert len(middle_cut("x" * 40)) == 24 and middle_cut("minilm") == "minilm"


def test_a_narrow_terminal_still_keeps_the_runs(folder):
    frame = load_results(folder)
    text = compact_table(frame, 50)
    assert "left out to fit 50 columns: clean: acc, f1, val_acc;" in " ".join(text.split())
    assert sum("c3d4e5" in line for line in text.splitlines()) == 2  # clld-adaptive: clean and textfooler


def test_a_run_of_a_variant_other_than_the_released_code_is_reported_as_its_own_method():
    from bench.reporting.resultsview import normalise, shown_method

    rows = pd.DataFrame([
        {"run_key": "a", "method": "cline", "variant": "released", "dataset": "trec", "value": 0.9, "seed": 1},
        {"run_key": "b", "method": "cline", "variant": "paper", "dataset": "trec", "value": 0.8, "seed": 1},
        {"run_key": "c", "method": "ce", "variant": "", "dataset": "trec", "value": 0.85, "seed": 1},
        {"run_key": "d", "method": "ce", "dataset": "trec", "value": 0.85, "seed": 2}])  # no variant at all
    frame = normalise(rows)
    assert list(frame["method"]) == ["cline", "cline:paper", "ce", "ce"]
    assert shown_method("cline:paper", "paper") == "cline:paper"  # normalising twice changes nothing
    # the default is the method's own: supcon's is `paper`, so its released-code runs are the named ones
    assert shown_method("supcon", "paper") == "supcon" and shown_method("supcon", "released") == "supcon:released"
    assert list(normalise(frame)["method"]) == list(frame["method"])
