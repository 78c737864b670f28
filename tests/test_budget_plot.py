"""`clbench plot budget`: expected maximum validation accuracy against knob combinations tried (Dodge et al. 2019),
checked against brute force, on hand-built result frames, through the command line and on the HTML page."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from bench.errors import BenchError
from bench.reporting import budgetplot, figures, htmlfigures
from bench.reporting.budgetplot import budget_plot, expected_max
from bench.reporting.resultsview import normalise
from bench.results import store


def brute_force(values: list[float], n: int) -> tuple[float, float]:
    """Mean and (population) std of the maximum over every one of the N^n ordered draws with replacement."""
    maxima = [max(draw) for draw in itertools.product(values, repeat=n)]
    return float(np.mean(maxima)), float(np.std(maxima))


def run(method: str, seed: int, combo: str, val: float, test: float = 0.5, dataset: str = "sst2",
        encoder: str = "minilm", **extra) -> list[dict]:
    """The rows of one run: clean validation accuracy (what the curves read) and rows they must ignore."""
    base = {"run_key": f"{method}_{dataset}_{encoder}_s{seed}_{combo or 'legacy'}", "method": method,
            "dataset": dataset, "encoder": encoder, "seed": seed, "combo": combo,
            "knobs": json.dumps({"tau": combo}) if combo else "", **extra}
    clean = {**base, "evaluator": "clean", "label": ""}
    return [{**clean, "split": "validation", "metric": "accuracy", "value": val},
            {**clean, "split": "validation", "metric": "macro_f1", "value": 0.0},
            {**clean, "split": "test", "metric": "accuracy", "value": test},
            {**clean, "split": "validation", "metric": "accuracy", "label": "pos", "value": 0.0},
            {**base, "evaluator": "contrast", "split": "validation", "metric": "accuracy", "label": "", "value": 0.0}]


def frame_of(*runs: list[dict]) -> pd.DataFrame:
    """A normalised results frame (as `load_results` gives) from runs' rows."""
    return normalise(pd.DataFrame([row for rows in runs for row in rows]))


def grid(scores: dict[str, dict[str, list[float]]], seeds=(1, 2), **kwargs) -> pd.DataFrame:
    """method -> combo -> validation accuracy per seed."""
    return frame_of(*(run(method, seed, combo, values[i], **kwargs) for method, combos in scores.items()
                      for combo, values in combos.items() for i, seed in enumerate(seeds)))


def said(plot) -> str:
    """The figure's title and caption as one line."""
    return " ".join(f"{plot.figure.get_suptitle()} {figures.caption_of(plot.figure)}".split())


def curve(plot, method: str, dataset: str = "sst2") -> pd.DataFrame:
    data = plot.data
    return data[(data["method"] == method) & (data["dataset"] == dataset)].reset_index(drop=True)


# ----------------------------------------------------------------------------------------------- the formula

@pytest.mark.parametrize("values", [[0.3, 0.9], [70.0, 80.0, 80.0, 95.0], [1.0, 2.0, 3.0, 4.0, 5.0],
                                    [60.0, 60.0, 60.0], [88.5, 12.0, 50.0]])
def test_expected_max_and_its_std_equal_brute_force_over_every_draw(values):
    mean, std = expected_max(values)
    assert len(mean) == len(std) == len(values)
    for n in range(1, len(values) + 1):
        assert (mean[n - 1], std[n - 1]) == pytest.approx(brute_force(values, n), abs=1e-9)


def test_random_values_match_brute_force_and_the_curve_rises_to_the_maximum():
    values = list(np.random.default_rng(0).uniform(50, 90, size=4).round(1))
    mean, std = expected_max(values)
    for n in (1, 2, 3, 4):
        assert (mean[n - 1], std[n - 1]) == pytest.approx(brute_force(values, n), abs=1e-9)
    assert np.all(np.diff(mean) > 0) and mean[-1] < max(values)
    assert expected_max(values * 50)[0][-1] == pytest.approx(max(values), abs=1e-6)  # many draws: the best


def test_edge_cases_one_value_ties_and_one_draw_is_the_mean():
    assert [a.tolist() for a in expected_max([81.0])] == [[81.0], [0.0]]
    mean, std = expected_max([70.0, 70.0, 70.0])
    assert mean.tolist() == pytest.approx([70.0] * 3) and std.tolist() == pytest.approx([0.0] * 3)
    values = [40.0, 90.0, 65.0, 65.0]
    mean, std = expected_max(values)
    assert mean[0] == pytest.approx(np.mean(values)) and std[0] == pytest.approx(np.std(values))
    assert expected_max(values)[0] == pytest.approx(expected_max(sorted(values, reverse=True))[0])  # order-free
    for bad in ([], [1.0, float("nan")]):
        with pytest.raises(ValueError):
            expected_max(bad)


# ----------------------------------------------------------------------------------------------- the figure

def test_seeds_are_averaged_per_combination_and_methods_get_their_own_budget():
    frame = grid({"ce": {"a": [0.80, 0.82]},
                  "supcon": {"a": [0.70, 0.74], "b": [0.90, 0.90], "c": [0.80, 0.84]}})
    plot = budget_plot(frame)
    assert list(plot.data.columns) == budgetplot.COLUMNS and plot.stem == "budget"
    ce, supcon = curve(plot, "ce"), curve(plot, "supcon")
    assert ce[["n", "combinations", "expected_max", "std"]].values.tolist() == [[1, 1, pytest.approx(81.0), 0.0]]
    assert supcon["n"].tolist() == [1, 2, 3] and set(supcon["combinations"]) == {3}
    mean, std = expected_max([72.0, 90.0, 82.0])
    assert supcon["expected_max"].tolist() == pytest.approx(mean.tolist())
    assert supcon["low"].tolist() == pytest.approx((mean - std).tolist())
    assert supcon["expected_max"].iloc[0] == pytest.approx((72 + 90 + 82) / 3)   # n = 1: the mean
    assert set(plot.data["seeds"]) == {"2"}
    (ax,) = plot.figure.axes
    assert ax.get_title() == "sst2 · minilm" and ax.get_ylabel() == "expected max val. accuracy (%)"
    assert ax.get_xlabel() == "knob combinations tried (n)"
    assert [line.get_label() for line in ax.get_lines()] == ["ce", "supcon"]
    assert all(float(t).is_integer() for t in ax.get_xticks())
    assert plot.figure.get_suptitle() == budgetplot.TITLE                 # one line; the details in the caption
    title = said(plot)
    assert "Expected maximum validation accuracy" in title and "Dodge et al. 2019" in title
    assert "validation scores, not test" in title and "mean over seeds 1,2" in title
    assert "one combination (one point, its validation accuracy): ce" in title


def test_the_band_is_clipped_to_0_and_100_and_test_rows_never_count():
    frame = grid({"ce": {"a": [1.0, 1.0], "b": [0.0, 0.0]}})
    frame.loc[frame["split"] == "test", "value"] = 0.123
    data = budget_plot(frame).data
    assert data["expected_max"].tolist() == pytest.approx([50.0, 75.0])
    assert data["low"].min() >= 0.0 and data["high"].max() <= 100.0
    assert data["high"].tolist() == pytest.approx([100.0, 100.0])


def test_selection_seeds_panels_filters_and_regimes():
    frame = pd.concat([grid({"ce": {"a": [0.5, 0.9, 0.7], "b": [0.6, 0.6, 0.6]}}, seeds=(1, 2, 3)),
                       grid({"ce": {"a": [0.5, 0.5]}, "supcon": {"a": [0.4, 0.4], "b": [0.8, 0.8]}},
                            dataset="trec", train_size=100)])
    plot = budget_plot(frame, seeds=[1, 2])
    assert plot.stem == "budget-seeds-1+2"
    assert [ax.get_title() for ax in plot.figure.axes] == ["sst2 · minilm", "trec[n=100] · minilm"]
    assert curve(plot, "ce")["expected_max"].iloc[0] == pytest.approx((70.0 + 60.0) / 2)  # seed 3 left out
    legends = [ax.get_legend() for ax in plot.figure.axes]              # one, in the first panel: every method
    assert [[t.get_text() for t in lg.get_texts()] if lg else None for lg in legends] == [["ce", "supcon"], None]
    assert "one combination (one point, its validation accuracy): ce on trec[n=100] (minilm)" in said(plot)
    only = budget_plot(frame, filters=["dataset=trec"])
    assert only.stem == "budget_dataset-trec" and set(only.data["dataset"]) == {"trec[n=100]"}
    uneven = budget_plot(frame)  # sst2: 3 seeds, trec: 2 seeds
    assert set(uneven.data["seeds"]) == {"3", "2"}


def test_collapsed_runs_are_left_out_and_named():
    frame = grid({"ce": {"a": [0.8, 0.8], "b": [0.6, 0.6], "c": [0.1, 0.1]}})
    frame["collapsed"] = (frame["combo"] == "c").astype(int)
    plot = budget_plot(frame)
    assert set(plot.data["combinations"]) == {2}
    assert "left out of every mean: 2 collapsed run(s)" in said(plot)
    assert set(budget_plot(frame, filters=["collapsed=0,1"]).data["combinations"]) == {3}


@pytest.mark.parametrize("frame, fragment", [
    (grid({"ce": {"a": [0.8, 0.8]}, "supcon": {"a": [0.7, 0.7]}}), "every method here ran one knob combination"),
    (grid({"ce": {"": [0.8, 0.8]}}), "no run has a `combo` value"),
    (grid({"ce": {"a": [0.8, 0.8]}}).query("split != 'validation'"), "no clean validation accuracy rows"),
])
def test_nothing_to_draw_is_a_bench_error_naming_the_fix(frame, fragment):
    with pytest.raises(BenchError, match=fragment) as caught:
        budget_plot(frame)
    assert "\n" not in str(caught.value) and ("--grid" in str(caught.value) or "--filter" in str(caught.value))


def test_seeds_without_validation_rows_are_refused():
    with pytest.raises(BenchError, match=r"no validation accuracy on --selection-seeds 7; seeds with .*: 1,2"):
        budget_plot(grid({"ce": {"a": [0.8, 0.8], "b": [0.7, 0.7]}}), seeds=[7])


# ----------------------------------------------------------------------------------------------- command line

def write_runs(results, frame: pd.DataFrame) -> None:
    """Each run's rows as a finished run folder (rows.json)."""
    for key, rows in frame.groupby("run_key"):
        records = rows.drop(columns=["base_dataset"]).astype(object).where(rows.notna(), None)
        store.write_json(results / key / store.ROWS, records.to_dict("records"))


def test_the_command_writes_png_and_pdf_and_refuses_bad_input_in_one_line(cli, tmp_path):
    results, reports = tmp_path / "results", tmp_path / "reports"
    write_runs(results, grid({"ce": {"a": [0.8, 0.8], "b": [0.7, 0.7]}}))
    code, out, err = cli("plot", "budget", "--results-dir", results, "--reports-dir", reports,
                         "--selection-seeds", "1-2")
    assert code == 0, err
    assert [p.split("/")[-1] for p in out.split()] == ["budget-seeds-1+2.png", "budget-seeds-1+2.pdf"]
    assert all((reports / name).stat().st_size > 0 for name in ("budget-seeds-1+2.png", "budget-seeds-1+2.pdf"))
    single = tmp_path / "single"
    write_runs(single, grid({"ce": {"a": [0.8, 0.8]}}))
    code, out, err = cli("plot", "budget", "--results-dir", single, "--reports-dir", tmp_path / "r2")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: every method here ran one knob combination") and "--grid" in err
    code, _, err = cli("plot", "budget", "--results-dir", results, "--reports-dir", reports, "--filter", "seed=9")
    assert code == 2 and err.count("\n") == 1 and "--filter 'seed=9' matches no rows" in err


# ----------------------------------------------------------------------------------------------- HTML page

def test_the_html_page_gets_a_tuning_budgets_section_only_for_grids(tmp_path, monkeypatch):
    from bench.reporting import html

    monkeypatch.setattr(html, "method_figures", lambda *_: "")  # the budget section is under test, not these
    monkeypatch.setattr(html, "summary_figure", lambda *_: "")
    results = tmp_path / "results"
    write_runs(results, grid({"ce": {"a": [0.8, 0.8]}, "supcon": {"a": [0.7, 0.7], "b": [0.9, 0.85]}}))
    text = html.build_report(results, resamples=50).text
    assert '<section id="budgets">' in text and "<h2>Tuning budgets</h2>" in text
    assert 'href="#budgets"' in text and 'id="fig-budget"' in text and "Dodge et al. 2019" in text
    single = tmp_path / "single"
    write_runs(single, grid({"ce": {"a": [0.8, 0.8]}, "supcon": {"a": [0.7, 0.7]}}))
    assert "budgets" not in html.build_report(single, resamples=50).text


def test_the_html_figure_is_empty_without_grids_and_a_note_when_it_cannot_be_drawn():
    assert htmlfigures.budget_figure(grid({"ce": {"a": [0.8, 0.8]}}), []) == ""
    frame = grid({"ce": {"a": [0.8, 0.8], "b": [0.6, 0.6]}})
    figure = htmlfigures.budget_figure(frame, [])
    assert figure.startswith('<div class="figures"><figure data-key="') and 'id="fig-budget"' in figure
    frame["collapsed"] = (frame["combo"] == "b").astype(int)  # left with one combination: said in a note
    assert htmlfigures.budget_figure(frame, []).startswith('<p class="note">No tuning-budget figure: every method')
