"""The benchmarks of benchmarks: FLOP counts, peak lookup, wall-time estimates, and each benchmark end to end on
tiny models (structure and keys only: benchmarks are run by hand, nothing is timed here)."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest
import torch

import benchmarks as perf
from benchmarks import common as perf_common
from bench.data.batching import Encoded, collate
from bench.encoders.models import build_encoder
from bench.errors import BenchError
from benchmarks import gemm_tflops, main as perf_main, peak_tflops, throughput, training_flops
from bench.spec import RunSpec, TrainConfig
from benchmarks.costs import makespan, shard_cost, step_time_seconds
from bench.errors import install_extra


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


def test_step_times_count_batches_validations_and_the_test_pass():
    sizes = {"train": 250, "validation": 30, "test": 61}   # 8, 1 and 2 batches of 32
    steps = {"ce": 0.3, "clld-adaptive": 0.6}
    cfg = TrainConfig(epochs=4, batch_size=32)
    epoch, total = step_time_seconds(RunSpec("ce", "d", "e", 1, "f", cfg, ()), sizes, steps)
    assert epoch == pytest.approx(8 * 0.3 + 1 * 0.1) and total == pytest.approx(4 * epoch + 2 * 0.1)
    adaptive = RunSpec("clld-adaptive", "d", "e", 1, "f", cfg, (("evals_per_epoch", 10),))
    epoch, total = step_time_seconds(adaptive, sizes, steps, epochs=2)   # validations forward only, at ce's third
    assert epoch == pytest.approx(8 * 0.6 + 10 * 0.1) and total == pytest.approx(2 * epoch + 2 * 0.1)
    with pytest.raises(BenchError, match="add supcon=MS to --step-ms"):
        step_time_seconds(RunSpec("supcon", "d", "e", 1, "f", cfg, ()), sizes, steps)


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
    assert len(measured) == 1 and measured[0]["key"] == ce["key"]   # the run key matches `clbench run`'s
    assert report["calibration"]["runs_compared"] == 1


def test_estimate_from_step_times_uses_the_sweeps_batches_and_method_names(tiny, tmp_path, capsys):
    config = tmp_path / "sweep.yaml"
    config.write_text(f"methods: [ce, clld]\ndatasets: [{tiny}]\nencoder: tiny-bert\nepochs: 3\nbatch_size: 8\n")
    assert perf_main(["estimate", "--config", str(config), "--step-ms", "ce=3000,clld=6000", "--devices", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    ce, clld = report["per_shard"]
    sizes = report["datasets"]["tiny/tiny-bert"]
    batches = {split: math.ceil(sizes[f"{split}_texts"] / 8) for split in ("train", "validation", "test")}
    epoch = batches["train"] * 3 + batches["validation"] * 1   # validation forward only: a third of a ce step
    assert ce["expected_epoch_s"] == epoch and ce["expected_s"] == 3 * epoch + batches["test"] * 1
    assert clld["expected_epoch_s"] == batches["train"] * 6 + 10 * batches["validation"] * 1   # 10 validations
    assert report["step_seconds"] == {"ce": 3.0, "clld-adaptive": 6.0} and report["achieved_tflops"] is None
    assert "upper bound" in report["rate_from"]
    for bad, message in (("ce=fast", "METHOD=MILLISECONDS"), ("ce=30", "add clld-adaptive=MS")):
        assert perf_main(["estimate", "--config", str(config), "--step-ms", bad]) == 2
        assert message in capsys.readouterr().err


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
    assert report["methods"]["ce"]["host_syncs_per_step"] >= 0   # counted for ce, on an extra untimed epoch
    for entry in report["methods"].values():
        assert entry["seq_per_s"] > 0 and entry["tflops"] > 0 and entry["mfu"] is None
        assert entry["fraction_of_gemm"] == pytest.approx(entry["tflops"] / report["gemm_tflops"], rel=1e-2, abs=1e-3)


def test_flops_need_a_transformer_encoder():
    bundle = build_encoder("textcnn", ["a b c d", "e f g"], TrainConfig(max_length=16))
    with pytest.raises(BenchError, match="transformer encoders only"):
        training_flops(bundle.model, np.array([3, 4]))


# ----------------------------------------------------------------------------------------------- GPU fast path
# Benchmarks run end to end on the tiny fixture; nothing here is timed (speed is the benchmarks' output, not a
# property a test can rely on). Every benchmark's stdout must be one JSON document.

TINY = ["--encoder", "tiny-bert", "--max-length", "32", "--rounds", "1"]


def run_perf(capsys, *argv) -> tuple[dict, str]:
    """`python -m benchmarks ARGV` in-process: its parsed stdout (all of it JSON) and its stderr."""
    assert perf_main([str(a) for a in argv]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def test_stdout_carries_only_the_report_whatever_a_benchmark_prints(monkeypatch, capfd):
    import os
    import subprocess
    import sys

    def noisy(args):
        print("{'train_runtime': 0.1}")            # what the HF Trainer prints
        os.write(1, b"native library output\n")   # C code writing to file descriptor 1
        subprocess.run([sys.executable, "-c", "print('a child process')"], check=True)
        return {"benchmark": "noisy"}

    monkeypatch.setitem(perf.COMMANDS, "overhead", noisy)
    assert perf_main(["overhead", "--device", "cpu"]) == 0  # the CPU's device name below, GPU visible or not
    out, err = capfd.readouterr()
    assert json.loads(out) == {"benchmark": "noisy", "device_name": perf.device_name("cpu")}
    for line in ("{'train_runtime': 0.1}", "native library output", "a child process"):
        assert line in err


def test_the_package_imports_lightly_and_re_exports_each_benchmark_function():
    import subprocess
    import sys
    import types

    code = "import sys, benchmarks; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'methods')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"   # `import benchmarks` loads no benchmark and no torch
    for name in perf.__all__:       # each re-export is the object its module defines (no submodule shadows it)
        value = getattr(perf, name)
        assert not isinstance(value, types.ModuleType) and name in dir(perf)
    assert perf.throughput is throughput and perf.main is perf_main and perf.prepare is perf_common.prepare
    with pytest.raises(AttributeError):
        perf.no_such_name


def test_python_m_bench_perf_runs_the_command_line():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m benchmarks")
    assert "short-texts" in done.stdout and "estimate (expected wall time" in done.stdout


def test_prepare_sets_a_model_up_as_a_real_shard(monkeypatch):
    calls = []
    real_kernels = perf_common.deterministic_kernels
    monkeypatch.setattr(perf_common, "deterministic_kernels",
                        lambda device, strict=False: calls.append(real_kernels(device, strict)))
    args = argparse.Namespace(dataset="demo", data_dir=None, encoder="tiny-bert", batch_size=4, max_length=32,
                              steps=1, device="cpu", precision="fp32", compile_backend="eager")
    plain = perf.prepare(args)
    assert plain.trainer.bucket == 0 and plain.compiled == "" and len(plain.data) == 4   # CPU default: no bucket
    compiled = perf.prepare(args, compile=True)
    assert compiled.trainer.bucket == 16 and compiled.compiled == "regional: 2 x BertLayer"
    assert perf.prepare(args, bucket=8).trainer.bucket == 8
    args.device = "meta"  # any device but a CPU: no deterministic kernels (as shards on a GPU)
    perf.prepare(args)
    real_kernels(torch.device("cpu"))  # leave the process as a CPU shard would
    assert calls == [True, True, True, False]


def test_the_old_collate_pads_like_the_new_one_at_the_exact_width():
    rng = np.random.default_rng(1)
    data = Encoded([rng.integers(3, 40, size=n).tolist() for n in rng.integers(1, 20, size=30)],
                   rng.integers(0, 3, size=30))
    for _ in range(5):
        index = rng.choice(30, size=7, replace=False)
        old, new = perf.old_collate(data, index, pad_id=1, min_length=4), collate(data, index, 1, min_length=4)
        assert set(old) == set(new) and all(torch.equal(old[k], new[k]) for k in old)


def test_short_texts_compares_the_old_loop_with_the_new_on_the_same_sequences(tiny, capsys, monkeypatch):
    from bench.training.trainer import Trainer

    asked, real_optimizer = [], Trainer.optimizer

    def optimizer(self, fused=None):
        asked.append(fused)
        return real_optimizer(self, fused=fused)

    monkeypatch.setattr(Trainer, "optimizer", optimizer)
    report, err = run_perf(capsys, "short-texts", "--datasets", tiny, *TINY, "--batch-size", "8", "--steps", "2",
                           "--device", "cpu")  # the CPU's device and default bucket are asserted below
    assert asked == [None, None]  # old and new: the device's default AdamW (fused on a GPU), no credit for fusing
    assert "fused on a GPU" in report["old"] and "non-fused" not in report["old"]
    assert report["benchmark"] == "short-texts" and report["device"] == "cpu" and "CPU" in report["device_name"]
    entry = report["datasets"][str(tiny)]
    assert set(entry["seq_per_s"]) == set(entry["ratio_vs_old"]) == {"old", "new"}
    assert entry["sequences_per_round"]["old"] == entry["sequences_per_round"]["new"] == entry["train_examples"] == 16
    assert entry["ratio_vs_old"]["old"] == 1.0 and all(v > 0 for v in entry["seq_per_s"].values())
    assert entry["length_bucket"] == {"old": 0, "new": 0}  # the CPU default bucket
    assert "warm-up" in err and "round 1/1" in err  # a progress line per round on stderr


def test_report_measures_both_batch_sizes_and_gpu_targets_do_not_apply_on_a_cpu(tiny, capsys):
    report, progress = run_perf(capsys, "report", "--dataset", tiny, *TINY, "--steps", "1", "--device", "cpu")
    for size in (32, 128):  # a long report says on stderr what it measures as it goes
        assert f"[perf report] batch size {size}: ce and clld throughput" in progress
    assert report["batch_sizes"] == [32, 128] and set(report["per_batch_size"]) == {"32", "128"}
    for size, entry in report["per_batch_size"].items():
        assert entry["throughput"]["batch_size"] == int(size)
        assert set(entry["throughput"]["methods"]) == {"ce", "clld-adaptive"}
        assert entry["throughput"]["methods"]["ce"]["host_syncs_per_step"] >= 0
        assert "ratio_vs_hf_trainer" in entry["hf_trainer"] or "error" in entry["hf_trainer"]  # needs accelerate
    assert len(report["targets"]) == 6 and {t.split(" at batch ")[1] for t in report["targets"]} == {"32", "128"}
    assert all(t["met"].startswith("not applicable: a GPU target") for t in report["targets"].values())


def test_report_takes_one_batch_size_as_before():
    args = perf.build_parser().parse_args(["report", "--batch-size", "16"])
    perf.resolve(args)
    assert args.batch_size_list == [16]
    args = perf.build_parser().parse_args(["report", "--batch-size", "16", "--batch-sizes", "8,64"])
    perf.resolve(args)
    assert args.batch_size_list == [8, 64]


@pytest.mark.slow
def test_shards_runs_k_training_processes_at_once(tiny, capsys):
    report, _ = run_perf(capsys, "shards", "--dataset", tiny, *TINY, "--batch-size", "8", "--steps", "2",
                         "--concurrency", "1,2", "--epochs", "1", "--quiet")
    assert set(report["concurrency"]) == {"1", "2"} and report["ratio_vs_1"]["1"] == 1.0
    assert report["measured_by"].startswith("wall time")
    one, two = (report["concurrency"][k]["launches"][0] for k in ("1", "2"))
    assert len(one["pids"]) == 1 and len(set(two["pids"])) == 2 and not set(one["pids"]) & set(two["pids"])
    assert two["sequences"] == 2 * one["sequences"] == 32   # each process trained the same 16 examples
    assert one["threads_per_process"] >= two["threads_per_process"] >= 1
    assert 0 <= two["overlap"] <= 1 and report["concurrency"]["2"]["aggregate_seq_per_s"] > 0


@pytest.mark.slow
def test_shard_cost_splits_each_shard_of_a_worker(tiny, capsys):
    report, _ = run_perf(capsys, "shard-cost", "--dataset", tiny, "--encoder", "tiny-bert", "--epochs", "2",
                         "--batch-size", "8", "--max-length", "32", "--evaluators", "repr", "--shards", "2", "--quiet")
    assert report["run_key"].startswith("ce_tiny_tiny-bert_s1_") and report["epochs"] == 2 and report["shards"] == 2
    first, second = report["per_shard"]
    assert second["run_key"].startswith("ce_tiny_tiny-bert_s2_")
    for shard in (first, second):
        parts = shard["parts"]
        assert all(v >= 0 for v in parts.values()) and set(shard["evaluators"]) == {"repr"}
        assert sum(parts.values()) == pytest.approx(shard["seconds"], abs=0.05)  # the parts account for it all
        assert parts["validation_seconds"] > 0 and parts["evaluator_seconds"] > 0
        assert parts["checkpoint_seconds"] > 0  # the suite's checkpoint after every epoch (conftest)
        assert parts["after_seconds"] >= 0
        assert shard["fixed_seconds"] == pytest.approx(
            shard["seconds"] - parts["train_seconds"] - parts["validation_seconds"], abs=0.01)
        assert shard["fixed_without_evaluators_seconds"] < shard["fixed_seconds"]
    assert report["fixed_seconds_per_shard"] == pytest.approx(second["fixed_seconds"], abs=0.01)  # median after 1st
    assert report["first_shard_fixed_seconds"] == first["fixed_seconds"]
    assert report["startup_seconds"] > 0 and report["target_seconds"] == 3.0
    assert report["startup_seconds"] + first["seconds"] + second["seconds"] + report["wind_down_seconds"] == \
        pytest.approx(report["wall_seconds"], abs=0.1)
    assert set(report["phases"]) == {"build_seconds", "prepare_seconds", "tokenize_seconds", "test_seconds"}
    assert 0 < report["fixed_share_of_wall"] <= 1 and report["suggested_shard_overhead_s"] >= 0


@pytest.mark.slow
def test_grid_cost_sets_a_grid_wall_time_against_its_training(tiny, capsys):
    report, _ = run_perf(capsys, "grid-cost", "--dataset", tiny, "--encoder", "tiny-bert", "--epochs", "1",
                         "--batch-size", "8", "--max-length", "32", "--methods", "ce,supcon",
                         "--grid", "supcon.tau=0.1,0.3", "--shards", "4", "--train-size", "8", "--quiet")
    assert report["shards"] == 6 and report["train_size"] == 8  # 3 combinations a seed: 2 seeds for 4 shards
    assert "--grid supcon.tau=0.1,0.3" in report["command"] and "--train-size 8" in report["command"]
    assert report["evaluators"] == []  # a knob grid's default: clean metrics only
    wall, train = report["wall_seconds"], report["train_seconds"]
    assert 0 < train < train + report["validation_seconds"] + report["test_seconds"] < wall
    assert report["training_share"] == pytest.approx(train / wall, abs=0.002)
    assert report["training_share"] < report["model_passes_share"] < 1
    assert report["overhead_seconds_per_shard"]["median"] > 0


@pytest.mark.parametrize("argv, message", [
    (["grid-cost", "--grid", "supcon.tau"], "--grid 'supcon.tau': expected KEY=V1,V2"),  # as `clbench run` says
    (["grid-cost", "--methods", "ce", "--grid", "supcon.tau=0.1,0.3"], "supcon is not among the methods of this run"),
    (["grid-cost", "--grid", "supcon.nope=1,2"], "method 'supcon' has no setting 'nope'"),
    (["shard-cost", "--grid", "supcon.tau=0.1,0.3"], "--grid is for grid-cost"),
    (["grid-cost", "--shards", "0"], "--shards must be >= 1")])
def test_grid_cost_refuses_a_grid_it_cannot_count(argv, message, capsys):
    assert perf_main(argv) == 2
    assert message in capsys.readouterr().err


def test_compile_times_eager_and_compiled_steps_and_reports_what_cannot_compile(tiny, capsys, monkeypatch):
    common = ["compile", "--dataset", tiny, *TINY, "--batch-size", "8", "--steps", "2", "--methods", "ce",
              "--compile-backend", "eager", "--quiet"]
    report, err = run_perf(capsys, *common)
    ce = report["methods"]["ce"]
    assert report["backend"] == "eager" and report["length_bucket"] == 16 and "[perf" not in err
    assert ce["compiled"] == "regional: 2 x BertLayer" and ce["compilations"] >= 1
    for key in ("eager_step_seconds", "compiled_step_seconds", "speedup", "compile_seconds"):
        assert isinstance(ce[key], float)

    def lazily_broken(encoder, backend="inductor"):  # torch.compile fails at the first call, not when asked
        def fail(*args, **kwargs):
            raise RuntimeError("this model does not compile\nlong traceback")

        encoder.forward = fail
        return "broken"

    monkeypatch.setattr(perf_common, "compile_encoder", lazily_broken)
    report, _ = run_perf(capsys, *common)
    ce = report["methods"]["ce"]
    assert ce["error"] == "RuntimeError: this model does not compile"
    assert ce["eager_step_seconds"] > 0 and "compiled_step_seconds" not in ce


def test_profile_summarises_one_step_under_the_profiler(tiny, capsys):
    report, err = run_perf(capsys, "profile", "--dataset", tiny, *TINY, "--batch-size", "8", "--steps", "2",
                           "--device", "cpu", "--quiet")
    assert {"benchmark", "method", "encoder", "dataset", "batch_size", "max_length", "steps", "device", "precision",
            "torch_threads", "wall_seconds", "step_ms", "gpu_busy_share", "gpu_busy_share_note",
            "kernel_launches_per_step", "top_ops", "host_ops_per_step"} <= set(report)
    assert report["benchmark"] == "profile" and report["method"] == "ce" and "[perf" not in err
    assert report["steps"] == 2 and report["step_ms"] > 0 and report["wall_seconds"] > 0
    assert report["gpu_busy_share"] is None and report["kernel_launches_per_step"] is None   # a CPU runs no kernels
    assert "no GPU" in report["gpu_busy_share_note"] and report["host_ops_per_step"] > 0
    ops = report["top_ops"]
    assert 0 < len(ops) <= 10 and all(set(op) == {"name", "calls", "self_ms_per_step", "share"} for op in ops)
    assert all(0 < op["share"] <= 1 and op["calls"] >= 1 and op["self_ms_per_step"] > 0 for op in ops)
    assert sum(op["share"] for op in ops) <= 1 + 1e-3   # shares of all host operators' self time (4 digits each)
    assert [op["share"] for op in ops] == sorted((op["share"] for op in ops), reverse=True)


@pytest.mark.parametrize("argv,message", [
    (["report", "--batch-sizes", "32,x"], "--batch-sizes takes whole numbers"),
    (["overhead", "--batch-sizes", "32"], "--batch-sizes is for `report`"),
    (["shards", "--concurrency", "2,4"], "--concurrency needs 1"),
    (["shard-cost", "--methods", "ce,cl"], "give one method"),
    (["profile", "--methods", "ce,clld"], "profile profiles one method"),
    (["compile", "--compile-backend", "nosuch"], "unknown --compile-backend 'nosuch'"),
    (["methods", "--methods", "nope"], "nope"),
    (["overhead", "--steps", "0"], "--steps must be >= 1"),
    (["short-texts", "--datasets", ","], "--datasets names no dataset"),
    (["no-such-benchmark"], "invalid choice"),
    (["throughput", "--rounds", "many"], "is not a whole number"),
])
def test_bad_arguments_exit_2_with_one_line(capsys, argv, message):
    assert perf_main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("python -m benchmarks: error:") and message in captured.err


def test_hf_trainer_without_accelerate_is_a_one_line_error(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real(name, *a))
    assert perf_main(["hf-trainer", "--encoder", "tiny-bert", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and install_extra("perf") in err[0]


def test_hf_trainer_races_its_length_grouped_and_its_random_sampler(tiny, monkeypatch, capsys):
    """Both HF rows by default: group_by_length (loop vs loop) and the default random sampler (batching and loop),
    each with its padding share; the HF Trainer really builds a LengthGroupedSampler for the first."""
    pytest.importorskip("accelerate")
    try:
        from transformers import Trainer as HFTrainer, TrainingArguments
    except Exception as exc:  # noqa: BLE001 (any import failure of the optional baseline skips)
        pytest.skip(f"the Hugging Face Trainer cannot be imported: {exc}")
    from benchmarks.hf_baseline import sampler_arguments

    samplers: list[str] = []
    real = HFTrainer._get_train_sampler

    def recording(self, *a, **k):
        sampler = real(self, *a, **k)
        samplers.append(type(sampler).__name__)
        return sampler

    monkeypatch.setattr(HFTrainer, "_get_train_sampler", recording)
    report, err = run_perf(capsys, "hf-trainer", "--dataset", tiny, *TINY, "--steps", "2", "--batch-size", "8",
                           "--device", "cpu")
    rows = {"ours", "hf_trainer", "hf_trainer_group_by_length"}
    assert set(report["seq_per_s"]) == set(report["padding_share"]) == rows
    assert set(report["ratio_vs_hf_trainer"]) == set(report["ratio_vs_hf_trainer_group_by_length"]) == rows
    assert report["ratio_vs_hf_trainer"]["hf_trainer"] == report["ratio_vs_hf_trainer_group_by_length"][
        "hf_trainer_group_by_length"] == 1.0
    loop, both = "loop vs loop (ours / HF group_by_length)", "batching and loop (ours / HF default random sampler)"
    per_token = report["padded_tokens_per_s"]
    assert report["comparisons"] == {
        loop: report["ratio_vs_hf_trainer_group_by_length"]["ours"], both: report["ratio_vs_hf_trainer"]["ours"],
        loop + ", per padded token": pytest.approx(per_token["ours"] / per_token["hf_trainer_group_by_length"],
                                                   abs=0.01)}
    assert set(report["ratio_per_round"]) == {"ours / hf_trainer", "ours / hf_trainer_group_by_length"}
    assert all(len(v) == 1 and v[0] > 0 for v in report["ratio_per_round"].values())
    assert all(0 <= share < 1 for share in report["padding_share"].values())
    assert report["train_examples"] == 16 and report["optimizer_steps_per_round"] == 2
    assert report["megabatch_batches"] == {"ours": 50, "hf_trainer_group_by_length": 1}  # HF: min(50, 16 // 32)
    assert len({tuple(t) for t in report["torch_threads_per_variant"].values()}) == 1  # same threads for all
    assert samplers.count("LengthGroupedSampler") == 2 and samplers.count("RandomSampler") == 2  # warm-up + 1
    assert "hf_trainer_group_by_length" in err and "round 1/1" in err
    assert sampler_arguments(False) == {}
    TrainingArguments(output_dir=str(tiny / "hf"), use_cpu=True, report_to=[], **sampler_arguments(True))


def test_slurm_benchmark_says_why_it_cannot_run_without_a_cluster(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, sinfo, sacct...
    assert perf_main(["slurm", "--slurm-shards", "3"]) == 2
    err = capsys.readouterr().err
    assert "no SLURM cluster here" in err and "scripts/start-local-slurm.sh" in err
    assert perf_main(["slurm", "--slurm-shards", "0"]) == 2
    assert "--slurm-shards must be >= 1" in capsys.readouterr().err


def test_the_slow_dataset_is_balanced_and_loads(tmp_path):
    from bench.data.loading import load_dataset
    from benchmarks.slurm import slow_dataset

    data = load_dataset(str(slow_dataset(tmp_path / "slow", 90, 27)), None, 0, 0.1)
    assert len(data.train) + len(data.validation) == 90 and len(data.test) == 27
    assert np.bincount(data.test.labels).tolist() == [9, 9, 9]
    assert sorted(data.label_names) == ["food", "sport", "tech"]


# ----------------------------------------------------------------------------------------------- demo

def write_demo_folder(folder, accuracies=(0.6, 0.8), collapsed=(False, False), eval_seconds=((1.5, 2.0), (0.5,))):
    """What the demo leaves in its folder: results/<run>/rows.json (+ evals/*.json) per method, and reports/."""
    from bench.results import store

    for method, accuracy, flat, evals in zip(("ce", "clld-adaptive"), accuracies, collapsed, eval_seconds):
        run = folder / "results" / f"{method}_demo_minilm_s1_x"
        base = {"run_key": run.name, "method": method, "evaluator": "clean", "wall_seconds": 10.0,
                "train_seconds": 7.5, "collapsed": int(flat)}
        store.write_json(run / "rows.json", [
            {**base, "split": "test", "metric": "accuracy", "label": "", "value": accuracy},
            {**base, "split": "test", "metric": "macro_f1", "label": "", "value": accuracy - 0.1},
            {**base, "split": "test", "metric": "f1", "label": "positive", "value": 0.01},
            {**base, "split": "validation", "metric": "accuracy", "label": "", "value": 0.02}])
        for i, seconds in enumerate(evals):
            store.write_json(run / "evals" / f"e{i}-h.json", {"status": "done", "rows": [
                {"eval_seconds": seconds, "metric": "m", "value": 1.0}, {"eval_seconds": 99.0}]})
        store.write_json(run / "evals" / "empty-h.json", {"status": "done", "rows": []})
    reports = folder / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    for name in ("paper-ii.md", "summary.png", "summary.pdf", "notes.txt"):
        (reports / name).write_text("x")


def test_demo_report_times_each_shard_against_the_budget_and_checks_the_comparison(tmp_path):
    from benchmarks.demo import BUDGET_SECONDS, demo_report

    write_demo_folder(tmp_path)
    report = demo_report(tmp_path, 100.0, 123.456, "a\nb\nc\n")
    assert BUDGET_SECONDS == 180
    assert report["within_budget"] is True and report["share_of_budget"] == round(100 / 180, 3)
    assert report["wall_s"] == 100.0 and report["cpu_s"] == 123.5 and report["stdout_lines"] == 3
    assert report["shards"] == {
        "ce": {"wall_s": 10.0, "train_s": 7.5, "evaluators_s": 3.5, "accuracy": 0.6, "macro_f1": 0.5,
               "collapsed": False},
        "clld-adaptive": {"wall_s": 10.0, "train_s": 7.5, "evaluators_s": 0.5, "accuracy": 0.8,
                          "macro_f1": pytest.approx(0.7), "collapsed": False}}
    assert report["outside_shards_s"] == 100 - (10 + 3.5 + 10 + 0.5)
    assert report["methods_differ"] is True and report["any_collapsed"] is False
    assert report["reports"] == ["reports/paper-ii.md", "reports/summary.png"]   # PNG and Markdown only


def test_demo_report_flags_a_collapsed_shard_equal_accuracies_and_a_blown_budget(tmp_path):
    from benchmarks.demo import demo_report

    write_demo_folder(tmp_path / "a", accuracies=(0.7, 0.7), collapsed=(False, True))
    report = demo_report(tmp_path / "a", 200.0, 1.0, "")
    assert report["any_collapsed"] is True and report["shards"]["clld-adaptive"]["collapsed"] is True
    assert report["methods_differ"] is False
    assert report["within_budget"] is False and report["share_of_budget"] == round(200 / 180, 3)
    assert demo_report(tmp_path / "a", 180.0, 1.0, "")["within_budget"] is True   # the budget itself is within


def test_demo_runs_bench_run_alone_in_an_empty_folder_without_the_callers_folders(tmp_path, monkeypatch):
    import subprocess
    from pathlib import Path

    from benchmarks import demo as demo_module

    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    calls = []

    def fake_run(argv, cwd, env, capture_output, text):
        calls.append((argv, cwd, env))
        assert not list(Path(cwd).iterdir())   # an empty folder
        write_demo_folder(Path(cwd))
        return subprocess.CompletedProcess(argv, 0, stdout="table\n", stderr="clbench: 2 shard(s)\n")

    monkeypatch.setattr(demo_module.subprocess, "run", fake_run)
    report = demo_module.demo(argparse.Namespace(quiet=True))
    (argv, cwd, env), = calls
    assert argv[1:] == ["-m", "bench", "run"]
    assert "BENCH_RESULTS_DIR" not in env and "BENCH_DATA_DIR" not in env
    assert not Path(cwd).exists()   # the temporary folder is removed
    assert set(report["shards"]) == {"ce", "clld-adaptive"} and report["stdout_lines"] == 1
    walls = iter([50.0, 70.0, 60.0])
    monkeypatch.setattr(demo_module, "demo_report", lambda *args: {"wall_s": next(walls)})
    report = demo_module.demo(argparse.Namespace(quiet=True, rounds=3))
    assert len(calls) == 4 and len({cwd for _, cwd, _ in calls}) == 4  # each round in a fresh folder
    assert report["wall_s_rounds"] == [50.0, 70.0, 60.0] and report["wall_s_median"] == 60.0
    assert report["wall_s_range"] == [50.0, 70.0] and report["wall_s"] == 60.0  # the last round's report

    monkeypatch.setattr(demo_module.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(
        argv, 2, stdout="", stderr="clbench: 3 shard(s)\nerror: no MiniLM here\n"))
    with pytest.raises(BenchError, match="the demo exited 2: error: no MiniLM here"):
        demo_module.demo(argparse.Namespace(quiet=True))


def test_demo_is_a_benchmark_of_the_command_line(monkeypatch, capsys):
    from benchmarks.demo import demo

    assert "demo" in perf.COMMANDS and perf.COMMANDS["demo"] is demo
    monkeypatch.setitem(perf.COMMANDS, "demo", lambda args: {"benchmark": "demo", "quiet": args.quiet})
    report, _ = run_perf(capsys, "demo", "--quiet")
    assert report["benchmark"] == "demo" and report["quiet"] is True


def test_floor_times_the_tfidf_floor_against_its_first_configuration(capsys, tiny):
    report, _ = run_perf(capsys, "floor", "--datasets", str(tiny), "--encoder", "tiny-bert", "--rounds", "2",
                         "--max-length", "16", "--quiet")
    (entry,) = report["datasets"].values()
    assert report["benchmark"] == "floor" and entry["classes"] == 3 and entry["train"] > 0
    for variant in ("now", "first"):
        assert len(entry[variant]["seconds"]) == 2 and entry[variant]["c"] in (0.1, 1.0, 10.0, 100.0)
        assert 0 <= entry[variant]["test_accuracy"] <= 100 and entry[variant]["features"] > 0
    medians = {v: float(np.median(entry[v]["seconds"])) for v in ("now", "first")}
    assert entry["speedup"] == round(medians["first"] / medians["now"], 2)


def test_the_answers_benchmarks_synthetic_archive_loads_as_finished_runs(tmp_path):
    """`python -m benchmarks answers` measures the page of a synthetic archive made from one real run folder: its
    runs load as results (methods x datasets x seeds, one knob combination each here), each run's accuracy row
    agrees with its predictions, and --runs defaults to 2,000 for answers (1,000 for verify-cost)."""
    import gzip

    from benchmarks.answers import SYNTHETIC_DATASETS, SYNTHETIC_METHODS, synthetic_archive
    from benchmarks.cli import build_parser, resolve
    from bench.reporting.resultsview import load_results
    from test_html_report import CE1, fill

    template = fill(tmp_path / "results") / CE1
    archive = synthetic_archive(tmp_path / "synthetic", template, runs=200, items=20)
    frame = load_results(archive)
    assert frame["run_key"].nunique() == 200
    assert set(frame["method"]) == set(SYNTHETIC_METHODS) and set(frame["dataset"]) == set(SYNTHETIC_DATASETS)
    run = next(archive.iterdir())
    predictions = [json.loads(line) for line in gzip.decompress((run / "predictions.jsonl.gz").read_bytes())
                   .decode().splitlines()]
    accuracy = next(r["value"] for r in json.loads((run / "rows.json").read_text())
                    if r["metric"] == "accuracy" and not r["label"])
    assert accuracy == sum(p["gold"] == p["predicted"] for p in predictions) / len(predictions)
    for command, runs in (("answers", 2000), ("verify-cost", 1000)):
        args = build_parser().parse_args([command])
        resolve(args)
        assert args.runs == runs
