"""The building blocks of the HTML report (`bench.reporting.html`), as plain data for the template's macros
(`bench.reporting.htmltemplate`, templates/page.html.j2): cell frames and plain frames as sortable <table>s with
a CSV button, figures as inline base64 PNG <img>s, notes, badges and the page.

Everything is self-contained: no external scripts, style sheets, fonts or images. Every piece of text that
comes from results (method names, notes, settings) is escaped by the template (or by `esc`, for the few pieces
of HTML still made here).
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
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bench.reporting.figures import METADATA, Plot, style  # no plotting library until a figure is drawn
from bench.reporting.htmltemplate import CSS, SCRIPT, render, safe
from bench.reporting.plotdata import FEW_SEEDS, FEW_SEEDS_WHY
from bench.reporting.render import cell_text, grid

PNG_DPI = 144  # inline figures: sharp on screen, small enough to mail (a heatmap is ~40 kB)
CSS_PIXELS_PER_INCH = 120  # figures are shown at their natural size (never wider than the page)


@dataclass(frozen=True)
class Absent:
    """What a section builder returns when the section has nothing to show: the page leaves it out and names it,
    with `why`, in one line under its contents."""

    why: str


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
    return render("note", text)


def badge(text: str, title: str = "", kind: str = "") -> str:
    """A small coloured label shown beside a name (e.g. `collapsed` beside a run), with a tooltip; `kind` adds a
    class (e.g. `few`: amber instead of red)."""
    return render("badge", text, title, kind)


def badge_data(text: str, title: str = "", kind: str = "") -> dict[str, str]:
    """A badge as the template's `table` macro draws it beside a cell's text."""
    return {"text": text, "title": title, "kind": kind}


def few_seeds_badge(n: Any) -> str:
    """The warning badge of a cell resting on 1 or 2 seeds ('' for none or for FEW_SEEDS and more)."""
    found = few_seeds_data(n)
    return badge(**found) if found else ""


def few_seeds_data(n: Any) -> dict[str, str] | None:
    """`few_seeds_badge` as data (None for none)."""
    if not isinstance(n, numbers.Real) or not 0 < n < FEW_SEEDS:
        return None
    return badge_data(f"< {FEW_SEEDS} seeds", f"{int(n)} seed(s): {FEW_SEEDS_WHY}", "few")


FEW_SEEDS_NOTE = f"< {FEW_SEEDS} seeds: the cell rests on fewer than {FEW_SEEDS} seeds; {FEW_SEEDS_WHY}"


def figures_row(items: Iterable[str]) -> str:
    """Figures side by side (each HTML: a figure, an SVG chart, a heatmap table); '' without any."""
    return render("figures", [safe(item) for item in items])


def details(summary: str, body: str) -> str:
    """A folded block: its one-line summary (text), then `body` (HTML)."""
    return render("details", summary, safe(body))


def link(href: str | None, text: str) -> str:
    """`text` linked to `href` (relative), or the text alone when there is no link."""
    return render("link", href or "", text)


def notes_list(notes: Iterable[str]) -> str:
    """Table notes as a small list ('' without notes)."""
    return render("notes", list(notes))


def cells_table(cells: pd.DataFrame, table_id: str, seed_columns: Sequence[str] | None = None) -> str:
    """A cell frame (`bench.reporting.tables`) as a sortable <table>: its title as caption, best cells bold,
    missing cells "—", a cell whose mean includes a collapsed run greyed with a badge, a cell over fewer than
    FEW_SEEDS seeds (in `seed_columns`, default every column) with a warning badge; then a CSV button and its
    notes."""
    columns, found_rows = grid(cells)
    left = set(cells.attrs.get("left", []))
    rows, few = [], False
    for label, found in found_rows:
        shown = []
        for column, cell in zip(columns, found):
            collapsed = cell is not None and cell.get("collapsed") is True
            classes = [name for name, on in (("left", column in left), ("best", cell is not None and cell.get("best")),
                                             ("missing", cell is None), ("collapsed", collapsed)) if on]
            title = cell.get("note") if cell is not None and isinstance(cell.get("note"), str) else ""
            badges = [badge_data("collapsed", "the mean includes a collapsed run: not a result")] if collapsed else []
            if cell is not None and (seed_columns is None or column in seed_columns):
                warning = few_seeds_data(cell.get("n"))
                badges, few = badges + ([warning] if warning else []), few or bool(warning)
            shown.append({"classes": classes, "title": title, "text": cell_text(cell), "badges": badges})
        rows.append((label, shown))
    return render("table", {
        "id": table_id, "caption": cells.attrs.get("title") or "", "row_header": cells.attrs.get("row_header", "row"),
        "head": [(c, c in left) for c in columns], "rows": rows,
        "notes": [*(cells.attrs.get("notes") or []), *([FEW_SEEDS_NOTE] if few else [])]})


def frame_table(frame: pd.DataFrame, table_id: str, caption: str, left: Sequence[str] = (),
                html_columns: Sequence[str] = (), right: Sequence[str] = ()) -> str:
    """A plain frame as a sortable <table> with a caption and a CSV button (columns in `left`, and text columns
    not in `right`, left-aligned); the values of `html_columns` are HTML already (escaped by the caller), every
    other value is escaped by the template."""
    columns = [str(c) for c in frame.columns]
    aligned = set(left) | {c for c in columns if not pd.api.types.is_numeric_dtype(frame[c]) and c not in right}
    rows = [(None, [{"classes": ["left"] if c in aligned else [], "title": "", "badges": [],
                     "text": safe(v) if c in html_columns else "" if missing(v) else v}
                    for c, v in zip(columns, record)])
            for record in frame.itertuples(index=False, name=None)]
    return render("table", {"id": table_id, "caption": caption, "row_header": None,
                            "head": [(c, c in aligned) for c in columns], "rows": rows, "notes": []})


def missing(value: Any) -> bool:
    """Whether a value is shown as an empty cell (None, NA, NaN), as `esc` shows it."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def png_bytes(plot: Plot, dpi: int = PNG_DPI) -> bytes:
    """The plot's figure as PNG bytes, rendered in memory (no timestamp in the metadata)."""
    buffer = io.BytesIO()
    with style():
        plot.figure.savefig(buffer, format="png", dpi=dpi, metadata=METADATA["png"])
    return buffer.getvalue()


def figure_html(plot: Plot, caption: str, key: str = "") -> str:
    """A <figure> holding the plot as an inline base64 PNG (id `fig-<stem>`) and its caption; `key`: what it was
    drawn from (bench.reporting.figurecache), so that the next build can reuse it."""
    return render("figure", {"png": base64.b64encode(png_bytes(plot)).decode("ascii"),
                             "width": round(plot.figure.get_figwidth() * CSS_PIXELS_PER_INCH),
                             "id": "fig-" + anchor(plot.stem), "caption": caption, "key": key})


def page(title: str, header: dict[str, Any], sections: Sequence[tuple[str, str, str]], footer: str,
         absent: Sequence[tuple[str, str]] = ()) -> str:
    """The whole document (the template's `page`): inline CSS, the header (`header`: the data of the template's
    `header` macro), a table of contents, the sections (id, title, body HTML), a line naming the sections `absent`
    (title, why: nothing to show) and the inline script that sorts tables and saves them as CSV."""
    shown = [{"id": sid, "title": name, "body": safe(body)} for sid, name, body in sections]
    return render("page", {"title": title, "css": safe(CSS), "script": safe(SCRIPT), "header": header,
                           "footer": footer, "absent": [{"title": t, "why": why} for t, why in absent],
                           "sections": shown})


def without_paths(text: str, named: dict[str, str]) -> str:
    """`text` with every absolute path in `named` (its plain and HTML-escaped spelling, as a whole path: not
    `/a/bc` for `/a/b`) replaced by the short name given for it, longest first, so that the page shows no
    absolute local path."""
    for path in sorted(named, key=len, reverse=True):
        if len(path) > 1 and os.path.isabs(path):
            for spelled in dict.fromkeys((path, html.escape(path, quote=True))):
                text = re.sub(re.escape(spelled) + r"(?![\w-]|\.\w)", lambda _: named[path], text)
    return text
