"""The page's heatmaps as HTML tables (bench.reporting.htmlheatmap): colours on the figures' scales, readable
text on dark cells, masked cells, values left to tooltips for many classes, and a confusion table that says the
run's counts."""

from __future__ import annotations

import re

import numpy as np

from bench.reporting import htmlheatmap
from bench.reporting.figures import ANNOTATE_MAX


def test_the_scale_runs_from_its_first_to_its_last_anchor_with_readable_text():
    assert htmlheatmap.colour(0, "Blues", 0, 10) == "background:#f7fbff;color:#262626"   # light: dark text
    assert htmlheatmap.colour(10, "Blues", 0, 10) == "background:#08306b;color:#ffffff"  # dark: white text
    assert htmlheatmap.colour(99, "Blues", 0, 10) == htmlheatmap.colour(10, "Blues", 0, 10)  # clipped
    assert htmlheatmap.colour(0, "RdBu_r", -3, 3) == "background:#f7f7f7;color:#262626"  # 0: white, diverging
    assert htmlheatmap.colour(5, "rocket_r", 5, 5).startswith("background:#")          # one value: mid-scale


def test_a_table_holds_every_cell_its_mask_and_names():
    matrix = np.array([[5.0, 7.5], [7.5, 5.0]])
    table = htmlheatmap.matrix_table(matrix, ["neg", "pos"], "rocket_r", 7.5, 7.5, "d", [["5.0", "7.5"], ["7.5", "5.0"]],
                                     mask=np.eye(2, dtype=bool))
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", table)
    assert cells == ["—", "7.5", "7.5", "—"]
    assert table.count('scope="col"') == 2 and "neg → pos: 7.5" in table


def test_many_classes_keep_their_values_in_tooltips_only():
    n = ANNOTATE_MAX + 1
    matrix = np.arange(n * n, dtype=float).reshape(n, n)
    table = htmlheatmap.matrix_table(matrix, [f"c{i}" for i in range(n)], "Blues", 0, n * n, "counts",
                                     [[f"{int(v)}" for v in row] for row in matrix])
    assert re.findall(r"<td[^>]*>([^<]*)</td>", table) == [""] * (n * n)
    assert 'title="c0 → c1: 1"' in table


def test_a_runs_confusion_says_its_counts_and_shares(tmp_path):
    from test_html_report import CE1, fill

    results = fill(tmp_path / "results")
    figure = htmlheatmap.confusion_html(results / CE1, "caption")
    assert figure.startswith(f'<figure id="fig-confusion_{CE1}">') and "<figcaption>caption</figcaption>" in figure
    counts, shares = re.findall(r"<table.*?</table>", figure)
    assert re.findall(r">(\d+)</td>", counts) == ["8", "2", "2", "8"]  # write_run's 16 of 20 right, alternating
    assert re.findall(r">(\d+)</td>", shares) == ["80", "20", "20", "80"]
