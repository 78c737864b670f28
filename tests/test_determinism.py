"""`clbench run --deterministic` and the device paths, on a CPU: which kernels a shard trains with on each device
(a GPU forced by a fake device object; nothing here needs one), that the flag reaches the shard from the command
line and a settings file, that each row records the choice, and what an operation without a deterministic
implementation does to the shard."""

import json
import os

import pytest
import torch

from bench.training import session as session_module  # where a shard sets up its kernels
from bench.training import trainer as trainer_module
from bench.training.setup import autocast_dtype, deterministic_kernels, resolve_device
from conftest import FAST

CUDA = torch.device("cuda")  # a device object only: nothing is allocated on it


def switches() -> dict:
    """The process-wide kernel switches `deterministic_kernels` sets."""
    return {"algorithms": torch.are_deterministic_algorithms_enabled(),
            "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
            "flash": torch.backends.cuda.flash_sdp_enabled(),
            "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
            "cudnn_attention": torch.backends.cuda.cudnn_sdp_enabled(),
            "math": torch.backends.cuda.math_sdp_enabled()}


FAST_KERNELS = {"flash": True, "mem_efficient": True, "cudnn_attention": True, "math": True}
MATH_ONLY = {"flash": False, "mem_efficient": False, "cudnn_attention": False, "math": True}


@pytest.fixture(autouse=True)
def cpu_default_afterwards():
    """Leave the process as a CPU shard would (the other tests' state)."""
    yield
    deterministic_kernels(torch.device("cpu"))


def test_a_cpu_is_deterministic_with_warnings_only_and_keeps_the_fast_attention_kernels():
    assert deterministic_kernels(torch.device("cpu")) is True
    assert switches() == {"algorithms": True, "warn_only": True, **FAST_KERNELS}


def test_a_gpu_trains_with_the_fastest_kernels_unless_asked():
    assert deterministic_kernels(CUDA) is False
    state = switches()
    assert state.pop("algorithms") is False and state.pop("warn_only") in (True, False)  # moot when off
    assert state == FAST_KERNELS


@pytest.mark.parametrize("device", [torch.device("cpu"), CUDA])
def test_strict_mode_raises_on_nondeterministic_ops_and_keeps_attention_on_the_math_kernel(device, monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    torch.backends.cudnn.benchmark = True
    assert deterministic_kernels(device, strict=True) is True
    assert switches() == {"algorithms": True, "warn_only": False, **MATH_ONLY}
    assert torch.backends.cudnn.benchmark is False
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"  # cuBLAS's reproducible workspace


def test_each_call_sets_every_switch_so_shards_in_one_process_do_not_inherit_a_choice():
    deterministic_kernels(CUDA, strict=True)
    assert deterministic_kernels(CUDA) is False and switches()["flash"] and not switches()["algorithms"]
    deterministic_kernels(CUDA, strict=True)
    assert deterministic_kernels(torch.device("cpu")) is True and switches()["warn_only"] and switches()["flash"]


def test_auto_picks_the_gpu_and_bf16_when_one_is_visible_and_an_explicit_cpu_stays_fp32(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == CUDA and autocast_dtype("auto", resolve_device("auto")) == torch.bfloat16
    assert resolve_device("cpu").type == "cpu" and autocast_dtype("auto", resolve_device("cpu")) is None
    assert autocast_dtype("fp32", CUDA) is None and autocast_dtype("bf16", torch.device("cpu")) == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto").type == "cpu"


def recorded_switches(monkeypatch) -> list[dict]:
    """Patch the Trainer so that each training run records the switches it trains under."""
    seen = []
    real_fit = trainer_module.Trainer.fit

    def fit(self, *args, **kwargs):
        seen.append(switches())
        return real_fit(self, *args, **kwargs)

    monkeypatch.setattr(trainer_module.Trainer, "fit", fit)
    return seen


def clean_rows(results) -> list[dict]:
    (run,) = [p for p in results.iterdir() if (p / "rows.json").is_file()]
    return json.loads((run / "rows.json").read_text()), json.loads((run / "train_log.json").read_text())


@pytest.mark.parametrize("how", ["flag", "settings file"])
def test_the_flag_reaches_the_shard_and_every_row_records_it(how, tiny, results, cli, monkeypatch, tmp_path):
    seen = recorded_switches(monkeypatch)
    extra = ["--deterministic"]
    if how == "settings file":
        config = tmp_path / "sweep.yaml"
        config.write_text("deterministic: true\n")
        extra = ["--config", config]
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--epochs", "1", "--device", "cpu",
                       "--results-dir", results, *extra)
    assert code == 0, err
    assert seen == [{"algorithms": True, "warn_only": False, **MATH_ONLY}]
    rows, log = clean_rows(results)
    assert {r["deterministic"] for r in rows} == {1} and log["deterministic"] is True


def test_without_the_flag_a_row_records_what_the_device_chose(tiny, results, cli, monkeypatch):
    seen = recorded_switches(monkeypatch)
    asked = []
    monkeypatch.setattr(session_module, "deterministic_kernels",
                        lambda device, strict=False: asked.append((device.type, strict)) or False)  # as on a GPU
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--epochs", "1", "--device", "cpu",
                       "--results-dir", results)
    assert code == 0, err
    assert asked == [("cpu", False)] and len(seen) == 1
    rows, log = clean_rows(results)
    assert {r["deterministic"] for r in rows} == {0} and log["deterministic"] is False


def test_the_flag_is_not_in_the_run_key(tiny, results, cli):
    assert cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--epochs", "1", "--device", "cpu",
               "--results-dir", results)[0] == 0
    code, out, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--epochs", "1", "--device", "cpu",
                         "--results-dir", results, "--deterministic")
    assert code == 0 and "[1/1] skipped" in err
    assert len([p for p in results.iterdir() if (p / "rows.json").is_file()]) == 1


def test_an_operation_without_a_deterministic_implementation_fails_the_shard_saying_what_to_do(
        tiny, results, cli, monkeypatch):
    def fit(self, *args, **kwargs):  # what torch raises in strict mode on a GPU, e.g. for a scatter-add
        raise RuntimeError("index_add_cuda_ does not have a deterministic implementation, but you set "
                           "'torch.use_deterministic_algorithms(True)'")

    monkeypatch.setattr(trainer_module.Trainer, "fit", fit)
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--device", "cpu",
                       "--results-dir", results, "--deterministic")
    assert code == 1
    (run,) = list(p for p in results.iterdir() if p.is_dir() and not p.name.startswith("."))
    reason = json.loads((run / "error.json").read_text())["reason"]
    assert "run without --deterministic" in reason and "index_add_cuda_" in reason
    assert not (run / "rows.json").exists()


def test_a_bad_settings_value_is_refused_before_anything_runs(tiny, results, cli, tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text("deterministic: sometimes\n")
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--results-dir", results,
                       "--config", config)
    assert code == 2 and "deterministic: expected true or false" in err and len(err.strip().splitlines()) == 1
    assert not results.exists()
