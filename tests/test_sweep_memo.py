"""A finished sweep re-run is answered from its memo (bench.running.sweepmemo, bench.results.sweeps): the same
output without planning, loading data or importing torch; any change to a run folder, the data, the gathered
table, the command or the code plans and checks everything again."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.codeversion import canonical
from bench.results import sweeps
from bench.running import sweepmemo
from bench.running.options import RunOptions
from conftest import FAST

SHARDS = [("ce_tiny_tiny-bert_s1_aaaa", "ce", ["evals/repr.json"]), ("supcon_tiny_tiny-bert_s1_bbbb", "supcon", [])]


def fake_sweep(root: Path) -> tuple[Path, Path]:
    """A results folder with two run folders and a gathered table, and a data folder."""
    results, data = root / "results", root / "data"
    for key, _, _ in SHARDS:
        (results / key / "evals").mkdir(parents=True)
        (results / key / "rows.json").write_text("[]")
        (results / key / "evals" / "repr.json").write_text("{}")
    (results / "results.parquet").write_bytes(b"table")
    data.mkdir()
    (data / "train.jsonl").write_text("{}\n")
    return results, data


def remembered(results: Path, data: Path) -> None:
    state = {key: sweeps.files_state(results / key) for key, _, _ in SHARDS}
    sweeps.remember(results, "d1", SHARDS, [str(data)], state)


def test_an_unchanged_sweep_is_recalled_in_plan_order(tmp_path):
    results, data = fake_sweep(tmp_path)
    remembered(results, data)
    assert sweeps.recall(results, "d1") == SHARDS
    assert sweeps.recall(results, "other") is None


@pytest.mark.parametrize("change", ["touch-rows", "add-eval", "remove-eval", "grow-rows", "lease", "data-edited",
                                    "data-added", "table-regathered", "table-gone", "run-gone", "memo-damaged"])
def test_any_change_to_a_run_the_data_or_the_table_forgets_the_sweep(tmp_path, change):
    results, data = fake_sweep(tmp_path)
    remembered(results, data)
    run = results / SHARDS[0][0]
    stat = (run / "rows.json").stat()
    if change == "touch-rows":  # same size, same content: a new modification time
        os.utime(run / "rows.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    elif change == "add-eval":
        (run / "evals" / "checklist.json").write_text("{}")
    elif change == "remove-eval":
        (run / "evals" / "repr.json").unlink()
    elif change == "grow-rows":
        (run / "rows.json").write_text("[{}]")
        os.utime(run / "rows.json", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    elif change == "lease":
        (run / ".lease").write_text("holder")
    elif change == "data-edited":
        (data / "train.jsonl").write_text("{}\n{}\n")
    elif change == "data-added":
        (data / "test.jsonl").write_text("{}\n")
    elif change == "table-regathered":
        (results / "results.parquet").write_bytes(b"TABLE!")
    elif change == "table-gone":
        (results / "results.parquet").unlink()
    elif change == "run-gone":
        for path in sorted(run.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        run.rmdir()
    elif change == "memo-damaged":
        sweeps.memo_path(results, "d1").write_text('{"format": 1, "shards": [')
    assert sweeps.recall(results, "d1") is None


def options(tmp_path: Path, **changed) -> RunOptions:
    base = RunOptions(methods=("ce",), datasets=("tiny",), encoders=("tiny-bert",), seeds=(1,),
                      results_dir=tmp_path / "results")
    return dataclasses.replace(base, **changed)


def test_the_digest_names_the_plan_and_the_request_and_refuses_what_it_cannot_watch(tmp_path):
    from bench.evaluators.base import EvalOptions

    request = {"evaluators": ("repr",), "options": EvalOptions(checklist_n=100)}
    first = sweepmemo.digest(options(tmp_path), request)
    assert first == sweepmemo.digest(options(tmp_path), dict(request)) and len(first) == 32
    for changed in ({"seeds": (1, 2)}, {"methods": ("ce", "supcon")}, {"overrides": {"epochs": 3}},
                    {"knobs": {"ce": {"x": 1}}}, {"data_dir": str(tmp_path)}, {"device": "cpu"},
                    {"results_dir": tmp_path / "elsewhere"}):
        assert sweepmemo.digest(options(tmp_path, **changed), request) != first, changed
    assert sweepmemo.digest(options(tmp_path), {**request, "evaluators": ()}) != first
    assert sweepmemo.digest(options(tmp_path), {**request, "options": EvalOptions(checklist_n=50)}) != first
    assert sweepmemo.digest(options(tmp_path, jobs=2, progress=False), request) == first  # how, not what
    for refused in ({"overwrite": True}, {"resume": True}):
        assert sweepmemo.digest(options(tmp_path, **refused), request) is None


def test_the_digest_changes_with_the_code_and_the_data_folders(tmp_path, monkeypatch):
    request = {"evaluators": ()}
    first = sweepmemo.digest(options(tmp_path), request)
    monkeypatch.setattr(sweepmemo, "code_digest", lambda: "another version")
    assert sweepmemo.digest(options(tmp_path), request) != first
    monkeypatch.undo()
    data = tmp_path / "data"
    data.mkdir()
    with_dir = sweepmemo.digest(options(tmp_path, data_dir=str(data)), request)
    (data / "tiny").mkdir()  # a folder that may now be what `tiny` names
    assert sweepmemo.digest(options(tmp_path, data_dir=str(data)), request) != with_dir


def test_canonical_values_do_not_depend_on_set_order():
    assert canonical(frozenset({"b", "a", "c"})) == ["a", "b", "c"]
    assert canonical({"b": 1, "a": (2, Path("x"))}) == {"a": [2, "x"], "b": 1}


RERUN = """
import json, sys
from bench.cli.main import main
code = main(sys.argv[1:])
print(json.dumps([code, sorted(m for m in ("torch", "transformers", "sklearn") if m in sys.modules)]),
      file=sys.stderr)
"""


def rerun(argv: list[str], cwd: Path) -> tuple[list, str, str]:
    """`clbench ARGV` in a fresh interpreter: ([exit code, heavy modules imported], stdout, stderr lines but the
    last)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("BENCH_DATA_DIR", None)
    done = subprocess.run([sys.executable, "-c", RERUN, *argv], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=600)
    *lines, last = done.stderr.strip().splitlines()
    return json.loads(last), done.stdout, "\n".join(lines)


def test_a_finished_sweep_reruns_without_torch_and_says_the_same(tmp_path, tiny):
    argv = ["run", "--methods", "ce,supcon", "--datasets", str(tiny), "--seeds", "1", *FAST, "--evaluators", "repr",
            "--results-dir", str(tmp_path / "results")]
    trained, first_out, _ = rerun(argv, tmp_path)  # trains, then finds nothing left to tend: remembers the sweep
    assert trained[0] == 0 and "torch" in trained[1]
    (memo,) = (tmp_path / "results" / sweeps.SWEEPS).glob("*.json")
    kept = json.loads(memo.read_text())["answer"]  # computed after training, as a re-run would say it
    checked, out, err = rerun(argv + ["--jobs", "1"], tmp_path)  # answered from the memo: the kept answer
    assert kept["stdout"] == out and kept["stderr"].rstrip("\n") in err
    memo.write_text(json.dumps({k: v for k, v in json.loads(memo.read_text()).items() if k != "answer"}))
    computed, computed_out, computed_err = rerun(argv, tmp_path)  # no answer kept: computed, the same
    assert computed == checked and (computed_out, computed_err) == (out, err)
    fast, fast_out, fast_err = rerun(argv, tmp_path)  # the kept answer, said again
    assert checked == fast == [0, []]
    assert (fast_out, fast_err) == (out, err) and "skipped" in fast_err and "ce" in fast_out
    assert fast_out == first_out and "representation:" in fast_out  # the table and its evaluator lines, as at first
    rows = next((tmp_path / "results").glob("ce_*")) / "rows.json"
    os.utime(rows)  # a run touched: checked again, with torch, and remembered again
    again, again_out, _ = rerun(argv, tmp_path)
    assert again[0] == 0 and "torch" in again[1] and again_out == out
    assert rerun(argv, tmp_path)[0] == [0, []]
    with (tiny / "train.jsonl").open("a") as handle:  # the data changed: the keys may change, so it plans again
        handle.write((tiny / "train.jsonl").read_text().splitlines()[0] + "\n")
    assert "torch" in rerun(argv, tmp_path)[0][1]


def test_a_method_registered_or_changed_at_run_time_changes_the_digest(tmp_path, monkeypatch):
    from bench.registry import METHODS

    first = sweepmemo.digest(options(tmp_path), {})
    monkeypatch.setattr(METHODS, "_entries", {**METHODS._entries, "memo-test": type("MemoTest", (), {"version": 1})})
    assert sweepmemo.digest(options(tmp_path), {}) != first


def test_the_table_holds_a_run_when_it_has_as_many_of_its_rows_as_the_folder(tmp_path):
    import pandas as pd

    from bench.results import store

    results, _ = fake_sweep(tmp_path)
    runs = [results / key for key, _, _ in SHARDS]
    (runs[0] / "rows.json").write_text(json.dumps([{"run_key": runs[0].name, "metric": "accuracy"}] * 2))
    (runs[0] / "evals" / "repr.json").write_text(json.dumps({"rows": [{"metric": "alignment"}]}))
    pd.DataFrame({"run_key": [runs[0].name] * 3}).to_parquet(results / store.TABLE)
    assert store.table_holds(results, runs[:1]) and not store.table_holds(results, runs)
    pd.DataFrame({"run_key": [runs[0].name] * 2}).to_parquet(results / store.TABLE)  # lacks the evaluation's row
    assert not store.table_holds(results, runs[:1])
    (results / store.TABLE).write_bytes(b"not parquet")
    assert not store.table_holds(results, runs[:1])


def test_installed_plugins_are_never_answered_from_a_memo(tmp_path, monkeypatch):
    monkeypatch.setattr(sweepmemo, "plugins", lambda kind: ["toy = toyplug.method"] if kind == "method" else [])
    assert sweepmemo.digest(options(tmp_path), {}) is None


def test_a_kept_answer_is_said_again_only_while_its_reports_are_unchanged(tmp_path):
    results, data = fake_sweep(tmp_path)
    remembered(results, data)
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "summary.png").write_bytes(b"png")
    answer = {"stdout": "table\n", "stderr": "next steps\n", "code": 0}
    sweeps.remember_answer(results, "d1", answer, reports)
    assert sweeps.recall(results, "d1") == SHARDS  # the memo still holds
    assert sweeps.recall_answer(results, "d1", reports) == answer
    assert sweeps.recall_answer(results, "d1", None) is None  # kept with reports, asked without
    (reports / "summary.png").unlink()
    assert sweeps.recall_answer(results, "d1", reports) is None
    sweeps.remember_answer(results, "d1", answer, None)
    assert sweeps.recall_answer(results, "d1", None) == answer
    remembered(results, data)  # remembered again (after a full check): no answer yet
    assert sweeps.recall_answer(results, "d1", None) is None


def test_capturing_prints_and_keeps_a_copy_and_counts_log_records(capsys):
    import logging

    from bench.cli.run_summary import capturing

    with capturing() as said:
        print("out")
        print("err", file=sys.stderr)
    assert (said.stdout.getvalue(), said.stderr.getvalue(), said.logged) == ("out\n", "err\n", 0)
    assert capsys.readouterr() == ("out\n", "err\n")
    with capturing() as said:
        logging.getLogger("bench.test").warning("a warning")
    assert said.logged > 0
    with capturing(echo=False) as said:
        print("kept, not said")
    assert said.stdout.getvalue() == "kept, not said\n" and capsys.readouterr() == ("", "")
