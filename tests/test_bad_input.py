"""Bad input to `clbench run`: each case fails at once with one line on stderr and exit code 2, before any
training, and leaves nothing under the results folder."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import pytest

import bench.running.runner  # noqa: F401  (import torch & co. once, so the timing below measures the checks only)
from conftest import FAST, FIXTURE, read_fixture, write_jsonl

BASE = ["--encoder", "tiny-bert", "--evaluators", "none", "--no-progress"]


def rows(classes=("a", "b"), n=6):
    return [{"text": f"text about {c} number {i}", "label": c} for c in classes for i in range(n)]


def folder(tmp_path: Path, train=None, test=None, validation=None, name="set") -> Path:
    """A dataset folder with JSON Lines splits (train/test default to two good classes)."""
    target = tmp_path / name
    write_jsonl(target / "train.jsonl", rows() if train is None else train)
    write_jsonl(target / "test.jsonl", rows(n=2) if test is None else test)
    if validation is not None:
        write_jsonl(target / "validation.jsonl", validation)
    return target


def csv_folder(tmp_path: Path, header: str, body: bytes | None = None) -> Path:
    """A folder with train.csv and test.csv under `header` (train's body replaced by `body` when given)."""
    target = tmp_path / "set"
    target.mkdir()
    lines = "".join(f"text number {i},{'ab'[i % 2]}\n" for i in range(8))
    for split in ("train", "test"):
        (target / f"{split}.csv").write_text(f"{header}\n{lines}", encoding="utf-8")
    if body is not None:
        (target / "train.csv").write_bytes(body)
    return target


def with_train_file(tmp_path: Path, name: str, content: bytes) -> Path:
    """The good folder with its train file replaced by `name` holding `content`."""
    target = folder(tmp_path)
    (target / "train.jsonl").unlink()
    (target / name).write_bytes(content)
    return target


def jsonl_bytes(records) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def dataset(build):
    """A case that only changes the data: `--datasets <the folder build(tmp_path) makes>`."""
    return lambda tmp_path: ["--datasets", build(tmp_path)]


def data_dir_with(name: str):
    def build(tmp_path):
        folder(tmp_path / "D", name="mine")
        return ["--datasets", name, "--data-dir", tmp_path / "D"]
    return build


def config_with(text: str):
    def build(tmp_path):
        (tmp_path / "run.yaml").write_text(text)
        return ["--config", tmp_path / "run.yaml"]
    return build


def card_copy_with_one_class(tmp_path):
    folder(tmp_path / "D", rows(("positive",)), rows(("positive",), 2), name="mr")
    return ["--datasets", "mr", "--data-dir", tmp_path / "D"]


def results_under_a_file(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    return ["--results-dir", tmp_path / "afile" / "results"]


def results_is_a_file(tmp_path):
    (tmp_path / "results.txt").write_text("not a folder")
    return ["--results-dir", tmp_path / "results.txt"]


LATIN1 = '{"text": "caf\xe9 au lait", "label": "a"}\n'.encode("latin-1")

# id -> (the arguments that make the case, given tmp_path; words the one-line message must hold)
CASES = {
    # classes
    "one-class-train": (dataset(lambda p: folder(p, train=rows(("a",)), test=rows(("a",), 2))),
                        ["'set'", "train has a single class ('a' in all 6 rows", "at least two classes"]),
    "one-class-card-copy": (card_copy_with_one_class,
                            ["dataset 'mr': train has a single class ('positive' in all 6 rows of local:",
                             "at least two classes"]),
    "test-class-not-in-train": (dataset(lambda p: folder(p, test=rows(("a", "z"), 2))),
                                ["dataset 'set': test label(s) ['z'] never occur in train"]),
    "validation-class-not-in-train": (dataset(lambda p: folder(p, validation=rows(("a", "c"), 2))),
                                      ["dataset 'set': validation label(s) ['c'] never occur in train"]),
    # lists that name nothing
    "empty-methods": (lambda p: ["--methods", ","], ["--methods names no method", "nothing to run"]),
    "empty-datasets": (lambda p: ["--datasets", ", ,"], ["--datasets names no dataset", "nothing to run"]),
    "empty-encoders": (lambda p: ["--encoder", ","], ["--encoder names no encoder", "nothing to run"]),
    "empty-seeds": (lambda p: ["--seeds", ","], ["--seeds names no seed", "nothing to run"]),
    "empty-evaluators": (lambda p: ["--evaluators", ","],
                         ["--evaluators names no evaluator", "--evaluators none to run none"]),
    "empty-config-methods": (config_with("methods: []\n"), ["config file", "methods is empty", "nothing to run"]),
    # folders
    "results-under-a-file": (results_under_a_file,
                             ["afile/results (--results-dir) cannot be created", "afile is a file",
                              "choose another folder with --results-dir"]),
    "results-is-a-file": (results_is_a_file, ["results.txt (--results-dir) is a file, not a folder"]),
    "missing-data-dir": (lambda p: ["--data-dir", p / "nowhere"], ["nowhere (--data-dir) does not exist"]),
    "dataset-is-a-file": (lambda p: ["--datasets", folder(p) / "train.jsonl"], ["train.jsonl is a file"]),
    "missing-test-file": (dataset(lambda p: (folder(p) / "test.jsonl").unlink() or p / "set"),
                          ["needs train and test files", "found: train.jsonl"]),
    # labels
    "label-list": (dataset(lambda p: folder(p, train=rows() + [{"text": "x", "label": ["a", "b"]}])),
                   ["row 13 of", "train.jsonl", '["a", "b"] is a list', "a string, an integer or a boolean"]),
    "label-dict": (dataset(lambda p: folder(p, train=[{"text": "x", "label": {"name": "a"}}] + rows())),
                   ["row 1 of", "train.jsonl", "is an object", "a string, an integer or a boolean"]),
    "label-fraction": (dataset(lambda p: folder(p, train=rows() + [{"text": "x", "label": 0.5}])),
                       ["row 13 of", "0.5 is a number with a fraction"]),
    "label-missing-in-a-row": (dataset(lambda p: folder(p, train=rows() + [{"text": "x"}])),
                               ["row 13 of", "has no 'label' value"]),
    "text-list": (dataset(lambda p: folder(p, train=[{"text": ["a", "b"], "label": "a"}] + rows())),
                  ["row 1 of", "'text' value is a list", "must be one string"]),
    "empty-text": (dataset(lambda p: folder(p, train=rows() + [{"text": "  ", "label": "a"}])),
                   ["1 row(s) of", "have empty text (first: row 13)"]),
    # columns and keys
    "csv-without-label-column": (dataset(lambda p: csv_folder(p, "text,category")),
                                 ["train.csv has no 'label' column", "columns found: 'text', 'category'"]),
    "csv-without-text-column": (dataset(lambda p: csv_folder(p, "sentence,label")),
                                ["train.csv has no 'text' column", "columns found: 'sentence', 'label'"]),
    "csv-label-in-other-case": (dataset(lambda p: csv_folder(p, "text,Label")),
                                ["has no 'label' column", "(is it 'Label'?)"]),
    "jsonl-without-label-key": (dataset(lambda p: folder(p, train=[{"text": "x", "y": "a"}] * 4)),
                                ["no row of", "train.jsonl has a 'label' key", "keys found: 'text', 'y'"]),
    "empty-csv": (dataset(lambda p: csv_folder(p, "text,label", b"")), ["train.csv is empty"]),
    # file formats
    "gz-that-is-not-gzip": (dataset(lambda p: with_train_file(p, "train.jsonl.gz", jsonl_bytes(rows()))),
                            ["train.jsonl.gz is not gzip-compressed: expected gzip",
                             "rename it to train.jsonl if it is plain text"]),
    "gzip-without-gz": (dataset(lambda p: with_train_file(p, "train.jsonl", gzip.compress(jsonl_bytes(rows())))),
                        ["train.jsonl is gzip-compressed", "rename it to train.jsonl.gz"]),
    "damaged-gzip": (dataset(lambda p: with_train_file(p, "train.jsonl.gz",
                                                       gzip.compress(jsonl_bytes(rows()))[:30])),
                     ["train.jsonl.gz is a damaged gzip file"]),
    "latin1-jsonl": (dataset(lambda p: with_train_file(p, "train.jsonl", jsonl_bytes(rows()) + LATIN1)),
                     ["train.jsonl is not UTF-8 text", "byte 0xe9 on line 13", "re-save it as UTF-8"]),
    "latin1-csv": (dataset(lambda p: csv_folder(p, "text,label", "text,label\ncaf\xe9,a\n".encode("latin-1"))),
                   ["train.csv is not UTF-8 text", "byte 0xe9 on line 2", "re-save it as UTF-8"]),
    "malformed-json": (dataset(lambda p: with_train_file(p, "train.jsonl", jsonl_bytes(rows()) + b'{"text": \n')),
                       ["malformed JSON on line 13 of", "train.jsonl"]),
    # names
    "method-typo": (lambda p: ["--methods", "supcom"], ["unknown method 'supcom'", "Did you mean 'supcon'?"]),
    "card-typo": (lambda p: ["--datasets", "trek"], ["unknown dataset 'trek'", "Did you mean 'trec'?"]),
    "folder-typo": (data_dir_with("mien"), ["unknown dataset 'mien'", "Did you mean 'mine'?", "folders in",
                                            "mine"]),
    "card-typo-with-data-dir": (data_dir_with("trek"), ["unknown dataset 'trek'", "Did you mean 'trec'?"]),
    "bad-setting": (lambda p: ["--epochs", "0"], ["--epochs must be >= 1"]),
    "cuda-graphs-on-a-cpu": (lambda p: ["--cuda-graphs", "on", "--device", "cpu"],
                             ["--cuda-graphs on needs a CUDA device", "--cuda-graphs auto"]),
    "cuda-graphs-with-compile": (lambda p: ["--cuda-graphs", "on", "--compile"],
                                 ["--cuda-graphs on and --compile exclude each other"]),
}


def leftovers(folder: Path) -> list[str]:
    """What a failed command left in a results folder (nothing, or no folder at all, is right)."""
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(cli, tmp_path, monkeypatch, case):
    make, words = CASES[case]
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    extra = [str(a) for a in make(tmp_path)]
    started = time.perf_counter()
    what = [] if "--config" in extra else ["--methods", "ce", "--datasets", FIXTURE]  # a config file names them
    code, out, err = cli("run", *what, *BASE, "--results-dir", results, *extra)
    assert time.perf_counter() - started < 10
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], (word, lines[0])
    given = Path(extra[extra.index("--results-dir") + 1]) if "--results-dir" in extra else results
    assert leftovers(results) == [] and (given.is_file() or leftovers(given) == [])
    assert out == ""


def test_unwritable_results_folder_fails_before_loading(cli, tmp_path, monkeypatch):
    """A results folder whose parent cannot be written (simulated: tests may run as root, who may write anywhere)."""
    import bench.data.loading

    parent = tmp_path / "locked"
    parent.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if Path(path) == parent
                        else real_access(path, mode, **kw))
    monkeypatch.setattr(bench.data.loading, "load_raw", lambda *a: pytest.fail("the data was loaded"))
    code, _, err = cli("run", "--methods", "ce", "--datasets", FIXTURE, *BASE, "--results-dir", parent / "results")
    assert code == 2 and err.count("\n") == 1
    assert f"results folder {parent / 'results'} (--results-dir) cannot be created: {parent} is not writable" in err
    assert "choose another folder with --results-dir, or give yourself write permission" in err
    assert leftovers(parent) == []


def test_results_folder_from_the_environment_is_named_as_such(cli, tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path / "afile" / "r"))
    code, _, err = cli("run", "--methods", "ce", "--datasets", FIXTURE, *BASE)
    assert code == 2 and "($BENCH_RESULTS_DIR) cannot be created" in err


def test_reversed_seed_range_is_refused():
    import argparse

    from bench.cli.common import seed_list

    assert seed_list("1-3,5") == [1, 2, 3, 5]
    with pytest.raises(argparse.ArgumentTypeError, match="seed range '3-1' is empty; write it low-high, e.g. 1-3"):
        seed_list("3-1")


def test_label_types_that_are_accepted(tmp_path):
    from bench.data.loading import load_dataset

    train = [{"text": f"t{i}", "label": label} for i, label in enumerate([1, 2, 1.0, 2, True, False] * 4)]
    data = load_dataset(str(folder(tmp_path, train=train, test=train[:6])))
    assert data.label_names == ["1", "2", "False", "True"]  # 1.0 is the integer 1; booleans are True/False


def test_a_users_folder_under_data_dir_is_a_dataset(cli, tmp_path, monkeypatch):
    """`--datasets NAME --data-dir D` trains on D/NAME when NAME is no card, and records the folder."""
    from bench.data.loading import load_dataset
    from bench.data.loading import data_ref

    data_dir = tmp_path / "D"
    write_jsonl(data_dir / "mine" / "train.jsonl", read_fixture("train"))
    write_jsonl(data_dir / "mine" / "test.jsonl", read_fixture("test"))
    monkeypatch.chdir(tmp_path)  # no ./mine here: the name is found under --data-dir only
    data = load_dataset("mine", str(data_dir))
    assert data.name == "mine" and data.source == f"folder:{(data_dir / 'mine').resolve()}"
    assert data.fingerprint == load_dataset(str(data_dir / "mine")).fingerprint
    code, _, err = cli("run", "--methods", "ce", "--datasets", "mine", "--data-dir", data_dir, *FAST,
                       "--epochs", "1", "--results-dir", tmp_path / "results")
    assert code == 0, err
    run = next((tmp_path / "results").glob("ce_mine_tiny-bert_s1_*"))
    spec = json.loads((run / "spec.json").read_text())
    assert spec["data"]["source"] == data.source
    from bench.running.runner import plan

    shard, = plan(["ce"], ["mine"], ["tiny-bert"], [1], {}, str(data_dir), results_dir=tmp_path / "results")
    assert shard.source.load().fingerprint == data.fingerprint  # how workers and SLURM jobs reload it


def test_card_name_wins_over_a_folder_of_that_name(tmp_path):
    """A card's local copy under --data-dir is still loaded as that card (its label order, its source)."""
    from bench.data.loading import load_dataset

    write_jsonl(tmp_path / "D" / "trec" / "train.jsonl", [{"text": f"what {i}", "label": "NUM" if i % 2 else "DESC"}
                                                          for i in range(20)])
    write_jsonl(tmp_path / "D" / "trec" / "test.jsonl", [{"text": "why", "label": "DESC"}])
    assert load_dataset("trec", str(tmp_path / "D")).source.startswith("local:")


@pytest.mark.parametrize("torch_version, available, devices, flags, words", [
    ("2.13.0+cpu", False, 0, ["--device", "cuda"], ["--device cuda: CUDA is not available here (torch 2.13.0+cpu, a "
                                                    "CPU build)", "use --device cpu or auto"]),
    ("2.13.0", False, 0, ["--device", "cuda:0"], ["--device cuda:0: CUDA is not available here",
                                                  "no CUDA device visible"]),
    ("2.13.0+cpu", False, 0, ["--cuda-graphs", "on"], ["--cuda-graphs on: CUDA is not available here",
                                                       "use --cuda-graphs auto (or off) on this machine"]),
    ("2.13.0", True, 1, ["--device", "cuda:2"], ["--device cuda:2: this machine has 1 CUDA device(s) (cuda:0 to "
                                                 "cuda:0); pick one of them"]),
])
def test_cuda_this_machine_lacks_is_refused_before_planning(cli, tmp_path, monkeypatch, torch_version, available,
                                                            devices, flags, words):
    """A local run asking for CUDA (or a GPU) this machine lacks: one line, exit 2, before any data is loaded (it
    used to plan, load and fail every shard). The machine is simulated, so this holds on a GPU machine too."""
    import importlib.metadata

    import torch

    import bench.data.loading

    monkeypatch.setattr(importlib.metadata, "version", lambda name: torch_version if name == "torch" else "0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: devices)
    monkeypatch.setattr(torch.version, "cuda", None if torch_version.endswith("+cpu") else "12.8")
    monkeypatch.setattr(bench.data.loading, "load_raw", lambda *a: pytest.fail("the data was loaded"))
    code, out, err = cli("run", "--methods", "ce", "--datasets", FIXTURE, *BASE, "--results-dir", tmp_path / "r",
                         *flags)
    assert code == 2 and err.count("\n") == 1 and out == "", err
    assert all(word in err for word in words), err
    assert not (tmp_path / "r").exists()
