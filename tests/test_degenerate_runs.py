"""Degenerate runs fail loudly or are flagged: non-finite weights or outputs fail the shard (no rows), a model
that predicts one class whatever the input is flagged `collapsed` with a warning that stays (re-run, status,
reports; the reports' policy is tested on written rows in tests/test_collapsed.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bench.errors import BenchError
from bench.evaluators.metrics import collapse_note
from bench.training.trainer import Trainer

FAST = ["--methods", "ce", "--encoder", "tiny-bert", "--epochs", "1", "--batch-size", "8", "--no-progress",
        "--evaluators", "none"]


def test_collapse_is_one_class_whatever_the_gold_labels_say():
    gold = np.array([0, 1, 2] * 10)
    assert "predicts 'b' for 100%" in collapse_note(gold, np.ones(30, dtype=int), ["a", "b", "c"])
    assert collapse_note(gold, gold, ["a", "b", "c"]) == ""
    mostly = np.array([1] * 27 + [0, 2, 0])
    assert collapse_note(gold, mostly, ["a", "b", "c"]) == ""  # 90% one class is a poor model, not a collapse
    assert collapse_note(np.zeros(5, dtype=int), np.zeros(5, dtype=int), ["a", "b"]) == ""  # gold has one class


def test_non_finite_outputs_and_weights_raise():
    trainer = Trainer.__new__(Trainer)
    trainer.method = torch.nn.Linear(2, 2)
    logits = np.array([[0.1, 0.2], [np.nan, 0.0], [np.inf, 1.0]], dtype=np.float32)
    with pytest.raises(BenchError, match="test outputs are not finite .*2 of 3"):
        trainer.require_finite_outputs(logits, "test")
    assert trainer.require_finite_outputs(logits[:1], "test") is not None
    trainer.require_finite_weights(0)
    with torch.no_grad():
        trainer.method.bias[1] = float("inf")
    with pytest.raises(BenchError, match="weights became inf/NaN in epoch 3 .*bias"):
        trainer.require_finite_weights(2)


def test_diverged_weights_with_a_finite_loss_fail_the_shard(cli, tiny, results, monkeypatch):
    original = Trainer.train_epoch

    def epoch_then_diverge(self, *args, **kwargs):
        record = original(self, *args, **kwargs)  # every loss of the epoch was finite...
        with torch.no_grad():
            self.method.head[1].weight.fill_(float("inf"))  # ...and its last update made weights infinite
        return record

    monkeypatch.setattr(Trainer, "train_epoch", epoch_then_diverge)
    code, out, err = cli("run", "--datasets", tiny, *FAST, "--results-dir", results)
    assert code == 1 and "weights became inf/NaN in epoch 1" in out + err
    (run,) = results.glob("ce_*")
    assert not (run / "rows.json").exists() and "inf/NaN" in json.loads((run / "error.json").read_text())["reason"]


def test_a_collapsed_model_is_flagged_in_every_row_with_a_warning(cli, tiny, results):
    # on the CPU in fp32, where the collapse (and the healthy run below) was calibrated
    code, out, err = cli("run", "--datasets", tiny, *FAST, "--device", "cpu", "--results-dir", results)  # lr 5e-5
    assert code == 0 and "a collapsed model, not a result" in err
    assert "try --lr 2e-3 (trained tiny-bert without collapse" in err  # the measured rate, used below
    (run,) = results.glob("ce_*")
    rows = json.loads((run / "rows.json").read_text())
    assert rows and all(r["collapsed"] == 1 for r in rows)
    code, _, err = cli("run", "--datasets", tiny, *FAST, "--lr", "2e-3", "--epochs", "6", "--patience", "6",
                       "--max-length", "32", "--device", "cpu", "--results-dir",
                       results / "healthy")
    rows = json.loads(next((results / "healthy").glob("ce_*/rows.json")).read_text())
    assert code == 0 and "warning:" not in err and all(r["collapsed"] == 0 for r in rows)


def test_a_collapsed_run_stays_flagged_on_a_re_run_in_status_and_in_reports(cli, tiny, results, tmp_path):
    code, out, err = cli("run", "--datasets", tiny, *FAST, "--device", "cpu", "--results-dir", results)
    assert code == 0 and "a collapsed model, not a result" in err  # collapses on the CPU (see above)
    (run,) = results.glob("ce_*")
    assert "collapsed — not a result" in out and "warning: 1 shard(s) collapsed" in err  # the run summary
    code, out, err = cli("run", "--datasets", tiny, *FAST, "--device", "cpu", "--results-dir", results)
    assert code == 0 and f"skipped {run.name}" in err                # finished: not trained again...
    assert f"warning: {run.name} collapsed when it was trained" in err  # ...and still flagged
    assert "collapsed — not a result" in out and "warning: 1 shard(s) collapsed" in err
    code, out, err = cli("status", "--results-dir", results)
    assert code == 0 and "collapsed: the model predicts one class" in out and "1 done (1 collapsed" in out
    code, out, err = cli("report", "--results-dir", results, "--reports-dir", tmp_path / "reports")
    assert code == 2 and err.startswith("warning: 1 collapsed run(s)") and run.name in err  # nothing else to show
    assert "--filter collapsed=0,1" in err
    code, out, err = cli("report", "--results-dir", results, "--filter", "collapsed=1", "--reports-dir",
                         tmp_path / "reports")
    assert code == 0 and "†" in out and "**" not in out  # shown when asked for, marked, never bold
    code, _, err = cli("report", "--results-dir", results, "--filter", "collapsed=0")
    assert code == 2 and "matches no rows" in err
    code, out, err = cli("evaluate", run.name, "--results-dir", results, "--evaluators", "repr", "--device", "cpu")
    assert code == 0 and "note: † = the mean includes 1 collapsed run(s)" in out and run.name in out
    assert "†" in out.splitlines()[1]  # the run asked for is shown, marked


def test_a_collapsed_run_is_not_scored_by_default_but_is_when_asked(cli, tiny, results):
    """The evaluators that score the model cost minutes on a run that is not a result: by default a collapsed
    run skips them, stores nothing for them (so asking later scores it) and a re-run loads no model; naming
    evaluators (`all` too) scores it."""
    args = ["--methods", "ce", "--encoder", "tiny-bert", "--epochs", "1", "--batch-size", "8", "--no-progress",
            "--device", "cpu", "--datasets", tiny, "--results-dir", results]
    code, _, err = cli("run", *args)  # default evaluators; collapses on the CPU (see above)
    assert code == 0 and "a collapsed model, not a result" in err
    assert "repr: skipped: not run on a collapsed run" in err
    (run,) = results.glob("ce_*")
    assert [p.name.split("-")[0] for p in run.glob("evals/*.json")] == ["tfidf"]  # the floor scores no model
    code, _, err = cli("run", *args)
    assert code == 0 and f"skipped {run.name}" in err and "repr: skipped" not in err  # no work, no model loaded
    code, _, err = cli("run", *args, "--evaluators", "repr")
    assert code == 0 and "repr: done" in err and list(run.glob("evals/repr-*.json"))
