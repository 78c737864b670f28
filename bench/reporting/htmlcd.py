"""The page's critical-difference diagram (Demšar 2006) as inline SVG: the mean-rank axis with 1 (best) on the
right, each method joined by an elbow line to its mean rank (the worse half labelled on the left, the better half
on the right), the CD as a scale bar above the axis, and a thick bar under the axis joining each group of methods
the Nemenyi test does not tell apart. The layout is the one `clbench plot ranking` draws with autorank; as SVG it
costs no matplotlib and no autorank import (0.65 s of the page), stays sharp and shows each mean rank on hover."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from bench.reporting.htmlparts import anchor, esc

WIDTH = 600            # CSS pixels; the label columns grow with the longest name
CHAR = 6.6             # width of a character at font-size 12, for the label columns
ROW = 18               # between two methods' label lines
TOP = 50               # the rank axis' height from the top (the CD bar and tick labels above it)
STROKE = "#1f2937"


def scale(mean_ranks: Mapping[str, float]) -> tuple[int, int]:
    """The axis' ends: 1 (or lower) to the number of methods (or the highest mean rank)."""
    ranks = list(mean_ranks.values())
    return min(1, math.floor(min(ranks))), max(len(ranks), math.ceil(max(ranks)))


def cd_svg(mean_ranks: Mapping[str, float], cd: float, groups: Sequence[Sequence[str]]) -> str:
    """The diagram of `mean_ranks` (method -> mean rank, 1 = best) with the Nemenyi `cd` and the `groups` not
    told apart, as an <svg>."""
    low, high = scale(mean_ranks)
    order = sorted(mean_ranks, key=lambda m: (-mean_ranks[m], m))  # worst first
    half = math.ceil(len(order) / 2)
    label = max((len(m) for m in order), default=4) * CHAR + 16
    left, right = label, WIDTH - label
    bars = [g for g in groups if len(g) > 1]
    first_row = TOP + 22 + 8 * max(0, len(bars) - 1)
    height = first_row + ROW * max(half, len(order) - half) + 8

    def x(rank: float) -> float:
        return left + (right - left) * (high - rank) / (high - low)

    out = [f'<svg width="{WIDTH}" height="{height:.0f}" viewBox="0 0 {WIDTH} {height:.0f}" role="img" '
           f'aria-label="critical-difference diagram" font-family="sans-serif" font-size="12" fill="{STROKE}">',
           f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{TOP}" y2="{TOP}" stroke="{STROKE}"/>']
    for tick in [low + 0.5 * i for i in range(2 * (high - low) + 1)]:
        size = 8 if tick == int(tick) else 4
        out.append(f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{TOP - size}" y2="{TOP}" stroke="{STROKE}"/>')
        if tick == int(tick):
            out.append(f'<text x="{x(tick):.1f}" y="{TOP - 12}" text-anchor="middle">{int(tick)}</text>')
    if math.isfinite(cd) and cd > 0:  # the CD as a scale bar, from the worst end of the axis
        end = x(max(low, high - cd))
        out.append(f'<g class="cd-bar"><line x1="{x(high):.1f}" x2="{end:.1f}" y1="20" y2="20" stroke="{STROKE}"/>'
                   f'<line x1="{x(high):.1f}" x2="{x(high):.1f}" y1="16" y2="24" stroke="{STROKE}"/>'
                   f'<line x1="{end:.1f}" x2="{end:.1f}" y1="16" y2="24" stroke="{STROKE}"/>'
                   f'<text x="{(x(high) + end) / 2:.1f}" y="12" text-anchor="middle" font-size="10">CD = {cd:.2f}'
                   f'</text></g>')
    for index, method in enumerate(order):
        on_left = index < half
        row = index if on_left else len(order) - index - 1
        y, end = first_row + ROW * row, left - 8 if on_left else right + 8
        rank = mean_ranks[method]
        out.append(f'<g class="method"><title>{esc(method)}: mean rank {rank:.2f}</title>'
                   f'<polyline points="{x(rank):.1f},{TOP} {x(rank):.1f},{y} {end:.1f},{y}" fill="none" '
                   f'stroke="{STROKE}"/><text x="{end - 4 if on_left else end + 4:.1f}" y="{y + 4}" '
                   f'text-anchor="{"end" if on_left else "start"}">{esc(method)}</text></g>')
    for level, group in enumerate(bars):
        ranks = [mean_ranks[m] for m in group]
        y = TOP + 14 + 8 * level
        out.append(f'<line class="group" x1="{x(max(ranks)) - 4:.1f}" x2="{x(min(ranks)) + 4:.1f}" y1="{y}" '
                   f'y2="{y}" stroke="{STROKE}" stroke-width="4"><title>not told apart: '
                   f'{esc(", ".join(group))}</title></line>')
    return "".join(out) + "</svg>"


def cd_figure_html(stem: str, mean_ranks: Mapping[str, float], cd: float, groups: Sequence[Sequence[str]],
                   caption: str) -> str:
    """A <figure> (id `fig-<stem>`, as the PNG's) holding the diagram and `caption`."""
    return (f'<figure id="{esc("fig-" + anchor(stem))}">{cd_svg(mean_ranks, cd, groups)}'
            f'<figcaption>{esc(caption)}</figcaption></figure>\n')
