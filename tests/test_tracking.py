"""`clbench run --report-to`: TensorBoard event files and the MLflow file store read back after a tiny shard (each
skipped without its package), W&B through a stand-in module, and the promises around them: the choice of trackers
is not in the run key, a missing package fails before training, a failing tracker costs no results."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import logging
import sys
import types
from pathlib import Path

import pytest
import torch

from bench.cli.main import main
from bench.data.batching import Encoded
from bench.data.loading import load_dataset
from bench.encoders.models import build_encoder
from bench.registry import METHODS
from bench.spec import TrainConfig
from bench.training.trainer import Trainer
from bench.training.setup import seed_everything
from bench.errors import BenchError
from bench.training import tracking
from bench.training.tracking import Tracker, parse_report_to, tracked
from bench.errors import install_extra
from conftest import FAST, FIXTURE

CFG = TrainConfig(epochs=2, lr=1e-3, batch_size=8, max_length=32, patience=5)


class FakeWandb(types.ModuleType):
    """A stand-in `wandb` module that records what it is given; `fail` makes every `log` raise."""

    def __init__(self, fail: bool = False):
        super().__init__("wandb")
        self.__spec__ = importlib.machinery.ModuleSpec("wandb", None)  # found by importlib.util.find_spec
        self.fail = fail
        self.runs: list[types.SimpleNamespace] = []

    def init(self, **kwargs):
        module = self

        class Run:
            def __init__(self):
                self.kwargs, self.logged, self.summary, self.exit_code = kwargs, [], {}, None

            def log(self, metrics, step=None):
                if module.fail:
                    raise ConnectionError("wandb is down")
                self.logged.append((step, dict(metrics)))

            def finish(self, exit_code=0):
                self.exit_code = exit_code

        self.runs.append(Run())
        return self.runs[-1]


class Records(logging.Handler):
    """Keeps the log records it is given."""

    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory):
    """One tiny shard trained with every tracker installed here and a W&B stand-in whose `log` always fails;
    `report_to` comes from a config file. Returns (results folder, run key, exit code, warnings, fake wandb)."""
    root = tmp_path_factory.mktemp("tracked")
    results = root / "results"
    names = [n for n in ("tensorboard", "mlflow") if importlib.util.find_spec(n) is not None] + ["wandb"]
    config = root / "run.yaml"
    config.write_text(json.dumps({"report_to": names}))  # JSON is YAML: a list, as a config file may give it
    fake, handler = FakeWandb(fail=True), Records()
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "wandb", fake)
        for name in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE", "BENCH_DATA_DIR", "WANDB_MODE"):
            mp.delenv(name, raising=False)  # restored afterwards, whatever the run sets
        mp.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
        mp.setenv("HF_HUB_OFFLINE", "1")
        logging.getLogger(tracking.__name__).addHandler(handler)
        try:
            code = main(["run", "--methods", "ce", "--datasets", str(FIXTURE), *FAST, "--results-dir", str(results),
                         "--config", str(config)])
        finally:
            logging.getLogger(tracking.__name__).removeHandler(handler)
    keys = [p.parent.name for p in results.glob("*/rows.json")]
    assert code == 0 and len(keys) == 1
    warnings = [r.getMessage() for r in handler.records if r.levelno == logging.WARNING]
    return results, keys[0], warnings, fake


def rows_of(results: Path, key: str) -> dict[str, float]:
    """The shard's result rows as `split/metric[/label]` -> value."""
    return tracking.row_metrics(json.loads((results / key / "rows.json").read_text()))


def history_of(results: Path, key: str) -> list[dict]:
    return json.loads((results / key / "train_log.json").read_text())["history"]


def test_tensorboard_event_files_hold_settings_losses_validation_and_results(tracked_run):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    results, key, _, _ = tracked_run
    events = EventAccumulator(str(results / "tensorboard" / key), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    history = history_of(results, key)
    assert [e.value for e in events.Scalars("epoch/val_accuracy")] == pytest.approx(
        [h["val_accuracy"] for h in history])
    steps = [e.step for e in events.Scalars("train/loss")]
    assert steps == sorted(steps) and steps[-1] == sum(h["steps"] for h in history)
    assert events.Scalars("train/loss")[-1].value == pytest.approx(history[-1]["train_loss"], rel=1e-5)
    for name, value in rows_of(results, key).items():  # every result row, at the last step
        assert events.Scalars(name)[-1].value == pytest.approx(value)
    settings = events.Tensors("settings/text_summary")[0].tensor_proto.string_val[0].decode()
    assert f'"key": "{key}"' in settings and '"lr": 0.001' in settings


def test_mlflow_file_store_holds_a_run_named_by_the_run_key(tracked_run, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    results, key, _, _ = tracked_run
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient((results / "mlruns").resolve().as_uri())
    runs = client.search_runs([client.get_experiment_by_name("clbench").experiment_id])
    assert [r.info.run_name for r in runs] == [key]
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.params["lr"] == "0.001" and run.data.params["method"] == "ce" and run.data.params["key"] == key
    history = history_of(results, key)
    assert [m.value for m in client.get_metric_history(run.info.run_id, "epoch/val_accuracy")] == pytest.approx(
        [h["val_accuracy"] for h in history])
    losses = client.get_metric_history(run.info.run_id, "train/loss")
    assert len(losses) >= len(history) and max(m.step for m in losses) == sum(h["steps"] for h in history)
    assert run.data.metrics["test/accuracy"] == pytest.approx(rows_of(results, key)["test/accuracy"])


def test_a_failing_tracker_warns_once_and_the_shard_keeps_its_results(tracked_run):
    results, key, warnings, fake = tracked_run
    assert (results / key / "rows.json").is_file() and not (results / key / "error.json").exists()
    assert len(fake.runs) == 1 and fake.runs[0].kwargs["name"] == key
    assert fake.runs[0].exit_code == 1 and fake.runs[0].logged == []  # its run ended as failed when dropped
    assert len([w for w in warnings if "wandb" in w]) == 1, warnings
    assert "wandb is down" in warnings[0]
    assert not [w for w in warnings if "wandb" not in w]  # the other trackers went on without a hitch


def test_the_choice_of_trackers_is_not_in_the_run_key(tracked_run, cli):
    results, key, _, _ = tracked_run
    code, out, err = cli("run", "--methods", "ce", "--datasets", FIXTURE, *FAST, "--results-dir", results)
    assert code == 0 and f"skipped {key}" in err  # the same shard, already finished


def test_a_missing_package_fails_before_training_naming_the_extra(cli, results, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "wandb", None)  # importlib.util.find_spec then finds no package
    code, _, err = cli("run", "--methods", "ce", "--datasets", FIXTURE, *FAST, "--results-dir", results,
                       "--report-to", "tensorboard,wandb")
    assert code == 2 and install_extra("wandb") in err and len(err.strip().splitlines()) == 1
    assert not list(results.glob("*/spec.json"))  # nothing was trained
    config = tmp_path / "run.yaml"
    config.write_text("report_to: wandb\n")
    code, _, err = cli("run", "--methods", "ce", "--datasets", FIXTURE, *FAST, "--config", config)
    assert code == 2 and '.[wandb]"' in err


def test_report_to_names():
    assert parse_report_to("TensorBoard, mlflow,tensorboard") == ("tensorboard", "mlflow")
    assert parse_report_to(["wandb"]) == ("wandb",)
    assert parse_report_to("none") == parse_report_to(None) == parse_report_to("") == ()
    with pytest.raises(BenchError, match="comet"):
        parse_report_to("tensorboard,comet")


def test_wandb_run_is_offline_by_default_and_named_by_the_run_key(monkeypatch, tmp_path):
    fake = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    spec = {"method": "ce", "dataset": "tiny", "train": {"lr": 1e-3}, "method_config": {"tau": 0.5},
            "canonical": "ce:...", "key": "ce_tiny_k"}
    with tracked(("wandb",), "ce_tiny_k", spec, tmp_path) as tracker:
        tracker.log({"train/loss": 0.5, "skip": float("nan"), "also skipped": [1]}, 3)
        tracker.log_final([{"split": "test", "metric": "f1", "label": "sci/tech & more", "value": 0.25}])
    run = fake.runs[0]
    assert run.kwargs["mode"] == "offline" and run.kwargs["name"] == "ce_tiny_k" and run.kwargs["dir"] == str(tmp_path)
    assert run.kwargs["config"] == {"method": "ce", "dataset": "tiny", "key": "ce_tiny_k", "lr": 1e-3, "ce.tau": 0.5}
    assert run.logged == [(3, {"train/loss": 0.5})]
    assert run.summary == {"test/f1/sci/tech _ more": 0.25} and run.exit_code == 0
    monkeypatch.setenv("WANDB_MODE", "online")
    with pytest.raises(KeyError):
        with tracked(("wandb",), "k2", spec, tmp_path):
            raise KeyError("the shard failed")
    assert fake.runs[1].kwargs["mode"] == "online" and fake.runs[1].exit_code == 1


class Recorder:
    """A tracker backend that keeps every call."""

    def __init__(self):
        self.logged: list[tuple[int, dict]] = []

    def log(self, metrics, step):
        self.logged.append((step, metrics))


def tiny_trainer(cfg: TrainConfig):
    """A Trainer of `ce` on tiny-bert and the tiny fixture, seeded, and the fixture's encoded splits."""
    data = load_dataset(str(FIXTURE))
    seed_everything(1)
    bundle = build_encoder("tiny-bert", data.train.texts, cfg)
    model = METHODS.get("ce")(bundle.model, data.num_labels, head_dropout=cfg.head_dropout)
    encoded = {s: Encoded(bundle.tokenize(getattr(data, s).texts), getattr(data, s).labels)
               for s in ("train", "validation", "test")}
    return Trainer(model, cfg, torch.device("cpu"), bundle.pad_id, 1, progress=False), encoded


def test_trainer_reports_losses_at_its_log_interval_and_each_epoch():
    trainer, data = tiny_trainer(CFG)
    recorder = Recorder()
    trainer.tracker, trainer.log_every = Tracker("k", {"rec": recorder}), 2
    fit = trainer.fit(data["train"], data["validation"])
    per_epoch = fit.history[0]["steps"]
    steps = [step for step, m in recorder.logged if "train/loss" in m]
    expected = [e * per_epoch + n for e in range(CFG.epochs) for n in range(1, per_epoch + 1)
                if n % 2 == 0 or n == per_epoch]
    assert steps == expected
    epochs = [(step, m) for step, m in recorder.logged if "epoch/val_accuracy" in m]
    assert [s for s, _ in epochs] == [per_epoch * (e + 1) for e in range(CFG.epochs)]
    assert [m["epoch/val_accuracy"] for _, m in epochs] == [h["val_accuracy"] for h in fit.history]
    ends = [m["train/loss"] for s, m in recorder.logged if "train/loss" in m and s % per_epoch == 0]
    assert ends == pytest.approx([h["train_loss"] for h in fit.history])
    plain, data2 = tiny_trainer(CFG)  # the same training without a tracker: the same model
    plain.fit(data2["train"], data2["validation"])
    assert torch.equal(torch.as_tensor(trainer.predict(data["test"])), torch.as_tensor(plain.predict(data2["test"])))
