"""The page's training curves as inline SVG: one small chart per panel of `plots.curves_plot` (validation
accuracy in %, the total loss, each loss part) with the same lines, colours, dash patterns, titles and legend,
written as text. A grid cost 0.6-0.9 s of matplotlib layout and rasterising (5 of them were a third of the
issue30 page); an SVG costs milliseconds, stays sharp at any zoom and shows each point's value on hover.
`clbench plot curves` still draws the PNG/PDF for papers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.reporting.htmlparts import anchor, esc
from bench.reporting.plotdata import PERCENT
from bench.reporting.plots import CurvesContent, curves_content, curves_stem

WIDTH, HEIGHT = 250, 170                      # one panel, in CSS pixels
LEFT, RIGHT, TOP, BOTTOM = 46, 10, 22, 32     # margins around the plot area
DASHES = {"-": "", "--": "6 3", ":": "1.5 2.5", "-.": "6 2.5 1.5 2.5"}
GRID, AXIS, TEXT = "#e5e7eb", "#6b7280", "#1f2937"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (steps of 1, 2, 2.5 or 5 times a power of ten) covering [low, high], about `count`."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0, 1.0]
    if high <= low:
        pad = abs(low) * 0.05 or 0.5
        low, high = low - pad, high + pad
    rough = (high - low) / max(1, count - 1)
    power = 10 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= rough * (1 - 1e-9))
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)]


def tick_text(value: float, ticks: Sequence[float]) -> str:
    """A tick label with as many decimals as the ticks' step needs."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else 1.0
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) + (1 if round(step / 10 ** math.floor(
        math.log10(step) + 1e-9), 6) == 2.5 else 0)
    return f"{value:.{decimals}f}".replace("-", "−")


def epoch_ticks(first: int, last: int) -> list[int]:
    """Whole epochs from `first` to `last`, about six at most."""
    step = max(1, math.ceil((last - first + 1) / 6))
    return list(range(first, last + 1, step))


def hex_colour(rgb: Sequence[float]) -> str:
    """`#rrggbb` for an RGB triple in 0-1."""
    return "#" + "".join(f"{round(255 * c):02x}" for c in rgb[:3])


def panel_svg(content: CurvesContent, metric: str, title: str) -> str:
    """One panel: its title, axes, grid, ticks and one line (with markers) per label, as an <svg>."""
    part = content.frame[content.frame["metric"] == metric]
    scale = PERCENT if metric == "val_accuracy" else 1.0
    lines = {label: [(int(e), scale * float(v)) for e, v in sorted(zip(group["epoch"], group["value"]))]
             for label, group in part.groupby("label", sort=False)}
    values = [v for points in lines.values() for _, v in points if math.isfinite(v)]
    epochs = [e for points in lines.values() for e, _ in points]
    ticks = nice_ticks(min(values, default=0.0), max(values, default=1.0))
    first, last = min(epochs, default=1), max(epochs, default=1)
    span_x = (last - first) or 1
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(epoch: float) -> float:
        return LEFT + (inner_w / 2 if last == first else (epoch - first) / span_x * inner_w)

    def y(value: float) -> float:
        return TOP + inner_h * (1 - (value - ticks[0]) / (ticks[-1] - ticks[0]))

    out = [f'<svg width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} '
           f'{HEIGHT}" role="img" aria-label="{esc(title)}" font-family="sans-serif" font-size="10">',
           f'<text x="{LEFT + inner_w / 2:.1f}" y="13" text-anchor="middle" font-size="11" fill="{TEXT}">'
           f'{esc(title)}</text>']
    for tick in ticks:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + inner_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="{GRID}"/>'
                   f'<text x="{LEFT - 4}" y="{y(tick) + 3.5:.1f}" text-anchor="end" fill="{AXIS}">'
                   f'{tick_text(tick, ticks)}</text>')
    for epoch in epoch_ticks(first, last):
        out.append(f'<line x1="{x(epoch):.1f}" x2="{x(epoch):.1f}" y1="{TOP + inner_h}" y2="{TOP + inner_h + 4}" '
                   f'stroke="{AXIS}"/><text x="{x(epoch):.1f}" y="{TOP + inner_h + 14}" text-anchor="middle" '
                   f'fill="{AXIS}">{epoch}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{inner_w}" height="{inner_h}" fill="none" stroke="{AXIS}"/>'
               f'<text x="{LEFT + inner_w / 2:.1f}" y="{HEIGHT - 3}" text-anchor="middle" fill="{AXIS}">epoch</text>')
    for label, points in lines.items():
        out.append(line_svg(label, points, content.styles[label], x, y))
    return "".join(out) + "</svg>"


def line_svg(label: str, points: list[tuple[int, float]], style: dict[str, Any], x: Any, y: Any) -> str:
    """One run's line: polylines through its finite points (a non-finite value breaks the line) and a marker with a
    tooltip at each."""
    colour, dash = hex_colour(style["color"]), DASHES.get(style.get("linestyle", "-"), "")
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    segments: list[list[tuple[int, float]]] = [[]]
    for point in points:
        if math.isfinite(point[1]):
            segments[-1].append(point)
        elif segments[-1]:
            segments.append([])
    out = [f'<g><title>{esc(label)}</title>']
    for segment in segments:
        if len(segment) > 1:
            coordinates = " ".join(f"{x(e):.1f},{y(v):.1f}" for e, v in segment)
            out.append(f'<polyline points="{coordinates}" fill="none" stroke="{colour}" stroke-width="1.5"{dashed}/>')
    for epoch, value in (p for segment in segments for p in segment):
        out.append(f'<circle cx="{x(epoch):.1f}" cy="{y(value):.1f}" r="2.2" fill="{colour}"><title>{esc(label)}, '
                   f'epoch {epoch}: {value:.4g}</title></circle>')
    return "".join(out) + "</g>"


def legend_html(content: CurvesContent) -> str:
    """The legend under the panels: a line sample in each label's style, its text; the weighted-parts note."""
    items = []
    for style, text in zip(content.styles.values(), content.legend):
        colour, dash = hex_colour(style["color"]), DASHES.get(style.get("linestyle", "-"), "")
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        items.append(f'<span style="white-space:nowrap;margin-right:14px"><svg width="30" height="10">'
                     f'<line x1="1" x2="29" y1="5" y2="5" stroke="{colour}" stroke-width="1.5"{dashed}/>'
                     f'<circle cx="15" cy="5" r="2.2" fill="{colour}"/></svg> {esc(text)}</span>')
    note = f'<div style="font-size:0.85em;color:#555">{esc(content.note)}</div>' if content.note else ""
    return f'<div style="font-size:0.9em;max-width:{3 * WIDTH}px">{"".join(items)}{note}</div>'


def curves_html(run_dirs: Sequence[Path], caption: str) -> str:
    """A <figure> (id `fig-curves_<hash>`, as the PNG's) holding one SVG per panel, the legend and `caption`."""
    content = curves_content(run_dirs)
    panels = "".join(panel_svg(content, metric, title) for metric, title in zip(content.metrics, content.titles))
    stem = curves_stem([run.key for run in content.runs])
    return (f'<figure id="{esc("fig-" + anchor(stem))}"><div style="display:grid;grid-template-columns:repeat('
            f'{min(3, len(content.metrics))},{WIDTH}px);gap:4px">{panels}</div>{legend_html(content)}'
            f'<figcaption>{esc(caption)}</figcaption></figure>\n')
