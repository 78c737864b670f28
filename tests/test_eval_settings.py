"""Evaluator settings are stable and visible: a dataset card's `eval_defaults` fill the evaluator options the
user left unset, whatever else the command asks for (so the demo and `clbench run --methods ce` score CheckList
alike and the second call re-scores nothing); an explicit option wins; and a report table that holds two
settings of one evaluator names in each column's footnote the settings that differ."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench.cli.main import build_parser
from bench.cli.run_options import checked_run_options
from bench.data.cards import Card, parse_card
from bench.data.loading import load_dataset
from bench.errors import BenchError
from bench.evaluators.base import EvalOptions, card_defaults
from bench.evaluators.checklist import ChecklistEvaluator
from bench.registry import DATASETS
from bench.reporting import tables
from bench.reporting.evalsettings import settings_labels, settings_notes
from bench.reporting.resultsview import load_results
from bench.results import store
from bench.running.evaluation import data_card, is_done, options_for_data
from test_report import checklist, right, write_run

DEMO_CARD = DATASETS.get("demo")


def request_options(argv: list[str], demo: bool = False) -> tuple[tuple[str, ...], EvalOptions]:
    """The datasets and evaluator options `bench ARGV` asks for (`demo`: as `main` marks `clbench run` alone)."""
    args = build_parser().parse_args(argv)
    args.demo = demo
    opts, request = checked_run_options(args)
    return opts.datasets, request["options"]


@pytest.fixture(scope="module")
def demo_data():
    return load_dataset("demo")


def checklist_settings(options: EvalOptions, data) -> dict:
    """CheckList's settings (what its eval_hash is of) for a run on `data` under `options`."""
    return ChecklistEvaluator().settings(options_for_data(options, data))


# ----------------------------------------------------------------------------------------------- options

def test_the_demo_and_a_methods_call_score_checklist_alike(demo_data):
    demo_datasets, demo = request_options(["run"], demo=True)
    ce_datasets, ce = request_options(["run", "--methods", "ce"])
    assert demo_datasets == ce_datasets == ("demo",)  # both on the demo set by default
    assert checklist_settings(demo, demo_data) == checklist_settings(ce, demo_data)
    assert checklist_settings(ce, demo_data)["checklist_n"] == DEMO_CARD.eval_defaults["checklist_n"] == 100


def test_an_explicit_option_wins_over_the_card(demo_data, tmp_path):
    _, default = request_options(["run", "--methods", "ce"])
    _, flag = request_options(["run", "--methods", "ce", "--checklist-n", "500"])  # the built-in default, given
    config = tmp_path / "run.yaml"
    config.write_text("checklist_n: 500\n")
    _, from_file = request_options(["run", "--config", str(config)])
    evaluator = ChecklistEvaluator()
    assert [checklist_settings(o, demo_data)["checklist_n"] for o in (flag, from_file, default)] == [500, 500, 100]
    assert (evaluator.settings_hash(options_for_data(flag, demo_data))
            != evaluator.settings_hash(options_for_data(default, demo_data)))


def test_eval_options_remember_what_was_left_out():
    left_out, given = EvalOptions(), EvalOptions(checklist_n=500)
    assert left_out.checklist_n == given.checklist_n == 500
    assert "checklist_n" in left_out.unset and "checklist_n" not in given.unset
    assert left_out.for_card(DEMO_CARD).checklist_n == 100 and given.for_card(DEMO_CARD).checklist_n == 500
    assert left_out.for_card(None) is left_out  # a folder without a card
    assert dataclasses.replace(left_out, data_dir="x").for_card(DEMO_CARD).checklist_n == 100  # still unset
    assert dataclasses.replace(left_out, checklist_n=7).for_card(DEMO_CARD).checklist_n == 7  # set now
    assert "unset" not in EvalOptions.field_names()  # not an option: no flag, no config key


def test_only_a_dataset_from_its_card_takes_the_card_defaults():
    assert data_card("demo", "generated:bench.data.demo:generate(seed=0)") is DEMO_CARD
    assert data_card("demo", "folder:/data/demo") is None  # a folder of that name is not the card's set
    assert data_card("my-set", "folder:/data/my-set") is None


def test_card_defaults_are_checked_against_the_options(tmp_path):
    card = Card("x", "X", ("a", "b"), {}, path="x.yaml")
    assert card_defaults(dataclasses.replace(card, eval_defaults={"checklist_dir_tolerance": 0})) == {
        "checklist_dir_tolerance": 0.0}  # a float option's whole number is a float (its settings hash is)
    for bad, message in (({"checklist_m": 5}, "no evaluator option"), ({"checklist_n": "many"}, "expected int"),
                         ({"data_dir": "/data"}, "no evaluator option"), ({"tsne": 1}, "expected bool")):
        with pytest.raises(BenchError, match=message):
            EvalOptions().for_card(dataclasses.replace(card, eval_defaults=bad))
    path = tmp_path / "x.yaml"
    path.write_text("name: x\ntitle: X\nlabels: [a, b]\nsizes: {}\neval_defaults: [checklist_n]\n")
    with pytest.raises(BenchError, match="eval_defaults must be a mapping"):
        parse_card(path)
    for _, shipped in DATASETS.items():  # every shipped card's defaults are options of the right type
        card_defaults(shipped)


def test_a_bad_card_default_stops_bench_run_before_anything_runs(monkeypatch):
    bad = dataclasses.replace(DEMO_CARD, eval_defaults={"checklist_m": 5})
    monkeypatch.setitem(DATASETS._entries, "demo", bad)
    with pytest.raises(BenchError, match="checklist_m"):
        request_options(["run", "--methods", "ce"])


# ----------------------------------------------------------------------------------------------- end to end

def stored_checklist(run_dir: Path) -> dict[str, dict]:
    """The run's stored CheckList evaluations by file name."""
    return {p.name: store.read_json(p) for p in sorted((run_dir / store.EVALS).glob("checklist-*.json"))}


@pytest.mark.slow
def test_the_demo_then_a_methods_call_rescores_nothing(tmp_path, monkeypatch, capsys, cli):
    """`clbench run` (the demo switch, with a tiny model) scores CheckList on the card's 100 texts; `clbench run
    --methods ce` then finds the evaluation stored; `clbench evaluate` without options too; `--checklist-n 20`
    is a second setting, and the footnotes of a table tell the two apart."""
    from bench.cli import run_summary
    from bench.cli.run import cmd_run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run_summary, "write_demo_reports", lambda *a: [])  # the demo's figures: not tested here
    results = tmp_path / "results"
    tiny = ["--encoder", "tiny-bert", "--epochs", "1", "--lr", "1e-3", "--batch-size", "16", "--max-length", "32",
            "--no-progress", "--evaluators", "checklist", "--results-dir", str(results)]
    args = build_parser().parse_args(["run", "--methods", "ce", *tiny])
    args.demo = True
    assert cmd_run(args) == 0
    run_dir, = [p.parent for p in results.glob(f"*/{store.ROWS}")]
    first = stored_checklist(run_dir)
    (name, stored), = first.items()
    assert stored["settings"]["checklist_n"] == 100
    assert {json.loads(r["eval_settings"])["checklist_n"] for r in stored["rows"]} == {100}
    stamp = (run_dir / store.EVALS / name).stat().st_mtime_ns
    assert is_done(run_dir, ChecklistEvaluator(), EvalOptions())  # a finished run needs no tending: no lease taken
    capsys.readouterr()

    code, _, err = cli("run", "--methods", "ce", *tiny)  # not the demo: same settings, nothing to score
    assert code == 0, err
    assert "checklist: done" not in err and stored_checklist(run_dir) == first
    assert (run_dir / store.EVALS / name).stat().st_mtime_ns == stamp
    code, _, err = cli("evaluate", run_dir.name, "--evaluators", "checklist", "--results-dir", results)
    assert code == 0, err
    assert "checklist: done" not in err and list(stored_checklist(run_dir)) == [name]

    code, _, err = cli("evaluate", run_dir.name, "--evaluators", "checklist", "--checklist-n", "20",
                       "--results-dir", results)
    assert code == 0, err
    assert sorted(s["settings"]["checklist_n"] for s in stored_checklist(run_dir).values()) == [20, 100]
    rows = tables.evaluator_rows(load_results(results))  # as the robustness table reads them (a model this
    hashes = sorted(rows["eval_hash"].unique())            # small may collapse, which the table leaves out)
    n_of = {h: json.loads(rows.loc[rows["eval_hash"] == h, "eval_settings"].iloc[0])["checklist_n"] for h in hashes}
    assert sorted(n_of.values()) == [20, 100]
    assert sorted(settings_labels(rows, hashes).values()) == ["checklist_n=100", "checklist_n=20"]
    notes = settings_notes(rows, {("checklist", h) for h in hashes})
    assert {n for n in notes if "checklist_n=" in n} == {f"checklist {h}: checklist_n={n}" for h, n in n_of.items()}


# ----------------------------------------------------------------------------------------------- footnotes

def settings_json(n: int, version: int = 2) -> str:
    return json.dumps({"checklist_dir_score": "side", "checklist_n": n, "checklist_suite": "",
                       "evaluator": "checklist", "version": version}, sort_keys=True)


def with_settings(records: list[dict], settings: str) -> list[dict]:
    return [{**r, "eval_settings": settings} for r in records]


def test_two_settings_of_one_evaluator_have_footnotes_naming_what_differs(tmp_path):
    results = tmp_path / "results"
    write_run(results, "ce", "demo", 1, right(16), evals={("checklist", "k1"): with_settings(checklist(0.1),
                                                                                            settings_json(100))})
    write_run(results, "ce", "demo", 2, right(16), evals={("checklist", "k2"): with_settings(checklist(0.3),
                                                                                            settings_json(1000))})
    table = tables.robustness(load_results(results))
    assert list(dict.fromkeys(table["column"])) == ["CheckList failure rate [checklist_n=100]",
                                                    "CheckList failure rate [checklist_n=1000]"]
    notes = table.attrs["notes"]
    assert "checklist k1: checklist_n=100" in notes and "checklist k2: checklist_n=1000" in notes
    assert "checklist, all 2 settings: checklist_dir_score=side, eval_version=2" in notes


def test_one_setting_has_one_footnote_with_all_its_settings(tmp_path):
    results = tmp_path / "results"
    write_run(results, "ce", "demo", 1, right(16), evals={("checklist", "k1"): with_settings(checklist(0.1),
                                                                                            settings_json(100))})
    table = tables.robustness(load_results(results))
    assert list(dict.fromkeys(table["column"])) == ["CheckList failure rate"]
    assert "checklist k1: checklist_dir_score=side, checklist_n=100, eval_version=2" in table.attrs["notes"]


def test_settings_that_rows_cannot_tell_apart_say_where_they_are(tmp_path):
    """Rows stored before rows carried their settings: two settings look alike; their notes say so and
    where to look, and a setting stored since is told apart from both."""
    results = tmp_path / "results"
    write_run(results, "ce", "demo", 1, right(16), evals={("checklist", "k1"): checklist(0.1)})
    write_run(results, "ce", "demo", 2, right(16), evals={("checklist", "k2"): checklist(0.3)})
    write_run(results, "ce", "demo", 3, right(16), evals={("checklist", "k3"): with_settings(checklist(0.2),
                                                                                            settings_json(100))})
    notes = tables.robustness(load_results(results)).attrs["notes"]
    old = [n for n in notes if n.startswith(("checklist k1:", "checklist k2:"))]
    assert len(set(old)) == 2 and all("evals/checklist-k" in n for n in old)
    assert next(n for n in notes if n.startswith("checklist k3:")).startswith("checklist k3: checklist_dir_score=side")
