"""`clbench results` on a terminal: one line per run and evaluator (a metric family), its main metrics as columns
with short names (fractions -- accuracy, F1, rates -- in %, as every table shows them; the stored rows and
exports keep fractions), fitted to the terminal width; collapsed runs are marked.

Each evaluator gets its own small table (its metrics differ from the others'), headed by a line that spells out
the short names. Only summary rows are shown (no per-class, per-test or per-capability breakdowns: those are
in the long form, `clbench results --long`). Metric columns that do not fit the width are left out, and a line
says which and how to see them. Runs flagged `collapsed` (the model predicts one class for every input) carry
COLLAPSED after their method, and a line names them (bench.reporting.collapsed says what a collapsed run is).
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass

import pandas as pd

from bench.errors import BenchError
from bench.reporting import nearchance
from bench.reporting.collapsed import collapsed_keys, listed
from bench.reporting.plotdata import PERCENT, is_fraction
from bench.reporting.resultsview import as_text, breakdown_rows

SHORT_METRICS = {
    "accuracy": "acc", "macro_f1": "f1", "original_accuracy": "orig_acc", "contrast_accuracy": "cont_acc",
    "consistency": "consist", "pair_consistency": "pair_cons", "clean_accuracy": "clean_acc",
    "accuracy_under_attack": "att_acc", "attack_success_rate": "success", "adversarial_accuracy": "adv_acc",
    "words_changed_pct": "changed%", "queries_per_example": "queries", "examples_per_second": "ex/s",
    "skipped_examples": "skip_ex", "excluded_train_overlap": "excluded", "failure_rate": "fail_rate",
    "not_scorable": "unscored", "alignment_dropout": "align", "uniformity": "uniform", "alignment_class": "cls_align",
    "cos_within": "cos_in", "cos_across": "cos_out"}
SHORT_SPLITS = {"validation": "val"}
RUN_COLUMNS = ("method", "dataset", "encoder", "seed", "key")  # what tells the runs apart
SHARED = ("dataset", "encoder")  # named once above the tables when every run has the same
COLLAPSED = "!"  # after the method of a collapsed run
GAP = "  "
LONGEST_CELL = 24  # longer names (a Hugging Face id) are cut in the middle
KEY_DIGITS = 6  # of the config hash that ends a run key
MIN_NOTE = 12  # the note is left out when less room is left


@dataclass
class Column:
    """A column of one evaluator's table: header, cells, right-aligned or not, and the metric it shows (with
    its full name, split included when not the table's main one)."""
    name: str
    cells: list[str]
    right: bool = False
    metric: str = ""
    full: str = ""

    @property
    def width(self) -> int:
        """Characters the column takes: its longest cell or its header."""
        return max([len(self.name), *map(len, self.cells)])


def compact_table(frame: pd.DataFrame, width: int, wanted: list[str] | None = None) -> str:
    """The results as compact tables at most `width` characters wide, one line per run x evaluator x
    evaluator settings; `wanted` names the metric columns to show (short or full names; default: all that
    fit)."""
    frame = frame.reset_index(drop=True)
    collapsed = set(collapsed_keys(frame))
    near = nearchance.keys(frame)
    marks = {key: (COLLAPSED if key in collapsed else "") + (nearchance.MARK if key in near else "")
             for key in collapsed | set(near)}
    keys = short_keys(list(frame["run_key"].unique()))
    evaluators = sorted(set(frame["evaluator"]), key=lambda name: (name != "clean", name))
    shared = {name: str(frame[name].iloc[0]) for name in SHARED if frame[name].nunique() == 1}
    sections = [section(frame[frame["evaluator"] == name], name, keys, marks, set(shared))
                for name in evaluators]
    if wanted:
        known = {name for _, columns in sections for c in columns if c.metric for name in (c.name, c.metric)}
        unknown = [name for name in wanted if name not in known]
        if unknown:
            short = sorted({c.name for _, columns in sections for c in columns if c.metric})
            raise BenchError(f"--columns {','.join(unknown)}: no such metric column here; columns: "
                             f"{', '.join(short)} (or their full metric names)")
    lines: list[str] = wrap(f"every run: {', '.join(f'{k} {v}' for k, v in shared.items())}", width) if shared else []
    left_out: dict[str, list[str]] = {}
    for (title, columns), name in zip(sections, evaluators):
        shown, dropped = fit(columns, width, wanted)
        if dropped:
            left_out[name] = [c.name for c in dropped]
        if wanted and not any(c.metric for c in shown):
            continue  # none of the chosen columns
        if lines:
            lines.append("")
        lines += [*wrap(title_line(title, shown), width), *render(shown)]
    if left_out:
        named = "; ".join(f"{name}: {', '.join(columns)}" for name, columns in left_out.items())
        lines += wrap(f"left out to fit {width} columns: {named} (pick columns with --columns NAME,... or see "
                      "every row with --long)", width)
    if collapsed:
        lines += wrap(f"{COLLAPSED} = {collapsed_note(frame)}", width)
    if near:
        lines += wrap(f"{nearchance.MARK} = {len(near)} run(s) near chance ({nearchance.WHAT}): {', '.join(near)}; "
                      "never ranked or given a verdict", width)
    lines += wrap(f"{frame['run_key'].nunique()} run(s); key: start of the run key's config hash; per-class and "
                  "per-test rows: --long", width)
    return "\n".join(lines)


def collapsed_note(frame: pd.DataFrame) -> str:
    """A line naming the runs flagged `collapsed` with the filter that leaves them out ('' when none)."""
    keys = collapsed_keys(frame)
    return f"{listed(keys)}; leave them out with --filter collapsed=0" if keys else ""


def short_keys(run_keys: list[str]) -> dict[str, str]:
    """Run key -> the start of its last part (the config hash), KEY_DIGITS long or longer where two runs of the
    same method, dataset, encoder and seed would otherwise look alike."""
    digits = KEY_DIGITS
    while True:
        short = {key: key.rsplit("_", 1)[-1][:digits] for key in run_keys}
        heads = {key: key.rsplit("_", 1)[0] for key in run_keys}
        if len({(heads[k], v) for k, v in short.items()}) == len(run_keys) or digits > 64:
            return short
        digits += 2


def section(rows: pd.DataFrame, evaluator: str, keys: dict[str, str], marks: dict[str, str],
            shared: set[str]) -> tuple[tuple[str, str], list[Column]]:
    """One evaluator's table: (evaluator, main split) and its columns, one cell per run x settings (no column
    for the `shared` ones: the same for every run); `marks`: what follows the method of a flagged run (! for
    collapsed, ° for near chance)."""
    skipped = rows["metric"] == "skipped"
    summary = rows[~breakdown_rows(rows) & ~skipped]
    main = summary["split"].iloc[0] if len(summary) else ""
    metrics = list(dict.fromkeys(zip(summary["split"], summary["metric"])))
    groups = sorted(rows.groupby(["run_key", "eval_hash"], sort=False),
                    key=lambda item: sort_key(item[1].iloc[0], item[0]))
    settings = {eval_hash for (_, eval_hash), _ in groups}
    names = [name for name in RUN_COLUMNS if name not in shared] + (["settings"] if len(settings) > 1 else [])
    columns = [Column(name, [], right=name == "seed") for name in names]
    values = [Column(metric_name(split, metric, main), [], right=True, metric=metric,
                     full=(metric if split == main else f"{split} {metric}") + (" (%)" if is_fraction(metric) else ""))
              for split, metric in metrics]
    note = Column("note", [])
    for (run_key, eval_hash), group in groups:
        first = group.iloc[0]
        cells = {"method": middle_cut(str(first["method"])) + marks.get(run_key, ""),
                 "dataset": middle_cut(str(first["dataset"])), "encoder": middle_cut(str(first["encoder"])),
                 "seed": as_text(group["seed"]).iloc[0], "key": keys[run_key], "settings": eval_hash}
        for column in columns:
            column.cells.append(cells[column.name])
        found = group[group.index.isin(summary.index)]
        for column, (split, metric) in zip(values, metrics):
            hit = found[(found["split"] == split) & (found["metric"] == metric)]
            column.cells.append("" if not len(hit) else percent(hit["value"].iloc[0]) if is_fraction(metric)
                                else number(hit["value"].iloc[0]))
        reasons = list(group.loc[skipped.loc[group.index], "note"])
        if reasons and found.empty and values:  # a skipped evaluation says so where its first number would be
            values[0].cells[-1] = "skipped"
        notes = [text if values else f"skipped: {text}" for text in reasons]
        notes += [text for text in found["note"] if text]
        note.cells.append("; ".join(dict.fromkeys(text for text in notes if text)))
    if any(note.cells):
        values.append(note)
    return (evaluator, main), columns + values


def sort_key(first: pd.Series, group_key: tuple[str, str]) -> tuple:
    """Rows in the long form's order: dataset, encoder, method, seed (then run key and settings)."""
    seed = first["seed"]
    return (str(first["dataset"]), str(first["encoder"]), str(first["method"]),
            -1 if pd.isna(seed) else int(seed), *group_key)


def metric_name(split: str, metric: str, main: str) -> str:
    """A metric's column name: its short name, prefixed by its split when that is not the table's main one."""
    name = SHORT_METRICS.get(metric, metric)
    return name if split == main else f"{SHORT_SPLITS.get(split, split)}_{name}"


def number(value: float) -> str:
    """A metric value in at most a few characters: 3 decimals below 10, whole numbers as such, '-' for none."""
    if value is None or pd.isna(value):
        return "-"
    value = float(value)
    if math.isinf(value):
        return str(value)
    if value.is_integer() and abs(value) >= 2:
        return f"{value:.0f}"
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}" if abs(value) < 1000 else f"{value:.0f}"


def percent(value: float) -> str:
    """A fraction (accuracy, F1, a rate) as the tables show it: in %, 2 decimals; '-' for none."""
    return "-" if value is None or pd.isna(value) else f"{PERCENT * float(value):.2f}"


def middle_cut(text: str, most: int = LONGEST_CELL) -> str:
    """`text`, or its start and end around '…' when longer than `most` characters."""
    if len(text) <= most:
        return text
    head = (most - 1) // 2
    return text[:head] + "…" + text[-(most - 1 - head):]


def fit(columns: list[Column], width: int, wanted: list[str] | None) -> tuple[list[Column], list[Column]]:
    """(shown, left out): the run columns always, then metric columns in order while the line stays within
    `width` (only the `wanted` ones when given), then the note cut to the room left (left out below
    MIN_NOTE characters)."""
    shown = [c for c in columns if not c.metric and c.name != "note"]
    used = sum(c.width for c in shown) + len(GAP) * (len(shown) - 1)
    dropped = []
    for column in (c for c in columns if c.metric):
        if wanted and column.name not in wanted and column.metric not in wanted:
            continue
        if used + len(GAP) + column.width <= width:
            shown.append(column)
            used += len(GAP) + column.width
        else:
            dropped.append(column)
    note = next((c for c in columns if c.name == "note"), None)
    room = width - used - len(GAP)
    if note is not None and room >= min(note.width, MIN_NOTE):
        shown.append(Column("note", [cell if len(cell) <= room else cell[:room - 1] + "…" for cell in note.cells]))
    elif note is not None:
        dropped.append(note)
    return shown, dropped


def title_line(title: tuple[str, str], shown: list[Column]) -> str:
    """`clean, split test: acc = accuracy, ...`: the evaluator, its main split, the short names spelled out."""
    evaluator, split = title
    names = [f"{c.name} = {c.full}" for c in shown if c.metric and c.name != c.full]
    if any(c.name == "settings" for c in shown):  # several settings of this evaluator among the runs
        names.append("settings = eval_hash")
    named = f", split {split}" if split and split != evaluator else ""
    return evaluator + named + (f": {', '.join(names)}" if names else "")


def render(columns: list[Column]) -> list[str]:
    """The header and one line per cell row, columns padded to their widths and joined by GAP."""
    widths = [c.width for c in columns]

    def line(cells: list[str]) -> str:
        return GAP.join(cell.rjust(w) if c.right else cell.ljust(w)
                        for c, cell, w in zip(columns, cells, widths)).rstrip()

    return [line([c.name for c in columns])] + [line(list(cells)) for cells in zip(*(c.cells for c in columns))]


def wrap(text: str, width: int) -> list[str]:
    """`text` as lines of at most `width` characters (continuations indented)."""
    return textwrap.wrap(text, width=max(width, 20), subsequent_indent="  ", break_on_hyphens=False)
