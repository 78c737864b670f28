"""A compact mean ± std table over seeds, printed after `clbench run`.

Collapsed runs follow `bench.reporting.collapsed`: left out of every mean, and said so next to the numbers (a
`note` column, or "collapsed — not a result" where every run of a method collapsed)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bench.reporting import floor, nearchance, pairs
from bench.reporting.collapsed import MARK, split_runs
from bench.reporting.resultsview import breakdown_rows, knobs_text, with_regimes
from bench.reporting.verdicts import MIN_RUNS, TaskLevel, task_level, verdict

KEYS = ["dataset", "encoder", "method"]
COLLAPSED = "collapsed"  # shown instead of the numbers of a method whose every run collapsed
NOT_A_RESULT = "collapsed — not a result"


def summary_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Per dataset x encoder x method: seeds, test accuracy and macro-F1 (mean ± std, in %), wall time. Collapsed
    runs are left out of the means (`seeds` counts the others); when there are any, a `note` column says how
    many, and a method whose every run collapsed shows "collapsed" instead of numbers and how many seeds ran.
    Where `rows` hold the classical reference's (`bench.reporting.floor`), each dataset ends with its floor line
    (`seeds`: the draws it was trained on) and `attrs["notes"]` says what it is."""
    everything = pd.DataFrame(rows)
    if everything.empty:
        return everything
    everything = nearchance.fill(everything)
    frame = with_regimes(everything[(everything["evaluator"] == "clean") & (everything["split"] == "test")
                                    & (everything["label"] == "")])
    several = "combo" in frame and (frame.groupby(KEYS)["combo"].nunique() > 1).any()
    if several:  # a knob grid: one line per combination, named by the knobs it changed
        frame = frame.assign(knobs=[knobs_text(k) for k in frame["knobs"]])
    keys = [*KEYS, "knobs"] if several else KEYS
    table = with_floor(summary_lines(frame, keys), with_regimes(floor.reference_rows(everything)))
    table.attrs["notes"] = [*table.attrs.get("notes", []), *nearchance.note(nearchance.keys(frame))]
    return table


def with_floor(table: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """`table` with the reference's floor line after the lines of each dataset it was trained on (mean ± std over
    its distinct draws, its fit's seconds as `wall_s`), and the note saying what it is ([] without one)."""
    found = floor.values(reference) if not table.empty else {}
    table.attrs["notes"] = []
    if not found:
        return table
    out = []
    for dataset, lines in table.groupby("dataset", sort=False):
        out.append(lines)
        entry = found.get((dataset,))
        if entry:
            seconds = [v for v in entry["seconds"] if v == v]  # NaN: not recorded
            line = {column: "" for column in table.columns}
            line.update(dataset=dataset, method=floor.LABEL, seeds=len(entry.get("accuracy", [])),
                        accuracy=mean_std(pd.Series(entry.get("accuracy", []), dtype=float)),
                        macro_f1=mean_std(pd.Series(entry.get("macro_f1", []), dtype=float)),
                        wall_s=f"{np.mean(seconds):.1f}" if seconds else "")
            out.append(pd.DataFrame([line]))
    table = pd.concat(out, ignore_index=True)
    table.attrs["notes"] = [floor.SHORT]
    return table


def table_text(table: pd.DataFrame) -> str:
    """The summary as printed: its lines, then its notes."""
    return "\n".join([table.to_string(index=False), *table.attrs.get("notes", [])])


def summary_lines(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """`summary_table`'s lines: one per group of `by` (clean test rows of finished runs), sorted."""
    split = split_runs(frame)
    wall = frame.groupby([*by, "seed"])["wall_seconds"].first().groupby(by).mean()  # time spent: every run
    lost = frame[frame["run_key"].isin(split.keys)].groupby(by)["seed"].nunique() if split.keys else {}
    kept = split.kept
    near = {tuple(k) for k in nearchance.cells(kept, by)} if not kept.empty else set()
    groups = {} if kept.empty else dict(list(
        kept.pivot_table(index=[*by, "seed"], columns="metric", values="value").reset_index().groupby(by)))
    out = []
    for keys in wall.index:  # every group, sorted
        group = groups.get(keys)
        row = {**dict(zip(by, keys)), "seeds": 0 if group is None else len(group),
               "accuracy": COLLAPSED if group is None else
               mean_std(group["accuracy"]) + (f" {nearchance.MARK}" if tuple(keys) in near else ""),
               "macro_f1": COLLAPSED if group is None else mean_std(group["macro_f1"]),
               "wall_s": f"{wall[keys]:.0f}"}
        if split.keys:
            n_lost = int(lost.get(keys, 0))
            row["note"] = f"{n_lost} seed(s), all collapsed — not a result" if group is None else \
                f"{n_lost} collapsed seed(s) left out — not results" if n_lost else ""
        out.append(row)
    return pd.DataFrame(out)


def mean_std(values: pd.Series) -> str:
    """`mean ± std` in percent (std over seeds, ddof=1; just the mean for one seed)."""
    mean = 100 * values.mean()
    if len(values) < 2:
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {100 * values.std(ddof=1):.2f}"


def overall_evaluator_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The evaluator rows that summarise a whole evaluation: no clean rows, no skip markers, no per-label,
    per-test or per-capability rows."""
    return frame[(frame["evaluator"] != "clean") & (frame["metric"] != "skipped") & ~breakdown_rows(frame)]


def evaluation_table(rows: list[dict[str, Any]], include_collapsed: bool = False) -> pd.DataFrame:
    """Per dataset x encoder x method x evaluator settings x metric: seeds and value (mean ± std over seeds).

    Only overall rows are shown (not per-label, per-test or per-capability ones) and no skip markers. Collapsed
    runs (known from the clean rows among `rows`) are left out, or with `include_collapsed` kept and marked †;
    the table's `attrs["notes"]` says which."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    split = split_runs(overall_evaluator_rows(frame), frame, include_collapsed)
    out = []
    group_keys = [*KEYS, "evaluator", "eval_hash", "split", "metric"]  # never average different settings
    flagged = split.cells(group_keys)
    for keys, group in split.kept.groupby(group_keys, sort=True):
        values = group["value"].astype(float)
        text = f"{values.mean():.4g}" if len(values) < 2 else f"{values.mean():.4g} ± {values.std(ddof=1):.2g}"
        out.append({**dict(zip(group_keys, keys)), "seeds": len(group),
                    "value": f"{text} {MARK}" if keys in flagged else text})
    table = pd.DataFrame(out)
    table.attrs["notes"] = split.notes()
    return table


# ----------------------------------------------------------------------------------------------- after a run

BASELINE = "ce"
SUMMARY_RESAMPLES = 200  # the item bootstrap behind the pairing (the summary shows the run-level verdict only)
# evaluator -> (its headline metric, what it measures, percent?, lower is better?)
HEADLINES = {
    "checklist": ("failure_rate", "CheckList failure rate", True, True),
    "contrast": ("consistency", "contrast-set consistency (original and contrast right)", True, False),
    "repr": ("cos_gap", "representation: within- minus across-class cosine", False, False),
    "textfooler": ("attack_success_rate", "TextFooler attack success rate", True, True),
}


def delta_column(baseline: str = BASELINE) -> str:
    """The run summary's column of the comparison with `baseline`."""
    return f"Δacc vs {baseline} [95% CI], verdict"


def results_table(rows: list[dict[str, Any]], predictions: dict[str, pd.DataFrame] | None = None,
                  baseline: str = BASELINE) -> pd.DataFrame:
    """`summary_table` plus, where `baseline` ran on the same dataset and encoder and `predictions` (run key ->
    `stats.load_predictions` frame) are given, the comparison with it as `clbench report --table compare` makes
    it (bench.reporting.verdicts): the mean paired difference in points over runs, its interval over runs and
    test items (from 2 runs) and the verdict word, BH over the summary's comparisons."""
    from bench.reporting.stats import bh_adjust
    from bench.reporting.tables import clean_accuracy

    table = summary_table(rows)
    if table.empty or not predictions:
        return table
    everything = nearchance.fill(pd.DataFrame(rows))
    kept = split_runs(clean_accuracy(everything)).kept  # no paired difference with a collapsed run
    kept = with_regimes(kept)  # `dataset` names the regime, as in `table` (sst2[n=100])
    runs = {k: keys[0] for k, keys in pairs.runs_by_pair(kept).items()}  # paired by draw, as compare pairs them
    levels = [paired_runs(runs, predictions, row["dataset"], row["encoder"], row["method"], baseline)
              if row["method"] != floor.LABEL else None for _, row in table.iterrows()]  # the floor: never compared
    guessing = set(nearchance.keys(everything))

    def side(dataset: str, encoder: str, method: str) -> list[str]:
        return [key for (d, e, m, _), key in runs.items() if (d, e, m) == (dataset, encoder, method)]

    near = [row["method"] != floor.LABEL and nearchance.no_verdict(
        [side(row["dataset"], row["encoder"], m) for m in (row["method"], baseline)], guessing)
        for _, row in table.iterrows()]
    qvalues = iter(bh_adjust([level.pvalue for level in levels if level is not None]))
    column = [delta_text(level, next(qvalues), guess) if level is not None else "—"
              for level, guess in zip(levels, near)]
    table.insert(table.columns.get_loc("wall_s"), delta_column(baseline), column)
    return table


def paired_runs(runs: dict[tuple, str], predictions: dict[str, pd.DataFrame], dataset: str, encoder: str,
                method: str, baseline: str) -> TaskLevel | None:
    """The task-level comparison of `method` with `baseline` (points; bench.reporting.verdicts.task_level); None
    for the baseline itself or when the two share no draw with predictions."""
    from bench.reporting import stats

    def by_draw(name: str) -> dict[tuple, pd.DataFrame]:
        return {k: predictions[key] for (d, e, m, k), key in runs.items()
                if (d, e, m) == (dataset, encoder, name) and key in predictions}

    if method == baseline:
        return None
    ours, theirs = by_draw(baseline), by_draw(method)
    result = stats.compare_predictions(ours, theirs, SUMMARY_RESAMPLES, label=pairs.namer([*ours, *theirs]))
    return task_level(100 * np.asarray(result.deltas), result.items) if result.pairs else None


def delta_text(level: TaskLevel, q: float, near: bool = False) -> str:
    """`+1.23 [-0.40, +2.90] inconclusive` (points; from 2 runs), `+2.00 inconclusive (1 run)`, or with a run not
    clearly above chance on either side (`near`) `near chance` in place of the verdict."""
    interval = "" if np.isnan(level.low) else f" [{level.low:+.2f}, {level.high:+.2f}]"
    runs = f" ({level.n} run{'s' if level.n > 1 else ''})" if level.n < MIN_RUNS else ""
    return f"{level.delta:+.2f}{interval} {nearchance.VERDICT if near else verdict(level, q)}{runs}"


def evaluator_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per evaluator: its headline metric per method (mean over seeds; overall rows of the first
    settings), or why it was skipped; the classical reference only when skipped (else it is the table's floor
    line). Runs flagged collapsed in the clean rows among `rows` are left out of the
    means and said so: "(1 collapsed run(s) left out)", or "collapsed — not a result" for a method with no other."""
    everything = pd.DataFrame(rows)
    if everything.empty or "evaluator" not in everything:
        return []
    frame = everything[everything["evaluator"] != "clean"]
    lines = []
    for evaluator, group in frame.groupby("evaluator", sort=True):
        skipped = group[group["metric"] == "skipped"]
        if len(skipped) == len(group):
            lines.append(f"{evaluator}: skipped: {str(skipped['note'].iloc[0]) if 'note' in skipped else ''}".rstrip())
            continue
        if evaluator == floor.EVALUATOR:  # a line of the table above (its floor), not a score of each method
            continue
        metric, what, percent, lower = HEADLINES.get(evaluator, (None, evaluator, False, False))
        overall = overall_evaluator_rows(group)
        if metric is None or metric not in set(overall["metric"]):
            lines.append(f"{evaluator}: {overall['metric'].nunique()} metrics (`clbench results --filter "
                         f"evaluator={evaluator}`)")
            continue
        chosen = overall[(overall["metric"] == metric) & (overall["eval_hash"] == overall["eval_hash"].iloc[0])]
        split = split_runs(chosen, everything)
        means = split.kept.groupby(KEYS)["value"].mean().to_dict()
        lost = chosen[chosen["run_key"].isin(split.keys)].groupby(KEYS)["run_key"].nunique().to_dict() \
            if split.keys else {}
        cells = sorted(set(means) | set(lost))
        several = len({(d, e) for d, e, _ in cells}) > 1
        parts = []
        for d, e, m in cells:
            name = f"{d}/{e}/{m}" if several else m
            if (d, e, m) not in means:
                parts.append(f"{name} {NOT_A_RESULT}")
                continue
            v = means[d, e, m]
            left_out = f" ({lost[d, e, m]} collapsed run(s) left out)" if (d, e, m) in lost else ""
            parts.append((f"{name} {100 * v:.1f}%" if percent else f"{name} {v:.3f}") + left_out)
        better = "lower" if lower else "higher"
        lines.append(f"{evaluator}: {what} ({better} is better): {', '.join(parts)}")
    return lines
