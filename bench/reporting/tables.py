"""Paper-style tables built from result rows (`paper-ii`, `ablation`, `robustness`, `compare`, `vs-paper`), as
tidy cell frames (`bench.reporting.cellframes`) that `bench.reporting.render` turns into text.

Accuracies and rates are shown in percent, mean ± sample std over seeds (n seeds); one seed shows no std.
Collapsed runs follow `bench.reporting.collapsed`: left out of every mean and named in a note, or, with
`include_collapsed` (a `--filter collapsed=...`), kept in cells marked † that are never best.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from bench.reporting import floor, nearchance, pairs, stats, verdicts
from bench.errors import BenchError
from bench.reporting.cellframes import DIGITS, MISSING, format_p, make_table, mark_best, text_cell, value_cell
from bench.reporting.collapsed import MARK, split_runs
from bench.reporting.evalsettings import settings_labels, settings_notes
from bench.reporting.papers import (PAPER_MAP, card_papers, encoder_family, nothing_published, paper_cells,
                                   paper_note)
from bench.reporting.resultsview import as_text
from bench.reporting.verdicts import VerdictSettings

METHOD_ORDER = ("ce", "cl", "clld-static", "clld-adaptive", "supcon", "lcl", "cline", "dcl", "simcse", "mirror-bert")
ABLATION_METHODS = ("ce", "cl", "clld-static", "clld-adaptive")
CELL = ["dataset", "encoder", "method"]  # the rows averaged into one cell, over seeds

# robustness columns: (evaluator, attack mode or "" for any, metric, header, higher is better)
ROBUSTNESS = (
    ("contrast", "", "original_accuracy", "Contrast Ori", True),
    ("contrast", "", "contrast_accuracy", "Contrast Rev", True),
    ("contrast", "", "consistency", "Contrast Con", True),
    ("textfooler", "adaptive", "accuracy_under_attack", "TF acc under attack", True),
    ("textfooler", "adaptive", "attack_success_rate", "TF success rate", False),
    ("textfooler", "transfer", "accuracy_under_attack", "TF transfer acc", True),
    ("textfooler", "transfer", "adversarial_accuracy", "TF transfer adv-only acc", True),
    ("checklist", "", "failure_rate", "CheckList failure rate", False),
)


# ----------------------------------------------------------------------------------------------- rows

def method_key(name: str) -> tuple[int, str]:
    """Sort key: the project's method order, unknown methods after it alphabetically."""
    return (METHOD_ORDER.index(name) if name in METHOD_ORDER else len(METHOD_ORDER), name)


def clean_accuracy(frame: pd.DataFrame) -> pd.DataFrame:
    """The clean test-accuracy rows (one per run)."""
    keep = (frame["evaluator"] == "clean") & (frame["split"] == "test") & (frame["metric"] == "accuracy")
    return frame[keep & (frame["label"] == "")]


def evaluator_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Overall evaluator rows that carry a number (no skip markers, per-label, per-test or per-capability rows)."""
    keep = (frame["evaluator"] != "clean") & (frame["metric"] != "skipped") & (frame["label"] == "")
    for column in ("test", "capability"):
        if column in frame:
            keep &= as_text(frame[column]) == ""
    return frame[keep]


def table_rows(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows a named table (`paper-ii`, `ablation`, `robustness`, `compare`, `vs-paper`) reads."""
    if table == "robustness":
        return evaluator_rows(frame)
    if table == "ablation":
        accuracy = clean_accuracy(frame)
        return accuracy[accuracy["method"].isin(ABLATION_METHODS)]
    return clean_accuracy(frame)


# ----------------------------------------------------------------------------------------------- tables

def paper_ii(frame: pd.DataFrame, digits: int = DIGITS, include_collapsed: bool = False) -> pd.DataFrame:
    """Test accuracy with datasets as rows and encoder x method as columns; best per dataset marked."""
    split = split_runs(clean_accuracy(frame), frame, include_collapsed)
    split.need("clean test accuracy rows", "run `clbench run` or loosen --filter")
    accuracy, flagged = split.kept, split.cells(CELL)
    columns = [(e, m) for e in sorted(accuracy["encoder"].unique())
               for m in sorted(accuracy.loc[accuracy["encoder"] == e, "method"].unique(), key=method_key)]
    values = accuracy.groupby(["dataset", "encoder", "method"])["value"].apply(list).to_dict()
    datasets = sorted(accuracy["dataset"].unique())
    near = nearchance.cells(accuracy, CELL)
    cells = [value_cell(d, f"{e} {m}", values.get((d, e, m), []), digits=digits, collapsed=(d, e, m) in flagged,
                        near_chance=(d, e, m) in near) for d in datasets for e, m in columns]
    mark_best(cells, lambda c: c["row"], digits=digits)
    reference = floor.values(frame)  # the floor: a column of its own, after mark_best (never best)
    if reference:  # each dataset's row ends with the floor's cell
        ends = {d: floor.cell(d, floor.LABEL, reference.get((d,), {}).get("accuracy", []), digits) for d in datasets}
        cells = [c for d in datasets for c in (*(c for c in cells if c["row"] == d), ends[d])]
    return make_table(cells, "Test accuracy (%): mean ± std over seeds (n seeds); best per dataset in bold",
                      "dataset", ["— = no finished run", *split.notes(), *nearchance.note(nearchance.keys(accuracy)),
                                  *([floor.NOTE] if reference else [])])


def ablation(frame: pd.DataFrame, digits: int = DIGITS, include_collapsed: bool = False) -> pd.DataFrame:
    """Test accuracy of ce, cl, clld-static and clld-adaptive (rows) on each dataset (columns)."""
    split = split_runs(table_rows("ablation", frame), frame, include_collapsed)
    split.need(f"runs of {', '.join(ABLATION_METHODS)}", "run them with `clbench run --methods "
               f"{','.join(ABLATION_METHODS)}` or loosen --filter")
    accuracy, flagged = split.kept, split.cells(CELL)
    encoders = sorted(accuracy["encoder"].unique())
    blocks = sorted(set(zip(accuracy["dataset"], accuracy["encoder"])))
    values = accuracy.groupby(["dataset", "encoder", "method"])["value"].apply(list).to_dict()
    near = nearchance.cells(accuracy, CELL)
    cells = [value_cell(m, d if len(encoders) == 1 else f"{d} {e}", values.get((d, e, m), []), digits=digits,
                        collapsed=(d, e, m) in flagged, near_chance=(d, e, m) in near)
             for m in ABLATION_METHODS for d, e in blocks]
    mark_best(cells, lambda c: c["column"], digits=digits)
    title = "Ablation: test accuracy (%), mean ± std over seeds (n seeds); best per column in bold"
    if len(encoders) == 1:
        title += f"; encoder {encoders[0]}"
    return make_table(cells, title, "method", ["— = no finished run", *split.notes(),
                                               *nearchance.note(nearchance.keys(accuracy))])


def robustness(frame: pd.DataFrame, digits: int = DIGITS, include_collapsed: bool = False) -> pd.DataFrame:
    """Per method: contrast-set Ori/Rev/Con, TextFooler accuracy under attack and success rate (adaptive;
    transfer in separate columns), CheckList failure rate; each evaluator setting kept apart."""
    split = split_runs(evaluator_rows(frame), frame, include_collapsed)  # evaluator rows: flags from clean rows
    split.need("evaluator rows (contrast, textfooler, checklist)", "score runs with `clbench evaluate RUN`")
    rows = split.kept
    if "attack_mode" not in rows:
        rows = rows.assign(attack_mode="")
    groups = sorted(set(zip(rows["dataset"], rows["encoder"])))
    specs: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}
    for evaluator, mode, metric, header, higher in ROBUSTNESS:
        specs.setdefault((evaluator, mode), []).append((metric, header, higher))
    columns: dict[str, bool] = {}           # header -> higher is better, in display order
    found: dict[tuple[str, str, str, str], list[float]] = {}   # (dataset, encoder, method, header) -> values
    flagged: set[tuple[str, str, str, str]] = set()            # the cells of `found` holding a collapsed run
    near: set[tuple[str, str, str, str]] = set()               # ... holding a run near chance
    used: set[tuple[str, str]] = set()      # (evaluator, eval_hash) shown
    for dataset, encoder in groups:
        here = rows[(rows["dataset"] == dataset) & (rows["encoder"] == encoder)]
        for (evaluator, mode), metrics in specs.items():
            part = here[(here["evaluator"] == evaluator) & ((here["attack_mode"] == mode) if mode else True)]
            part = part[part["metric"].isin([m for m, _, _ in metrics])]
            hashes = sorted(part["eval_hash"].unique())
            labels = settings_labels(part, hashes)
            for h in hashes:
                used.add((evaluator, h))
                for metric, header, higher in metrics:
                    chosen = part[(part["eval_hash"] == h) & (part["metric"] == metric)]
                    if chosen.empty:
                        continue
                    name = header + (f" [{labels[h]}]" if len(hashes) > 1 else "")
                    columns.setdefault(name, higher)
                    for method, group in chosen.groupby("method"):
                        found.setdefault((dataset, encoder, method, name), []).extend(group["value"])
                    flagged |= {(dataset, encoder, m, name) for (m,) in split.cells(["method"], chosen)}
                    near |= {(dataset, encoder, m, name) for (m,) in nearchance.cells(chosen, ["method"], frame)}
    if not found:
        raise BenchError("no robustness metrics (contrast, textfooler, checklist) in the selection; score runs "
                         "with `clbench evaluate RUN --evaluators contrast,textfooler,checklist`")
    methods = sorted({(d, e, m) for d, e, m, _ in found}, key=lambda k: (k[0], k[1], method_key(k[2])))
    shown = sorted({(d, e) for d, e, _ in methods})
    several = len(shown) > 1
    cells = []
    for dataset, encoder, method in methods:
        label = f"{dataset} {encoder} {method}" if several else method
        for name in columns:
            cell = value_cell(label, name, found.get((dataset, encoder, method, name), []), digits=digits,
                              collapsed=(dataset, encoder, method, name) in flagged,
                              near_chance=(dataset, encoder, method, name) in near)
            cell["group"] = (dataset, encoder)
            cells.append(cell)
    mark_best(cells, lambda c: (c["group"], c["column"]), lambda c: columns[c["column"]], digits=digits)
    for cell in cells:
        del cell["group"]
    notes = [("values in %: Ori/Rev = accuracy on original/contrast examples, Con = both right; "
              "TF = TextFooler; best per column in bold (lowest for success and failure rates); "
              "— = not evaluated with these settings")]
    notes += settings_notes(rows, used)  # the settings of each evaluator column, told apart
    notes += skipped_notes(frame) + split.notes() + nearchance.note(nearchance.keys(rows))
    title = "Robustness: mean ± std over seeds (n seeds)"
    if not several:
        title += f" on {shown[0][0]} ({shown[0][1]})"
    return make_table(cells, title, "dataset encoder method" if several else "method", notes)


def skipped_notes(frame: pd.DataFrame) -> list[str]:
    """One note per evaluator skipped for a reason on a dataset, naming the methods."""
    skipped = frame[(frame["evaluator"] != "clean") & (frame["metric"] == "skipped")]
    notes = []
    for (evaluator, dataset, note), group in skipped.groupby(["evaluator", "dataset", "note"], sort=True):
        methods = ", ".join(sorted(group["method"].unique(), key=method_key))
        notes.append(f"{evaluator} skipped on {dataset} ({methods}): {note or 'no reason recorded'}")
    return notes


def compare(frame: pd.DataFrame, predictions: Mapping[str, pd.DataFrame], baseline: str = "ce",
            n_resamples: int = stats.N_RESAMPLES, seed: int = stats.BOOTSTRAP_SEED,
            include_collapsed: bool = False, settings: VerdictSettings = VerdictSettings()) -> pd.DataFrame:
    """Every other method against `baseline` per dataset x encoder, paired by draw (bench.reporting.pairs: the same
    training and validation sample; runs of several draw sets pool into one comparison): the verdict
    (bench.reporting.verdicts) from the task-level Δ, its interval over runs and test items and its test
    (Benjamini-Hochberg q over the table), ASO and the runs needed; then, secondary, the run-only interval (test
    items held fixed), the item-level bootstrap interval and McNemar p of these trained models (bench.reporting.stats).

    `predictions` maps run keys to `stats.load_predictions` frames."""
    split = split_runs(clean_accuracy(frame), frame, include_collapsed)
    split.need("clean test accuracy rows", "run `clbench run` or loosen --filter")
    accuracy = split.kept
    if baseline not in set(accuracy["method"]):
        raise BenchError(f"baseline {baseline!r} has no finished runs in the selection; methods there: "
                         f"{', '.join(sorted(accuracy['method'].unique(), key=method_key))} (use --baseline)")
    runs = pairs.runs_by_pair(accuracy)
    scores = dict(zip(accuracy["run_key"], accuracy["value"].astype(float)))
    guessing = set(nearchance.keys(accuracy))
    groups = sorted({(d, e) for d, e, m, _ in runs if m == baseline})
    several = len(groups) > 1
    results, notes = [], []
    notes += [f"{d}/{e}: no {baseline} run, not compared" for d, e in sorted({(d, e) for d, e, _, _ in runs})
              if (d, e) not in groups]
    for dataset, encoder in groups:
        per_method: dict[str, dict[pairs.PairKey, str]] = {}
        crowded: dict[str, int] = {}  # runs left out because several configurations share one draw
        vary = pairs.varying([k for d, e, _, k in runs if (d, e) == (dataset, encoder)])
        for (d, e, m, k), keys in runs.items():
            if (d, e) != (dataset, encoder):
                continue
            if len(keys) > 1:
                crowded[m] = crowded.get(m, 0) + len(keys)
                notes.append(f"{d}/{e}/{m} {pairs.described(k, vary)}: {len(keys)} runs (different configs) left "
                             f"out; pick one with --filter config_hash=...")
                continue
            per_method.setdefault(m, {})[k] = keys[0]
        base = per_method.get(baseline, {})
        for method in sorted(set(per_method) - {baseline}, key=method_key):
            result = stats.compare_predictions({k: predictions[r] for k, r in base.items()},
                                               {k: predictions[r] for k, r in per_method[method].items()},
                                               n_resamples, seed, (baseline, method),
                                               lambda k: pairs.described(k, vary))
            aso = verdicts.aso_epsilon([scores[r] for r in per_method[method].values()],
                                       [scores[r] for r in base.values()], settings.aso_iterations)
            points = 100 * np.asarray(result.deltas)
            sides = [[r for k, r in side.items() if k in result.pairs] for side in (base, per_method[method])]
            pairing = pairs.Pairing(pairs.draw_sets(result.pairs), crowded.get(method, 0) + crowded.get(baseline, 0),
                                    sorted(guessing & {r for side in sides for r in side}), vary,
                                    nearchance.no_verdict(sides, guessing))
            results.append((dataset, encoder, method, result, verdicts.task_level(points, result.items),
                            verdicts.run_level(points), aso, pairing))
            where = f"{dataset}/{encoder}/{method}" if several else method
            notes += [f"{where}: {note}" for note in result.notes]
    if not results:
        raise BenchError(f"no method besides the baseline {baseline!r} on the datasets it ran on; nothing to compare")
    qvalues = stats.bh_adjust([level.pvalue for *_, level, _, _, _ in results])
    cells = []
    flagged = split.cells(CELL)
    for (dataset, encoder, method, result, level, runs_only, aso, pairing), q in zip(results, qvalues):
        row = comparison_cells(f"{dataset} {encoder} {method}" if several else method, result, level, runs_only,
                               aso, q, settings, pairing)
        for cell in row:  # what the row compares, for readers of the cells (bench.api.compare)
            cell.update(dataset=dataset, encoder=encoder, method=method)
        if {(dataset, encoder, method), (dataset, encoder, baseline)} & flagged and row[1]["text"] != MISSING:
            row[1]["text"] += f" {MARK}"  # Δ of a pair that includes a collapsed run
        cells += row
    title = (f"Paired comparison with {baseline}: Δ = method − {baseline} test accuracy (points), over runs and "
             f"test items")
    if not several:
        title += f" on {groups[0][0]} ({groups[0][1]})"
    return make_table(cells, title, "dataset encoder method" if several else "method",
                      compare_notes(baseline, settings, qvalues, n_resamples, seed)
                      + notes + split.notes() + nearchance.note(sorted({r for *_, pairing in results
                                                                          for r in pairing.near})), left=["verdict"])


def compare_notes(baseline: str, settings: VerdictSettings, qvalues: np.ndarray, n_resamples: int,
                  seed: int) -> list[str]:
    """What the compare table's columns hold (docs/REPORTS.md#verdicts-about-the-task); `qvalues`: one per
    comparison, NaN where it has no p-value (fewer than 2 paired runs)."""
    with_p, total = int(np.isfinite(qvalues).sum()), len(qvalues)
    if with_p == total:
        adjusted = f"q: Benjamini-Hochberg over the {total} comparison{'s' * (total > 1)} in this table"
    elif with_p:
        adjusted = (f"q: Benjamini-Hochberg over the {with_p} of the {total} comparisons in this table that have a "
                    "p-value (2 or more paired runs)")
    else:
        adjusted = "q: none, as no comparison has a p-value (a p-value needs 2 or more paired runs)"
    return [
        (f"verdict: better / worse (q < {settings.alpha:g}), equivalent (95% CI inside ±{settings.rope:g} points, "
         f"the ROPE) or inconclusive; fewer than {verdicts.MIN_RUNS} paired runs: inconclusive, always; "
         f"{nearchance.VERDICT}: half or more of a side's paired runs are not clearly above chance, so no verdict"),
        ("run = the method and the baseline trained on one draw (data seed, seed, regime: one training and "
         "validation sample), paired; Δ: mean over runs; 95% CI and p: over runs and test items (a crossed "
         "runs × items model, Student t with runs − 1 df: the test set is a sample of the task, not fixed); "
         + adjusted),
        (f"ASO ε: Almost Stochastic Order of the method's run accuracies over {baseline}'s (deepsig, "
         f"{settings.aso_iterations} iterations; < 0.5: the method almost stochastically dominates; — below "
         f"{verdicts.MIN_RUNS} runs a side)"),
        ("runs: paired runs (draw sets when several; runs that could not be paired); runs needed: a plug-in "
         "estimate at the observed Δ and spread of the paired runs that would likely settle an inconclusive "
         "comparison (80% power), with its range over the uncertainty of the run spread; 'more test items' when "
         "the test set alone keeps it open"),
        (f"secondary (‡), never deciding the verdict: runs-only CI = Student t over the per-run differences, the "
         f"test items held fixed; items CI = paired bootstrap over test items pooled over runs ({n_resamples:,} "
         f"resamples, RNG seed {seed}) and McNemar per run (exact binomial when discordant items < "
         f"{stats.EXACT_BELOW}), the trained models held fixed"),
    ]


def comparison_cells(row: str, result: stats.PairedComparison, level: verdicts.TaskLevel,
                     runs_only: verdicts.RunLevel, aso: float, q: float,
                     settings: VerdictSettings = VerdictSettings(), pairing: pairs.Pairing = pairs.Pairing()
                     ) -> list[dict[str, Any]]:
    """The cells of one comparison row: the task-level verdict and its statistics, then the secondary ones;
    `pairing` says how its runs were paired (pairs.Pairing)."""
    n = len(result.pairs)
    unpaired = "; ".join(result.notes)
    sets, near, vary = pairing.draw_sets, pairing.near, pairing.vary
    left_out = len(result.unpaired) + pairing.crowded
    extras = [f"{sets} draw sets"] if sets > 1 else []
    extras += [f"{left_out} unpaired"] if left_out else []
    runs_text = str(n) + (f" ({'; '.join(extras)})" if extras else "")
    if not n or result.bootstrap is None:
        return [text_cell(row, "verdict", "inconclusive", note=unpaired or "no paired runs")] + \
            [text_cell(row, c, MISSING, note=unpaired or "no paired runs")
             for c in ("Δ acc", "95% CI", "p", "q (BH)", "ASO ε")] + \
            [text_cell(row, "runs", runs_text, n=0, note=unpaired, unpaired=left_out),
             text_cell(row, "runs needed", verdicts.needed_text(verdicts.Needed(None), 0), n=0)] + \
            [text_cell(row, c, MISSING) for c in ("runs-only CI ‡", "items CI ‡", "McNemar p ‡")]
    word = nearchance.VERDICT if pairing.no_verdict else verdicts.verdict(level, q, settings)
    needed = verdicts.runs_needed(level, settings) if word == "inconclusive" else verdicts.Needed(None)
    delta = text_cell(row, "Δ acc", f"{level.delta:+.2f}", level.delta, n, unpaired)
    delta["std"] = level.std
    boot = result.bootstrap
    mcnemar = ", ".join(f"{pairs.label(k, vary) if isinstance(k, tuple) else k} {format_p(t.pvalue)}"
                        for k, t in zip(result.pairs, result.mcnemar))
    return [
        text_cell(row, "verdict", word, n=n, verdict=word, near_chance=pairing.no_verdict,
                  note=f"{len(near)} paired run(s) near chance: {', '.join(near)}" if near else ""),
        delta,
        text_cell(row, "95% CI", interval_text(level.low, level.high), n=n, low=level.low, high=level.high),
        text_cell(row, "p", format_p(level.pvalue), level.pvalue, n),
        text_cell(row, "q (BH)", format_p(q), float(q), n),
        text_cell(row, "ASO ε", MISSING if math.isnan(aso) else f"{aso:.2f}", aso, n),
        text_cell(row, "runs", runs_text, float(n), n, unpaired, sets=sets, unpaired=left_out),
        text_cell(row, "runs needed", verdicts.needed_text(needed, n) if word == "inconclusive" else "",
                  math.nan if needed.runs is None else float(needed.runs), n,
                  low=math.nan if needed.low is None else float(needed.low),
                  high=math.nan if needed.high is None else float(needed.high), more_items=needed.more_items),
        text_cell(row, "runs-only CI ‡", interval_text(runs_only.low, runs_only.high), n=n, low=runs_only.low,
                  high=runs_only.high, p=runs_only.pvalue),
        text_cell(row, "items CI ‡", interval_text(100 * boot.low, 100 * boot.high), n=n, low=100 * boot.low,
                  high=100 * boot.high, p=boot.pvalue),
        text_cell(row, "McNemar p ‡", mcnemar, n=n),
    ]


def interval_text(low: float, high: float) -> str:
    """`[-0.40, +2.90]` (points), — for a missing end."""
    return "[" + ", ".join(MISSING if math.isnan(v) else f"{v:+.2f}" for v in (low, high)) + "]"


def vs_paper(frame: pd.DataFrame, papers: Mapping[str, Mapping[str, Any]] | None = None,
             digits: int = DIGITS, include_collapsed: bool = False) -> pd.DataFrame:
    """Our mean test accuracy next to the published numbers of the dataset cards, with the gap (ours − paper).

    Card entries map to our methods by PAPER_MAP (e.g. clld_table2 `bert` -> ce, `bert+clld` ->
    clld-adaptive); for each of our encoders, the entries of the same encoder family are shown when a source
    has them, else all of the source's entries, noted "encoders differ"."""
    papers = card_papers() if papers is None else papers
    split = split_runs(clean_accuracy(frame), frame, include_collapsed)
    split.need("clean test accuracy rows", "run `clbench run` or loosen --filter")
    accuracy, flagged = split.kept, split.cells(CELL)
    near = nearchance.cells(accuracy, CELL)
    values = accuracy.groupby(["dataset", "encoder", "method"])["value"].apply(list).to_dict()
    datasets = sorted(d for d in accuracy["dataset"].unique() if papers.get(d))
    if not datasets:
        raise BenchError(nothing_published(sorted(accuracy["dataset"].unique()), papers))
    cells, unmapped = [], []
    for dataset in datasets:
        for source, entries in sorted(papers[dataset].items()):
            mapping = PAPER_MAP.get(source, {})
            unmapped += [f"{dataset} {source} {key}" for key in entries if key not in mapping]
            for encoder in sorted(accuracy.loc[accuracy["dataset"] == dataset, "encoder"].unique()):
                family = encoder_family(encoder)
                mapped = [(k, v) for k, v in entries.items() if k in mapping]
                same = [(k, v) for k, v in mapped if mapping[k][0] == family]
                for key, published in same or mapped:
                    paper_family, method = mapping[key]
                    cells += paper_cells(f"{dataset} {encoder} · {source} {key}", method,
                                         values.get((dataset, encoder, method), []), float(published),
                                         paper_note(encoder, family, paper_family, source), digits,
                                         (dataset, encoder, method) in flagged, (dataset, encoder, method) in near)
    notes = ["gap = ours − paper in points; — = we have no finished run of the mapped method",
             "mapping: " + "; ".join(f"{source}: " + ", ".join(f"{k}→{m}" for k, (_, m) in entries.items())
                                     for source, entries in PAPER_MAP.items())]
    if unmapped:
        notes.append("paper entries without a counterpart, left out: " + ", ".join(unmapped))
    notes += split.notes() + nearchance.note(nearchance.keys(accuracy))
    return make_table(cells, "Ours vs published test accuracy (%)", "dataset encoder · paper entry", notes,
                      left=["ours", "note"])
