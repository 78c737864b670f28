"""The leaderboard sections of the HTML report (`bench.reporting.html`): the ranking of methods across datasets
with their cost (`bench.reporting.leaderboard`), the cost of each dataset x method, and the datasets and
methods the page covers (`bench.reporting.datasetinfo`). Each is a table, or `Absent` (the page names why not).
"""

from __future__ import annotations

import math
import numbers
from pathlib import Path

import pandas as pd

from bench.errors import BenchError
from bench.reporting import leaderboard
from bench.reporting.datasetinfo import dataset_details, method_href
from bench.reporting.htmlparts import Absent, few_seeds_badge, frame_table, link, note, notes_list
from bench.reporting.htmltemplate import render, safe
from bench.reporting.plotdata import FEW_SEEDS, FEW_SEEDS_WHY
from bench.reporting.tables import clean_accuracy, method_key

MISSING = "—"
LOAD_FACTOR, IDLE_LOAD = 2.0, 1.0  # other work apart by more than 2x, counting under one busy core as one


def number(value: object, digits: int = 1) -> str:
    """A number with thousands separators and `digits` decimals, or "—" when missing."""
    if not isinstance(value, numbers.Real) or math.isnan(value):
        return MISSING
    return f"{value:,.{digits}f}"


def method_html(method: str, page_dir: Path | None) -> str:
    """The method's name, linked (relative link) to its section of docs/METHODS.md when there is one."""
    return link(method_href(method, page_dir), method)


def rank_test_html(frame: pd.DataFrame, include: bool = False) -> tuple[str, str]:
    """The ranking's headline (`bench.reporting.ranking`: Friedman p, Nemenyi CD, the CD diagram) and the label
    of the mean ranks below ('' when tested, else e.g. "no test: fewer than 3 datasets/regimes")."""
    from bench.reporting.ranking import rank_blocks, ranking_html

    try:
        result = rank_blocks(frame, include)
        return ranking_html(result), result.label
    except (BenchError, ValueError) as exc:  # autorank missing or refusing: the mean ranks stand alone
        return note(f"No ranking with uncertainty: {exc}"), "no test"


def ranking_section(frame: pd.DataFrame, source: Path, page_dir: Path | None, include: bool = False
                    ) -> str | Absent:
    """Methods ranked across datasets: the Friedman/Nemenyi headline with its CD diagram (`rank_test_html`), then
    mean rank, win rate, coverage, fewest seeds, cost per run and the mean accuracy on each dataset; absent when
    there are fewer than two datasets (blocks) to rank across or no dataset has two methods."""
    table = leaderboard.ranking(frame, include)
    if table.empty:
        return Absent("it needs at least two methods (or encoders) with runs on one dataset")
    datasets, notes = table.attrs["datasets"], table.attrs["notes"]
    if len(datasets) < 2:
        return Absent(f"it ranks across datasets and needs runs on at least two (or two data regimes); the selection "
                      f"has one, {datasets[0]}: its methods are compared in the tables above and below")
    headline, untested = rank_test_html(frame, include)
    costs = leaderboard.entry_costs(leaderboard.run_costs(frame, source, include))
    table = table.merge(costs, on=leaderboard.ENTRY, how="left")
    shown = pd.DataFrame({
        "method": [method_html(m, page_dir) for m in table["method"]],
        "encoder": table["encoder"],
        "mean rank": [number(v, 2) for v in table["mean_rank"]],
        "win rate (%)": [number(v, 1) for v in table["win_rate"]],
        "datasets": [f"{d} of {n}" for d, n in zip(table["datasets"], table["of"])],
        "fewest seeds": [f"{int(s)}{few_seeds_badge(int(s))}" for s in table["fewest_seeds"]],
        "train s / run": [number(v, 1) for v in table["train_seconds"]],
        "seq/s": [number(v, 1) for v in table["seq_per_s"]],
        "params": [number(v, 0) for v in table["params"]],
        **{f"{d} (%)": [number(v, 2) for v in table[d]] for d in datasets},
    })
    numeric = [c for c in shown.columns if c not in ("method", "encoder")]
    notes = [*notes,
             f"fewest seeds: the fewest seeds of the method's cells; < {FEW_SEEDS} seeds: {FEW_SEEDS_WHY}",
             "train s / run and seq/s: medians over the method's runs; params: the encoder's (see Cost below)",
             "<dataset> (%): mean test accuracy over seeds on that dataset (— = no run)"]
    caption = ("Ranking across datasets: mean rank (1 = best) and win rate over head-to-head meetings, with cost"
               + (f" ({untested})" if untested else "; detail of the test above") + "; click a header to sort")
    return (headline
            + frame_table(shown, "table-ranking", caption, html_columns=("method", "fewest seeds"), right=numeric)
            + notes_list(notes))


def cost_section(frame: pd.DataFrame, source: Path, page_dir: Path | None, include: bool = False) -> str:
    """Per dataset x encoder x method: runs, train and wall seconds per run, sequences/s, encoder parameters."""
    costs = leaderboard.run_costs(frame, source, include)
    if costs.empty:
        return note("No cost table: no clean test-accuracy rows in the selection.")
    table = leaderboard.cost_table(costs)
    shown = pd.DataFrame({
        "dataset": table["dataset"], "encoder": table["encoder"],
        "method": [method_html(m, page_dir) for m in table["method"]],
        "runs": table["runs"].astype(int),
        "train s / run": [number(v, 1) for v in table["train_seconds"]],
        "wall s / run": [number(v, 1) for v in table["wall_seconds"]],
        "seq/s": [number(v, 1) for v in table["seq_per_s"]],
        "params": [number(v, 0) for v in table["params"]],
    })
    numeric = ["train s / run", "wall s / run", "seq/s", "params"]
    return (frame_table(shown, "table-cost", "Cost of each dataset × encoder × method: mean per run",
                        html_columns=("method",), right=numeric)
            + notes_list(leaderboard.cost_notes(costs) + load_note(frame, costs["run_key"])))


def load_note(frame: pd.DataFrame, run_keys: pd.Series) -> list[str]:
    """A note when the methods' runs were timed under other work on the machine apart by more than LOAD_FACTOR
    (per method, the median over its runs of the larger of `load_avg_1m`, before the sweep trained, and
    `load_avg_end` less the run's `cpu_threads`); none where fewer than two methods' rows record the load."""
    runs = clean_accuracy(frame)
    runs = runs[runs["run_key"].isin(set(run_keys))].drop_duplicates("run_key")
    if "load_avg_1m" not in runs:
        return []

    def numbers(column: str) -> pd.Series:
        return pd.to_numeric(runs[column], errors="coerce") if column in runs else pd.Series(math.nan, runs.index)

    ended = (numbers("load_avg_end") - numbers("cpu_threads")).clip(lower=0)
    other = pd.concat([numbers("load_avg_1m"), ended], axis=1).max(axis=1)
    by_method = other.groupby(runs["method"]).median().dropna()
    if len(by_method) < 2 or by_method.max() <= LOAD_FACTOR * max(by_method.min(), IDLE_LOAD):
        return []
    loads = ", ".join(f"{m} {by_method[m]:.1f}" for m in sorted(by_method.index, key=method_key))
    return [f"timed under different machine loads (other work, median load average by method: {loads}): the "
            "speeds are not comparable; time them again on an idle machine (rows: load_avg_1m, load_avg_end)"]


def datasets_section(frame: pd.DataFrame, source: Path, page_dir: Path | None) -> str:
    """The datasets (sizes used, classes, source, card) and the methods on the page, each linked to its
    definition in docs/METHODS.md."""
    details = dataset_details(frame, source)
    body = (frame_table(details, "table-datasets", "Datasets: sizes the runs used (from their spec.json; a range "
                        "when runs differ), classes, where the data came from, and the dataset card",
                        right=["train", "validation", "test", "full (card)"])
            + notes_list(["full (card): train / validation / test sizes of the whole dataset on its card; a "
                          "dataset name with [...] is a data regime (e.g. n=100 training examples)"])
            if not details.empty else note("No dataset details: no clean test-accuracy rows in the selection."))
    methods = sorted({str(m) for m in frame["method"] if str(m)}, key=method_key)
    links = [method_html(m, page_dir) for m in methods]
    where = ("each linked to its definition in docs/METHODS.md" if any("<a " in link for link in links) else
             "defined in docs/METHODS.md of the clbench checkout (no link: the page lies outside it)")
    return body + render("paragraph", f"Methods on this page, {where}: ", "methods", more=safe(", ".join(links) + "."))
