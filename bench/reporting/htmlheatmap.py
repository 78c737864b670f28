"""The page's heatmaps as HTML tables: a run's test confusion (counts and row-normalised %), a clld run's
label-distance matrix and a confusion change (B − A), each cell coloured on the figure's colour scale with its
value written in it. A table costs microseconds where a matplotlib figure cost 0.3-0.7 s (its layout and
rasteriser), and its numbers can be selected and read at any zoom; `clbench plot` draws the same matrices as PNG
and PDF for papers. Colours follow the figures' colour maps (Blues, RdBu_r, rocket_r) by linear interpolation
between their anchors; text is dark or light by the cell's luminance, as on the figures."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.reporting.figures import (ANNOTATE_MAX, class_names, ldm_update_note, luminance, read_confusion,
                                     read_ldm, run_info, short)
from bench.reporting.htmlparts import anchor, esc
from bench.reporting.plotdata import PERCENT

# (position, RGB) anchors of the figures' colour maps
SCALES = {
    "Blues": ((0.0, (247, 251, 255)), (0.5, (107, 174, 214)), (1.0, (8, 48, 107))),
    "RdBu_r": ((0.0, (5, 48, 97)), (0.25, (67, 147, 195)), (0.5, (247, 247, 247)), (0.75, (214, 96, 77)),
               (1.0, (103, 0, 31))),
    "rocket_r": ((0.0, (250, 235, 221)), (0.35, (243, 118, 81)), (0.6, (203, 27, 79)), (0.85, (95, 23, 86)),
                 (1.0, (3, 5, 26))),
}
CELL_CSS = "text-align:center;min-width:2.6em"


def colour(value: float, scale: str, low: float, high: float) -> str:
    """The CSS background and text colour of `value` on `scale` from `low` to `high`."""
    position = 0.5 if high <= low else min(1.0, max(0.0, (value - low) / (high - low)))
    anchors = SCALES[scale]
    for (a, left), (b, right) in zip(anchors, anchors[1:]):
        if position <= b:
            share = (position - a) / (b - a)
            rgb = [round(l + (r - l) * share) for l, r in zip(left, right)]
            break
    text = "#262626" if luminance([c / 255 for c in rgb]) > 0.408 else "#ffffff"
    return f"background:#{rgb[0]:02x}{rgb[1]:02x}{rgb[2]:02x};color:{text}"


def matrix_table(matrix: np.ndarray, names: Sequence[str], scale: str, low: float, high: float, title: str,
                 cells: Sequence[Sequence[str]], rows: str = "gold", columns: str = "predicted",
                 mask: np.ndarray | None = None) -> str:
    """One heatmap as a <table>: `title` above, class names heading rows (`rows`) and columns (`columns`), each cell
    coloured by its value and showing `cells` (many classes: no text, the value in a tooltip)."""
    labels = [esc(short(name)) for name in names]
    head = "".join(f'<th scope="col" title="{esc(n)}">{label}</th>' for n, label in zip(names, labels))
    body = []
    written = len(matrix) <= ANNOTATE_MAX
    for i, name in enumerate(names):
        tds = []
        for j in range(len(names)):
            if mask is not None and mask[i, j]:
                tds.append(f'<td style="{CELL_CSS}">—</td>')
                continue
            text = esc(cells[i][j])
            tip = f"{esc(name)} → {esc(names[j])}: {text}"
            tds.append(f'<td style="{CELL_CSS};{colour(float(matrix[i, j]), scale, low, high)}" title="{tip}">'
                       f'{text if written else ""}</td>')
        body.append(f'<tr><th scope="row" title="{esc(name)}">{labels[i]}</th>{"".join(tds)}</tr>')
    return (f'<table class="heatmap"><caption>{esc(title)}</caption><thead><tr><th>{esc(rows)} \\ '
            f'{esc(columns)}</th>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>')


def figure(stem: str, tables: Sequence[str], caption: str) -> str:
    """A <figure> (id `fig-<stem>`, as the PNG figures' ids) holding the tables and the caption."""
    return (f'<figure id="{esc("fig-" + anchor(stem))}"><div class="figures">{"".join(tables)}</div>'
            f'<figcaption>{esc(caption)}</figcaption></figure>\n')


def confusion_html(run_dir: Path, caption: str) -> str:
    """A run's test confusion: counts and row-normalised (%), as `plots.confusion_plot` draws it."""
    from bench.reporting.plots import outcome_text, row_normalise  # pure numpy helpers (plots imports no pyplot)

    run = run_info(run_dir)
    names, counts = read_confusion(run)
    share = PERCENT * row_normalise(counts)
    tables = [matrix_table(counts, names, "Blues", 0, max(1, int(counts.max())), "counts",
                           [[f"{int(v)}" for v in row] for row in counts]),
              matrix_table(share, names, "Blues", 0, PERCENT, "row-normalised (% of gold class)",
                           [[f"{v:.0f}" for v in row] for row in share])]
    title = f"Test confusion: {run.label} · {run.where} · {run.encoder} · {outcome_text(run, counts)}"
    return figure(f"confusion_{run.key}", [f'<div><strong>{esc(title)}</strong><div class="figures">'
                                           f'{"".join(tables)}</div></div>'], caption)


def ldm_html(run_dir: Path, caption: str) -> str:
    """A clld run's final label-distance matrix, diagonal masked, as `plots.ldm_plot` draws it."""
    from bench.reporting.plots import off_diagonal_limits

    run = run_info(run_dir)
    matrix = read_ldm(run)
    names = class_names(run, len(matrix))
    low, high = off_diagonal_limits([matrix])
    title = " · ".join(filter(None, [run.label, run.dataset, ldm_update_note(run)]))  # the caption says the start
    table = matrix_table(matrix, names, "rocket_r", low, high, "label distance d(i, j)",
                         [[f"{v:.1f}" for v in row] for row in matrix], rows="class i", columns="class j",
                         mask=np.eye(len(matrix), dtype=bool))
    return figure(f"ldm_{run.key}", [f"<div><strong>{esc(title)}</strong>{table}</div>"], caption)


def confusion_diff_html(run_a: Path, run_b: Path, caption: str) -> str:
    """Confusion counts of B minus A on one symmetric scale around 0, as `plots.confusion_diff_plot` draws it."""
    from bench.reporting.plots import check_comparable, diff_title_lines, signed

    a, b = run_info(run_a), run_info(run_b)
    (names_a, counts_a), (names_b, counts_b) = read_confusion(a), read_confusion(b)
    check_comparable(a, b, names_a, names_b)
    diff = counts_b - counts_a
    limit = max(1, int(np.abs(diff).max()))
    where, first, second = diff_title_lines(a, b, counts_a, counts_b)
    title = f"{where}: {first} {second}"
    table = matrix_table(diff, names_a, "RdBu_r", -limit, limit, "examples (B − A)",
                         [[signed(int(v)) for v in row] for row in diff])
    return figure(f"confusion-diff_{a.key}_vs_{b.key}", [f"<div><strong>{esc(title)}</strong>{table}</div>"],
                  caption)
