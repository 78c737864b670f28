"""`bash scripts/gpu-campaign.sh report`: the README's GPU section from synthetic campaign records (the shapes of
`run PART --out OUT`'s JSON records and of a paper part's rows CSV), without training anything."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from bench.errors import BenchError
from benchmarks.campaign.report import render

H100 = "NVIDIA H100 80GB HBM3"
CPU = "CPU AMD EPYC, 2 threads"


def record(part: str, steps: list[dict], gpu: bool = True, dry_run: bool = False,
           started: str = "2026-11-25T10:00:00+00:00", **extra) -> dict:
    """A campaign record as runner.run_part writes it."""
    return {"campaign": 1, "part": part, "dry_run": dry_run, "device_name": H100 if gpu else CPU, "gpu": gpu,
            "torch": "2.5.1+cu124" if gpu else "2.13.0+cpu", "cuda": "12.4" if gpu else None, "python": "3.11.7",
            "cpu_count": 16, "host": "box", "started": started, "finished": started, "budget_seconds": 540,
            "pack": None, "setup_seconds": 4.2, "steps": steps, "seconds": 100.0, **extra}


def step(name: str, status: str = "ok", command: str | None = None, **extra) -> dict:
    """One step of a record."""
    return {"name": name, "command": command or f"python -m benchmarks {name} --x", "status": status,
            "exit_code": 0 if status == "ok" else 1, "seconds": 12.5, **extra}


def method(seq: float, tflops: float, mfu: float | None, util: float | None, syncs: float | None = None) -> dict:
    """One method's entry of benchmarks.mfu.throughput."""
    return {"seq_per_s": seq, "tflops": tflops, "mfu": mfu, "gpu_utilisation_pct": util, "host_syncs_per_step": syncs}


def report_result() -> dict:
    """benchmarks.mfu.report's shape at batch 32 and 128."""
    per_size = {
        "32": {"throughput": {"methods": {"ce": method(1234.5, 85.43, 0.2104, 87.5, 0.5),
                                          "clld-adaptive": method(640.0, 88.1, 0.0891, 90.0)}},
               "hf_trainer": {"ratio_vs_hf_trainer": {"ours": 1.618, "hf_trainer": 1.0}}},
        "128": {"throughput": {"methods": {"ce": method(2500.0, 300.2, 0.3041, 99.0, 0.25),
                                           "clld-adaptive": method(1300.0, 310.0, 0.3135, 98.0)}},
                "hf_trainer": {"error": "ModuleNotFoundError: No module named 'accelerate'"}}}
    targets = {"ce MFU >= 0.15 at batch 32": {"measured": 0.2104, "met": True},
               "clld MFU >= 0.15 at batch 32": {"measured": 0.0891, "met": False},
               "ours / HF Trainer >= 1.5 at batch 128": {
                   "measured": None, "met": "not applicable: the HF Trainer did not run (no accelerate)"}}
    return {"benchmark": "report", "per_batch_size": per_size, "targets": targets}


def short_texts_result(trec: tuple[float, float], mr: tuple[float, float]) -> dict:
    """benchmarks.fast_path.short_texts's shape: (new, new+compile) ratios to old per dataset."""
    def one(ratios: tuple[float, float], tokens: float) -> dict:
        return {"mean_tokens": tokens,
                "seq_per_s": {"old": 1000.0, "new": 1000 * ratios[0], "new+compile": 1000 * ratios[1]},
                "ratio_vs_old": {"old": 1.0, "new": ratios[0], "new+compile": ratios[1]}}
    return {"benchmark": "short-texts", "datasets": {"trec": one(trec, 11.2), "mr": one(mr, 26.4)}}


def compile_result(ce_s: float, clld_s: float) -> dict:
    """benchmarks.compile.compile_bench's shape."""
    def one(seconds: float) -> dict:
        return {"eager_step_seconds": 0.0412, "compiled_step_seconds": 0.0301, "speedup": 1.369,
                "compile_seconds": seconds, "compilations": 3}
    return {"benchmark": "compile", "backend": "inductor", "batch_size": 32, "max_length": 128,
            "methods": {"ce": one(ce_s), "clld-adaptive": one(clld_s)}}


def perf_steps(short: dict | None = None, compiled: dict | None = None) -> list[dict]:
    """The perf part's steps: report, compile, short-texts and shards ok, profile timed out, shard-cost absent."""
    return [step("report", result=report_result()),
            step("compile", result=compiled or compile_result(12.34, 45.0)),
            step("short-texts", result=short or short_texts_result((3.4, 2.0), (2.5, 3.2))),
            step("shards", result={"concurrency": {"1": {"aggregate_seq_per_s": 100.0},
                                                   "4": {"aggregate_seq_per_s": 310.0}},
                                   "ratio_vs_1": {"1": 1.0, "4": 3.1}}),
            step("profile", status="timeout", reason="stopped after 40 s, what was left of the part's budget")]


def write(folder: Path, name: str, data: dict) -> Path:
    """`data` as JSON at folder/name."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_gpu_record_shows_the_device_the_tables_and_each_target_met_or_not(tmp_path):
    write(tmp_path / "call-1", "perf.json", record("perf", perf_steps()))
    text = render([tmp_path / "call-1"])
    assert text.startswith(f"## GPU campaign: {H100}\n")
    assert "torch 2.5.1+cu124, CUDA 12.4, Python 3.11.7; run on 2026-11-25" in text
    assert "dry run" not in text
    assert "| 32 | ce | 1230 | 85.4 | 0.210 | 87.5% | 0.500 | 1.62 |" in text
    assert "| 128 | ce | 2500 | 300 | 0.304 | 99.0% | 0.250 | not run: ModuleNotFoundError" in text
    assert "| ce MFU ≥ 0.15 at batch 32 | 0.210 | ✅ met |" in text
    assert "| clld MFU ≥ 0.15 at batch 32 | 0.089 | ❌ not met |" in text
    assert "| ours / HF Trainer ≥ 1.5 at batch 128 | — | not applicable: the HF Trainer did not run" in text
    # the campaign's own targets: the best of new and new+compile per dataset, each method's compile time
    assert "| short texts: new / old ≥ 3 (trec, mr) | mr 3.20, trec 3.40 | ✅ met |" in text
    assert "| compile time < 60 s | ce 12.3 s, clld-adaptive 45.0 s | ✅ met |" in text
    assert "| ce | 41.2 | 30.1 | 1.37× | 12.3 | 3 |" in text
    assert "| 4 | 310 | 3.10 |" in text
    assert "- `python -m benchmarks compile --x`" in text
    assert "- `profile`: timeout (exit code 1): stopped after 40 s, what was left of the part's budget" in text
    assert "- `shard-cost`: not in any record (not run)" in text
    assert "_not measured: the profile step timed out_" in text


def test_the_campaign_targets_are_not_met_below_the_thresholds_on_a_gpu(tmp_path):
    steps = perf_steps(short=short_texts_result((2.9, 2.95), (3.5, 3.1)), compiled=compile_result(75.0, 20.0))
    text = render([write(tmp_path, "perf.json", record("perf", steps))])
    assert "| short texts: new / old ≥ 3 (trec, mr) | mr 3.50, trec 2.95 | ❌ not met |" in text
    assert "| compile time < 60 s | ce 75.0 s, clld-adaptive 20.0 s | ❌ not met |" in text


def test_a_dry_run_on_a_cpu_says_it_is_not_gpu_figures_and_the_gpu_targets_do_not_apply(tmp_path):
    write(tmp_path, "perf.json", record("perf", perf_steps(), gpu=False, dry_run=True))
    text = render([tmp_path])
    assert f"**⚠️ dry run at toy scale on {CPU}: not GPU figures**" in text
    assert "### perf (dry run)" in text
    cpu = "not applicable: a GPU target (this ran on a CPU)"
    assert f"| short texts: new / old ≥ 3 (trec, mr) | mr 3.20, trec 3.40 | {cpu} |" in text
    assert f"| compile time < 60 s | ce 12.3 s, clld-adaptive 45.0 s | {cpu} |" in text


def test_a_part_re_run_with_only_one_step_is_merged_step_by_step(tmp_path):
    first = record("perf", perf_steps(compiled=compile_result(12.34, 45.0)), started="2026-11-25T10:00:00+00:00")
    first["steps"][2] = step("short-texts", status="failed", command="python -m benchmarks short-texts --old")
    again = record("perf", [step("short-texts", command="python -m benchmarks short-texts --again",
                                 result=short_texts_result((4.0, 5.0), (3.0, 1.0))),
                            step("compile", status="failed", command="python -m benchmarks compile --again")],
                   started="2026-11-25T11:00:00+00:00")
    write(tmp_path / "a", "perf.json", first)
    write(tmp_path / "b", "perf.json", again)
    text = render([tmp_path / "b", tmp_path / "a"])
    assert "(2 record(s))" in text
    assert "| short texts: new / old ≥ 3 (trec, mr) | mr 3.00, trec 5.00 | ✅ met |" in text  # the re-run's
    assert "| compile time < 60 s | ce 12.3 s, clld-adaptive 45.0 s | ✅ met |" in text  # ok before, failed after
    assert "- `python -m benchmarks short-texts --again` (run started 2026-11-25T11:00:00+00:00)" in text
    assert "- `python -m benchmarks compile --x` (run started 2026-11-25T10:00:00+00:00)" in text
    assert "short-texts --old" not in text and "compile --again" not in text
    assert "- `short-texts`: failed" not in text


def paper_rows() -> list[dict]:
    """A paper part's tidy rows: ce 3 seeds, clld 3 seeds of which seed 3 collapsed, TextFooler for ce."""
    rows = []
    runs = [("ce", 1, 0.80, 0.70, 0), ("ce", 2, 0.82, 0.72, 0), ("ce", 3, 0.84, 0.74, 0),
            ("clld", 1, 0.85, 0.80, 0), ("clld", 2, 0.87, 0.82, 0), ("clld", 3, 0.25, 0.10, 1)]
    for name, seed, accuracy, f1, collapsed in runs:
        key = f"{name}_mr_minilm_s{seed}_abc"
        base = {"run_key": key, "method": name, "dataset": "mr", "encoder": "minilm", "seed": seed, "label": "",
                "n": 100, "collapsed": f"{collapsed:.1f}"}
        rows += [{**base, "evaluator": "clean", "split": "test", "metric": "accuracy", "value": accuracy},
                 {**base, "evaluator": "clean", "split": "test", "metric": "macro_f1", "value": f1},
                 {**base, "evaluator": "clean", "split": "validation", "metric": "accuracy", "value": 0.99}]
        if name == "ce":
            attack = {**base, "collapsed": "", "evaluator": "textfooler", "split": "attack"}
            rows += [{**attack, "metric": "accuracy_under_attack", "value": 0.3 + 0.1 * seed},
                     {**attack, "metric": "attack_success_rate", "value": 0.5}]
        rows.append({**base, "collapsed": "", "evaluator": "contrast", "split": "", "metric": "skipped", "value": ""})
    return rows


def test_a_paper_record_with_its_rows_csv_gives_mean_and_sd_per_method_without_collapsed_runs(tmp_path):
    steps = [step("train", command="clbench run --config configs/clld-table2-minilm.yaml", seconds=301.0),
             step("table", output_tail="| method | mr |\n| ce | 82.00 ± 2.00 (paper 80.1) |\n"),
             step("export", status="failed", command="clbench results --export csv")]
    write(tmp_path, "paper-mr.json", record("paper:mr", steps, archive={"archive": "paper-mr-results.tar.gz",
                                                                           "finished_runs": 6, "failed_runs": 1}))
    rows = paper_rows()
    with open(tmp_path / "paper-mr-rows.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    text = render([tmp_path])
    assert "### paper:mr\n" in text
    assert "Training (`train`): ok in 301.0 s; runs: 6 finished, 1 failed (archive paper-mr-results.tar.gz)" in text
    assert ("| method | seeds | test accuracy | test macro-F1 | TF accuracy under attack | TF success rate |"
            in text)
    assert "| ce | 3 | 82.0 ± 2.0 | 72.0 ± 2.0 | 50.0 ± 10.0 | 50.0 ± 0.0 |" in text
    assert "| clld | 2 | 86.0 ± 1.4 | 81.0 ± 1.4 | — | — |" in text
    assert "collapsed run left out of the means (it predicts one class): clld_mr_minilm_s3_abc (clld, seed 3)" in text
    assert "```text\n| method | mr |\n| ce | 82.00 ± 2.00 (paper 80.1) |\n```" in text
    assert "- `clbench run --config configs/clld-table2-minilm.yaml`" in text
    assert "- `export`: failed (exit code 1)" in text
    assert "- `status`: not in any record (not run)" in text


def test_a_paper_record_without_its_rows_csv_says_so(tmp_path):
    write(tmp_path, "paper-trec.json", record("paper:trec", [step("train", status="failed"),
                                                             step("table", status="failed", output_tail="")]))
    text = render([tmp_path])
    assert "Training (`train`): failed in 12.5 s; runs: — finished, — failed" in text
    assert "_no rows CSV beside the record (paper-trec-rows.csv is absent)_" in text
    assert "_paper-ii table: not measured: the table step failed, no output_" in text


def test_the_tests_record_lists_the_counts_and_the_failing_tests(tmp_path):
    pytest_step = step("pytest", status="failed", command="python -m pytest -n 8 -q", tests=120, failures=2,
                       errors=1, skipped=3, passed=114, test_seconds=301.44,
                       failing=["tests.test_trainer::test_b", "tests.test_perf::test_a"])
    write(tmp_path, "tests.json", record("tests", [pytest_step]))
    text = render([tmp_path])
    assert "| 120 | 114 | 2 | 1 | 3 | 301.4 |" in text
    assert "Failing:\n\n- `tests.test_perf::test_a`\n- `tests.test_trainer::test_b`\n" in text
    assert "- `python -m pytest -n 8 -q`" in text
    assert "- `pytest`: failed (exit code 1)" in text


def test_parts_come_in_campaign_order_from_several_folders_and_other_json_is_ignored(tmp_path):
    write(tmp_path / "x", "tests.json", record("tests", [step("pytest", tests=1, failures=0, errors=0, skipped=0,
                                                              passed=1, test_seconds=1.0, failing=[])]))
    write(tmp_path / "y", "perf.json", record("perf", perf_steps()))
    write(tmp_path / "y", "other.json", {"benchmark": "report"})
    (tmp_path / "y" / "broken.json").write_text("{", encoding="utf-8")
    text = render([tmp_path])  # sub-folders are read too
    assert text.index("### perf") < text.index("### tests")
    assert "(2 record(s))" in text


@pytest.mark.parametrize("make", [lambda p: p / "missing", lambda p: p])
def test_no_record_is_one_clear_error(tmp_path, make):
    write(tmp_path, "other.json", {"benchmark": "report"})
    with pytest.raises(BenchError, match=r"^no campaign records in .*; give the folders `run --out` wrote$"):
        render([make(tmp_path)])
