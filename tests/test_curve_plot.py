"""`clbench plot curve`: test accuracy against a data-regime dimension, from hand-built result frames."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bench.errors import BenchError
from bench.reporting import curveplot, figures

T_975_2 = 4.302652729749464  # Student t, 97.5% quantile, 2 degrees of freedom (3 seeds)


def run_rows(method: str, seed: int, value: float, train_size: int = 0, label_noise: float = 0.0, shots: int = 0,
             dataset: str = "sst2", encoder: str = "minilm", noise_kind: str = "symmetric", **extra) -> list[dict]:
    """The rows of one run: clean test accuracy (the one drawn) plus rows the figure must ignore."""
    key = f"{method}_{dataset}_n{train_size}_k{shots}_p{label_noise}_{noise_kind}_{encoder}_s{seed}"
    regime = f"[n={train_size}]" if train_size else ""
    base = {"run_key": key, "method": method, "encoder": encoder, "seed": seed, "evaluator": "clean",
            "split": "test", "label": "", "base_dataset": dataset, "dataset": dataset + regime,
            "train_size": train_size, "shots": shots, "label_noise": label_noise, "noise_kind": noise_kind, **extra}
    return [{**base, "metric": "accuracy", "value": value},
            {**base, "metric": "macro_f1", "value": value - 0.1},
            {**base, "metric": "f1", "label": "pos", "value": 0.0},
            {**base, "split": "validation", "metric": "accuracy", "value": 0.01},
            {**base, "evaluator": "noise", "metric": "accuracy", "value": 0.02}]


def frame_of(*runs: list[dict]) -> pd.DataFrame:
    """One results frame from runs' rows."""
    return pd.DataFrame([row for rows in runs for row in rows])


def sweep(methods=("ce", "clld"), sizes=(20, 100), seeds=(1, 2, 3), **kwargs) -> pd.DataFrame:
    """Every method x size x seed, accuracy 0.5 + size/1000 + seed/100 (+0.1 for clld)."""
    return frame_of(*(run_rows(m, s, 0.5 + n / 1000 + s / 100 + 0.1 * (m == "clld"), train_size=n, **kwargs)
                      for m in methods for n in sizes for s in seeds))


def point(plot: figures.Plot, method: str, x: float, facet: str | None = None) -> pd.Series:
    """The one data row of a method at x (in a facet)."""
    data = plot.data
    chosen = data[(data["method"] == method) & (data["x"] == x) & ((data["facet"] == facet) if facet else True)]
    assert len(chosen) == 1, chosen
    return chosen.iloc[0]


def heading(plot: figures.Plot) -> str:
    """The figure's title and caption as one line (however they are wrapped)."""
    return " ".join(f"{plot.figure.get_suptitle()} {figures.caption_of(plot.figure)}".split())


def test_mean_and_t_interval_over_three_seeds():
    frame = frame_of(*(run_rows("ce", s, v, train_size=20) for s, v in zip((1, 2, 3), (0.70, 0.74, 0.78))),
                     *(run_rows("ce", s, 0.9, train_size=100) for s in (1, 2, 3)))
    built = curveplot.curve_plot(frame)
    assert list(built.data.columns) == ["base_dataset", "encoder", "facet", "method", "x", "n", "mean", "low",
                                        "high"]
    low = point(built, "ce", 20)
    half = T_975_2 * 4.0 / math.sqrt(3)  # sd of 70, 74, 78 is 4 (percent)
    assert low["n"] == 3 and low["mean"] == pytest.approx(74.0)
    assert low["low"] == pytest.approx(74.0 - half) and low["high"] == pytest.approx(74.0 + half)
    assert point(built, "ce", 100)[["mean", "low", "high"]].tolist() == pytest.approx([90.0, 90.0, 90.0])
    assert built.figure.axes[0].get_ylabel() == "test accuracy (%)"
    assert built.figure.axes[0].get_xscale() == "log"
    assert [t.get_text() for t in built.figure.axes[0].get_xticklabels()] == ["20", "100"]
    assert "95% t-interval" in heading(built)
    assert built.figure.get_suptitle() == "Test accuracy by training-set size"   # one line; details below


def test_macro_f1_and_stem_names():
    built = curveplot.curve_plot(sweep(), metric="macro_f1", filters=["method=ce", "encoder=minilm"])
    assert built.stem == "curve-train_size-macro_f1_encoder-minilm_method-ce"
    assert set(built.data["method"]) == {"ce"}
    assert point(built, "ce", 20)["mean"] == pytest.approx((0.52 + 0.02 - 0.1) * 100)
    assert built.figure.axes[0].get_ylabel() == "test macro_f1 (%)"
    assert curveplot.curve_plot(sweep()).stem == "curve-train_size"
    assert curveplot.curve_stem("label_noise", filters=["seed=1,2"]) == "curve-label_noise_seed-1+2"


def test_one_line_per_method_per_facet_with_colours_kept_across_facets():
    frame = pd.concat([sweep(label_noise=0.2), sweep(dataset="trec", methods=("clld",)), sweep()])
    built = curveplot.curve_plot(frame)
    titles = [ax.get_title() for ax in built.figure.axes]  # in order, whatever the order of the rows
    assert titles == ["sst2 · minilm · noise 0", "sst2 · minilm · noise 0.2", "trec · minilm · noise 0"]
    colours = {}
    for ax in built.figure.axes:
        lines = ax.get_lines()
        assert [line.get_label() for line in lines] == (["clld"] if ax.get_title().startswith("trec") else
                                                        ["ce", "clld"])
        for line in lines:
            assert colours.setdefault(line.get_label(), line.get_color()) == line.get_color()
            assert list(line.get_xdata()) == [20, 100]
    legends = [ax.get_legend() for ax in built.figure.axes]             # one, in the first panel: every method
    assert [t.get_text() for t in legends[0].get_texts()] == ["ce", "clld"] and not any(legends[1:])
    assert built.data.groupby(["facet", "method"]).size().tolist() == [2, 2, 2, 2, 2]
    noisy = point(built, "clld", 100, "sst2 · minilm · noise 0.2")
    assert noisy["base_dataset"] == "sst2" and noisy["mean"] == pytest.approx(72.0)


def test_label_noise_is_linear_in_percent_with_clean_runs_shared_by_noise_kinds():
    frame = frame_of(*(run_rows("ce", s, 0.9 - p, label_noise=p, noise_kind=kind) for s in (1, 2)
                       for p, kind in ((0.0, "symmetric"), (0.2, "symmetric"), (0.4, "symmetric"),
                                       (0.2, "asymmetric"))))
    built = curveplot.curve_plot(frame, x="label_noise")
    assert built.stem == "curve-label_noise"
    axes = {ax.get_title(): ax for ax in built.figure.axes}
    assert set(axes) == {"sst2 · minilm · asymmetric", "sst2 · minilm · symmetric"}
    symmetric = axes["sst2 · minilm · symmetric"]
    assert symmetric.get_xscale() == "linear"
    assert [t.get_text() for t in symmetric.get_xticklabels()] == ["0%", "20%", "40%"]
    assert [t.get_text() for t in axes["sst2 · minilm · asymmetric"].get_xticklabels()] == ["0%", "20%"]
    assert point(built, "ce", 20.0, "sst2 · minilm · symmetric")["mean"] == pytest.approx(70.0)
    assert point(built, "ce", 0.0, "sst2 · minilm · asymmetric")["n"] == 2


def test_whole_training_set_drawn_at_its_size_or_left_out():
    whole = frame_of(*(run_rows("ce", s, 0.95, train_size=0, train_examples=6920) for s in (1, 2)))
    built = curveplot.curve_plot(pd.concat([sweep(methods=("ce",)), whole]))
    assert built.data["x"].tolist() == [20, 100, 6920]
    assert [t.get_text() for t in built.figure.axes[0].get_xticklabels()] == ["20", "100", "6920"]
    without = curveplot.curve_plot(pd.concat([sweep(methods=("ce",)), whole.drop(columns="train_examples")]))
    assert without.data["x"].tolist() == [20, 100]
    assert "2 run(s) on the whole training set" in heading(without)


def test_shots_rows_are_left_out_of_a_train_size_curve():
    shots = frame_of(*(run_rows("ce", s, 0.6, shots=5, train_examples=6920) for s in (1, 2)))
    built = curveplot.curve_plot(pd.concat([sweep(methods=("ce",)), shots]))
    assert built.data["x"].tolist() == [20, 100]
    assert "k-shot run(s)" in heading(built)
    counted = curveplot.curve_plot(pd.concat([shots, frame_of(*(run_rows("ce", s, 0.7, shots=10) for s in (1, 2)))]),
                                   x="shots")
    assert counted.data["x"].tolist() == [5, 10] and counted.data["mean"].tolist() == pytest.approx([60, 70])


def test_one_seed_has_no_interval_and_says_so():
    built = curveplot.curve_plot(sweep(seeds=(1,)))
    assert built.data["n"].eq(1).all() and built.data["low"].isna().all() and built.data["high"].isna().all()
    assert "one seed: no interval" in heading(built)
    assert "no interval" not in heading(curveplot.curve_plot(sweep()))
    mixed = pd.concat([sweep(), frame_of(run_rows("ce", 1, 0.9, train_size=500))])
    assert "points with one seed have no interval" in heading(curveplot.curve_plot(mixed))


def test_a_facet_with_one_point_is_drawn_with_error_bars():
    frame = pd.concat([sweep(), frame_of(*(run_rows("ce", s, 0.5 + s / 10, train_size=50, dataset="trec")
                                           for s in (1, 2, 3)))])
    built = curveplot.curve_plot(frame)
    assert [ax.get_title() for ax in built.figure.axes] == ["sst2 · minilm", "trec · minilm"]
    trec = built.figure.axes[1]
    assert len(trec.containers) == 1 and not trec.collections[1:]  # error bars, no band
    assert len(built.figure.axes[0].collections) == 2  # a band per method
    assert point(built, "ce", 50)["high"] - 70.0 == pytest.approx(T_975_2 * 10 / math.sqrt(3))


@pytest.mark.parametrize("kwargs,message", [
    ({"x": "epochs"}, "unknown --x 'epochs'; choose from train_size, shots, label_noise"),
    ({"metric": "bleu"}, "change --metric"),
    ({"x": "shots"}, "no runs left to place on the shots axis"),
    ({"x": "label_noise"}, r"only one label_noise \(0\).*--label-noise 0,0.1"),
])
def test_errors_say_what_to_do(kwargs, message):
    with pytest.raises(BenchError, match=message):
        curveplot.curve_plot(sweep(), **kwargs)


def test_one_train_size_is_nothing_to_draw():
    with pytest.raises(BenchError, match=r"only one train_size \(20\).*--train-size 20,100,1000"):
        curveplot.curve_plot(sweep(sizes=(20,)))
    with pytest.raises(BenchError, match="no finished runs"):
        curveplot.curve_plot(pd.DataFrame())


def test_several_knob_combinations_at_one_point_are_refused():
    frame = sweep(combo="a")
    frame.loc[(frame["method"] == "ce") & (frame["train_size"] == 100) & (frame["seed"] == 3), "combo"] = "b"
    with pytest.raises(BenchError, match=r"ce at train_size=100 \(sst2 · minilm\) has 2 knob combinations.*"
                                         "--select-by validation"):
        curveplot.curve_plot(frame)
    per_size = sweep(combo="a")
    per_size.loc[per_size["train_size"] == 100, "combo"] = "b"  # one combination per point: fine
    assert len(curveplot.curve_plot(per_size).data) == 4
    assert len(curveplot.curve_plot(frame, filters=["combo=a"]).data) == 4


def test_a_seed_twice_at_one_point_is_refused():
    frame = pd.concat([sweep(), frame_of(run_rows("ce", 1, 0.1, train_size=20, run_key="ce_other_lr_s1"))])
    with pytest.raises(BenchError, match="seed 1 more than once"):
        curveplot.curve_plot(frame)


def test_a_collapsed_run_is_left_out_and_named():
    frame = sweep(collapsed=0)
    bad = frame_of(run_rows("ce", 4, 0.1, train_size=20, collapsed=1))
    built = curveplot.curve_plot(pd.concat([frame, bad]))
    assert point(built, "ce", 20)["n"] == 3 and point(built, "ce", 20)["mean"] == pytest.approx(54.0)
    title = heading(built)
    assert "left out of every mean: 1 collapsed run(s)" in title and bad["run_key"].iloc[0] in title
    kept = curveplot.curve_plot(pd.concat([frame, bad]), filters=["collapsed=0,1"])
    assert point(kept, "ce", 20)["n"] == 4
    assert [t.get_text() for t in kept.figure.axes[0].texts] == ["†"]


def test_regime_columns_may_be_missing():
    frame = sweep(methods=("ce",)).drop(columns=["shots", "label_noise", "noise_kind", "base_dataset"])
    built = curveplot.curve_plot(frame)
    assert built.figure.axes[0].get_title() == "sst2 · minilm" and len(built.data) == 2


def test_save_writes_png_and_pdf(tmp_path):
    built = curveplot.curve_plot(sweep(), filters=["method=ce"])
    paths = figures.save_plot(built, tmp_path)
    assert [p.name for p in paths] == ["curve-train_size_method-ce.png", "curve-train_size_method-ce.pdf"]
    assert paths[0].read_bytes()[:4] == b"\x89PNG" and paths[1].read_bytes()[:4] == b"%PDF"


def test_a_validation_size_set_at_one_point_is_noted_not_a_panel_of_its_own():
    frame = pd.concat([sweep(), sweep(sizes=(1000,), val_size=500)])
    built = curveplot.curve_plot(frame)
    assert [ax.get_title() for ax in built.figure.axes] == ["sst2 · minilm"]
    assert sorted(set(built.data["x"])) == [20, 100, 1000]
    assert "validation examples set at n=1000: 500; elsewhere as many as the training sample" in heading(built)
    assert "validation examples" not in heading(curveplot.curve_plot(sweep()))
    with pytest.raises(BenchError, match="seed 1 more than once"):  # two validation sizes at one point
        other = sweep(sizes=(100,), val_size=-1)
        curveplot.curve_plot(pd.concat([sweep(), other.assign(run_key=other["run_key"] + "_val-all")]))


def test_intervals_are_clipped_to_what_a_rate_can_be():
    import pandas as pd

    from bench.reporting.curveplot import curve_frame

    rows = pd.DataFrame({"facet": "f", "method": "ce", "x": 20.0, "base_dataset": "sst2", "encoder": "minilm",
                         "value": [0.99, 0.60]})  # two runs: the t interval reaches far past 100%
    clipped = curve_frame(rows, 100.0).iloc[0]
    assert clipped["high"] == 100.0 and 0.0 <= clipped["low"] and clipped["mean"] == pytest.approx(79.5)
    assert curve_frame(rows, 100.0, clip=False).iloc[0]["high"] > 100.0
