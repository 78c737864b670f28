"""Where a table's runs were built, as table notes: the runs made from a modified tree (a `git_commit` ending in
`+dirty`), the git commits when a table's runs come from several, and the runs of a few-label or noisy-label
regime that all trained on one fixed draw of their data ("one draw"), the clld-adaptive runs whose label
distances barely adapted (fewer than 2 updates: "few LDM updates"), and the runs left out as damaged. Every table
`clbench report` prints or writes, the selection table and the HTML page (its tables and header) carry these
notes; a table whose runs all name one clean commit (or none) carries none.

A run's commits are those of the rows the table read for it plus those of its clean (training) rows: a robustness
number rests on both the scoring and the training code.
"""

from __future__ import annotations

import pandas as pd

from bench.reporting import tables
from bench.reporting.collapsed import split_runs
from bench.reporting.resultsview import as_text, first_few, short_value
from bench.results.store import FEW_LDM_UPDATES, LEFT_OUT, LEFT_OUT_FIX

COLUMN = "git_commit"
DIRTY = "+dirty"
UPDATES = "ldm_updates"  # clld-adaptive's label-distance update count (bench.methods.clld)


def run_commits(rows: pd.DataFrame, frame: pd.DataFrame | None = None) -> dict[str, set[str]]:
    """Each run of `rows` (by run key) with the git commits its rows record (empty values left out), its clean
    rows in `frame` counted too."""
    if rows.empty or "run_key" not in rows:
        return {}
    keys = set(as_text(rows["run_key"])) - {""}
    parts = [rows]
    if frame is not None and "run_key" in frame and "evaluator" in frame:
        parts.append(frame[(frame["evaluator"] == "clean") & as_text(frame["run_key"]).isin(keys)])
    found: dict[str, set[str]] = {key: set() for key in keys}
    for part in parts:
        if COLUMN not in part:
            continue
        for key, commit in zip(as_text(part["run_key"]), as_text(part[COLUMN])):
            if key in found and commit:
                found[key].add(commit)
    return found


def provenance_notes(rows: pd.DataFrame, frame: pd.DataFrame | None = None) -> list[str]:
    """The notes on the code the runs of `rows` were built from: the runs from a modified tree, the commits when
    there are several, the runs that record none when others do ([] when all name one clean commit)."""
    commits = run_commits(rows, frame)
    if not commits:
        return []
    total = len(commits)
    notes = []
    dirty = sorted(key for key, found in commits.items() if any(c.endswith(DIRTY) for c in found))
    if dirty:
        named = sorted({short_value(c) for key in dirty for c in commits[key] if c.endswith(DIRTY)})
        notes.append(f"built from a modified tree (git_commit {', '.join(named)}): {len(dirty)} of {total} runs: "
                     f"{first_few(dirty)}")
    counts: dict[str, int] = {}
    for found in commits.values():
        for commit in found:
            counts[commit] = counts.get(commit, 0) + 1
    if len(counts) > 1:
        listed = [f"{short_value(c)} ({n} run{'s' if n > 1 else ''})"
                  for c, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
        notes.append(f"the {total} runs come from {len(counts)} git commits (code that may differ): "
                     f"{first_few(listed)}")
    unknown = sorted(key for key, found in commits.items() if not found)
    if unknown and counts:
        notes.append(f"{len(unknown)} of {total} runs record no git commit: {first_few(unknown)}")
    return notes + draw_notes(rows) + few_update_notes(rows) + left_out_notes(rows if frame is None else frame)


def left_out_notes(frame: pd.DataFrame) -> list[str]:
    """A note naming the runs left out of `frame` as damaged (`attrs["left_out"]`, set by load_results and by the
    comparison when a run's test predictions do not verify), with the first one's damage and the fix."""
    left_out = frame.attrs.get(LEFT_OUT) or {}
    if not left_out:
        return []
    keys = sorted(left_out)
    others = f" (also {first_few(keys[1:])})" if len(keys) > 1 else ""
    return [f"left out as damaged: {len(keys)} run(s): {left_out[keys[0]]}{others}; `clbench verify` names each, "
            f"{LEFT_OUT_FIX}"]


def fixed_draw_runs(rows: pd.DataFrame) -> tuple[list[str], int]:
    """The run keys of `rows` in a data regime trained on one fixed draw (`data_draw` fixed, or rows written
    before draws varied), sorted, and how many runs of `rows` are in a data regime."""
    if rows.empty or not {"run_key", "dataset"} <= set(rows.columns):
        return [], 0
    base = as_text(rows["base_dataset"]) if "base_dataset" in rows else as_text(rows["dataset"])
    regime = as_text(rows["dataset"]) != base
    draw = as_text(rows["data_draw"]) if "data_draw" in rows else pd.Series("", index=rows.index)
    fixed = sorted(set(as_text(rows["run_key"])[regime & (draw != "per-seed")]))
    return fixed, len(set(as_text(rows["run_key"])[regime]))


def draw_notes(rows: pd.DataFrame) -> list[str]:
    """A note naming the runs of a data regime trained on one fixed draw: their results hold for that one
    sample, not for the regime."""
    fixed, total = fixed_draw_runs(rows)
    if not fixed:
        return []
    return [f"one draw: {len(fixed)} of {total} runs in a few-label or noisy-label regime trained on one fixed draw "
            f"of their data (data_draw fixed, or made before draws varied): their results hold for that sample, "
            f"not for the regime (run with --data-draw per-seed): {first_few(fixed)}"]


def few_update_notes(rows: pd.DataFrame) -> list[str]:
    """A note naming the clld-adaptive runs (rows with `ldm_updates`) that made fewer than FEW_LDM_UPDATES
    label-distance updates: they trained nearly as `cl`, with uniform distances."""
    if rows.empty or not {"run_key", UPDATES} <= set(rows.columns):
        return []
    counts = pd.to_numeric(rows[UPDATES], errors="coerce")
    keys = as_text(rows["run_key"])
    adaptive = set(keys[counts.notna()])
    few = sorted(set(keys[counts < FEW_LDM_UPDATES]))
    if not few:
        return []
    return [f"few LDM updates: {len(few)} of {len(adaptive)} clld-adaptive runs made fewer than {FEW_LDM_UPDATES} "
            f"label-distance updates, so they trained nearly as cl (uniform distances): {first_few(few)}"]


def table_runs(name: str, frame: pd.DataFrame, include: bool = False, cells: pd.DataFrame | None = None
               ) -> pd.DataFrame:
    """The rows of `frame` that table `name` (paper-ii, ablation, robustness, compare, vs-paper) rests on: those
    of the runs the collapsed-run policy keeps (`include`), of the dataset x encoder groups `cells` compares
    (compare) and of the datasets with published numbers (vs-paper)."""
    rows = tables.table_rows(name, split_runs(frame, include=include).kept)
    if name == "robustness":
        rows = rows[rows["evaluator"].isin({evaluator for evaluator, *_ in tables.ROBUSTNESS})]
    if name == "compare" and cells is not None and {"dataset", "encoder"} <= set(cells.columns):
        compared = set(zip(cells["dataset"], cells["encoder"]))  # the groups with a baseline run
        rows = rows[[key in compared for key in zip(rows["dataset"], rows["encoder"])]]
    if name == "vs-paper":
        from bench.reporting.papers import card_papers

        papers = card_papers()
        rows = rows[[bool(papers.get(d)) for d in rows["dataset"]]]
    return rows


def with_notes(cells: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """`cells` (a cell frame) with `notes` added after its own notes (the same frame, returned)."""
    if notes:
        cells.attrs["notes"] = [*cells.attrs.get("notes", []), *notes]
    return cells


def with_provenance(name: str, cells: pd.DataFrame, frame: pd.DataFrame, include: bool = False) -> pd.DataFrame:
    """The cell frame of table `name` built from `frame` with the provenance notes of the runs it rests on."""
    return with_notes(cells, provenance_notes(table_runs(name, frame, include, cells), frame))
