"""clld-adaptive's update schedule follows the run (bench.methods.clld.update_plan): short runs adapt, long runs
update as Algorithm 1 read literally; the update count is in every row, on the LDM figure, and a run with fewer
than two updates is warned about in the shard's line and in every report."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.methods.base import validation_steps
from bench.methods.clld import AdaptiveConfig, update_plan
from bench.results import store
from conftest import FAST


def reference_plan(per_epoch_steps, epochs, evals=10, every=10, warmup=0.2, minimum=4):
    """Brute force: walk every validation of the run in order, as the Trainer makes them."""
    inner = sorted({round(j * per_epoch_steps / evals) for j in range(1, evals)} - {0, per_epoch_steps})
    local = inner + [per_epoch_steps]
    total = per_epoch_steps * epochs
    validations = [(e - 1) * per_epoch_steps + s for e in range(1, epochs + 1) for s in local]
    eligible = [(n, t) for n, t in enumerate(validations, start=1) if t > warmup * total and t < total]
    k = max(1, min(every, len(local), len(eligible) // max(1, minimum)))
    return [t for n, t in eligible if n % k == 0], local, eligible


def test_validation_steps_are_the_trainers():
    assert validation_steps(4, 10) == [1, 2, 3, 4]  # at most one validation per batch, the epoch's end included
    assert validation_steps(25, 10) == [2, 5, 8, 10, 12, 15, 18, 20, 22, 25]
    assert validation_steps(7, 1) == [7]


def test_a_4_batch_epoch_updates():
    """The issue's case: 100 examples at batch 32 (4 batches), one epoch. Every 10th validation (version 2)
    never came; now every eligible one updates (eps 0.75, 0.5, 0.25; the last step's eps is 0)."""
    assert update_plan(AdaptiveConfig(), 4, 1) == [1, 2, 3]
    assert update_plan(AdaptiveConfig(), 4, 3) == [4, 6, 8, 10]  # warm-up: steps <= 2.4
    assert update_plan(AdaptiveConfig(), 1, 1) == []  # one step: nothing to adapt before the end
    assert update_plan(AdaptiveConfig(min_updates=1), 4, 3) == [4, 8]  # at least once per epoch still


@pytest.mark.parametrize("per_epoch_steps", [1, 2, 3, 4, 7, 10, 13, 25])
@pytest.mark.parametrize("epochs", [1, 2, 3, 5, 7, 10])
@pytest.mark.parametrize("evals,every,minimum", [(10, 10, 4), (10, 10, 0), (2, 5, 4), (3, 1, 2), (10, 20, 8)])
def test_the_plan_is_the_brute_force_one_and_keeps_its_promises(per_epoch_steps, epochs, evals, every, minimum):
    config = AdaptiveConfig(update_every=every, evals_per_epoch=evals, min_updates=minimum)
    plan = update_plan(config, per_epoch_steps, epochs)
    expected, local, eligible = reference_plan(per_epoch_steps, epochs, evals, every, 0.2, minimum)
    assert plan == expected
    total = per_epoch_steps * epochs
    assert all(0.2 * total < t < total for t in plan)  # after warm-up, never at eps = 0
    assert len(plan) >= min(minimum, len(eligible))  # min_updates, or every eligible validation when fewer
    for epoch in range(1, epochs + 1):  # an epoch whose validations are all eligible updates at least once
        steps = [(epoch - 1) * per_epoch_steps + s for s in local]
        if all(t in {t for _, t in eligible} for t in steps):
            assert any(t in plan for t in steps), (epoch, plan)


@pytest.mark.parametrize("epochs", [10, 20, 50])
def test_long_runs_update_as_algorithm_1_read_literally(epochs):
    """10 or more batches an epoch, epochs a multiple of 5: at the ends of epochs n/5 + 1 .. n - 1 (version 2 made
    one more, at the last step, with eps = 0)."""
    assert update_plan(AdaptiveConfig(), 12, epochs) == [e * 12 for e in range(epochs // 5 + 1, epochs)]


def test_five_epochs_update_more_often_than_every_10th_validation():
    """5 epochs of 12 batches: every 10th validation would update 3 times (ends of epochs 2-4); min_updates 4
    shortens the interval to every 9th of the 39 eligible validations."""
    assert len(update_plan(AdaptiveConfig(), 12, 5)) == 4
    assert update_plan(AdaptiveConfig(min_updates=3), 12, 5) == [24, 36, 48]


def test_a_4_batch_epoch_run_adapts_end_to_end(cli, tiny, results):
    """41 training examples at batch 11: 4 batches, one epoch. The LDM moves, the rows count the updates, and the
    shard line carries no warning."""
    code, out, err = cli("run", "--datasets", tiny, "--methods", "clld-adaptive", *FAST, "--epochs", "1",
                         "--batch-size", "11")
    assert code == 0, err
    folder = next(results.glob("clld-adaptive_tiny_*"))
    state = json.loads((folder / store.METHOD_STATE).read_text())
    assert [u["step"] for u in state["updates"]] == [1, 2, 3]
    assert not np.allclose(state["ldm"], 5.0)
    assert {row["ldm_updates"] for row in json.loads((folder / store.ROWS).read_text())} == {3}
    assert "label-distance update" not in err


def test_a_run_without_updates_is_warned_about_in_the_shard_line_the_reports_and_the_figure(cli, tiny, results):
    """One batch an epoch, one epoch: no update can be made. The shard says so, every table notes it, and the
    LDM figure's title gives the count."""
    code, out, err = cli("run", "--datasets", tiny, "--methods", "ce,clld-adaptive", *FAST, "--epochs", "1",
                         "--batch-size", "64")
    assert code == 0, err
    assert "clld-adaptive made 0 label-distance update(s) (fewer than 2)" in err + out
    code, out, err = cli("report", "--table", "paper-ii", "--results-dir", results,
                         "--filter", "collapsed=0,1")  # one step: both runs collapsed
    assert code == 0, err
    assert "few LDM updates: 1 of 1 clld-adaptive runs made fewer than 2 label-distance updates" in out
    from bench.reporting.plots import ldm_plot

    folder = next(results.glob("clld-adaptive_tiny_*"))
    plot = ldm_plot(folder)
    assert "0 label-distance updates (fewer than 2: it trained nearly as cl)" in plot.figure.axes[0].get_title()


def test_runs_stored_before_the_count_get_it_from_their_method_state(tmp_path):
    """A version-2 run's rows lack `ldm_updates`: reading them counts the stored updates, leaving out one with
    eps = 0 (it changed nothing), and puts the count on every row, evaluator rows included."""
    run = tmp_path / "clld-adaptive_mr_minilm_s1_abc"
    (run / store.EVALS).mkdir(parents=True)
    store.write_json(run / store.ROWS, [{"run_key": run.name, "evaluator": "clean", "value": 0.8}])
    store.write_json(run / store.EVALS / "contrast.json", {"settings": {}, "rows": [{"run_key": run.name,
                                                                                     "evaluator": "contrast"}]})
    store.write_json(run / store.METHOD_STATE, {"ldm": [[5.0]], "updates": [{"step": 10, "eps": 0.5},
                                                                           {"step": 20, "eps": 0.0}]})
    assert [row["ldm_updates"] for row in store.run_rows(run)] == [1, 1]
    store.write_json(run / store.METHOD_STATE, {"ldm": [[5.0]]})  # clld-static: no updates stored, no column
    assert all("ldm_updates" not in row for row in store.run_rows(run))
