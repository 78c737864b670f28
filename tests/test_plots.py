"""`clbench plot`: figures from tiny hand-made run folders (no training, no network)."""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

from bench.reporting import figures, plotdata, plots

from bench.results import store
from bench.errors import BenchError
from bench.cli.plot import add_plot_parser, cmd_plot

LABELS = ["alpha", "beta", "gamma"]
ACCURACY = {"ce": [0.80, 0.84, 0.90], "clld-adaptive": [0.86, 0.88]}


def make_run(results: Path, method: str, seed: int, dataset: str = "toy", labels: list[str] = LABELS,
             confusion: list[list[int]] | None = None, updates: int = 0, tsne: bool = False) -> Path:
    """A finished run folder with the files `clbench run` writes (and method_state/tsne when asked)."""
    key = f"{method}_{dataset}_tiny_s{seed}_{seed:06d}"
    run = results / key
    n = len(labels)
    spec = {"method": method, "dataset": dataset, "encoder": "tiny", "seed": seed, "config_hash": f"{seed:06d}",
            "key": key, "data": {"label_names": labels}, "split_ids": {"test": f"test-{dataset}"}}
    store.write_json(run / "spec.json", spec)
    counts = confusion or (np.eye(n, dtype=int) * 5 + 1).tolist()
    store.write_json(run / "confusion.json", {"labels": labels, "test": counts, "validation": None})
    history = [{"epoch": e, "val_accuracy": 0.5 + 0.1 * e, "train_loss": 1.0 / e, "train_ce": 0.6 / e,
                "train_seq_per_s": 100.0, "seconds": 1.0, "lr": 1e-5,
                **({"train_contrastive": 0.4 / e} if method.startswith("clld") else {})} for e in (1, 2, 3)]
    store.write_json(run / "train_log.json", {"history": history, "best_epoch": 3})
    if method.startswith("clld"):
        def ldm(step: int) -> list[list[float]]:  # off-diagonal distances grow with the step
            return (np.full((n, n), 5.0) + step / 100 * (1 - np.eye(n))).tolist()

        store.write_json(run / "method_state.json", {"ldm": ldm(300), "updates": [
            {"step": step, "epoch": step / 100, "eps": 0.1, "confusion": counts, "ldm": ldm(step)}
            for step in range(100, 100 * updates + 1, 100)]})
    if tsne:
        rng = np.random.default_rng(0)
        store.write_json(run / "tsne.json", {"ids": [str(i) for i in range(30)],
                                             "labels": [labels[i % n] for i in range(30)],
                                             "x": rng.normal(size=30).tolist(), "y": rng.normal(size=30).tolist()})
    accuracy = ACCURACY.get(method, [0.7] * 5)[seed - 1]
    base = {"run_key": key, "method": method, "dataset": dataset, "encoder": "tiny", "seed": seed,
            "evaluator": "clean", "split": "test", "n": 30}
    store.write_json(run / "rows.json", [
        {**base, "metric": "accuracy", "label": "", "value": accuracy},
        {**base, "metric": "macro_f1", "label": "", "value": accuracy - 0.05},
        {**base, "metric": "f1", "label": labels[0], "value": 0.5},
        {**base, "split": "validation", "metric": "accuracy", "label": "", "value": 0.99}])
    return run


@pytest.fixture
def results(tmp_path) -> Path:
    """Three ce seeds and two clld-adaptive seeds on `toy`, one ce run on `other` (different labels)."""
    folder = tmp_path / "results"
    for seed in (1, 2, 3):
        make_run(folder, "ce", seed, confusion=[[5, 1, 0], [2, 4, 0], [0, 0, 6]])
    make_run(folder, "clld-adaptive", 1, updates=3, tsne=True, confusion=[[6, 0, 0], [1, 4, 1], [0, 0, 6]])
    make_run(folder, "clld-adaptive", 2, updates=3)
    make_run(folder, "ce", 1, dataset="other", labels=["yes", "no"])
    return folder


def plot(results: Path, reports: Path, *argv: str) -> list[str]:
    """Run `clbench plot ...` in-process; returns the printed paths."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true")
    parser = argparse.ArgumentParser(prog="bench", parents=[common])
    add_plot_parser(parser.add_subparsers(dest="command"), common)
    args = parser.parse_args(["plot", *argv, "--results-dir", str(results), "--reports-dir", str(reports)])
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert cmd_plot(args) == 0
    return out.getvalue().splitlines()


CLLD = "clld-adaptive_toy_tiny_s1_000001"
CE = "ce_toy_tiny_s1_000001"
COMMANDS = [
    (["ldm", CLLD], f"ldm_{CLLD}"),
    (["ldm", CLLD, "--evolution"], f"ldm-evolution_{CLLD}"),
    (["confusion", CE], f"confusion_{CE}"),
    (["confusion", CE, "--normalise"], f"confusion-normalised_{CE}"),
    (["confusion-diff", CE, CLLD], f"confusion-diff_{CE}_vs_{CLLD}"),
    (["curves", CLLD, "ce_toy_*"], plots.curves_stem([CLLD, CE, "ce_toy_tiny_s2_000002", "ce_toy_tiny_s3_000003"])),
    (["embeddings", CLLD], f"embeddings_{CLLD}"),
    (["summary"], "summary"),
    (["summary", "--filter", "encoder=tiny", "--filter", "dataset=toy", "--filter", "method=ce,clld-adaptive",
      "--metric",
      "macro_f1"], "summary-macro_f1_dataset-toy_encoder-tiny_method-ce+clld-adaptive"),
]


@pytest.mark.parametrize("argv,stem", COMMANDS, ids=[c[1].split("_0")[0] for c in COMMANDS])
def test_each_figure_writes_png_and_pdf_with_stable_bytes(results, tmp_path, argv, stem):
    reports = tmp_path / "reports"
    printed = plot(results, reports, *argv)
    expected = [str(reports / f"{stem}.png"), str(reports / f"{stem}.pdf")]
    assert printed == expected
    first = {p: Path(p).read_bytes() for p in expected}
    assert first[expected[0]].startswith(b"\x89PNG") and first[expected[1]].startswith(b"%PDF")
    plot(results, reports, *argv)
    assert {p: Path(p).read_bytes() for p in expected} == first  # deterministic: identical bytes
    assert sorted(p.name for p in reports.iterdir()) == sorted(Path(p).name for p in expected)  # no temp files


def test_curves_name_ignores_run_order():
    assert plots.curves_stem(["b", "a"]) == plots.curves_stem(["a", "b"]) != plots.curves_stem(["a"])


def test_evolution_keeps_first_and_last_of_at_most_max_panels():
    assert plots.evolution_indices(3) == [0, 1, 2]
    assert plots.evolution_indices(12) == list(range(12))
    chosen = plots.evolution_indices(40)
    assert len(chosen) == 12 and chosen[0] == 0 and chosen[-1] == 39 and chosen == sorted(set(chosen))
    assert np.ptp(np.diff(chosen)) <= 1  # evenly spaced
    assert plots.evolution_indices(5, max_panels=2) == [0, 4]
    with pytest.raises(BenchError, match="at least 2"):
        plots.evolution_indices(5, max_panels=1)


def test_evolution_plot_panels_titles_and_shared_scale(results):
    built = plots.ldm_evolution_plot(results / CLLD, max_panels=2)
    assert [u["step"] for u in built.data] == [100, 300]
    heatmaps = [ax for ax in built.figure.axes if ax.get_title().startswith("step")]
    assert [ax.get_title() for ax in heatmaps] == ["step 100 (ep 1.0)", "step 300 (ep 3.0)"]
    limits = {ax.collections[0].get_clim() for ax in heatmaps}
    assert len(limits) == 1  # one colour scale for all panels
    assert limits.pop() == pytest.approx((6.0, 8.0))  # off-diagonal entries only: the diagonal (5.0) is masked
    assert all(ax.collections[0].get_array().mask.reshape(3, 3).diagonal().all() for ax in heatmaps)
    assert "start: every entry = tau = 5" in " ".join(built.figure._suptitle.get_text().split())
    assert len(plots.ldm_evolution_plot(results / CLLD).data) == 3


def test_ldm_plot_draws_the_final_matrix_with_class_names(results):
    built = plots.ldm_plot(results / CLLD)
    assert built.data[0, 1] == pytest.approx(8.0) and built.data[0, 0] == 5.0
    ax = built.figure.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == LABELS
    assert [t.get_text() for t in ax.get_yticklabels()] == LABELS
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("class j", "class i")           # axis labels
    drawn = ax.collections[0].get_array()                                       # the diagonal is masked
    assert drawn.mask.reshape(3, 3).tolist() == np.eye(3, dtype=bool).tolist()
    assert ax.collections[0].get_clim()[0] > 5.0               # the diagonal's 5.0 does not stretch the scale
    assert [t.get_text() for t in ax.texts] == ["8.0"] * 6                      # no number on the diagonal
    note = " ".join(built.figure.get_supxlabel().split())     # wrapped to the figure's width
    assert "every entry = tau = 5 (methods/clld.py fills the matrix with tau)" in note and "masked" in note


def test_ldm_start_is_the_runs_tau_else_the_methods_default(results):
    run = figures.run_info(results / CLLD)
    assert figures.ldm_start(run) == 5.0                         # spec without method_config: the default
    spec = store.read_json(results / CLLD / "spec.json")
    store.write_json(results / CLLD / "spec.json", {**spec, "method_config": {"tau": 2.5}})
    assert figures.ldm_start(run) == 2.5
    assert "tau = 2.5" in plots.ldm_plot(results / CLLD).figure.get_supxlabel()
    with pytest.raises(BenchError, match="has no tau knob"):
        figures.ldm_start(figures.run_info(results / CE))


def test_confusion_panels_and_row_normalisation(results):
    built = plots.confusion_plot(results / CE)
    assert built.data["counts"].tolist() == [[5, 1, 0], [2, 4, 0], [0, 0, 6]]
    assert built.data["normalised"][1].tolist() == pytest.approx([100 * 2 / 6, 100 * 4 / 6, 0])   # in %
    normalised = built.figure.axes[1]
    assert normalised.collections[0].get_clim() == (0, 100) and "33" in [t.get_text() for t in normalised.texts]
    assert built.figure.axes[-1].get_ylabel() == "% of gold class"
    assert plots.row_normalise(np.zeros((2, 2), dtype=int)).tolist() == [[0, 0], [0, 0]]


def test_confusion_diff_is_b_minus_a(results):
    built = plots.confusion_diff_plot(results / CE, results / CLLD)
    assert built.data.tolist() == [[1, -1, 0], [-1, 0, 1], [0, 0, 0]]
    assert built.figure.axes[0].get_title() == ("Confusion change on toy · tiny\nB = clld-adaptive s1 (86.00%)\n"
                                                "minus A = ce s1 (80.00%)")
    texts = [t.get_text() for t in built.figure.axes[0].texts]
    assert "+1" in texts and "\u22121" in texts and "0" not in texts


def test_confusion_diff_needs_same_dataset_and_labels(results, tmp_path):
    with pytest.raises(BenchError, match="different datasets") as error:
        plot(results, tmp_path / "reports", "confusion-diff", CE, "ce_other_*")
    assert "\n" not in str(error.value)
    relabelled = make_run(results, "supcon", 1, labels=["alpha", "beta", "delta"])
    with pytest.raises(BenchError, match="different labels"):
        plots.confusion_diff_plot(results / CE, relabelled)
    with pytest.raises(BenchError, match="matches 3 runs"):
        plot(results, tmp_path / "reports", "confusion-diff", "ce_toy_*", CLLD)


@pytest.mark.parametrize("argv,message", [
    (["ldm", CE], f"run {CE} has no method_state.json; only clld methods store a label-distance matrix"),
    (["embeddings", CE], f"run `clbench evaluate {CE} --evaluators repr --tsne` first"),
    (["ldm", "nope_*"], "no run 'nope_*' under"),
    (["ldm", "--evolution", CLLD, "--max-panels", "1"], "--max-panels must be at least 2"),
])
def test_missing_inputs_are_one_line_errors_with_the_fix(results, tmp_path, argv, message):
    with pytest.raises(BenchError) as error:
        plot(results, tmp_path / "reports", *argv)
    assert message in str(error.value) and "\n" not in str(error.value)
    assert not (tmp_path / "reports").exists()


def test_evolution_of_a_static_matrix_is_an_error(results):
    static = make_run(results, "clld-static", 1)
    store.write_json(static / "method_state.json", {"ldm": [[5.0] * 3] * 3})
    assert plots.ldm_plot(static).data.shape == (3, 3)
    with pytest.raises(BenchError, match="drop --evolution"):
        plots.ldm_evolution_plot(static)


def test_summary_error_bars_are_std_over_seeds(results):
    built = plots.summary_plot(store.finished_rows(results))
    frame = built.data.set_index(["dataset", "method"])
    ce = frame.loc[("toy", "ce")]
    assert ce["seeds"] == 3
    assert ce["mean"] == pytest.approx(np.mean(ACCURACY["ce"]))
    assert ce["std"] == pytest.approx(np.std(ACCURACY["ce"], ddof=1))
    assert frame.loc[("toy", "clld-adaptive"), "std"] == pytest.approx(np.std(ACCURACY["clld-adaptive"], ddof=1))
    assert np.isnan(frame.loc[("other", "ce"), "std"])  # one seed: no error bar
    assert [ax.get_title() for ax in built.figure.axes if ax.axison] == ["other", "toy"]
    bars = [c for c in built.figure.axes[1].containers]  # errorbar containers of the `toy` facet
    segments = bars[0].lines[2][0].get_segments()[0]
    assert segments[1][1] - segments[0][1] == pytest.approx(2 * 100 * ce["std"])  # ± 1 std, in %
    assert bars[0].lines[0].get_ydata()[0] == pytest.approx(100 * ce["mean"])
    assert built.figure.axes[0].get_ylabel() == "test accuracy (%)"
    caption = " ".join(built.figure.get_supxlabel().split())   # wrapped to the figure's width
    assert "mean ± 1 sample std over seeds (ddof 1; no bar for one seed)" in caption
    # ce on toy: 3 seeds, a filled marker; clld-adaptive: 2 seeds, an open one, and the caption says why
    assert [c.lines[0].get_markerfacecolor() for c in bars] == [bars[0].lines[0].get_color(), "white"]
    assert "open markers: < 3 seeds (one seed cannot separate methods)" in caption


def test_summary_filters(results):
    rows = store.finished_rows(results)
    built = plots.summary_plot(rows, filters=["dataset=toy", "method=ce"])
    assert built.stem == "summary_dataset-toy_method-ce"
    assert built.data[["dataset", "method"]].values.tolist() == [["toy", "ce"]]
    validation = plots.summary_plot(rows, filters=["split=validation"])
    assert validation.data["mean"].tolist() == pytest.approx([0.99] * 3)
    with pytest.raises(BenchError, match="no column 'colour'"):
        plots.summary_plot(rows, filters=["colour=red"])
    with pytest.raises(BenchError, match="column=value"):
        plots.summary_plot(rows, filters=["dataset"])
    both = plots.summary_plot(rows, filters=["method=ce,clld", "dataset=toy"])  # aliases as in clbench results
    assert sorted(both.data["method"]) == ["ce", "clld-adaptive"]
    seeds = plots.summary_plot(rows, filters=["seed=1,2", "method=ce"])
    assert seeds.data["seeds"].tolist() == [1, 2] and seeds.stem == "summary_method-ce_seed-1+2"
    with pytest.raises(BenchError, match="metric 'bleu'"):
        plots.summary_plot(rows, metric="bleu")
    with pytest.raises(BenchError, match="2 rows of accuracy"):
        plots.summary_plot(rows, filters=["split=test,validation"])


def test_curves_data_has_validation_accuracy_and_loss_parts(results):
    built = plots.curves_plot([results / CE, results / CLLD])
    assert plotdata.curve_metrics(built.data) == ["val_accuracy", "train_loss", "train_ce", "train_contrastive"]
    assert "train_seq_per_s" not in set(built.data["metric"])
    assert set(built.data["label"]) == {"ce s1", "clld-adaptive s1"}
    assert [ax.get_title() for ax in built.figure.axes if ax.axison][:2] == ["validation accuracy (%)",
                                                                             "training loss (total)"]
    assert built.figure.axes[0].lines[0].get_ydata().tolist() == pytest.approx([60, 70, 80])  # in %
    legend = built.figure.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["ce s1", "clld-adaptive s1 (ce ×0.5, contrastive ×0.5)"]


def test_figures_are_paper_sized_with_readable_fonts(results):
    single = plots.ldm_plot(results / CLLD).figure
    grid = plots.curves_plot([results / CE, results / CLLD]).figure
    assert single.get_figwidth() == pytest.approx(figures.COLUMN_WIDTH)
    assert grid.get_figwidth() == pytest.approx(figures.PAGE_WIDTH)
    single.canvas.draw()
    sizes = [t.get_fontsize() for t in single.findobj(lambda a: hasattr(a, "get_fontsize") and a.get_text())]
    assert sizes and min(sizes) >= 7


def test_plot_needs_a_figure_name(tmp_path):
    with pytest.raises(SystemExit):
        plot(tmp_path, tmp_path)


# ----------------------------------------------------------------------------------------------- legible figures

def test_summary_has_a_one_line_title_and_one_marker_per_method_point(results):
    from matplotlib.collections import PathCollection

    make_run(results, "supcon", 1)                                # one seed on toy: its point only, no dot
    built = plots.summary_plot(store.finished_rows(results))
    title = built.figure.get_suptitle()
    assert title == "Test accuracy by method" and "\n" not in title
    other, toy = [ax for ax in built.figure.axes if ax.axison]
    for ax, seeds in ((other, [1]), (toy, [3, 2, 1])):            # ce; ce, clld-adaptive, supcon
        markers = [line for line in ax.lines if line.get_marker() == "o"]
        assert [list(line.get_xdata()) for line in markers] == [[x] for x in range(len(seeds))]
        dots = [c for c in ax.collections if isinstance(c, PathCollection)]
        assert [len(c.get_offsets()) for c in dots] == [n for n in seeds if n > 1]   # no dot beside a lone seed
        for x, (dot, marker) in enumerate(zip(dots, markers)):   # the seeds sit beside their point, in its colour
            gaps = dot.get_offsets()[:, 0] - x
            assert gaps.min() >= 0.08 and gaps.max() <= 0.25          # none hidden behind the mean's marker
            assert tuple(dot.get_facecolor()[0][:3]) == pytest.approx(tuple(marker.get_color()[:3]))
    built.figure.canvas.draw()
    renderer = built.figure.canvas.get_renderer()
    title_height = built.figure._suptitle.get_window_extent(renderer).height
    assert title_height < 0.15 * toy.get_window_extent(renderer).height   # the data, not the title, fills it
    caption = built.figure._supxlabel
    assert caption.get_fontsize() == 7 and "open markers" in caption.get_text()


def test_curve_panels_say_which_loss_parts_are_weighted(results):
    supcon = make_run(results, "supcon", 1)
    log = store.read_json(supcon / "train_log.json")
    store.write_json(supcon / "train_log.json", {**log, "history": [
        {**e, "train_ce": 0.1 * e["train_ce"], "train_supcon": 2.0 / e["epoch"]} for e in log["history"]]})
    built = plots.curves_plot([results / CE, supcon])
    titles = [ax.get_title() for ax in built.figure.axes if ax.axison]
    assert titles == ["validation accuracy (%)", "training loss (total)", "ce (weighted by λ)",
                      "supcon (weighted by λ)"]
    legend = built.figure.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["ce s1", "supcon s1 (ce ×0.1, supcon ×0.9)"]  # λ = 0.9
    assert "each method's term × its weight λ" in " ".join(legend.get_title().get_text().split())
    spec = store.read_json(supcon / "spec.json")
    store.write_json(supcon / "spec.json", {**spec, "method_config": {"lambda_": 0.5}})  # the run's own λ
    texts = [t.get_text() for t in plots.curves_plot([supcon]).figure.legends[0].get_texts()]
    assert texts == ["supcon s1 (ce ×0.5, supcon ×0.5)"]
    alone = plots.curves_plot([results / CE, results / "ce_toy_tiny_s2_000002"])  # ce's part is raw CE
    assert "loss part: ce" in [ax.get_title() for ax in alone.figure.axes]
    assert alone.figure.legends[0].get_title().get_text() == ""


def test_confusion_titles_name_the_run_its_accuracy_and_a_collapse(results, tmp_path, monkeypatch):
    assert plots.confusion_plot(results / CE).figure.get_suptitle() == \
        "Test confusion: ce s1 · toy · tiny\ntest accuracy 80.00%"
    bad = make_run(results, "supcon", 1, confusion=[[6, 0, 0], [6, 0, 0], [6, 0, 0]])
    store.write_json(bad / "spec.json", {**store.read_json(bad / "spec.json"), "train": {"train_size": 100}})
    store.write_json(bad / "rows.json", [{**r, "collapsed": 1} for r in store.read_json(bad / "rows.json")])
    store.write_json(bad / "rows.json", [{**r, "value": 1 / 3} if r["metric"] == "accuracy" else r
                                         for r in store.read_json(bad / "rows.json")])
    drawn = []
    monkeypatch.setattr(figures, "save_plot", lambda plot, folder: drawn.append(plot) or [])
    plot(results, tmp_path / "reports", "confusion", bad.name, "--normalise")   # `clbench plot confusion RUN`
    assert drawn[0].figure.get_suptitle() == ("Test confusion: supcon s1 · toy[n=100] · tiny\n"
                                              "test accuracy 33.33% · collapsed: one class predicted")


def test_the_tab10_colours_are_matplotlibs():
    from matplotlib import colormaps

    assert figures.colours(10) == [tuple(float(c) for c in rgb[:3]) for rgb in colormaps["tab10"].colors]
