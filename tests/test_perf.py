"""The throughput benchmark's FLOP count and peak lookup (benchmarks themselves are run by hand, not timed here)."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import torch

from bench.encoders import build_encoder
from bench.errors import BenchError
from bench.perf import gemm_tflops, main as perf_main, peak_tflops, throughput, training_flops
from bench.spec import RunSpec, TrainConfig
from bench.walltime import makespan, shard_cost


def test_training_flops_counts_weights_and_attention():
    bundle = build_encoder("tiny-bert", ["a b c d", "e f g"], TrainConfig(max_length=16))
    encoder = bundle.model
    embedding = sum(p.numel() for n, p in encoder.named_parameters() if "embeddings" in n)
    weights = sum(p.numel() for p in encoder.parameters()) - embedding
    lengths = np.array([3, 5])
    layers, width = 2, 32
    expected = 6 * weights * 8 + 12 * layers * width * (9 + 25)
    assert training_flops(encoder, lengths) == expected
    assert weights > 0 and embedding > 0


def test_peak_is_known_only_for_gpus_in_the_table_or_given():
    assert peak_tflops(torch.device("cpu"), None) is None
    assert peak_tflops(torch.device("cpu"), 123.0) == 123.0


# ----------------------------------------------------------------------------------------------- wall-time estimate

def test_makespan_packs_longest_first_onto_the_least_busy_device():
    assert makespan([5, 4, 3, 3, 3], 1) == 18
    assert makespan([5, 4, 3, 3, 3], 2) == 10  # LPT: 5 | 4, then 3 -> 4+3, 3 -> 5+3, 3 -> 7+3
    assert makespan([7], 4) == 7
    assert makespan([], 3) == 0
    with pytest.raises(BenchError):
        makespan([1.0], 0)


def test_shard_cost_counts_passes_validations_and_the_test_pass():
    flops = {"train": 90.0, "validation": 30.0, "test": 60.0}
    cfg = TrainConfig(epochs=4)
    ce = shard_cost(RunSpec("ce", "d", "e", 1, "f", cfg, ()), flops)
    assert ce.epoch_flops == 90 + 30 / 3 and ce.total_flops == 4 * 100 + 20
    adaptive = shard_cost(RunSpec("clld-adaptive", "d", "e", 1, "f", cfg, (("evals_per_epoch", 10),)), flops,
                          epochs=2)
    assert adaptive.epochs == 2 and adaptive.epoch_flops == 2 * 90 + 10 * 10
    assert adaptive.total_flops == 2 * 280 + 20
    with pytest.raises(BenchError, match="no pass count"):
        shard_cost(RunSpec("mystery", "d", "e", 1, "f", cfg, ()), flops)


def test_estimate_counts_the_real_data_and_sets_measured_runs_beside(tiny, tmp_path, cli, capsys):
    config = tmp_path / "sweep.yaml"
    config.write_text(f"methods: [ce, cl]\ndatasets: [{tiny}]\nseeds: 1-2\nencoder: tiny-bert\nepochs: 2\n"
                      "max_length: 32\nbatch_size: 8\nlr: 1.0e-3\n")
    results = tmp_path / "done"
    assert cli("run", "--config", config, "--methods", "ce", "--seeds", "1", "--results-dir", results,
               "--no-progress", "--evaluators", "none")[0] == 0
    assert perf_main(["estimate", "--config", str(config), "--tflops", "1e-6", "--devices", "1,2",
                      "--results-dir", str(results)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["shards"] == 4 and [r["key"].split("_")[0] for r in report["per_shard"]] == ["ce", "ce", "cl", "cl"]
    ce, cl = report["per_shard"][0], report["per_shard"][2]
    assert 1.8 < cl["expected_epoch_s"] / ce["expected_epoch_s"] <= 2   # two dropout views, one validation
    assert report["wall_seconds"]["2"] < report["wall_seconds"]["1"]
    measured = [r for r in report["per_shard"] if r["measured_epoch_s"] is not None]
    assert len(measured) == 1 and measured[0]["key"] == ce["key"]   # the run key matches `bench run`'s
    assert report["calibration"]["runs_compared"] == 1


def test_estimate_needs_a_rate_and_known_gpu_names(capsys):
    assert perf_main(["estimate"]) == 2
    assert "--tflops" in capsys.readouterr().err
    assert perf_main(["estimate", "--gpu", "B300"]) == 2
    assert "unknown --gpu 'B300'" in capsys.readouterr().err


def test_gemm_rate_is_positive_and_finite():
    rate = gemm_tflops(torch.device("cpu"), torch.float32, size=64, repeats=2)
    assert 0 < rate < 1e3


def test_throughput_reports_both_methods_and_the_gemm_reference():
    args = argparse.Namespace(
        dataset="demo", data_dir=None, encoder="tiny-bert", batch_size=8, max_length=32, steps=2, rounds=1,
        device="cpu", precision="fp32", peak_tflops=None)
    report = throughput(args)
    assert set(report["methods"]) == {"ce", "clld-adaptive"}
    for entry in report["methods"].values():
        assert entry["seq_per_s"] > 0 and entry["tflops"] > 0 and entry["mfu"] is None
        assert entry["fraction_of_gemm"] == pytest.approx(entry["tflops"] / report["gemm_tflops"], rel=1e-2, abs=1e-3)


def test_flops_need_a_transformer_encoder():
    bundle = build_encoder("textcnn", ["a b c d", "e f g"], TrainConfig(max_length=16))
    with pytest.raises(BenchError, match="transformer encoders only"):
        training_flops(bundle.model, np.array([3, 4]))
