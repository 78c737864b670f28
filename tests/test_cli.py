import gzip
import re
import json
import time

import pandas as pd
import pytest

from bench.registry import METHODS
from conftest import FAST, write_jsonl
from test_trainer import NanLoss

PROVENANCE = ["config_hash", "data_fingerprint", "clbench_version", "git_commit", "torch_version",
              "transformers_version", "device", "wall_seconds", "seed"]


def run_dirs(results):
    return sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")) if results.exists() else []


def test_help_and_lists(cli, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli("--help")
    assert exit_.value.code == 0 and "run" in capsys.readouterr().out
    code, out, _ = cli("list", "methods", "--verbose")
    assert code == 0 and out.startswith("ce:")
    assert "    supcon.lambda = 0.9" in out and "    clld-adaptive.ce_weight = 0.5" in out  # knobs as typed in --set
    assert ("    variant paper implies: sentence_loss='eq6', weights='fixed', redraw_same_word=True (an explicit --set "
            "wins)") in out
    code, out, _ = cli("list", "datasets")
    assert code == 0 and "20ng" in out and "demo" in out and "11314/-/7532" in out
    code, out, _ = cli("list", "encoders")
    assert code == 0 and "minilm" in out and "tiny-bert" in out and "Hugging Face model id" in out


def test_end_to_end_run_writes_a_complete_run_folder(cli, tiny, results, monkeypatch):
    # two epochs of tiny-bert may collapse to one class (then the summary shows no numbers: tests/test_collapsed.py);
    # this test is about the run folder and the table's shape, so no run counts as collapsed here
    monkeypatch.setattr("bench.evaluators.metrics.collapse_note", lambda *args: "")
    code, out, err = cli("run", "--methods", "ce", "--datasets", tiny, "--seeds", "1,2", *FAST)
    assert code == 0, err
    assert re.search(r"tiny\s+tiny-bert\s+ce\s+2\s", out)  # summary table: one line, two seeds
    folders = run_dirs(results)
    assert len(folders) == 2
    for folder in folders:
        names = {p.name for p in folder.iterdir()}
        assert {"spec.json", "rows.json", "predictions.jsonl.gz", "confusion.json", "train_log.json"} <= names
        assert "checkpoint.pt" not in names
        assert not [n for n in names if n.endswith(".tmp")]
        spec = json.loads((folder / "spec.json").read_text())
        assert spec["key"] == folder.name
        assert "stratified 10% of train" in spec["data"]["validation_source"]
        with gzip.open(folder / "predictions.jsonl.gz", "rt") as f:
            predictions = [json.loads(line) for line in f]
        assert len(predictions) == 30
        assert {"id", "gold", "predicted", "probabilities"} <= set(predictions[0])
        assert abs(sum(predictions[0]["probabilities"]) - 1) < 1e-4
        confusion = json.loads((folder / "confusion.json").read_text())
        assert sum(map(sum, confusion["test"])) == 30
    table = pd.read_parquet(results / "results.parquet")
    assert set(table["run_key"]) == {f.name for f in folders}
    for column in PROVENANCE:
        assert table[column].notna().all(), column
    test_rows = table[(table.split == "test") & (table.label == "")]
    assert set(test_rows.metric) == {"accuracy", "macro_f1"}
    per_class = table[(table.metric == "f1") & (table.label != "")]
    assert set(per_class.label) == {"food", "sport", "weather"}
    # the accuracy row agrees with the stored predictions
    folder = folders[0]
    with gzip.open(folder / "predictions.jsonl.gz", "rt") as f:
        predictions = [json.loads(line) for line in f]
    accuracy = sum(p["gold"] == p["predicted"] for p in predictions) / len(predictions)
    stored = table[(table.run_key == folder.name) & (table.metric == "accuracy") & (table.split == "test")]
    assert stored.value.item() == pytest.approx(accuracy)


def test_rerun_skips_and_overwrite_recomputes(cli, tiny, results):
    # on the CPU: the recomputation is compared with the first run (a GPU under `auto` is not bit-reproducible)
    assert cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--device", "cpu")[0] == 0
    rows_file = next(results.glob("*/rows.json"))
    first = rows_file.read_text()
    started = time.perf_counter()
    code, out, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--device", "cpu")
    assert code == 0 and "skipped" in err
    assert time.perf_counter() - started < 5
    assert rows_file.read_text() == first
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--device", "cpu", "--overwrite")
    assert code == 0 and "done" in err
    again = json.loads(rows_file.read_text())
    assert again[0]["finished_at"] != json.loads(first)[0]["finished_at"]
    # deterministic: recomputation gives the same metrics
    assert [r["value"] for r in again] == [r["value"] for r in json.loads(first)]


def test_changed_settings_make_a_new_run(cli, tiny, results):
    assert cli("run", "--methods", "ce", "--datasets", tiny, *FAST)[0] == 0
    assert cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--head-dropout", "0.2")[0] == 0
    assert len(run_dirs(results)) == 2


@pytest.mark.parametrize("args,message", [
    (["--methods", "supcom"], "unknown method 'supcom'"),
    (["--datasets", "trek"], "unknown dataset 'trek'. Did you mean 'trec'?"),
    (["--encoder", "no-such/model"], "cannot load encoder 'no-such/model'"),
    (["--epochs", "0"], "--epochs must be >= 1"),
    (["--datasets", "mr"], "could not load 'mr' from the Hugging Face Hub"),
])
def test_bad_input_exits_with_one_line_and_no_rows(cli, tiny, results, args, message, monkeypatch):
    import datasets as hf_datasets

    monkeypatch.setattr(hf_datasets, "load_dataset", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("offline")))
    base = ["run", "--methods", "ce", "--datasets", tiny, *FAST]
    code, out, err = cli(*base, *args)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not list(results.glob("*/rows.json"))


def test_bad_data_file_exits_cleanly(cli, tmp_path, results):
    write_jsonl(tmp_path / "d" / "train.jsonl", [{"text": "a", "label": "x"}, {"text": "", "label": "y"}])
    write_jsonl(tmp_path / "d" / "test.jsonl", [{"text": "a", "label": "x"}])
    code, _, err = cli("run", "--methods", "ce", "--datasets", tmp_path / "d", *FAST)
    assert code == 2 and "have empty text" in err
    assert not results.exists() or not list(results.glob("*/rows.json"))


def test_failing_shard_is_reported_and_others_go_on(cli, tiny, results):
    if "nan-test" not in METHODS:
        METHODS.add("nan-test", NanLoss)
    code, out, err = cli("run", "--datasets", tiny, "--methods", "nan-test,ce", *FAST)
    assert code == 1
    assert "1 of 2 shard(s) failed" in err and "loss became nan" in err
    finished = list(results.glob("*/rows.json"))
    assert [p.parent.name.split("_")[0] for p in finished] == ["ce"]
    error = json.loads(next(results.glob("nan-test*/error.json")).read_text())
    assert "loss became nan" in error["reason"]
    table = pd.read_parquet(results / "results.parquet")
    assert set(table.method) == {"ce"}


def test_debug_shows_the_traceback(cli, tiny):
    with pytest.raises(Exception, match="unknown method"):
        cli("run", "--datasets", tiny, "--methods", "nope", "--debug")


def test_status_lists_runs(cli, tiny, results, monkeypatch):
    monkeypatch.setattr("bench.evaluators.metrics.collapse_note", lambda *args: "")  # as above: a healthy run here
    code, _, err = cli("status")
    assert code == 0 and "no shards" in err
    assert cli("run", "--methods", "ce", "--datasets", tiny, *FAST)[0] == 0
    code, out, _ = cli("status")
    assert code == 0 and out.splitlines()[-1] == "1 shard(s): 1 done"


@pytest.mark.slow
def test_parallel_jobs(cli, tiny, results):
    code, out, err = cli("run", "--methods", "ce", "--datasets", tiny, "--seeds", "1-3", "--jobs", "2", *FAST)
    assert code == 0, err
    assert len(list(results.glob("*/rows.json"))) == 3
    table = pd.read_parquet(results / "results.parquet")
    assert table.run_key.nunique() == 3


def test_no_arguments_means_the_demo():
    from bench.cli.main import build_parser
    from bench.cli.run_options import run_options

    opts = run_options(build_parser().parse_args(["run"]))
    assert opts.methods == ("ce", "supcon", "clld")
    assert (opts.datasets, opts.encoders, opts.seeds) == (("demo",), ("minilm",), (1,))
    assert opts.jobs == 1 and not opts.overwrite and opts.overrides == {} and opts.knobs == {}
    from bench.running.runner import train_config

    assert train_config("demo", {}).epochs == 3 and train_config("demo", {}).batch_size == 16  # the card's own
    assert train_config("demo", {"epochs": 5}).epochs == 5  # the command line wins


def test_killed_shard_resumes_on_the_next_run(cli, tiny, tmp_path, monkeypatch):
    from bench.training.trainer import Trainer
    from test_trainer import Killed

    # on the CPU: the resumed run is compared with the uninterrupted one
    args = ["run", "--methods", "ce", "--datasets", tiny, *FAST, "--epochs", "3", "--device", "cpu"]
    assert cli(*args, "--results-dir", tmp_path / "reference")[0] == 0
    original_save = Trainer.save
    calls = []

    def save_then_die(self, *a):
        original_save(self, *a)
        calls.append(1)
        if len(calls) == 2:
            raise Killed

    monkeypatch.setattr(Trainer, "save", save_then_die)
    with pytest.raises(Killed):
        cli(*args, "--results-dir", tmp_path / "resumed")
    folder = next(p for p in (tmp_path / "resumed").iterdir() if not p.name.startswith("."))
    assert (folder / "checkpoint.pt").exists() and not (folder / "rows.json").exists()
    monkeypatch.setattr(Trainer, "save", original_save)
    assert cli(*args, "--results-dir", tmp_path / "resumed")[0] == 0
    log = json.loads((folder / "train_log.json").read_text())
    assert log["resumed_from_epoch"] == 2
    reference = next((tmp_path / "reference").glob("ce_*"))
    assert reference.name == folder.name
    values = lambda d: [r["value"] for r in json.loads((d / "rows.json").read_text())]
    assert values(folder) == values(reference)


def test_out_of_memory_fails_the_shard_with_advice(cli, tiny, results, monkeypatch):
    import torch

    from bench.methods.ce import CrossEntropy

    def oom(self, batch):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(CrossEntropy, "loss", oom)
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST)
    assert code == 1
    assert "out of memory at batch size 8" in err and "lower --batch-size" in err
    assert not list(results.glob("*/rows.json"))


def test_cuda_graphs_are_recorded_with_the_reason_and_stay_out_of_the_run_key(cli, tiny, results):
    assert cli("run", "--methods", "ce", "--datasets", tiny, *FAST)[0] == 0
    stored = json.loads(next(results.glob("*/rows.json")).read_text())
    (row,) = [r for r in stored if r["metric"] == "accuracy" and r["split"] == "test"]
    assert row["cuda_graphs"] == "off: a CPU"
    log = json.loads(next(results.glob("*/train_log.json")).read_text())
    assert log["cuda_graphs"] == "off: a CPU" and log["graph_capture_seconds"] == []
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--cuda-graphs", "off")
    assert code == 0 and "skipped" in err  # same run key whatever --cuda-graphs says


def test_compile_flag_compiles_the_encoder_in_place_and_keeps_the_run_key(cli, tiny, results, monkeypatch):
    """--compile reaches each layer of the encoder (nn.Module.compile, parameter names unchanged) and is not part
    of the key."""
    import torch

    compiled = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kw: compiled.append(kw))
    assert cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--compile")[0] == 0
    assert compiled == [{"dynamic": True, "backend": "inductor"}] * 2  # tiny-bert's two layers, one by one
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST)
    assert code == 0 and "skipped" in err  # same run key with or without --compile
