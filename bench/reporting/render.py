"""Render cell frames (`bench.reporting.tables`) as Markdown, LaTeX (booktabs) or CSV, and write them to a reports folder.

Output depends only on the cell frame: rows and columns appear in the order of their first cell, a missing
cell shows "—", best cells are bold (a cell marked † for a collapsed run never is: `bench.reporting.collapsed`),
table notes follow the table.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pandas as pd

from bench.results import store
from bench.errors import BenchError
from bench.reporting.resultsview import parse_filter

EXTENSIONS = {"md": "md", "latex": "tex", "csv": "csv"}
MISSING = "—"
LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "±": r"$\pm$", "—": "---", "−": "$-$",
    "Δ": r"$\Delta$", "→": r"$\to$", "·": r"$\cdot$", "<": r"$<$", ">": r"$>$", "†": r"\textdagger{}",
}
LATEX_PATTERN = re.compile("|".join(re.escape(k) for k in LATEX_SPECIAL))
SLUG_LIMIT = 80


def grid(cells: pd.DataFrame) -> tuple[list[str], list[tuple[str, list[dict[str, Any] | None]]]]:
    """Column labels and, per row label, its cells in column order (None where a cell is missing)."""
    columns = list(dict.fromkeys(cells["column"]))
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for cell in cells.to_dict("records"):
        rows.setdefault(str(cell["row"]), {})[str(cell["column"])] = cell
    return columns, [(label, [found.get(c) for c in columns]) for label, found in rows.items()]


def cell_text(cell: dict[str, Any] | None) -> str:
    """A cell's displayed text ("—" for a missing cell)."""
    if cell is None:
        return MISSING
    text = cell.get("text")
    return "" if text is None or pd.isna(text) else str(text)


def to_markdown(cells: pd.DataFrame) -> str:
    """A Markdown table (title as a heading, best cells bold, notes as a list)."""
    columns, rows = grid(cells)
    left = {cells.attrs.get("row_header", "row"), *cells.attrs.get("left", [])}
    header = [cells.attrs.get("row_header", "row"), *columns]

    def escape(text: str) -> str:
        return text.replace("|", r"\|")

    lines = []
    if cells.attrs.get("title"):
        lines += [f"### {cells.attrs['title']}", ""]
    lines.append("| " + " | ".join(escape(h) for h in header) + " |")
    lines.append("| " + " | ".join(":---" if h in left else "---:" for h in header) + " |")
    for label, found in rows:
        texts = []
        for cell in found:
            text = escape(cell_text(cell))
            texts.append(f"**{text}**" if cell is not None and cell.get("best") and text else text)
        lines.append("| " + " | ".join([escape(label), *texts]) + " |")
    notes = cells.attrs.get("notes") or []
    if notes:
        lines += ["", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"


def latex_escape(text: str) -> str:
    """Text safe inside a LaTeX table (special characters escaped, a few symbols in math mode)."""
    return LATEX_PATTERN.sub(lambda m: LATEX_SPECIAL[m.group(0)], text)


def to_latex(cells: pd.DataFrame) -> str:
    """A booktabs LaTeX table (\\toprule/\\midrule/\\bottomrule) in a table float with the title as caption."""
    columns, rows = grid(cells)
    row_header = cells.attrs.get("row_header", "row")
    left = set(cells.attrs.get("left", []))
    spec = "l" + "".join("l" if c in left else "r" for c in columns)
    lines = [r"\begin{table}[ht]", r"\centering"]
    if cells.attrs.get("title"):
        lines.append(rf"\caption{{{latex_escape(cells.attrs['title'])}}}")
    lines += [rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
              " & ".join(latex_escape(h) for h in [row_header, *columns]) + r" \\", r"\midrule"]
    for label, found in rows:
        texts = []
        for cell in found:
            text = latex_escape(cell_text(cell))
            texts.append(rf"\textbf{{{text}}}" if cell is not None and cell.get("best") and text else text)
        lines.append(" & ".join([latex_escape(label), *texts]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    notes = cells.attrs.get("notes") or []
    if notes:
        lines += [r"\par\smallskip", r"{\footnotesize"]
        lines += [latex_escape(note) + r"\par" for note in notes]
        lines.append("}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def to_csv(cells: pd.DataFrame) -> str:
    """The tidy cell frame as CSV (one line per cell; numbers with 6 significant digits)."""
    return cells.to_csv(index=False, lineterminator="\n", float_format="%.6g")


def render(cells: pd.DataFrame, fmt: str = "md") -> str:
    """The table as text in `fmt` (md, latex or csv)."""
    renderers = {"md": to_markdown, "latex": to_latex, "csv": to_csv}
    if fmt not in renderers:
        raise BenchError(f"unknown format {fmt!r}; use one of {', '.join(renderers)}")
    return renderers[fmt](cells)


def filters_slug(filters: list[str] | None) -> str:
    """A file-name-safe summary of filters (`method=ce,clld` -> `method-ce+clld`), '' without filters."""
    parts = []
    for text in sorted(filters or []):
        column, values = parse_filter(text)
        parts.append(f"{column}-{'+'.join(values)}")
    slug = re.sub(r"[^A-Za-z0-9.+_-]+", "-", "_".join(parts)).strip("-")
    if len(slug) > SLUG_LIMIT:
        slug = slug[:SLUG_LIMIT - 9] + "-" + hashlib.sha256(slug.encode()).hexdigest()[:8]
    return slug


def report_path(reports_dir: Path | str, table: str, fmt: str, filters: list[str] | None = None) -> Path:
    """`<reports_dir>/<table>[-<filters slug>].<md|tex|csv>`."""
    if fmt not in EXTENSIONS:
        raise BenchError(f"unknown format {fmt!r}; use one of {', '.join(EXTENSIONS)}")
    slug = filters_slug(filters)
    return Path(reports_dir) / f"{table}{'-' + slug if slug else ''}.{EXTENSIONS[fmt]}"


def write_report(cells: pd.DataFrame, table: str, fmt: str, reports_dir: Path | str,
                 filters: list[str] | None = None) -> Path:
    """Write the rendered table atomically to its report path; returns the path."""
    path = report_path(reports_dir, table, fmt, filters)
    text = render(cells, fmt)
    with store.atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path
