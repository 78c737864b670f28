"""The page of a knob grid (`clbench report --html`, `bench.reporting.html`): the main table (test accuracy and
macro-F1 per method and dataset, each method named with the knobs its runs changed), the knobs chosen on
validation with each method's tuning budget (`--select-by validation`: `bench.reporting.selection`, the choice
`clbench report --table compare --select-by validation` makes), and per dataset the confusion change of each
method against the baseline (an HTML table, bench.reporting.htmlheatmap; `clbench plot confusion-diff` draws it).

A method's knobs are read from its rows' `knobs` (JSON of the settings its run changed from the defaults); those
every run of a dataset × encoder shares (e.g. the card's epochs) are said once in a note instead, and a method's
own knobs drop their `method.` prefix: `supcon (tau=0.3)`. Runs of one method with different knobs are rows of
their own, never averaged together.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.errors import BenchError
from bench.reporting import floor, nearchance
from bench.reporting.cellframes import DIGITS, make_table, mark_best, value_cell
from bench.reporting.collapsed import split_runs
from bench.reporting.figurecache import attempt
from bench.reporting.htmlheatmap import confusion_diff_html
from bench.reporting.htmlparts import Absent, cells_table, figures_row, note
from bench.reporting.htmltemplate import render
from bench.reporting.resultsview import as_text, canonical_method
from bench.reporting.selection import Selection, selection_cells
from bench.reporting.tables import method_key

MAIN_METRICS = (("accuracy", "acc (%)"), ("macro_f1", "macro-F1 (%)"))
MAX_DIFFS = 40  # confusion-change figures drawn; beyond this the page says how many were left out
NEVER_TEST = ("Test scores never took part in the choice: every table and figure on this page reports only the "
              "chosen combinations' runs, on the reported seeds.")


def knob_dict(text: Any) -> dict[str, Any]:
    """A row's `knobs` JSON as a dict ({} when empty or unreadable)."""
    try:
        value = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def knob_labels(runs: pd.DataFrame) -> tuple[dict[str, str], list[str]]:
    """Per run key (one row per run: dataset, encoder, method, knobs), its knobs as shown beside its method
    (`tau=0.3, lr=2e-05`; '' for none): the method's own knobs always, the training settings unless every run of
    its dataset × encoder changed them alike; and the notes naming those shared settings."""
    labels, notes = {}, []
    for (dataset, encoder), group in runs.groupby(["dataset", "encoder"], sort=True):
        knobs = {key: knob_dict(text) for key, text in zip(group["run_key"], group["knobs"])}
        first = next(iter(knobs.values()))
        shared = {k: v for k, v in first.items() if "." not in k and all(k in d and d[k] == v for d in knobs.values())}
        if shared:
            listed = ", ".join(f"{k}={v}" for k, v in sorted(shared.items()))
            notes.append(f"{dataset} ({encoder}): every run changed {listed}")
        for key, method in zip(group["run_key"], group["method"]):
            own = f"{method.split(':')[0]}."
            labels[key] = ", ".join(f"{k[len(own):] if k.startswith(own) else k}={v}"
                                    for k, v in sorted(knobs[key].items()) if k not in shared)
    return labels, notes


def several_combinations(frame: pd.DataFrame) -> pd.Series:
    """Per dataset × encoder × method that ran more than one knob combination, how many (rows from before
    combinations were recorded count as one)."""
    runs = frame.drop_duplicates("run_key") if "run_key" in frame else frame.iloc[0:0]
    if runs.empty:
        return pd.Series(dtype=int)
    combos = as_text(runs["combo"]) if "combo" in runs else pd.Series("", index=runs.index)
    counts = runs.assign(_combo=combos).groupby(["dataset", "encoder", "method"])["_combo"].nunique()
    return counts[counts > 1]


def in_several(frame: pd.DataFrame, several: pd.Series) -> pd.Series:
    """Which rows belong to a dataset × encoder × method of `several`."""
    keys = list(zip(frame["dataset"], frame["encoder"], frame["method"]))
    return pd.Series([key in several.index for key in keys], index=frame.index, dtype=bool)


def combinations_apart(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with each method that ran several knob combinations renamed after its knobs, as the main table
    names it (`supcon (tau=0.3)`), so that a figure draws the combinations apart instead of pooling them."""
    several = several_combinations(frame)
    if several.empty:
        return frame
    mine = in_several(frame, several)
    runs = frame.drop_duplicates("run_key")  # every run, as the main table reads them: the same shared settings
    labels, _ = knob_labels(runs.assign(knobs=as_text(runs["knobs"]) if "knobs" in runs else ""))
    named = frame.loc[mine, "run_key"].map(lambda key: f" ({labels[key]})" if labels.get(key) else "")
    return frame.assign(method=frame["method"].where(~mine, frame["method"] + named))


def one_combination(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows of the methods that ran one knob combination on each dataset × encoder (a ranking, a cost or a
    comparison may pool their seeds) and a note naming those left out ('' when none): pooling a method's
    combinations would average runs that are not one setting, and picking one by test would choose on test."""
    several = several_combinations(frame)
    if several.empty:
        return frame, ""
    kept = frame[~in_several(frame, several)]
    named = ", ".join(f"{m} on {d} · {e} ({n})" for (d, e, m), n in several.items())
    return kept, (f"Left out: methods that ran several knob combinations ({named}). Pooling them would average "
                  "runs of different settings, and picking one by its test score would choose on test; the main "
                  "table shows each combination, and `clbench report --html --select-by validation` ranks, costs "
                  "and compares the combination each method chose on validation.")


def main_table(frame: pd.DataFrame, include: bool = False, digits: int = DIGITS) -> pd.DataFrame:
    """Test accuracy and macro-F1 (%, mean ± std over seeds) with one row per encoder × method × shown knobs and
    two columns per dataset; best per column in bold; collapsed runs as `bench.reporting.collapsed` says; the
    classical reference's floor (`bench.reporting.floor`) last, never best."""
    rows = frame[(frame["evaluator"] == "clean") & (frame["split"] == "test") & (frame["label"] == "")
                 & frame["metric"].isin([m for m, _ in MAIN_METRICS])]
    split = split_runs(rows, frame, include)
    split.need("clean test accuracy rows", "run `clbench run` or loosen --filter")
    kept = split.kept.assign(knobs=as_text(split.kept["knobs"]) if "knobs" in split.kept else "")
    runs = kept.drop_duplicates("run_key")
    labels, shared = knob_labels(runs)
    several = runs["encoder"].nunique() > 1
    names = {key: (f"{e} " if several else "") + m + (f" ({labels[key]})" if labels[key] else "")
             for key, e, m in zip(runs["run_key"], runs["encoder"], runs["method"])}
    kept = kept.assign(row=kept["run_key"].map(names))
    order = sorted(set(zip(runs["encoder"], runs["method"], runs["run_key"].map(names))),
                   key=lambda r: (r[0], method_key(r[1]), r[2]))  # one entry per row name
    values = kept.groupby(["row", "dataset", "metric"])["value"].apply(list).to_dict()
    flagged = {(r, d) for r, d, k in zip(kept["row"], kept["dataset"], kept["run_key"]) if include and k in split.keys}
    guessing = nearchance.cells(kept, ["row", "dataset"])
    cells = [value_cell(row, f"{d} {header}", values.get((row, d, metric), []), digits=digits,
                        collapsed=(row, d) in flagged, near_chance=(row, d) in guessing)
             for _, _, row in order for d in sorted(kept["dataset"].unique())
             for metric, header in MAIN_METRICS]
    mark_best(cells, lambda c: c["column"], digits=digits)
    reference = floor.values(frame)  # the floor: a row of its own, after mark_best (never best)
    below = below_floor(cells, reference, [(d, metric, f"{d} {header}") for d in sorted(kept["dataset"].unique())
                                           for metric, header in MAIN_METRICS], digits)
    cells += [floor.cell(floor.LABEL, f"{d} {header}", reference.get((d,), {}).get(metric, []), digits)
              for d in sorted(kept["dataset"].unique()) for metric, header in MAIN_METRICS] if reference else []
    notes = ["— = no finished run; macro-F1: the unweighted mean of the per-class F1 on the test split",
             "knobs beside a method: the settings its runs changed from the defaults (a method's own knobs without "
             "its prefix); runs of one method with other knobs are rows of their own, never averaged together",
             *shared, *split.notes(), *nearchance.note(nearchance.keys(kept)),
             *([f"{BELOW_FLOOR} = below the classical floor's mean on this dataset ({len(below)} cell(s)): the "
                f"method does worse than TF-IDF + logistic regression here"] if below else []),
             *([floor.NOTE] if reference else [])]
    return make_table(cells, "Test accuracy and macro-F1 (%): mean ± std over seeds (n seeds); best per column in "
                      "bold", "method (knobs)", notes)


BELOW_FLOOR = "▾"  # after a method's cell whose mean is below the classical floor's on that dataset


def below_floor(cells: list[dict], reference: dict, columns: list[tuple[str, str, str]], digits: int) -> list[dict]:
    """Mark (▾) and return the method cells whose mean is below the floor's mean in their column (`columns`:
    (dataset, metric, column name)); the floor's own cells come after and are never marked."""
    floors = {name: float(np.mean(values)) * 100 for d, metric, name in columns
              if (values := reference.get((d,), {}).get(metric, []))}
    marked = [c for c in cells if c["column"] in floors and c["mean"] == c["mean"]
              and round(c["mean"], digits) < round(floors[c["column"]], digits)]
    for cell in marked:
        cell.update(text=f"{cell['text']} {BELOW_FLOOR}", below_floor=True)
    return marked


def selection_meta(selection: Selection | None) -> str:
    """The header's line on which runs the page reports."""
    if selection is None:
        return "every run (no --select-by)"
    table = selection.table
    chosen = ", ".join(sorted(set(table["selection_seeds"])))
    shown = ", ".join(sorted(set(table["eval_seeds"])))
    return (f"knobs chosen on validation per method ({len(table)} choices); chosen on seeds {chosen}, reported on "
            f"seeds {shown}")


def selection_section(selection: Selection) -> str:
    """Per dataset · encoder · method, the combination chosen on validation: its knobs, validation accuracy,
    tuning budget (combinations × seeds tried), compute and reported seeds; the choice's warnings."""
    alert = render("alert", "selection-warnings", f"Selection warnings ({len(selection.warnings)})",
                   selection.warnings) if selection.warnings else ""
    intro = render("selection_intro", NEVER_TEST)
    return intro + alert + cells_table(selection_cells(selection), "table-selection", ("Reported seeds",))


@dataclass(frozen=True)
class DiffPair:
    """A method's run (one knob combination) and the baseline's run it is drawn against (same dataset, encoder)."""

    dataset: str
    encoder: str
    method: str
    knobs: str  # the combination's knobs as the main table shows them ('' for none)
    seed: int
    base_seed: int
    key: str
    base_key: str


def diff_pairs(frame: pd.DataFrame, baseline: str, include: bool = False) -> tuple[list[DiffPair], list[str]]:
    """Per dataset × encoder × method other than the baseline × knob combination, its run and the baseline's on
    their lowest common seed (else each one's lowest seed), in table order; and notes for the groups without a
    baseline run."""
    rows = frame[(frame["evaluator"] == "clean") & (frame["split"] == "test") & (frame["metric"] == "accuracy")
                 & (frame["label"] == "")]
    rows = split_runs(rows, frame, include).kept
    rows = rows[(as_text(rows["run_key"]) != "") & rows["seed"].notna()].sort_values(["seed", "run_key"])
    rows = rows.assign(**{c: as_text(rows[c]) if c in rows else "" for c in ("combo", "knobs")})
    labels, _ = knob_labels(rows.drop_duplicates("run_key"))
    pairs, missing = [], []
    for (dataset, encoder), group in rows.groupby(["dataset", "encoder"], sort=True):
        seeds = {g: dict(zip(part["seed"].astype(int)[::-1], part["run_key"][::-1]))  # the first key per seed
                 for g, part in group.groupby(["method", "combo"], sort=False)}
        bases = [g for g in seeds if g[0] == baseline]
        others = sorted((g for g in seeds if g[0] != baseline),
                        key=lambda g: (method_key(g[0]), labels[next(iter(seeds[g].values()))]))
        if not bases:
            named = ", ".join(dict.fromkeys(m for m, _ in others))
            missing.append(f"{dataset} ({encoder}): no {baseline} run to compare {named} with")
            continue
        base = seeds[bases[0]]
        for group_key in others:
            mine = seeds[group_key]
            common = sorted(set(mine) & set(base))
            seed, base_seed = (common[0], common[0]) if common else (min(mine), min(base))
            pairs.append(DiffPair(dataset, encoder, group_key[0], labels[mine[seed]], seed, base_seed, mine[seed],
                                  base[base_seed]))
    return pairs, missing


def diff_caption(pair: DiffPair, baseline: str) -> str:
    """What a confusion-change figure shows."""
    seeds = f"seed {pair.seed}" if pair.seed == pair.base_seed else \
        f"seeds {pair.seed} and {pair.base_seed} (no seed in common)"
    name = pair.method + (f" ({pair.knobs})" if pair.knobs else "")
    return (f"Confusion change on {pair.dataset} ({pair.encoder}): {name} minus {baseline}, test counts, {seeds}. "
            f"Red: confusions {pair.method} adds (more examples in that cell), blue: confusions it removes; the "
            "diagonal: correct answers gained (red) or lost (blue). One seed each: a draw, not an average.")


def confusion_diff_section(source: Path, frame: pd.DataFrame, baseline: str, include: bool = False
                           ) -> str | Absent:
    """The confusion change (method − baseline) per dataset for each method; absent, with why, when there is none."""
    methods = set(as_text(frame["method"])) - {""}
    try:
        name = canonical_method(baseline, methods)
    except BenchError:  # an unknown baseline: the compare section says so too
        name = baseline
    pairs, missing = diff_pairs(frame, name, include)
    if not pairs:
        return Absent("; ".join(missing) if missing else f"no method besides {name} in the selection")
    parts, notes = [], list(missing)
    for pair in pairs[:MAX_DIFFS]:
        figure, reason = attempt(confusion_diff_html, source / pair.base_key, source / pair.key,
                                 diff_caption(pair, name))
        if figure is None:
            notes.append(f"No confusion change for {pair.key}: {reason}")
        else:
            parts.append(figure)
    if len(pairs) > MAX_DIFFS:
        notes.append(f"{len(pairs) - MAX_DIFFS} more method × dataset pairs left out (at most {MAX_DIFFS} drawn); "
                     "narrow the page with --filter.")
    return figures_row(parts) + "".join(note(n) for n in notes)
