"""The `data-scale` benchmark (benchmarks.data_scale) at a small scale: its dataset, its count of data copies, its
probe in a sweep worker, and the whole command end to end. The 1M-row figures are measured by hand
(docs/BENCHMARKS.md), never timed in a test."""

from __future__ import annotations

import json
import pickle

import pytest

import bench.running.runner as runner
from bench.data.loading import load_dataset
from benchmarks import data_scale as ds
from benchmarks.cli import main as perf_main
from bench.running.shard import ShardRequest
from bench.training.trainer import Trainer


def test_the_dataset_holds_every_probe_text_once(tmp_path):
    files = ds.write_dataset(tmp_path, 500)
    assert files["train.jsonl.gz"]["rows"] == 500 and files["test.jsonl.gz"]["rows"] == 50
    data = load_dataset(str(tmp_path))
    texts = data.train.texts + data.validation.texts
    probes = {ds.probe_text(i) for i in range(ds.probe_count(500))}  # a set: held_copies counts lists only
    assert len(probes) == 50 and {t for t in texts if t.startswith("probe ")} == probes
    assert ds.held_copies(probes) == {"min": 1, "max": 1}  # train and validation share nothing


def test_held_copies_counts_objects_not_values():
    texts = [ds.probe_text(1000 + i) for i in range(5)] + ["filler"] * 10  # probes no other test holds
    subset = texts[:3]  # a subset shares the objects: still one copy
    assert ds.held_copies(set(texts[:5])) == {"min": 1, "max": 1}
    again = pickle.loads(pickle.dumps(texts))  # what a worker unpickling the data a second time would hold
    assert ds.held_copies(set(texts[:5])) == {"min": 2, "max": 2}
    del subset, again


def test_the_probe_stops_a_worker_at_its_first_step_and_reports_it(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    ds.write_dataset(tmp_path / "data", 200)
    reports = tmp_path / "probes"
    reports.mkdir()
    (reports / "started").write_text("0")
    monkeypatch.setattr(runner, "run_shard", runner.run_shard)  # restored after the test: the probe replaces both
    monkeypatch.setattr(Trainer, "step", Trainer.step)
    ds.install_probe(reports)
    request = ShardRequest(evaluators=(), save_model=False)
    shards = runner.plan(["ce"], [str(tmp_path / "data")], ["tiny-bert"], [1],
                         {"epochs": 1, "batch_size": 8, "max_length": 16}, None, results_dir=tmp_path / "r",
                         request=request)
    outcomes = runner.execute(shards, tmp_path / "r", device="cpu", progress=False, request=request)
    assert [o.status for o in outcomes] == ["failed"] and "first training step" in outcomes[0].message
    (report,) = [json.loads(p.read_text()) for p in reports.glob("*.json")]
    assert report["copies_on_arrival"] == report["copies_at_first_step"] == {"min": 1, "max": 1}
    assert report["rss_first_step_mb"] >= report["rss_start_mb"] > 0


@pytest.mark.slow
def test_the_command_end_to_end(capsys):
    assert perf_main(["data-scale", "--rows", "300", "--batch-size", "8", "--max-length", "16", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["benchmark"] == "data-scale" and report["rows"] == 300
    assert report["load"]["sizes"] == {"train": 270, "validation": 30, "test": 30}
    assert report["load"]["copies"] == {"min": 1, "max": 1} and report["max_copies_per_worker"] == 1
    assert len(report["sweep"]["workers"]) == ds.WORKERS and report["sweep"]["outcomes"] == ["failed"] * ds.WORKERS
    assert all(report["targets"][k] for k in ("load_seconds_met", "peak_rss_met", "copies_met"))


def test_too_few_rows_is_one_line(capsys):
    assert perf_main(["data-scale", "--rows", "5"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == ["python -m benchmarks: error: --rows must be >= 20, got 5"]
