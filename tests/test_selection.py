"""Knobs chosen by validation (bench.reporting.selection): the best mean validation accuracy over the selection
seeds wins per dataset x encoder x method, test rows never take part, seeds held out as asked, budgets reported.
On hand-built results frames (no files)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from bench.errors import BenchError
from bench.reporting.render import render
from bench.reporting.resultsview import normalise
from bench.reporting.selection import OPTIMISTIC, duration_text, select_by_validation, selection_cells

ENCODER = "minilm"


def run(method: str, dataset: str, seed: int, combo: str, knobs: dict | str, val: float, test: float,
        encoder: str = ENCODER, wall: float = 60.0) -> list[dict]:
    """The rows of one run: clean validation and test accuracy and macro-F1, a per-label test row and a contrast
    evaluator row (test value - 0.1)."""
    text = knobs if isinstance(knobs, str) else json.dumps(knobs, sort_keys=True, separators=(",", ":"))
    key = f"{method}_{dataset}_{encoder}_s{seed}_{combo or 'legacy'}"
    base = {"run_key": key, "dataset": dataset, "encoder": encoder, "method": method, "seed": seed,
            "combo": combo, "knobs": text}
    clean = {**base, "evaluator": "clean", "wall_seconds": wall}
    return [
        {**clean, "split": "validation", "metric": "accuracy", "label": "", "value": val},
        {**clean, "split": "validation", "metric": "macro_f1", "label": "", "value": val - 0.05},
        {**clean, "split": "test", "metric": "accuracy", "label": "", "value": test},
        {**clean, "split": "test", "metric": "macro_f1", "label": "", "value": test - 0.05},
        {**clean, "split": "test", "metric": "accuracy", "label": "positive", "value": test + 0.01},
        {**base, "evaluator": "contrast", "split": "test", "metric": "contrast_accuracy", "label": "",
         "value": test - 0.1, "wall_seconds": math.nan},
    ]


def frame_of(*runs: list[dict]) -> pd.DataFrame:
    """A normalised results frame from runs' rows (a dataset written `sst2[n=100]` is sst2 at train_size 100, as
    its rows would record it)."""
    rows = [dict(row) for rows in runs for row in rows]
    for row in rows:
        if row["dataset"].endswith("[n=100]"):
            row.update(dataset=row["dataset"][:-len("[n=100]")], train_size=100)
    return normalise(pd.DataFrame(rows))


def combos(method: str, dataset: str, scores: dict[str, tuple[dict, list[float], list[float]]],
           seeds=(1, 2, 3), encoder: str = ENCODER, wall: float = 60.0) -> list[list[dict]]:
    """Runs of several combinations: combo -> (knobs, validation per seed, test per seed)."""
    return [run(method, dataset, seed, combo, knobs, val[i], test[i], encoder, wall)
            for combo, (knobs, val, test) in scores.items() for i, seed in enumerate(seeds)]


def chosen(selection, method: str = "ce", dataset: str = "sst2") -> dict:
    """The table row of one group."""
    table = selection.table
    rows = table[(table["method"] == method) & (table["dataset"] == dataset)]
    assert len(rows) == 1, table
    return rows.iloc[0].to_dict()


def chosen_combos(selection) -> set[str]:
    return set(selection.frame["combo"])


# ----------------------------------------------------------------------------------------------- the choice

def test_validation_decides_and_the_frame_holds_the_chosen_test_rows():
    frame = frame_of(*combos("ce", "sst2", {
        "ca": ({"lr": 1e-05}, [0.90, 0.91, 0.92], [0.70, 0.71, 0.72]),   # best on validation
        "cb": ({"lr": 5e-05}, [0.80, 0.81, 0.82], [0.95, 0.96, 0.97]),   # best on test
    }))
    selection = select_by_validation(frame)
    row = chosen(selection)
    assert row["knobs"] == "lr=1e-05 (tuned)" and row["val_accuracy"] == pytest.approx(0.91)
    assert chosen_combos(selection) == {"ca"}
    test = selection.frame[(selection.frame["evaluator"] == "clean") & (selection.frame["split"] == "test")
                           & (selection.frame["metric"] == "accuracy") & (selection.frame["label"] == "")]
    assert sorted(test["value"]) == pytest.approx([0.70, 0.71, 0.72])
    # every row of the chosen runs: all evaluators, splits, metrics and labels
    assert len(selection.frame) == 3 * 6 and set(selection.frame["evaluator"]) == {"clean", "contrast"}
    assert list(selection.frame.columns) == list(frame.columns)


def random_frame(rng: np.random.Generator) -> pd.DataFrame:
    """Random results: 1-2 datasets, 2 methods, 1-5 combinations of 1-4 seeds each, random scores."""
    runs = []
    for dataset in ["sst2", "sst2[n=100]"][:rng.integers(1, 3)]:
        for method in ("ce", "supcon"):
            for c in range(rng.integers(1, 6)):
                knobs = {} if c == 0 else {"lr": float(c) * 1e-05}
                for seed in range(1, rng.integers(2, 6)):
                    runs.append(run(method, dataset, seed, f"{method}{c}", knobs, float(rng.random()),
                                    float(rng.random()), wall=float(rng.random() * 100)))
    return frame_of(*runs)


def expected_choice(frame: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(dataset, method) -> the combo with the best mean validation accuracy, computed here by hand."""
    valid = frame[(frame["evaluator"] == "clean") & (frame["split"] == "validation")
                  & (frame["metric"] == "accuracy") & (frame["label"] == "")]
    means = valid.groupby(["dataset", "method", "combo"])["value"].mean()
    return {(d, m): group.idxmax()[2] for (d, m), group in means.groupby(level=[0, 1])}


def test_a_planted_leak_cannot_change_the_choice():
    """Replacing every value but the validation accuracy rows (test scores, other metrics, evaluator rows, wall
    times) never changes which combination is chosen, nor its validation score."""
    rng = np.random.default_rng(7)
    for _ in range(50):
        frame = random_frame(rng)
        before = select_by_validation(frame)
        is_validation = ((frame["evaluator"] == "clean") & (frame["split"] == "validation")
                         & (frame["metric"] == "accuracy") & (frame["label"] == ""))
        leaked = frame.copy()
        others = ~is_validation
        leaked.loc[others, "value"] = rng.permutation(rng.random(int(others.sum())) * 2 - 0.5)
        leaked["wall_seconds"] = rng.random(len(leaked)) * 1000
        after = select_by_validation(leaked)
        picked = {(d, m): c for d, m, c in
                  zip(before.frame["dataset"], before.frame["method"], before.frame["combo"])}
        assert picked == expected_choice(frame)
        assert set(after.frame["run_key"]) == set(before.frame["run_key"])
        shown = ["dataset", "encoder", "method", "knobs", "val_accuracy", "combinations", "selection_seeds"]
        pd.testing.assert_frame_equal(after.table[shown], before.table[shown])


def test_the_mean_over_seeds_decides_not_the_best_or_one_seed():
    frame = frame_of(*combos("ce", "sst2", {
        "spiky": ({"lr": 1e-05}, [0.90, 0.55, 0.90], [0.5] * 3),   # max, median, first and last seed: best
        "steady": ({"lr": 2e-05}, [0.80, 0.80, 0.80], [0.5] * 3),  # mean 0.80 > 0.783
    }))
    row = chosen(select_by_validation(frame))
    assert row["knobs"] == "lr=2e-05 (tuned)" and row["val_accuracy"] == pytest.approx(0.80)


def test_several_runs_of_a_combination_at_one_seed_count_as_their_mean_not_their_best():
    """Two runs of one combination at one seed (e.g. results folders merged) score that seed by their mean; the
    combination's score is then the mean over seeds, each seed once, not the mean over runs."""
    def again(rows: list[dict]) -> list[dict]:  # a second run of the same combination and seed
        return [{**row, "run_key": row["run_key"] + "-again"} for row in rows]

    # seed 1: twice (0.90 and 0.50: mean 0.70, best 0.90); the other combination: 0.80 once
    frame = frame_of(run("ce", "sst2", 1, "twice", {"lr": 1e-05}, 0.90, 0.5),
                     again(run("ce", "sst2", 1, "twice", {"lr": 1e-05}, 0.50, 0.5)),
                     run("ce", "sst2", 1, "once", {"lr": 2e-05}, 0.80, 0.5))
    row = chosen(select_by_validation(frame))
    assert row["knobs"] == "lr=2e-05 (tuned)" and row["val_accuracy"] == pytest.approx(0.80)  # best: lr=1e-05
    assert row["combinations"] == 2 and row["runs"] == 3  # every scored run counts in the budget

    # the per-seed mean, then the mean over seeds: (mean(0.90, 0.30) + 0.90) / 2 = 0.75 beats 0.72; the mean over
    # the three runs (0.70) would not, the best run per seed (0.90) would by more
    frame = frame_of(run("ce", "sst2", 1, "twice", {"lr": 1e-05}, 0.90, 0.5),
                     again(run("ce", "sst2", 1, "twice", {"lr": 1e-05}, 0.30, 0.5)),
                     run("ce", "sst2", 2, "twice", {"lr": 1e-05}, 0.90, 0.5),
                     *combos("ce", "sst2", {"steady": ({"lr": 2e-05}, [0.72, 0.72], [0.5, 0.5])}, seeds=(1, 2)))
    row = chosen(select_by_validation(frame))
    assert row["knobs"] == "lr=1e-05 (tuned)" and row["val_accuracy"] == pytest.approx(0.75)
    assert row["runs"] == 5 and row["selection_seeds"] == "1,2"


@pytest.mark.parametrize("candidates,winner", [
    ({"c1": {"lr": 2e-05}, "c2": {}}, "c2"),                                       # the defaults win a tie
    ({"c1": {"lr": 2e-05}, "c2": ""}, "c2"),                                       # "" knobs are the defaults
    ({"c1": {"lr": 2e-05, "supcon.tau": 0.1}, "c2": {"lr": 3e-05}}, "c2"),        # then the fewest changed knobs
    ({"c1": {"lr": 3e-05}, "c2": {"lr": 1e-05}}, "c2"),                           # then the smallest knobs text
])
def test_ties_go_to_the_defaults_then_the_fewest_changed_knobs(candidates, winner):
    frame = frame_of(*[run("ce", "sst2", seed, combo, knobs, 0.8, 0.9 if combo != winner else 0.1)
                       for combo, knobs in candidates.items() for seed in (1, 2)])
    assert chosen_combos(select_by_validation(frame)) == {winner}


def test_a_tie_is_within_1e_12_and_a_real_difference_wins():
    def pick(delta: float) -> tuple[str, list[str]]:
        frame = frame_of(run("ce", "sst2", 1, "defaults", {}, 0.8, 0.5),
                         run("ce", "sst2", 1, "tuned", {"lr": 1e-05}, 0.8 + delta, 0.5))
        row = chosen(select_by_validation(frame))
        return row["knobs"], row["ties"]

    assert pick(1e-13) == ("lr=default (tuned)", ["lr=default", "lr=1e-05"])  # the winner first
    assert pick(1e-9) == ("lr=1e-05 (tuned)", [])


def test_knobs_name_every_changed_setting_the_tuned_ones_marked_and_legacy_rows_are_one_combination():
    frame = frame_of(*combos("ce", "sst2", {
        "c1": ({"lr": 2e-05, "epochs": 3, "ce.x": 1}, [0.9] * 3, [0.5] * 3),
        "c2": ({"lr": 1e-05, "epochs": 3, "ce.x": 1}, [0.8] * 3, [0.5] * 3),
    }), *combos("supcon", "sst2", {"": ("", [0.7] * 3, [0.6] * 3)}))
    selection = select_by_validation(frame)
    row = chosen(selection)  # tuned first, then the method's knobs, then training settings
    assert row["knobs"] == "lr=2e-05 (tuned), ce.x=1, epochs=3" and row["tuned"] == "lr" and row["ties"] == []
    legacy = chosen(selection, "supcon")  # rows without knobs: not recorded, never "defaults"
    assert legacy["knobs"] == "—" and legacy["combinations"] == 1 and legacy["runs"] == 3


def test_a_single_combination_names_what_it_changed_and_defaults_only_when_nothing():
    """At 1,000 SST-2 examples the chosen lcl runs set ce_weight 0.9 in every combination (the method's default:
    0.5): the table must say so, not "defaults"."""
    runs = combos("lcl", "sst2", {"a": ({"epochs": 2, "lcl.ce_weight": 0.9}, [0.8] * 3, [0.5] * 3),
                                  "b": ({"epochs": 2, "lcl.ce_weight": 0.9, "lcl.tau": 0.1}, [0.7] * 3, [0.5] * 3)})
    runs += combos("ce", "sst2", {"c": ({"epochs": 2}, [0.8] * 3, [0.5] * 3)})
    runs += combos("supcon", "sst2", {"d": ({}, [0.8] * 3, [0.5] * 3)})
    selection = select_by_validation(frame_of(*runs))
    assert chosen(selection, "lcl")["knobs"] == "lcl.tau=default (tuned), lcl.ce_weight=0.9, epochs=2"
    assert chosen(selection, "ce")["knobs"] == "epochs=2"
    assert chosen(selection, "supcon")["knobs"] == "defaults"


def test_combinations_with_equal_knobs_are_the_defaults():
    frame = frame_of(*combos("ce", "sst2", {"": ("", [0.7] * 3, [0.5] * 3), "c1": ({}, [0.8] * 3, [0.5] * 3)}))
    row = chosen(select_by_validation(frame))
    assert (row["knobs"], row["combinations"]) == ("defaults", 2)


def test_damaged_knobs_are_a_bench_error():
    with pytest.raises(BenchError, match="not a JSON object"):
        select_by_validation(frame_of(run("ce", "sst2", 1, "c1", "lr=2", 0.8, 0.5)))


# ----------------------------------------------------------------------------------------------- seeds

SPLIT_SEEDS = {  # x wins on seeds 1-2, y on seeds 3-4 (and on the mean over all four)
    "x": ({"lr": 1e-05}, [0.90, 0.90, 0.50, 0.50], [0.61, 0.62, 0.63, 0.64]),
    "y": ({"lr": 2e-05}, [0.80, 0.80, 0.90, 0.90], [0.71, 0.72, 0.73, 0.74]),
}


def split_frame() -> pd.DataFrame:
    return frame_of(*combos("ce", "sst2", SPLIT_SEEDS, seeds=(1, 2, 3, 4)))


def test_chosen_on_the_selection_seeds_reported_on_the_eval_seeds():
    selection = select_by_validation(split_frame(), [1, 2], [3, 4])
    row = chosen(selection)
    assert row["knobs"] == "lr=1e-05 (tuned)" and row["val_accuracy"] == pytest.approx(0.90)
    assert (row["selection_seeds"], row["eval_seeds"]) == ("1,2", "3,4")
    assert (row["combinations"], row["runs"], row["compute_seconds"]) == (2, 4, 240.0)  # the runs chosen among
    assert set(selection.frame["seed"]) == {3, 4} and chosen_combos(selection) == {"x"}
    assert selection.notes == [] and selection.warnings == []


def test_without_seeds_all_are_used_and_an_optimism_note_says_so():
    selection = select_by_validation(split_frame())
    row = chosen(selection)
    assert row["knobs"] == "lr=2e-05 (tuned)" and (row["selection_seeds"], row["eval_seeds"]) == ("1,2,3,4", "1,2,3,4")
    assert selection.notes == [OPTIMISTIC] and "--selection-seeds/--eval-seeds" in OPTIMISTIC


def test_only_selection_seeds_report_on_the_others_and_only_eval_seeds_select_on_the_others():
    only_a = select_by_validation(split_frame(), selection_seeds=[3, 4])
    assert chosen_combos(only_a) == {"y"} and set(only_a.frame["seed"]) == {1, 2}
    assert chosen(only_a)["eval_seeds"] == "1,2" and only_a.notes == []
    only_b = select_by_validation(split_frame(), eval_seeds=[3, 4])
    assert chosen_combos(only_b) == {"x"} and set(only_b.frame["seed"]) == {3, 4}
    assert chosen(only_b)["selection_seeds"] == "1,2" and only_b.notes == []


def test_overlapping_seed_sets_are_a_bench_error():
    with pytest.raises(BenchError, match=r"share seed\(s\) 2,3") as error:
        select_by_validation(split_frame(), [1, 2, 3], [2, 3, 4])
    assert "\n" not in str(error.value)


def test_missing_eval_seeds_are_warned_about_and_a_group_missing_all_is_left_out():
    frame = frame_of(*combos("ce", "sst2", SPLIT_SEEDS, seeds=(1, 2, 3, 4)),
                     *combos("supcon", "sst2", {"s": ({}, [0.7] * 2, [0.6] * 2)}, seeds=(1, 2)))
    selection = select_by_validation(frame, [1, 2], [3, 4, 5])
    assert set(selection.table["method"]) == {"ce"}
    assert any(w.startswith("sst2/minilm/ce:") and "eval seed(s) 5" in w for w in selection.warnings)
    assert any(w.startswith("sst2/minilm/supcon:") and "left out" in w for w in selection.warnings)
    assert chosen(selection)["eval_seeds"] == "3,4"


def test_a_group_without_validation_on_the_selection_seeds_is_left_out():
    frame = frame_of(*combos("ce", "sst2", SPLIT_SEEDS, seeds=(1, 2, 3, 4)),
                     *combos("supcon", "sst2", {"s": ({}, [0.7] * 2, [0.6] * 2)}, seeds=(3, 4)))
    selection = select_by_validation(frame, [1, 2], [3, 4])
    assert list(selection.table["method"]) == ["ce"]
    assert any(w.startswith("sst2/minilm/supcon: no validation accuracy on the selection seeds 1,2")
               for w in selection.warnings)
    with pytest.raises(BenchError, match="seeds with validation accuracy: 1,2,3,4"):
        select_by_validation(frame, [8, 9])


def test_test_rows_without_validation_rows_cannot_be_selected():
    frame = split_frame()
    valid = (frame["split"] == "validation") & (frame["metric"] == "accuracy")
    with pytest.raises(BenchError, match="no clean validation accuracy rows"):
        select_by_validation(frame[~valid])


# ----------------------------------------------------------------------------------------------- budgets

def test_budget_columns_and_the_different_budget_warning():
    walls = [10.0, 20.0, math.nan]
    runs = [run("ce", "sst2", seed, "ce0", {}, 0.8, 0.7, wall=walls[seed - 1]) for seed in (1, 2, 3)]
    runs += combos("supcon", "sst2", {f"s{i}": ({"lr": i * 1e-05}, [0.7 + i / 100] * 3, [0.6] * 3)
                                      for i in range(4)}, wall=100.0)
    selection = select_by_validation(frame_of(*runs))
    ce, supcon = chosen(selection), chosen(selection, "supcon")
    assert (ce["combinations"], ce["selection_seeds"], ce["runs"]) == (1, "1,2,3", 3)
    assert ce["compute_seconds"] == pytest.approx(30.0)          # one wall time per run, NaN left out
    assert (supcon["combinations"], supcon["runs"], supcon["compute_seconds"]) == (4, 12, pytest.approx(1200.0))
    budget = [w for w in selection.warnings if "different budgets" in w]
    assert len(budget) == 1 and budget[0].startswith("sst2/minilm:")
    assert "ce 1×3" in budget[0] and "supcon 4×3" in budget[0] and "more chances to fit validation" in budget[0]


def test_equal_budgets_warn_nothing_and_budgets_compare_within_a_dataset_and_encoder():
    runs = combos("ce", "sst2", {"a": ({}, [0.8] * 3, [0.7] * 3), "b": ({"lr": 1e-05}, [0.7] * 3, [0.7] * 3)})
    runs += combos("supcon", "sst2", {"c": ({}, [0.8] * 3, [0.7] * 3), "d": ({"lr": 1e-05}, [0.7] * 3, [0.7] * 3)})
    runs += combos("supcon", "mr", {"e": ({}, [0.8] * 3, [0.7] * 3)})  # alone on mr: nothing to compare with
    selection = select_by_validation(frame_of(*runs))
    assert selection.warnings == []


def test_unequal_seeds_among_a_methods_combinations_are_warned_about():
    runs = combos("ce", "sst2", {"a": ({}, [0.8] * 3, [0.7] * 3)})
    runs += combos("ce", "sst2", {"b": ({"lr": 1e-05}, [0.7] * 2, [0.7] * 2)}, seeds=(1, 2))
    selection = select_by_validation(frame_of(*runs))
    assert chosen(selection)["selection_seeds"] == "1,2,3"
    unequal = [w for w in selection.warnings if "unequal numbers of selection seeds" in w]
    assert len(unequal) == 1 and unequal[0].startswith("sst2/minilm/ce:") and "lr=1e-05 (2 seeds)" in unequal[0]


# ----------------------------------------------------------------------------------------------- groups

def test_groups_are_independent():
    """The same combo ids in two methods, two regimes of a dataset and two encoders never compete."""
    runs = combos("ce", "sst2", {"c1": ({"lr": 1e-05}, [0.9] * 3, [0.5] * 3), "c2": ({}, [0.5] * 3, [0.5] * 3)})
    runs += combos("ce", "sst2[n=100]", {"c1": ({"lr": 1e-05}, [0.3] * 3, [0.5] * 3),
                                         "c2": ({}, [0.4] * 3, [0.5] * 3)})
    runs += combos("supcon", "sst2", {"c1": ({"lr": 1e-05}, [0.2] * 3, [0.5] * 3),
                                      "c2": ({}, [0.3] * 3, [0.5] * 3)})
    runs += combos("ce", "sst2", {"c1": ({"lr": 1e-05}, [0.1] * 3, [0.5] * 3), "c2": ({}, [0.2] * 3, [0.5] * 3)},
                   encoder="bert")
    selection = select_by_validation(frame_of(*runs))
    picked = {(d, e, m): c for d, e, m, c in selection.frame[["dataset", "encoder", "method", "combo"]]
              .drop_duplicates().itertuples(index=False)}
    assert picked == {("sst2", ENCODER, "ce"): "c1", ("sst2[n=100]", ENCODER, "ce"): "c2",
                      ("sst2", ENCODER, "supcon"): "c2", ("sst2", "bert", "ce"): "c2"}
    assert chosen(selection, "ce", "sst2[n=100]")["val_accuracy"] == pytest.approx(0.4)
    assert len(selection.table) == 4 and (selection.table["combinations"] == 2).all()


# ----------------------------------------------------------------------------------------------- cells

def test_selection_cells_render_as_markdown():
    runs = combos("ce", "sst2", {"a": ({"lr": 2e-05}, [0.9] * 3, [0.7] * 3), "b": ({}, [0.8] * 3, [0.7] * 3)},
                  wall=240.0)
    runs += combos("supcon", "sst2", {"c": ({}, [0.8] * 3, [0.7] * 3)}, wall=2400.0)
    selection = select_by_validation(frame_of(*runs), eval_seeds=[3])
    cells = selection_cells(selection)
    text = render(cells, "md")
    header = "| method | Knobs | Validation acc (%) | Budget (C×S) | Compute | Reported seeds |"
    assert header in text
    assert "| ce | lr=2e-05 (tuned) | 90.00 | 2×2 | 16 min | 3 |" in text
    assert "| supcon | defaults | 80.00 | 1×2 | 1.3 h | 3 |" in text
    assert "tie" not in text
    assert "sst2 (minilm)" in cells.attrs["title"]
    assert render(cells, "latex") and render(cells, "csv")


def test_selection_cells_name_the_group_with_several_datasets_and_carry_the_notes():
    runs = combos("ce", "sst2", {"a": ({}, [0.9] * 3, [0.7] * 3)})
    runs += combos("ce", "mr", {"b": ({}, [0.8] * 3, [0.7] * 3)})
    text = render(selection_cells(select_by_validation(frame_of(*runs))), "md")
    assert "| dataset encoder method |" in text and "| mr minilm ce | defaults |" in text
    assert OPTIMISTIC in text


@pytest.mark.parametrize("seconds,text", [(45, "45 s"), (720, "12 min"), (4680, "1.3 h"), (math.nan, "—")])
def test_compute_is_shown_in_readable_units(seconds, text):
    assert duration_text(seconds) == text


def test_the_chosen_knobs_name_every_varying_knob_a_default_one_too():
    runs = combos("supcon", "sst2", {"a": ({}, [0.5] * 3, [0.5] * 3),
                                     "b": ({"supcon.tau": 0.1}, [0.6] * 3, [0.5] * 3),
                                     "c": ({"supcon.lambda_": 0.3}, [0.7] * 3, [0.5] * 3),
                                     "d": ({"supcon.lambda_": 0.3, "supcon.tau": 0.1}, [0.4] * 3, [0.5] * 3)})
    assert chosen(select_by_validation(frame_of(*runs)), "supcon")["knobs"] == \
        "supcon.lambda_=0.3 (tuned), supcon.tau=default (tuned)"
    runs = combos("supcon", "sst2", {"a": ({}, [0.9] * 3, [0.5] * 3), "b": ({"supcon.tau": 0.1}, [0.6] * 3, [0.5] * 3)})
    assert chosen(select_by_validation(frame_of(*runs)), "supcon")["knobs"] == "supcon.tau=default (tuned)"


def test_a_tie_is_marked_and_a_note_names_the_tied_combinations_and_the_rule():
    runs = combos("lcl", "sst2", {"a": ({"lcl.ce_weight": 0.9}, [0.8] * 2, [0.5] * 2),
                                  "b": ({"lcl.ce_weight": 0.9, "lcl.tau": 0.1}, [0.8] * 2, [0.9] * 2),
                                  "c": ({"lcl.ce_weight": 0.9, "lcl.tau": 0.2}, [0.7] * 2, [0.9] * 2)}, seeds=(1, 2))
    selection = select_by_validation(frame_of(*runs), [1], [2])
    assert chosen(selection, "lcl")["ties"] == ["lcl.tau=default", "lcl.tau=0.1"]  # c scored lower: no tie
    text = render(selection_cells(selection), "md")
    assert "| lcl | lcl.tau=default (tuned), lcl.ce_weight=0.9 [tie] | 80.00 |" in text
    assert ("- lcl: a tie on validation (80.00) between 2 combinations (lcl.tau=default; lcl.tau=0.1): the tie rule "
            "chose lcl.tau=default") in text
    assert "the fewest changed knobs win, then the smallest knobs text" in text


def test_the_selection_table_says_which_of_its_runs_came_from_a_modified_tree():
    runs = combos("ce", "sst2", {"a": ({"lr": 1e-05}, [0.9] * 3, [0.5] * 3), "b": ({}, [0.8] * 3, [0.5] * 3)})
    frame = frame_of(*runs)
    frame["git_commit"] = ["abc123+dirty" if key.endswith("_s1_b") else "abc123" for key in frame["run_key"]]
    selection = select_by_validation(frame, [1], [2, 3])
    notes = selection_cells(selection).attrs["notes"]
    assert "built from a modified tree (git_commit abc123+dirty): 1 of 4 runs: ce_sst2_minilm_s1_b" in notes
    assert "the 4 runs come from 2 git commits (code that may differ): abc123 (3 runs), abc123+dirty (1 run)" in notes
    frame["git_commit"] = "abc123"
    assert not any("git" in note for note in selection_cells(select_by_validation(frame, [1])).attrs["notes"])
