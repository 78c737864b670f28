"""Resume checkpoints at most once per `checkpoint_every_s` of training (issue 34), and the knob grid's default of
clean metrics only."""

import time

import numpy as np
import pytest

import bench.training.trainer as trainer_module
from bench.cli.main import build_parser, main
from bench.errors import BenchError
from bench.spec import TrainConfig
from bench.training.checkpoint_policy import CHECKPOINT_EVERY_S, ENV, default_checkpoint_every_s
from bench.training.trainer import Trainer
from conftest import FAST, FIXTURE
from test_trainer import CFG, killed_after_first_checkpoint, setup


@pytest.fixture
def slow_epochs(monkeypatch):
    """Every training epoch seems to take 100 s more than it does (the trainer's clock jumps), so that the time
    between checkpoints is known exactly."""
    offset = [0.0]

    class Clock:
        @staticmethod
        def perf_counter():
            return time.perf_counter() + offset[0]

    original = Trainer.train_epoch

    def epoch(self, *args, **kwargs):
        record = original(self, *args, **kwargs)
        offset[0] += 100.0
        return record

    monkeypatch.setattr(trainer_module, "time", Clock)
    monkeypatch.setattr(Trainer, "train_epoch", epoch)


def saved_epochs(monkeypatch):
    """Record the epoch after which each checkpoint is written."""
    epochs = []
    original = Trainer.save

    def save(self, optimizer, scheduler, state):
        epochs.append(state["epoch"])
        original(self, optimizer, scheduler, state)

    monkeypatch.setattr(Trainer, "save", save)
    return epochs


@pytest.mark.parametrize("every, expected", [(0.0, [1, 2, 3, 4, 5, 6]), (250.0, [3]), (150.0, [2, 4]), (1e9, [])])
def test_a_checkpoint_only_once_enough_training_is_unsaved(tmp_path, monkeypatch, slow_epochs, every, expected):
    epochs = saved_epochs(monkeypatch)
    trainer, data = setup(TrainConfig(epochs=6, lr=1e-3, batch_size=8, max_length=32, patience=6),
                          checkpoint=tmp_path / "checkpoint.pt")
    trainer.checkpoint_every_s = every
    trainer.fit(data["train"], data["validation"])
    # 100 s an epoch: 250 -> after epoch 3 (300 s unsaved), 150 -> after 2 and 4; none after the last epoch
    # (its results are written at once) unless every epoch is asked for (0)
    assert epochs == expected
    assert (tmp_path / "checkpoint.pt").exists() == bool(expected)
    assert (trainer.checkpoint_seconds > 0) == bool(expected)


def test_no_checkpoint_after_early_stopping_ends_the_run(tmp_path, monkeypatch, slow_epochs):
    epochs = saved_epochs(monkeypatch)
    trainer, data = setup(TrainConfig(epochs=8, lr=1e-12, batch_size=8, max_length=32, patience=2),
                          checkpoint=tmp_path / "checkpoint.pt")  # lr ~0: no epoch improves on the first
    trainer.checkpoint_every_s = 150.0
    fit = trainer.fit(data["train"], data["validation"])
    assert len(fit.history) == 3 and fit.stopped_early
    assert epochs == [2]  # 200 s unsaved after epoch 2; epoch 3 ends the run (patience 2), so none after it


def test_a_shard_without_checkpoints_trains_as_one_with_them(tmp_path):
    every_epoch, data = setup(checkpoint=tmp_path / "a.pt")
    every_epoch.fit(data["train"], data["validation"])
    none, data2 = setup(checkpoint=tmp_path / "b.pt")
    none.checkpoint_every_s = 1e9
    none.fit(data2["train"], data2["validation"])
    assert not (tmp_path / "b.pt").exists()
    assert np.array_equal(every_epoch.predict(data["test"]), none.predict(data2["test"]))


def test_resume_from_a_sparse_checkpoint_equals_the_uninterrupted_run(tmp_path, monkeypatch, slow_epochs):
    reference, data = setup()
    reference.fit(data["train"], data["validation"])
    expected = reference.predict(data["test"])

    checkpoint = tmp_path / "checkpoint.pt"
    interrupted, data = setup(checkpoint=checkpoint)
    interrupted.checkpoint_every_s = 150.0  # the first checkpoint comes after epoch 2 (200 s unsaved)
    killed_after_first_checkpoint(monkeypatch, interrupted, data)
    resumed, data = setup(checkpoint=checkpoint)
    resumed.checkpoint_every_s = 150.0
    fit = resumed.fit(data["train"], data["validation"])
    assert fit.resumed_from_epoch == 2 and len(fit.history) == CFG.epochs
    assert np.array_equal(resumed.predict(data["test"]), expected)


def test_the_default_and_its_variable(monkeypatch):
    monkeypatch.delenv(ENV)
    assert default_checkpoint_every_s() == CHECKPOINT_EVERY_S == 30.0
    monkeypatch.setenv(ENV, "4.5")
    assert default_checkpoint_every_s() == 4.5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(BenchError, match=ENV):
            default_checkpoint_every_s()


def request(argv):
    """The checked shard-request fields of `clbench ARGV` (nothing planned or trained)."""
    from bench.cli.run_options import checked_run_options

    args = build_parser().parse_args([str(a) for a in argv])
    args.demo = False
    return checked_run_options(args)[1]


BASE = ["run", "--methods", "ce,supcon", "--datasets", str(FIXTURE), "--encoder", "tiny-bert"]


def test_the_flag_and_the_config_key(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV)
    assert request(BASE)["checkpoint_every_s"] == 30.0
    assert request([*BASE, "--checkpoint-every-s", "0"])["checkpoint_every_s"] == 0.0
    config = tmp_path / "sweep.yaml"
    config.write_text("checkpoint_every_s: 120\n")
    assert request([*BASE, "--config", config])["checkpoint_every_s"] == 120.0


def test_a_bad_value_is_one_line_and_exit_2(capsys, tmp_path):
    code = main([*BASE, "--checkpoint-every-s", "-3", "--results-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--checkpoint-every-s must be a number of seconds >= 0" in err[0]
    assert not (tmp_path / "r").exists()


def test_a_knob_grid_runs_clean_metrics_only_unless_asked():
    grid = [*BASE, "--grid", "supcon.tau=0.1,0.3"]
    assert request(grid)["evaluators"] == ()
    everything = request(BASE)["evaluators"]
    assert len(everything) > 1 and request([*grid, "--evaluators", "all"])["evaluators"] == everything
    assert request([*grid, "--evaluators", "all"])["explicit"] is False  # those that do not fit are left out
    assert request([*grid, "--evaluators", "repr"])["evaluators"] == ("repr",)
    assert request([*grid, "--evaluators", "repr"])["explicit"] is True


def test_a_grid_says_how_its_chosen_combinations_are_scored(capsys, tmp_path):
    argv = [*BASE, *FAST[:-2], "--epochs", "1", "--grid", "supcon.tau=0.1,0.3", "--results-dir", tmp_path / "r"]
    assert main([str(a) for a in argv]) == 0
    err = capsys.readouterr().err
    assert "a knob grid runs clean metrics only" in err and "clbench evaluate --selected" in err
    assert not any((tmp_path / "r").glob("*/evals/*.json"))


@pytest.mark.parametrize("variable, saved", [("0", [1, 2]), ("1e9", [])])
def test_a_request_left_unset_reads_the_variable_when_the_shard_runs(tmp_path, monkeypatch, variable, saved):
    from bench.running.runner import plan
    from bench.running.shard import ShardRequest, run_shard

    shard = plan(["ce"], [str(FIXTURE)], ["tiny-bert"], [1],
                 {"epochs": 2, "lr": 1e-3, "batch_size": 8, "max_length": 32}, None, results_dir=tmp_path)[0]
    request = ShardRequest(save_model=False)
    assert request.checkpoint_every_s is None  # resolved at run time, not when ShardRequest was imported
    monkeypatch.setenv(ENV, variable)
    epochs = saved_epochs(monkeypatch)
    assert run_shard(shard.spec, shard.data, tmp_path, progress=False, request=request).status == "done"
    assert epochs == saved
