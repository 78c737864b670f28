"""Number and table formatting shared by the campaign's report tables (Markdown, — for a missing figure)."""

from __future__ import annotations

import math
from typing import Any

DASH = "—"


def real(value: Any) -> bool:
    """Whether `value` is a finite number (not a bool, None or text)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def sig(value: Any, digits: int = 3) -> str:
    """`value` to `digits` significant digits, without an exponent; — when it is not a number."""
    if not real(value):
        return DASH
    if value == 0:
        return "0"
    places = digits - 1 - math.floor(math.log10(abs(value)))
    return f"{round(value, places):.{max(0, places)}f}"


def fixed(value: Any, places: int) -> str:
    """`value` with `places` decimals; — when it is not a number."""
    return f"{value:.{places}f}" if real(value) else DASH


def pct(fraction: Any) -> str:
    """A fraction as a percentage with 1 decimal; — when it is not a number."""
    return f"{100 * fraction:.1f}%" if real(fraction) else DASH


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table, the first column left-aligned and the others right-aligned."""
    def line(cells: list[Any]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    return [line(head), line([":---"] + ["---:"] * (len(head) - 1)), *(line(row) for row in rows), ""]


def verdict(met: Any) -> str:
    """A target's `met`: ✅ met, ❌ not met, or the reason it cannot tell."""
    return "✅ met" if met is True else "❌ not met" if met is False else str(met) if met else DASH
