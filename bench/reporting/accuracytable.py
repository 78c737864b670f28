"""The `accuracy` table, in the papers' layout: methods as rows, datasets (× encoder, when several) as columns,
test accuracy mean ± std over seeds (n), the TF-IDF floor as the last row.

A column's best mean is bold only where the verdict of the day supports it: the paired comparison with the best
method as the baseline (`bench.reporting.tables.compare` on that column's runs, the same as
`clbench report --table compare --baseline BEST --filter dataset=D`; Benjamini-Hochberg over that column's
comparisons) calls every other method of the column worse. Otherwise the column has no bold cell and a note says
which comparison left it open. A cell whose mean includes a collapsed run (†) or a run near chance (°) is never
bold, and a tie at the shown precision is not broken.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from bench.errors import BenchError
from bench.reporting import floor, nearchance, stats
from bench.reporting.cellframes import DIGITS, make_table, value_cell
from bench.reporting.collapsed import split_runs
from bench.reporting.tables import CELL, clean_accuracy, compare, method_key
from bench.reporting.verdicts import VerdictSettings

TITLE = ("Test accuracy (%): mean ± std over seeds (n seeds); bold: a column's best, only where the paired "
         "verdict calls every other method there worse")
RULE = ("bold: the column's best mean, when the paired comparison with it as the baseline (the verdict of "
        "`clbench report --table compare --baseline BEST --filter dataset=D`, Benjamini-Hochberg over that column's "
        "comparisons) calls every other method of the column worse; otherwise no cell of the column is bold")


def accuracy_table(frame: pd.DataFrame, predictions: Mapping[str, pd.DataFrame],
                   n_resamples: int = stats.N_RESAMPLES, seed: int = stats.BOOTSTRAP_SEED,
                   include_collapsed: bool = False, settings: VerdictSettings = VerdictSettings(),
                   digits: int = DIGITS) -> pd.DataFrame:
    """Methods (rows) × datasets (columns) test accuracy with verdict-supported bold (see the module docstring);
    `predictions` maps run keys to `stats.load_predictions` frames, as `tables.compare` reads them."""
    split = split_runs(clean_accuracy(frame), frame, include_collapsed)
    split.need("clean test accuracy rows", "run `clbench run` or loosen --filter")
    accuracy, flagged = split.kept, split.cells(CELL)
    encoders = sorted(accuracy["encoder"].unique())
    blocks = sorted(set(zip(accuracy["dataset"], accuracy["encoder"])))

    def label(dataset: str, encoder: str) -> str:
        return dataset if len(encoders) == 1 else f"{dataset} {encoder}"

    methods = sorted(accuracy["method"].unique(), key=method_key)
    values = accuracy.groupby(CELL)["value"].apply(list).to_dict()
    near = nearchance.cells(accuracy, CELL)
    cells = [value_cell(m, label(d, e), values.get((d, e, m), []), digits=digits, collapsed=(d, e, m) in flagged,
                        near_chance=(d, e, m) in near) for m in methods for d, e in blocks]
    decisions = []
    for dataset, encoder in blocks:
        column = [c for c in cells if c["column"] == label(dataset, encoder)]
        part = frame[(frame["dataset"] == dataset) & (frame["encoder"] == encoder)]
        best, why = supported_best(column, part, predictions, n_resamples, seed, include_collapsed, settings, digits)
        for cell in column:
            cell["best"] = cell["row"] == best
        decisions.append(f"{label(dataset, encoder)}: {why}")
    reference = floor.values(frame)
    if reference:  # the floor: a row of its own, never bold
        cells += [floor.cell(floor.LABEL, label(d, e), reference.get((d,), {}).get("accuracy", []), digits)
                  for d, e in blocks]
    notes = [RULE, *decisions, "— = no finished run", *split.notes(), *nearchance.note(nearchance.keys(accuracy)),
             *([floor.NOTE] if reference else [])]
    title = TITLE + (f"; encoder {encoders[0]}" if len(encoders) == 1 else "")
    return make_table(cells, title, "method", notes)


def supported_best(column: list[dict[str, Any]], frame: pd.DataFrame, predictions: Mapping[str, pd.DataFrame],
                   n_resamples: int, seed: int, include_collapsed: bool, settings: VerdictSettings,
                   digits: int = DIGITS) -> tuple[str | None, str]:
    """The method to bold in one column (None for none) and a note saying why: its best mean among cells that may
    be best, kept only where `tables.compare` with it as the baseline calls every other method with a result worse."""
    measured = [c for c in column if not math.isnan(c["mean"])]
    if len(measured) < 2:
        return None, "one method only, no bold"
    eligible = [c for c in measured if not c.get("collapsed") and not c.get("near_chance")]
    if not eligible:
        return None, "every cell includes a collapsed run or one near chance, no bold"
    top = max(round(c["mean"], digits) for c in eligible)
    leaders = [c["row"] for c in eligible if round(c["mean"], digits) == top]
    if len(leaders) > 1:
        return None, f"{' and '.join(leaders)} tie, no bold"
    best = leaders[0]
    try:
        table = compare(frame, predictions, best, n_resamples, seed, include_collapsed, settings)
    except BenchError as error:
        return None, f"best mean {best}, not compared ({error}), no bold"
    verdicts = {c["method"]: c["text"] for c in table.to_dict("records") if c["column"] == "verdict"}
    others = [c["row"] for c in measured if c["row"] != best]
    said = {m: verdicts.get(m, "not paired") for m in others}
    text = ", ".join(f"{m} {said[m]}" for m in others)
    if all(word == "worse" for word in said.values()):
        return best, f"{best} bold: every other method worse ({text})"
    return None, f"best mean {best}, not bold: {text}"
