"""Knobs chosen by validation (`clbench report --select-by validation`): per dataset x encoder x method (the dataset
carries the data regime), the knob combination with the best mean validation accuracy over the selection seeds,
reported by every row of its runs on the evaluation seeds.

The choice reads one row per run and nothing else: its clean validation accuracy (evaluator "clean", split
"validation", metric "accuracy", no label). Test rows, evaluator rows and wall times never change it. A
combination is one `combo` value (rows written before combos existed, combo "", count as one); its `knobs` (JSON
of the settings changed from the defaults) break ties (mean validation accuracies within TIE): the fewest changed
knobs win, then the smallest knobs text (the JSON, sorted keys), then the smallest combo id. The table names every
setting the chosen combination changed, marks the tuned ones (those that vary among the combinations) and says
when the choice was a tie, and between which combinations.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from bench.errors import BenchError
from bench.reporting.cellframes import MISSING, make_table, text_cell
from bench.reporting.provenance_notes import provenance_notes
from bench.reporting.resultsview import as_text, first_few
from bench.reporting.tables import method_key

GROUP = ["dataset", "encoder", "method"]  # one choice per group
VALIDATION = {"evaluator": "clean", "split": "validation", "metric": "accuracy", "label": ""}
TIE = 1e-12  # scores this close count as equal
TEXT = ("run_key", "dataset", "encoder", "method", "evaluator", "split", "metric", "label", "combo", "knobs")
TABLE_COLUMNS = ["dataset", "encoder", "method", "knobs", "tuned", "ties", "val_accuracy", "combinations",
                 "selection_seeds", "eval_seeds", "runs", "compute_seconds"]
TUNED = " (tuned)"  # after a knob that varies among the combinations
TIE_RULE = ("the fewest changed knobs win, then the smallest knobs text (the JSON of the changed settings, sorted "
            "keys), then the smallest combo id")
OPTIMISTIC = ("knobs were chosen and scores reported on the same seeds: optimistic (the choice also fits those "
              "seeds' noise); hold seeds out with --selection-seeds/--eval-seeds")


@dataclass
class Selection:
    """The chosen combinations: their rows on the reported seeds, one table row per group, warnings and notes."""

    frame: pd.DataFrame  # every row (all evaluators/splits/metrics) of the chosen combinations' runs, reported seeds
    table: pd.DataFrame  # one row per dataset x encoder x method (TABLE_COLUMNS)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    provenance: list[str] = field(default_factory=list)  # where the runs behind the table were built


@dataclass
class Candidate:
    """One knob combination of a group, scored on the selection seeds."""

    combo: str
    knobs: dict[str, Any]
    knobs_text: str
    recorded: bool  # whether its rows recorded their knobs (rows older than the `knobs` column did not)
    seed_scores: dict[int, float]  # selection seed -> validation accuracy (mean over its runs on that seed)
    runs: list[str]  # run keys scored

    @property
    def score(self) -> float:
        """Mean validation accuracy over the selection seeds."""
        return sum(self.seed_scores.values()) / len(self.seed_scores)

    def order(self) -> tuple[int, str, str]:
        """Tie-break order: fewest changed knobs (the defaults first), then the knobs text."""
        return len(self.knobs), self.knobs_text, self.combo


def select_by_validation(frame: pd.DataFrame, selection_seeds: list[int] | None = None,
                         eval_seeds: list[int] | None = None) -> Selection:
    """Per dataset x encoder x method, the combination with the best mean validation accuracy over the selection
    seeds, and its runs' rows on the evaluation seeds. Without seeds both are all seeds (an optimism note says
    so); with only one set given, the other is each group's remaining seeds. BenchError for overlapping seed
    sets, or when no group can be reported."""
    chosen_on = None if selection_seeds is None else {int(s) for s in selection_seeds}
    shown_on = None if eval_seeds is None else {int(s) for s in eval_seeds}
    if chosen_on == set() or shown_on == set():
        raise BenchError("--selection-seeds and --eval-seeds need at least one seed each when given")
    if chosen_on is not None and shown_on is not None and chosen_on & shown_on:
        raise BenchError(f"--selection-seeds and --eval-seeds share seed(s) {seeds_text(chosen_on & shown_on)}: "
                         "a seed the knobs were chosen on cannot also report them; make the two sets disjoint")
    rows = prepared(frame)
    runs = run_table(rows)
    scores = validation_scores(rows)
    if runs.empty or scores.empty:
        raise BenchError("no clean validation accuracy rows (evaluator=clean, split=validation, metric=accuracy) "
                         "in the selection: --select-by validation needs runs with a validation split; seeds "
                         f"present: {seeds_text(runs['seed']) or '(none)'}")
    runs = runs.assign(score=runs["run_key"].map(scores))
    warnings: list[str] = []
    table_rows, reported, rested = [], [], []
    groups = sorted(runs.groupby(GROUP, sort=False).groups, key=lambda k: (k[0], k[1], method_key(k[2])))
    for key in groups:
        group = runs[(runs["dataset"] == key[0]) & (runs["encoder"] == key[1]) & (runs["method"] == key[2])]
        present = set(int(s) for s in group["seed"])
        select = chosen_on if chosen_on is not None else present - (shown_on or set())
        evaluate = shown_on if shown_on is not None else present - (chosen_on or set())
        row, keys, scored = choose(group, "/".join(key), select, evaluate, warnings)
        if row is not None:
            table_rows.append(row)
            reported += keys
            rested += [*scored, *keys]
    if not table_rows:
        raise BenchError(f"no dataset/encoder/method left to report ({len(groups)} left out; first: "
                         f"{warnings[0] if warnings else 'no reason'}); seeds with validation accuracy: "
                         f"{seeds_text(runs.loc[runs['score'].notna(), 'seed']) or '(none)'}")
    table = pd.DataFrame(table_rows, columns=TABLE_COLUMNS)
    warnings += budget_warnings(table)
    notes = [OPTIMISTIC] if chosen_on is None and shown_on is None else []
    chosen_rows = frame[rows["run_key"].isin(reported).to_numpy()]
    behind = frame[(rows["run_key"].isin(rested) & (rows["evaluator"] == "clean")).to_numpy()]
    return Selection(chosen_rows.reset_index(drop=True), table, warnings, notes, provenance_notes(behind))


def prepared(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with the columns the choice reads as text (combo, knobs, wall_seconds added when missing)."""
    rows = frame.copy()
    for column in TEXT:
        rows[column] = as_text(rows[column]) if column in rows else ""
    rows["_knobs"] = rows["knobs"].where(rows["knobs"] != "", "{}")
    rows["wall_seconds"] = pd.to_numeric(rows["wall_seconds"], errors="coerce") if "wall_seconds" in rows \
        else math.nan
    rows["seed"] = pd.to_numeric(rows["seed"], errors="coerce").astype("Int64")
    return rows


def validation_mask(rows: pd.DataFrame) -> pd.Series:
    """True for the clean validation accuracy rows (one per run)."""
    mask = pd.Series(True, index=rows.index)
    for column, value in VALIDATION.items():
        mask &= rows[column] == value
    return mask


def validation_scores(rows: pd.DataFrame) -> pd.Series:
    """Validation accuracy by run key (the mean, should a run have several such rows)."""
    valid = rows[validation_mask(rows)]
    return valid.groupby("run_key")["value"].mean().dropna()


def run_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per run with a seed, from its clean rows (its validation row first): group, seed, combo, knobs
    ("{}" when not recorded), the knobs as recorded ("" when not: `recorded`) and wall seconds (NaN when none is
    recorded)."""
    clean = rows[(rows["evaluator"] == "clean") & rows["seed"].notna()]
    clean = clean.assign(_first=~validation_mask(clean)).sort_values("_first", kind="stable")
    runs = clean.groupby("run_key", sort=True).agg(
        dataset=("dataset", "first"), encoder=("encoder", "first"), method=("method", "first"),
        seed=("seed", "first"), combo=("combo", "first"), knobs=("_knobs", "first"), recorded=("knobs", "first"),
        wall_seconds=("wall_seconds", "max"))
    return runs.reset_index()


def choose(group: pd.DataFrame, name: str, select: set[int], evaluate: set[int],
           warnings: list[str]) -> tuple[dict[str, Any] | None, list[str], list[str]]:
    """The table row, reported run keys and scored run keys of one group (None, [] and [] when it is left out,
    with a warning)."""
    scored = group[group["seed"].isin(select) & group["score"].notna()] if select else group.iloc[:0]
    if scored.empty:
        where = f"the selection seeds {seeds_text(select)}" if select else "any seed (every seed is an eval seed)"
        warnings.append(f"{name}: no validation accuracy on {where}; left out")
        return None, [], []
    candidates = [candidate(combo, part) for combo, part in scored.groupby("combo", sort=True)]
    best = max(c.score for c in candidates)
    tied = sorted((c for c in candidates if c.score >= best - TIE), key=Candidate.order)
    chosen = tied[0]
    varying = varying_keys(candidates)
    counts = {len(c.seed_scores) for c in candidates}
    if len(counts) > 1:
        listed = [f"{knobs_label(c.knobs, varying, c.combo)} ({len(c.seed_scores)} seeds)"
                  for c in sorted(candidates, key=lambda c: (len(c.seed_scores), c.order()))]
        warnings.append(f"{name}: combinations scored on unequal numbers of selection seeds ({first_few(listed)}): "
                        "an unequal budget inside the method (means over fewer seeds are noisier)")
    mine = group[(group["combo"] == chosen.combo) & group["seed"].isin(evaluate)]
    shown = {int(s) for s in mine["seed"]}
    if not evaluate or not shown:
        wanted = f"on the eval seeds {seeds_text(evaluate)}" if evaluate else "outside the selection seeds"
        warnings.append(f"{name}: the chosen combination ({knobs_label(chosen.knobs, varying, chosen.combo)}) has "
                        f"no runs {wanted}; left out")
        return None, [], []
    if evaluate - shown:
        warnings.append(f"{name}: the chosen combination has no runs on eval seed(s) {seeds_text(evaluate - shown)}; "
                        f"reported on {seeds_text(shown)} only")
    used = scored["run_key"].unique()
    wall = group.loc[group["run_key"].isin(used), "wall_seconds"]
    row = {**dict(zip(GROUP, group[GROUP].iloc[0])),
           "knobs": chosen_label(chosen, varying), "tuned": ", ".join(varying),
           "ties": [knobs_label(c.knobs, varying, c.combo) for c in tied] if len(tied) > 1 else [],
           "val_accuracy": chosen.score, "combinations": len(candidates),
           "selection_seeds": seeds_text(scored["seed"]), "eval_seeds": seeds_text(shown), "runs": len(used),
           "compute_seconds": float(wall.sum(min_count=1))}
    return row, list(mine["run_key"]), list(used)


def candidate(combo: str, part: pd.DataFrame) -> Candidate:
    """A combination from its scored runs (validation accuracy averaged per seed)."""
    text = sorted(part["knobs"])[0]
    try:
        knobs = json.loads(text)
    except ValueError:
        knobs = None
    if not isinstance(knobs, dict):
        raise BenchError(f"run {part['run_key'].iloc[0]}: knobs {text!r} are not a JSON object; the row is damaged")
    per_seed = part.groupby("seed")["score"].mean()
    scores = {int(s): float(v) for s, v in per_seed.items()}
    return Candidate(combo, knobs, text, bool((part["recorded"] != "").all()), scores, sorted(part["run_key"]))


def varying_keys(candidates: list[Candidate]) -> list[str]:
    """The knobs whose values (a missing knob: its default) differ among the combinations, sorted."""
    keys = sorted({k for c in candidates for k in c.knobs})
    values = {k: {json.dumps(c.knobs.get(k, "\0default"), sort_keys=True) for c in candidates} for k in keys}
    return [k for k in keys if len(values[k]) > 1]


def knobs_label(knobs: dict[str, Any], varying: list[str], combo: str = "") -> str:
    """A combination told apart from the others of its group: `key=value, ...` for every knob among `varying`
    (`key=default` for one left at its default); when no knob varies (combinations that differ by something
    else), `combo <id>`, or "—" without `combo`."""
    if not varying:
        return f"combo {combo or '(none)'}" if combo else MISSING
    return ", ".join(f"{k}={value_text(knobs[k]) if k in knobs else 'default'}" for k in varying)


def chosen_label(chosen: Candidate, tuned: list[str]) -> str:
    """The chosen combination as the table names it: every setting it changed from the method's defaults and every
    tuned knob (`key=default` when left at its default): the tuned ones first, marked (tuned), then the method's
    knobs, then training settings; "defaults" only when it changed nothing, "—" when its rows did not record
    their knobs."""
    if not chosen.recorded and not chosen.knobs:
        return MISSING
    keys = sorted({*chosen.knobs, *tuned}, key=lambda k: (k not in tuned, "." not in k, k))  # then method knobs
    if not keys:
        return "defaults"
    return ", ".join(f"{k}={value_text(chosen.knobs[k]) if k in chosen.knobs else 'default'}"
                     f"{TUNED if k in tuned else ''}" for k in keys)


def value_text(value: Any) -> str:
    """A knob value as a report shows it (as `resultsview.knobs_text` does: 2e-05, True, [1, 2])."""
    return str(value)


def seeds_text(seeds: Any) -> str:
    """Seeds sorted and joined by commas (`1,2,3`), missing ones left out."""
    return ",".join(str(s) for s in sorted({int(s) for s in seeds if not pd.isna(s)}))


def budget_warnings(table: pd.DataFrame) -> list[str]:
    """One line per dataset x encoder whose methods were tuned with different budgets (combinations x seeds)."""
    lines = []
    for (dataset, encoder), part in table.groupby(["dataset", "encoder"], sort=True):
        budgets = {m: (c, len(s.split(","))) for m, c, s in
                   zip(part["method"], part["combinations"], part["selection_seeds"])}
        if len(set(budgets.values())) > 1:
            listed = ", ".join(f"{m} {c}×{s}" for m, (c, s) in budgets.items())
            lines.append(f"{dataset}/{encoder}: methods tuned with different budgets (combinations × selection "
                         f"seeds: {listed}); methods tuned with more combinations had more chances to fit "
                         "validation")
    return lines


def duration_text(seconds: float) -> str:
    """Compute time for a table cell: `45 s`, `12 min`, `1.3 h` ("—" when unknown)."""
    if math.isnan(seconds):
        return MISSING
    if seconds < 59.5:
        return f"{seconds:.0f} s"
    if seconds < 59.5 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def selection_cells(selection: Selection) -> pd.DataFrame:
    """The choice as a cell frame (`bench.reporting.render`): per dataset/encoder/method the chosen knobs,
    validation accuracy, tuning budget and compute, and the seeds reported; the ties, the selection's notes and
    where its runs were built as table notes (its warnings are the caller's to print)."""
    table = selection.table
    pairs = sorted(set(zip(table["dataset"], table["encoder"])))
    several = len(pairs) > 1
    cells, ties = [], []
    for row in table.to_dict("records"):
        label = f"{row['dataset']} {row['encoder']} {row['method']}" if several else row["method"]
        n_seeds = len(row["selection_seeds"].split(","))
        shown = len(row["eval_seeds"].split(","))
        tied = row.get("ties") or []
        if tied:
            ties.append(f"{label}: a tie on validation ({100 * row['val_accuracy']:.2f}) between {len(tied)} "
                        f"combinations ({'; '.join(tied)}): the tie rule chose {tied[0]}")
        cells += [
            text_cell(label, "Knobs", row["knobs"] + (" [tie]" if tied else "")),
            text_cell(label, "Validation acc (%)", f"{100 * row['val_accuracy']:.2f}",
                      mean=100 * row["val_accuracy"], n=n_seeds),
            text_cell(label, "Budget (C×S)", f"{row['combinations']}×{n_seeds}",
                      mean=float(row["combinations"] * n_seeds), n=n_seeds),
            text_cell(label, "Compute", duration_text(row["compute_seconds"]), mean=row["compute_seconds"]),
            text_cell(label, "Reported seeds", row["eval_seeds"], n=shown),
        ]
    title = "Knobs chosen by validation: per method, the combination with the best mean validation accuracy"
    if not several:
        title += f" on {pairs[0][0]} ({pairs[0][1]})"
    notes = ["Knobs: every setting the chosen combination changed from the method's defaults, and every knob tuned "
             f"(varied among its combinations), marked{TUNED} (=default: left at its default; defaults = it changed "
             "nothing; — = not recorded); Validation acc: its mean over the S selection seeds",
             "Budget: C combinations × S selection seeds tried; Compute: the wall time of those runs; test scores "
             "come from the reported seeds only, and never took part in the choice",
             *([f"[tie] = the best mean validation accuracy was shared (within {TIE:g}); ties: {TIE_RULE}", *ties]
               if ties else []),
             *selection.notes, *selection.provenance]
    return make_table(cells, title, "dataset encoder method" if several else "method", notes,
                      left=["Knobs", "Reported seeds"])
