"""Collapsed runs (the model predicts one class whatever the input, flagged `collapsed` = 1 in a run's clean rows
by `bench.running.shard`): the one policy every table and summary follows.

Policy: a collapsed run is not a result. Tables and summaries leave its rows (clean and evaluator rows alike,
matched by run key) out of every mean and say so in a note naming it. A `--filter` on the `collapsed` column is
the user's own choice (`--filter collapsed=0,1` brings collapsed runs back, `collapsed=1` shows only them): then
they are kept, but a cell whose mean includes one is marked † and never chosen as the best.

Light imports only (pandas): `bench.reporting.resultsview` may use it too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from bench.errors import BenchError
from bench.results.store import is_collapsed_flag

COLUMN = "collapsed"
WHAT = "the model predicts one class whatever the input: not a result"
BRING_BACK = "--filter collapsed=0,1"
KEPT_BY = "your --filter collapsed=..."
# The command's words in these lines -> the Python API's (bench.api: compare and table take include_collapsed=True;
# run takes lr= and epochs=; load_results takes filters=), so that a script sees its own keywords in the same sentences.
API_TERMS = {BRING_BACK: "include_collapsed=True", KEPT_BY: "include_collapsed=True", "--lr": "lr=",
             "--epochs": "epochs=", "loosen --filter": "load more rows (load_results' filters=)",
             "use --baseline": "use baseline=", "with --filter config_hash=...":
             "with load_results(filters=['config_hash=...'])"}
MARK = "†"


def flags(series: pd.Series) -> pd.Series:
    """Each value of a `collapsed` column as a bool (bench.results.store.is_collapsed_flag)."""
    return series.map(is_collapsed_flag).astype(bool)


def collapsed_keys(frame: pd.DataFrame) -> list[str]:
    """The run keys (sorted) with `collapsed` = 1 on any of their rows."""
    if frame.empty or COLUMN not in frame or "run_key" not in frame:
        return []
    return sorted({str(k) for k in frame.loc[flags(frame[COLUMN]), "run_key"]})


def flag_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with `collapsed` (0 or 1) on every row of a run, copied from its clean rows (evaluator rows are
    stored without it), so that `--filter collapsed=...` keeps or drops a run's evaluator rows with it."""
    if "run_key" not in frame:
        return frame
    keys = set(collapsed_keys(frame))
    return frame.assign(**{COLUMN: frame["run_key"].isin(keys).astype(int)})


def asked_for(filters: Iterable[str] | None) -> bool:
    """Whether a `--filter` names the `collapsed` column (then which runs to show is the user's choice)."""
    return any(text.partition("=")[0].strip() == COLUMN for text in filters or [])


def listed(keys: list[str]) -> str:
    """`2 collapsed run(s) (...: not a result): a, b`."""
    return f"{len(keys)} collapsed run(s) ({WHAT}): {', '.join(keys)}"


@dataclass(frozen=True)
class Split:
    """Rows split by the policy: `kept` (what means are taken over), the collapsed runs among the rows (`keys`),
    and whether those are among `kept` (`included`, when the user filtered on `collapsed`)."""

    kept: pd.DataFrame
    keys: list[str]
    included: bool

    def cells(self, columns: list[str], rows: pd.DataFrame | None = None) -> set[tuple]:
        """The groups of `rows` (default: `kept`) by `columns` (e.g. dataset, encoder, method) whose mean includes
        a collapsed run: such a cell is marked † and never best. Empty when collapsed runs are left out."""
        rows = self.kept if rows is None else rows
        if not self.included or not self.keys or rows.empty:
            return set()
        flagged = rows[rows["run_key"].isin(self.keys)]
        return {tuple(values) for values in flagged[columns].itertuples(index=False, name=None)}

    def notes(self) -> list[str]:
        """The note line a table or summary carries about the collapsed runs ([] when there are none)."""
        if not self.keys:
            return []
        if self.included:
            return [f"{MARK} = the mean includes {listed(self.keys)}; such a cell is never marked best"]
        return [f"left out of every mean: {listed(self.keys)}; show them with {BRING_BACK}"]

    def need(self, what: str, fix: str) -> None:
        """BenchError when nothing is left to show, saying so when collapsed runs were all there was."""
        if not self.kept.empty:
            return
        if self.keys:
            raise BenchError(f"no {what} in the selection but those of {listed(self.keys)}, left out; show them "
                             f"with {BRING_BACK}, or re-run them with another --lr or more --epochs")
        raise BenchError(f"no {what} in the selection; {fix}")


def split_runs(rows: pd.DataFrame, frame: pd.DataFrame | None = None, include: bool = False) -> Split:
    """Split `rows` by the policy. A run is collapsed when any of its rows in `frame` (default: `rows`) has
    `collapsed` = 1; pass the whole selection as `frame` when `rows` are evaluator rows, which may lack the flag.
    By default the rows of collapsed runs are left out; `include` keeps them (see `Split.cells`)."""
    every = collapsed_keys(rows if frame is None else frame)
    if not every or rows.empty or "run_key" not in rows:
        return Split(rows, [], include)
    mine = rows["run_key"].isin(every)
    keys = sorted({str(k) for k in rows.loc[mine, "run_key"]})
    return Split(rows if include else rows[~mine], keys, include)


def api_terms(text: str) -> str:
    """A note, warning or error of this policy (or the run's collapsed warning) in the Python API's terms."""
    for command, api in API_TERMS.items():
        text = text.replace(command, api)
    return text


def warning_lines(keys: list[str], included: bool) -> list[str]:
    """The warning block `clbench report` prints (each line after `warning: `) before its tables: what happens to
    the collapsed runs, then one line per run ([] when there are none)."""
    if not keys:
        return []
    fate = (f"kept by {KEPT_BY}: marked {MARK}, never best" if included else
            f"left out of every table and mean (show them with {BRING_BACK}; or re-run them with another --lr)")
    return [f"{len(keys)} collapsed run(s) ({WHAT}), {fate}:", *(f"  {key}" for key in keys)]
