"""The building blocks of the HTML report (`bench.reporting.html`): escaped text, cell frames and plain frames
as sortable <table>s with a CSV button, figures as inline base64 PNG <img>s, notes, sections and the page shell
with its inline CSS and its one inline script (`bench.reporting.htmlscript`).

Everything is self-contained: no external scripts, style sheets, fonts or images. Every piece of text that
comes from results (method names, notes, settings) goes through `esc`.
"""

from __future__ import annotations

import base64
import html
import io
import math
import numbers
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from bench.reporting.figures import METADATA, Plot, style  # no plotting library until a figure is drawn
from bench.reporting.htmlscript import SCRIPT
from bench.reporting.plotdata import FEW_SEEDS, FEW_SEEDS_WHY
from bench.reporting.render import cell_text, grid

PNG_DPI = 144  # inline figures: sharp on screen, small enough to mail (a heatmap is ~40 kB)
LEFT = ' class="left"'
CSS_PIXELS_PER_INCH = 120  # figures are shown at their natural size (never wider than the page)
CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       font-size: 14px; line-height: 1.45; color: #1f2328; background: #ffffff; margin: 0; }
main { max-width: 1180px; margin: 0 auto; padding: 18px 28px 48px; }
header { border-bottom: 2px solid #24292f; padding-bottom: 8px; margin-bottom: 12px; }
h1 { font-size: 24px; margin: 6px 0 8px; }
h2 { font-size: 19px; margin: 30px 0 8px; padding-bottom: 3px; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 15px; margin: 18px 0 6px; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; margin: 6px 0; }
dl.meta dt { font-weight: 600; color: #57606a; }
dl.meta dd { margin: 0; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
nav.toc { font-size: 13px; margin: 8px 0 4px; }
nav.toc a { margin-right: 12px; color: #0969da; text-decoration: none; }
.warnings { background: #fff8c5; border: 2px solid #bf8700; border-radius: 6px; padding: 8px 14px; margin: 12px 0; }
.warnings strong { color: #9a6700; }
.warnings ul { margin: 4px 0 2px; padding-left: 20px; }
.ok { color: #1a7f37; }
p.note { color: #57606a; font-style: italic; margin: 6px 0; }
table { border-collapse: collapse; margin: 8px 0 4px; font-size: 13px; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: 4px 0 6px; width: max-content;
          max-width: 90ch; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: right; vertical-align: top; }
th { background: #f6f8fa; }
th.left, td.left, tbody th { text-align: left; }
td.best { font-weight: 700; background: #dafbe1; }
td.missing { color: #8c959f; }
td.collapsed { color: #8c959f; }
.badge { display: inline-block; font-size: 11px; font-weight: 700; line-height: 1.3; padding: 0 6px;
         margin-left: 6px; border-radius: 8px; color: #ffffff; background: #cf222e; vertical-align: middle; }
.badge.few { background: #9a6700; }
table.sortable thead th { cursor: pointer; user-select: none; }
table.sortable thead th[aria-sort="ascending"]::after { content: " \25B2"; font-size: 10px; }
table.sortable thead th[aria-sort="descending"]::after { content: " \25BC"; font-size: 10px; }
button.csv { font-size: 12px; margin: 0 0 6px; padding: 1px 8px; cursor: pointer; }
tr:nth-child(even) td { background-color: #fbfcfd; }
tr:nth-child(even) td.best { background: #dafbe1; }
.scroll { overflow-x: auto; max-width: 100%; }
ul.notes { font-size: 12px; color: #57606a; margin: 2px 0 10px; padding-left: 18px; }
.figures { display: flex; flex-wrap: wrap; gap: 14px 18px; align-items: flex-start; }
figure { margin: 6px 0; border: 1px solid #d0d7de; border-radius: 6px; padding: 8px; background: #fff;
         max-width: 100%; box-sizing: border-box; }
figure img { display: block; max-width: 100%; height: auto; }
figcaption { font-size: 12px; color: #57606a; margin-top: 4px; width: 0; min-width: 100%; }
details { margin: 8px 0; }
summary { cursor: pointer; font-weight: 600; }
footer { margin-top: 36px; font-size: 12px; color: #57606a; border-top: 1px solid #d0d7de; padding-top: 6px; }
"""


def esc(value: Any) -> str:
    """Text safe inside HTML elements and quoted attributes (missing values as '')."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    return html.escape(str(value), quote=True)


def anchor(text: str) -> str:
    """An id made of letters, digits, `_`, `.` and `-` from any text (the same text gives the same id)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-") or "x"


def note(text: str) -> str:
    """A one-line note (why a section or figure is left out)."""
    return f'<p class="note">{esc(text)}</p>\n'


def badge(text: str, title: str = "", kind: str = "") -> str:
    """A small coloured label shown beside a name (e.g. `collapsed` beside a run), with a tooltip; `kind` adds a
    class (e.g. `few`: amber instead of red)."""
    tip = f' title="{esc(title)}"' if title else ""
    return f'<span class="badge{" " + esc(kind) if kind else ""}"{tip}>{esc(text)}</span>'


def few_seeds_badge(n: Any) -> str:
    """The warning badge of a cell resting on 1 or 2 seeds ('' for none or for FEW_SEEDS and more)."""
    if not isinstance(n, numbers.Real) or not 0 < n < FEW_SEEDS:
        return ""
    return badge(f"< {FEW_SEEDS} seeds", f"{int(n)} seed(s): {FEW_SEEDS_WHY}", "few")


FEW_SEEDS_NOTE = f"< {FEW_SEEDS} seeds: the cell rests on fewer than {FEW_SEEDS} seeds; {FEW_SEEDS_WHY}"


def csv_button(table_id: str) -> str:
    """The button that saves a table's rows as shown as `<table id>.csv` (wired by the page's script)."""
    return (f'<button type="button" class="csv" data-table="{esc(table_id)}" title="save the rows as shown '
            f'(in their current order) as {esc(table_id)}.csv">Download CSV</button>\n')


def notes_list(notes: Iterable[str]) -> str:
    """Table notes as a small list ('' without notes)."""
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return f'<ul class="notes">{items}</ul>\n' if items else ""


def cells_table(cells: pd.DataFrame, table_id: str, seed_columns: Sequence[str] | None = None) -> str:
    """A cell frame (`bench.reporting.tables`) as a sortable <table>: its title as caption, best cells bold,
    missing cells "—", a cell whose mean includes a collapsed run greyed with a badge, a cell over fewer than
    FEW_SEEDS seeds (in `seed_columns`, default every column) with a warning badge; then a CSV button and its
    notes."""
    columns, rows = grid(cells)
    row_header = cells.attrs.get("row_header", "row")
    left = set(cells.attrs.get("left", []))
    head = f'<th class="left">{esc(row_header)}</th>' + "".join(
        f'<th{LEFT if c in left else ""}>{esc(c)}</th>' for c in columns)
    body = []
    few = False
    for label, found in rows:
        tds = []
        for column, cell in zip(columns, found):
            collapsed = cell is not None and cell.get("collapsed") is True
            classes = [name for name, on in (("left", column in left), ("best", cell is not None and cell.get("best")),
                                             ("missing", cell is None), ("collapsed", collapsed)) if on]
            title = esc(cell.get("note")) if cell is not None and isinstance(cell.get("note"), str) else ""
            attrs = (f' class="{" ".join(classes)}"' if classes else "") + (f' title="{title}"' if title else "")
            mark = badge("collapsed", "the mean includes a collapsed run: not a result") if collapsed else ""
            if cell is not None and (seed_columns is None or column in seed_columns):
                warning = few_seeds_badge(cell.get("n"))
                mark, few = mark + warning, few or bool(warning)
            tds.append(f"<td{attrs}>{esc(cell_text(cell))}{mark}</td>")
        body.append(f'<tr><th scope="row">{esc(label)}</th>{"".join(tds)}</tr>')
    caption = f"<caption>{esc(cells.attrs.get('title', ''))}</caption>" if cells.attrs.get("title") else ""
    notes = [*(cells.attrs.get("notes") or []), *([FEW_SEEDS_NOTE] if few else [])]
    return (f'<div class="scroll"><table id="{esc(table_id)}" class="sortable">{caption}<thead><tr>{head}</tr>'
            f'</thead><tbody>{"".join(body)}</tbody></table></div>\n' + csv_button(table_id) + notes_list(notes))


def frame_table(frame: pd.DataFrame, table_id: str, caption: str, left: Sequence[str] = (),
                html_columns: Sequence[str] = (), right: Sequence[str] = ()) -> str:
    """A plain frame as a sortable <table> with a caption and a CSV button (columns in `left`, and text columns
    not in `right`, left-aligned); the values of `html_columns` are HTML already (escaped by the caller), every
    other value is escaped here."""
    columns = [str(c) for c in frame.columns]
    aligned = set(left) | {c for c in columns if not pd.api.types.is_numeric_dtype(frame[c]) and c not in right}
    head = "".join(f'<th{LEFT if c in aligned else ""}>{esc(c)}</th>' for c in columns)
    body = []
    for record in frame.itertuples(index=False, name=None):
        body.append("<tr>" + "".join(f'<td{LEFT if c in aligned else ""}>{v if c in html_columns else esc(v)}</td>'
                                     for c, v in zip(columns, record)) + "</tr>")
    return (f'<div class="scroll"><table id="{esc(table_id)}" class="sortable"><caption>{esc(caption)}</caption>'
            f'<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>\n' + csv_button(table_id))


def png_bytes(plot: Plot, dpi: int = PNG_DPI) -> bytes:
    """The plot's figure as PNG bytes, rendered in memory (no timestamp in the metadata)."""
    buffer = io.BytesIO()
    with style():
        plot.figure.savefig(buffer, format="png", dpi=dpi, metadata=METADATA["png"])
    return buffer.getvalue()


def figure_html(plot: Plot, caption: str, key: str = "") -> str:
    """A <figure> holding the plot as an inline base64 PNG (id `fig-<stem>`) and its caption; `key`: what it was
    drawn from (bench.reporting.figurecache), so that the next build can reuse it."""
    data = base64.b64encode(png_bytes(plot)).decode("ascii")
    width = round(plot.figure.get_figwidth() * CSS_PIXELS_PER_INCH)
    figure_id = "fig-" + anchor(plot.stem)
    keyed = f'data-key="{key}" ' if key else ""
    return (f'<figure {keyed}id="{esc(figure_id)}"><img src="data:image/png;base64,{data}" width="{width}" '
            f'alt="{esc(caption)}"><figcaption>{esc(caption)}</figcaption></figure>\n')


def section(section_id: str, title: str, body: str) -> str:
    """A <section> with its heading."""
    return f'<section id="{esc(section_id)}">\n<h2>{esc(title)}</h2>\n{body}</section>\n'


def page(title: str, header: str, sections: Sequence[tuple[str, str, str]], footer: str) -> str:
    """The whole document: inline CSS, the header, a table of contents, the sections (id, title, body) and the
    inline script that sorts tables and saves them as CSV."""
    toc = "".join(f'<a href="#{esc(sid)}">{esc(name)}</a>' for sid, name, _ in sections)
    parts = "".join(section(sid, name, body) for sid, name, body in sections)
    return ("<!DOCTYPE html>\n"
            '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
            f'<header>\n<h1>{esc(title)}</h1>\n{header}<nav class="toc">{toc}</nav>\n</header>\n'
            f"{parts}<footer>{esc(footer)}</footer>\n</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n")


def without_paths(text: str, named: dict[str, str]) -> str:
    """`text` with every absolute path in `named` (its plain and HTML-escaped spelling, as a whole path: not
    `/a/bc` for `/a/b`) replaced by the short name given for it, longest first, so that the page shows no
    absolute local path."""
    for path in sorted(named, key=len, reverse=True):
        if len(path) > 1 and os.path.isabs(path):
            for spelled in dict.fromkeys((path, html.escape(path, quote=True))):
                text = re.sub(re.escape(spelled) + r"(?![\w-]|\.\w)", lambda _: named[path], text)
    return text
