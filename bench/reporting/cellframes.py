"""Cell frames: the tidy form of a paper-style table (`bench.reporting.tables`), and the helpers that build,
mark and format its cells.

A cell frame has one row per table cell: `row` and `column` labels, `mean`, `std`, `n` (seeds), the
displayed `text`, a `best` flag and a `note` (and `collapsed`, when some cell's mean includes a collapsed run:
see `bench.reporting.collapsed`); cells appear row by row in display order, missing ones
included (text "—"). `frame.attrs` carries the title, the row header, table notes and left-aligned columns.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from bench.reporting.collapsed import MARK as COLLAPSED_MARK
from bench.reporting.nearchance import MARK as NEAR_CHANCE_MARK

CELL_COLUMNS = ["row", "column", "mean", "std", "n", "text", "best", "note"]
MISSING = "—"
DIGITS = 2


def value_cell(row: str, column: str, values: Iterable[float], scale: float = 100.0, digits: int = DIGITS,
               note: str = "", collapsed: bool = False, near_chance: bool = False) -> dict[str, Any]:
    """A cell of mean ± std (n) over seed values (times `scale`); "—" when there are none. A `collapsed` cell
    (its mean includes a collapsed run, `bench.reporting.collapsed`) is marked † and never best; a `near_chance`
    one (a run not clearly above chance, `bench.reporting.nearchance`) is marked ° and never best."""
    array = np.asarray([v for v in values if not math.isnan(v)], dtype=float) * scale
    if array.size == 0:
        return text_cell(row, column, MISSING, note=note)
    mean = float(array.mean())
    std = float(array.std(ddof=1)) if array.size > 1 else math.nan
    text = f"{mean:.{digits}f} ± {std:.{digits}f} ({array.size})" if array.size > 1 else \
        f"{mean:.{digits}f} ({array.size})"
    cell = {"row": row, "column": column, "mean": mean, "std": std, "n": int(array.size), "text": text,
            "best": False, "note": note}
    if collapsed:
        cell.update(text=f"{cell['text']} {COLLAPSED_MARK}", collapsed=True)
    if near_chance:
        cell.update(text=f"{cell['text']} {NEAR_CHANCE_MARK}", near_chance=True)
    return cell


def text_cell(row: str, column: str, text: str, mean: float = math.nan, n: int = 0, note: str = "",
              **extra: Any) -> dict[str, Any]:
    """A cell showing `text` (with an optional number behind it)."""
    return {"row": row, "column": column, "mean": mean, "std": math.nan, "n": n, "text": text, "best": False,
            "note": note, **extra}


def mark_best(cells: list[dict[str, Any]], group: Callable[[dict[str, Any]], Any], higher: bool | Callable = True,
              digits: int = DIGITS) -> None:
    """Flag the best cell(s) of each group (ties at the displayed precision all count); a cell whose mean includes
    a collapsed run (`collapsed`) or a run near chance (`near_chance`) is never best, and does not compete."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for cell in cells:
        if cell["mean"] == cell["mean"] and not cell.get("collapsed") and not cell.get("near_chance"):
            groups.setdefault(group(cell), []).append(cell)
    for members in groups.values():
        up = higher(members[0]) if callable(higher) else higher
        shown = [round(c["mean"], digits) for c in members]
        target = max(shown) if up else min(shown)
        for cell, value in zip(members, shown):
            cell["best"] = value == target


def make_table(cells: list[dict[str, Any]], title: str, row_header: str, notes: Iterable[str] = (),
               left: Iterable[str] = ()) -> pd.DataFrame:
    """A cell frame with its title, row header, notes and left-aligned columns in `attrs`."""
    extra = [k for cell in cells for k in cell if k not in CELL_COLUMNS]
    table = pd.DataFrame(cells, columns=[*CELL_COLUMNS, *dict.fromkeys(extra)])
    table["best"] = table["best"].astype(bool)
    for flag in ("collapsed", "near_chance"):  # only cells whose mean includes such a run carry it
        if flag in table:
            table[flag] = table[flag].eq(True)
    table["n"] = table["n"].astype(int)
    table.attrs.update(title=title, row_header=row_header, notes=list(notes), left=list(left))
    return table


def format_p(p: float) -> str:
    """A p-value for a table cell."""
    if math.isnan(p):
        return MISSING
    return "<0.001" if p < 0.001 else f"{p:.3f}"
