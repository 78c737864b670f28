"""The page's training curves as SVG (bench.reporting.htmlcurves): the panels, titles, lines and legend of
`clbench plot curves`' figure, each point where its value puts it, round ticks, broken lines at non-finite
values."""

from __future__ import annotations

import math
import re

import pytest

from bench.reporting import htmlcurves, plots
from bench.results import store
from test_plots import CE, CLLD, make_run, results  # noqa: F401  (the fixture)


def circles(html: str) -> list[str]:
    return re.findall(r"<circle[^>]*><title>([^<]*)</title>", html)


def test_the_svg_shows_the_figures_panels_titles_and_legend(results):  # noqa: F811
    runs = [results / CE, results / CLLD]
    html = htmlcurves.curves_html(runs, "Training curves")
    figure = plots.curves_plot(runs).figure
    titles = [ax.get_title() for ax in figure.axes if ax.axison]
    assert re.findall(r'font-size="11" fill="[^"]*">([^<]*)</text>', html) == titles
    assert html.count("<svg width=\"250\"") == len(titles) == 4
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert [htmlcurves.esc(text) in html for text in legend] == [True, True]
    assert 'id="fig-curves_' in html and "<figcaption>Training curves</figcaption>" in html


def test_each_point_is_drawn_at_its_value(results):  # noqa: F811
    html = htmlcurves.curves_html([results / CE], "c")
    accuracy = html.split("</svg>")[0]
    assert circles(accuracy) == ["ce s1, epoch 1: 60", "ce s1, epoch 2: 70", "ce s1, epoch 3: 80"]  # in %
    ys = [float(y) for y in re.findall(r'<circle cx="[^"]*" cy="([^"]*)"', accuracy)]
    ticks = htmlcurves.nice_ticks(60, 80)
    inner = htmlcurves.HEIGHT - htmlcurves.TOP - htmlcurves.BOTTOM
    expected = [htmlcurves.TOP + inner * (1 - (v - ticks[0]) / (ticks[-1] - ticks[0])) for v in (60, 70, 80)]
    assert ys == pytest.approx(expected, abs=0.06) and ys[0] > ys[1] > ys[2]  # higher values drawn higher
    xs = [float(x) for x in re.findall(r'<circle cx="([^"]*)"', accuracy)]
    assert xs[0] == htmlcurves.LEFT and xs[-1] == htmlcurves.WIDTH - htmlcurves.RIGHT


def test_a_non_finite_value_breaks_the_line_and_has_no_marker(results):  # noqa: F811
    log = store.read_json(results / CE / "train_log.json")
    history = [{**e, "train_loss": math.nan if e["epoch"] == 2 else e["train_loss"]} for e in log["history"]]
    history.append({**history[-1], "epoch": 4, "train_loss": 0.2})
    store.write_json(results / CE / "train_log.json", {**log, "history": history})
    loss = htmlcurves.curves_html([results / CE], "c").split("</svg>")[1]
    assert circles(loss) == ["ce s1, epoch 1: 1", "ce s1, epoch 3: 0.3333", "ce s1, epoch 4: 0.2"]
    assert loss.count("<polyline") == 1  # epoch 1 alone, then 3-4


@pytest.mark.parametrize("low, high", [(60, 80), (0.31, 0.97), (3.0428, 3.0528), (5, 5), (-2.5, 1e-3), (0, 1e4)])
def test_ticks_are_round_and_cover_the_values(low, high):
    ticks = htmlcurves.nice_ticks(low, high)
    assert ticks[0] <= low and ticks[-1] >= high and 3 <= len(ticks) <= 8
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
    assert len(steps) == 1
    step = steps.pop()
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 6) in (1, 2, 2.5, 5)
    texts = [htmlcurves.tick_text(t, ticks) for t in ticks]
    assert len(set(texts)) == len(texts)  # enough decimals to tell every tick apart


def test_epoch_ticks_are_whole_and_few():
    assert htmlcurves.epoch_ticks(1, 3) == [1, 2, 3]
    assert htmlcurves.epoch_ticks(1, 40) == [1, 8, 15, 22, 29, 36]
