"""The Python API (`import clbench`): run shards, read the results and build the report tables from a script or a
notebook, each a pandas DataFrame. It sits on top of the command line: `run` turns its arguments into those of
`clbench run` and hands them to the same parser, checks and runner, so a mistake raises the BenchError whose
one-line message the command prints; `load_results`, `compare` and `table` call the steps of `clbench report`.
See docs/API.md.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.errors import BenchError

if TYPE_CHECKING:
    import argparse

    import pandas as pd

__all__ = ["BenchError", "compare", "list_datasets", "list_encoders", "list_evaluators", "list_methods",
           "load_results", "run", "table"]

Names = str | Sequence[str]  # "ce,clld" or ["ce", "clld"]
Seeds = int | str | Sequence[int]  # 1, "1-3", [1, 2, 3]
PathLike = str | os.PathLike[str]
RESULTS_DIR = "results_dir"  # the key in DataFrame.attrs that names the folder rows were read from


# ----------------------------------------------------------------------------------------------- running

def run(methods: Names | None = None, datasets: Names | None = None, encoder: Names | None = None,
        seeds: Seeds | None = None, results_dir: PathLike | None = None, data_dir: PathLike | None = None,
        evaluators: Names | None = None, progress: bool = False, **settings: Any) -> pd.DataFrame:
    """Train and evaluate every method x dataset x encoder x seed shard here, as `clbench run` does (finished
    shards are skipped: their stored rows come back), and return the tidy result rows of those runs.

    Left out (None), an argument takes the command's default (ce,supcon,clld on the demo set with minilm, seed
    1, $BENCH_RESULTS_DIR or ./results, every evaluator). `settings` are the other options of `clbench run` and
    keys of a --config file: training settings (`epochs=1`, `lr=1e-3`, `train_size=[20, 100]`), method knobs
    (`clld={"tau": 5}` or `**{"clld.tau": 5}`), run options (`jobs=2`, `device="cpu"`, `overwrite=True`,
    `config="sweep.yaml"`, `grid={"lr": [1e-4, 3e-4]}`) and evaluator options (`attack_n=50`). Bad input raises
    BenchError with the command's message. A failed shard raises BenchError after the sweep (the others are
    stored; a rerun skips them); a failed evaluation, a shard another runner holds and collapsed runs are
    warnings."""
    import pandas as pd

    from bench.cli.common import quiet_transformers
    from bench.cli.run import outcome_rows
    from bench.cli.run_options import run_options
    from bench.cli.run_summary import collapsed_warning
    from bench.reporting.collapsed import api_terms, flag_runs
    from bench.reporting.resultsview import normalise
    from bench.running.keeping import apply_keep_policy
    from bench.running.runner import execute_sweep, plan_sweep

    given = {"methods": methods, "datasets": datasets, "encoders": encoder, "seeds": seeds,
             "results_dir": results_dir, "data_dir": data_dir, "evaluators": evaluators}
    args = run_arguments({**{k: v for k, v in given.items() if v is not None}, **settings}, progress)
    opts = run_options(args)
    if opts.executor == "slurm":
        raise BenchError("clbench.run runs the shards here; submit them with `clbench run --executor slurm`, then "
                         "read them with clbench.load_results")
    quiet_transformers()
    outcomes = execute_sweep(plan_sweep(opts), opts)
    kept = apply_keep_policy(opts.results_dir, outcomes, opts.keep_models)
    if kept:  # --keep-models best dropped the other runs' models
        warnings.warn(kept.removeprefix("clbench: "), stacklevel=2)
    rows, evaluation_rows = outcome_rows(outcomes)
    for outcome in outcomes:
        for evaluation in outcome.evaluations:
            if evaluation.status == "failed":
                warnings.warn(f"{outcome.key} {evaluation.evaluator}: evaluation failed: {evaluation.message}",
                              stacklevel=2)
        if outcome.status == "held":
            warnings.warn(f"{outcome.key}: {outcome.message}", stacklevel=2)
    collapsed = collapsed_warning(rows)  # trained now or before: said every time, as the command says it
    if collapsed:
        warnings.warn(api_terms(collapsed.removeprefix("warning: ")), stacklevel=2)
    failed = [o for o in outcomes if o.status == "failed"]
    if failed:
        raise BenchError(f"{len(failed)} of {len(outcomes)} shard(s) failed: "
                         + "; ".join(f"{o.key}: {o.message}" for o in failed)
                         + f" (the others are stored under {opts.results_dir}; a rerun skips them)")
    frame = flag_runs(normalise(pd.DataFrame(rows + evaluation_rows))) if rows else pd.DataFrame()
    frame.attrs[RESULTS_DIR] = str(opts.results_dir)
    return frame


def run_arguments(values: Mapping[str, Any], progress: bool = False) -> argparse.Namespace:
    """The parsed arguments of `clbench run` for keyword `values`: each value written as the flag of the same name
    would be typed, any other key as `--set KEY=VALUE` (a method's mapping as one --set per knob), then parsed by
    the command's own parser (a mistake there is a UsageError, a BenchError)."""
    from bench.cli.main import build_parser

    parser = build_parser()
    actions = {a.dest: a for a in subparser(parser, "run")._actions if a.option_strings and a.dest != "help"}
    argv = ["run"] if progress else ["run", "--no-progress"]
    for key, value in values.items():
        action = actions.get(key)
        if value is None:
            continue
        if key == "no_progress":
            raise BenchError("no_progress: clbench.run shows no progress bars unless progress=True")
        if action is None:
            argv += [part for knob, knob_value in knob_settings(key, value)
                     for part in ("--set", f"{knob}={set_text(knob_value)}")]
        else:
            argv += flag_arguments(action, key, value)
    return parser.parse_args(argv)


def subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of subcommand `name`."""
    import argparse

    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def flag_arguments(action: argparse.Action, key: str, value: Any) -> list[str]:
    """`value` as the command line would give the option of `action`: a switch present or not, a list joined by
    commas, a repeatable option once per item (a mapping such as grid={"lr": [1, 2]} once per key)."""
    flag = action.option_strings[0]
    if action.nargs == 0:  # a switch: store_true / store_false
        if value is action.const:
            return [flag]
        if isinstance(value, bool):
            return []
        raise BenchError(f"{key} must be True or False, got {value!r}")
    if action.__class__.__name__ == "_AppendAction":
        if isinstance(value, Mapping):
            return [part for k, v in value.items() for part in (flag, f"{k}={flag_text(v)}")]
        items = [value] if isinstance(value, str) else list(value)
        return [part for item in items for part in (flag, flag_text(item))]
    return [flag, flag_text(value)]


def flag_text(value: Any) -> str:
    """A value as typed after a flag: a list joined by commas, a bool as true/false, a float as Python writes it."""
    if isinstance(value, (list, tuple)):
        return ",".join(flag_text(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def knob_settings(key: str, value: Any) -> list[tuple[str, Any]]:
    """The `--set` assignments of one keyword: a method's mapping (`clld={"tau": 5}`) gives one per knob."""
    if isinstance(value, Mapping):
        return [(f"{key}.{knob}", v) for knob, v in value.items()]
    return [(key, value)]


def set_text(value: Any) -> str:
    """A value as typed after `--set KEY=`: text as it is, anything else as YAML (JSON is YAML) reads it back."""
    import json

    if isinstance(value, str):
        return value
    try:
        return json.dumps(list(value) if isinstance(value, tuple) else value)
    except TypeError:
        return str(value)


# ----------------------------------------------------------------------------------------------- results

def load_results(path: PathLike | None = None, filters: Sequence[str] = ()) -> pd.DataFrame:
    """Every row of the finished runs in a results folder (None: $BENCH_RESULTS_DIR or ./results), as
    `clbench report` reads them: one row per run x evaluator x split x metric (x label), `collapsed` (0/1) on
    each row of a run; `filters` as --filter takes them (`"method=ce,clld"`)."""
    from bench.cli.report import report_rows
    from bench.results.store import results_dir

    source = results_dir(None if path is None else os.fspath(path))
    frame = report_rows(source, list(filters))
    frame.attrs[RESULTS_DIR] = str(source)
    return frame


def compare(results: pd.DataFrame, baseline: str = "ce", results_dir: PathLike | None = None,
            bootstrap: int | None = None, include_collapsed: bool = False) -> pd.DataFrame:
    """The paired comparison of `clbench report --table compare`: every other method against `baseline` per
    dataset x encoder, paired by draw (data seed, seed and regime: the same training sample), one row each with
    the `verdict` (better / worse / equivalent / inconclusive), `delta` (mean test-accuracy difference over paired
    runs, points) and `delta_std`, its 95% interval over runs and test items (`ci_low`, `ci_high`) and test `p`,
    Benjamini-Hochberg `q`, `significant` (verdict better or worse), ASO's `aso_epsilon`, `runs` (`seeds`: the
    same number), `draw_sets`, `unpaired` (runs left out), `runs_needed` with its range (`runs_needed_low`,
    `runs_needed_high`; for an inconclusive verdict), then the secondary intervals: over runs alone with the test
    items fixed (`runs_only_ci_low`, `runs_only_ci_high`) and over items with these trained models fixed
    (`items_ci_low`, `items_ci_high`, `items_p`), per-run McNemar p (`mcnemar`); `collapsed`, `near_chance`
    (a paired run not clearly above chance: the verdict is "near chance"); and `note`.

    `results`: rows of `run` or `load_results` (filtered as you like); the test predictions are read from
    `results_dir` (default: the folder those rows came from). Collapsed runs are left out unless
    `include_collapsed`. `attrs` carries the table's title and notes; mixed provenance is a warning."""
    import pandas as pd

    cells = report_cells("compare", results, baseline, results_dir, bootstrap, include_collapsed)
    title = cells.attrs.get("title", "")
    records = []
    for _, group in cells.groupby("row", sort=False):
        cell = {column: row for column, row in zip(group["column"], group.to_dict("records"))}
        dataset, encoder, method = (group.iloc[0][k] for k in ("dataset", "encoder", "method"))
        delta, items = cell["Δ acc"], cell["items CI ‡"]
        word = cell["verdict"]["text"]
        records.append({
            "dataset": dataset, "encoder": encoder, "method": method, "baseline": cells.attrs["baseline"],
            "verdict": word, "delta": delta["mean"], "delta_std": delta["std"],
            "ci_low": cell["95% CI"].get("low", math.nan), "ci_high": cell["95% CI"].get("high", math.nan),
            "p": cell["p"]["mean"], "q": cell["q (BH)"]["mean"], "significant": word in ("better", "worse"),
            "aso_epsilon": cell["ASO ε"]["mean"], "runs": int(cell["runs"]["n"]), "seeds": int(cell["runs"]["n"]),
            "draw_sets": int(cell["runs"].get("sets", 1)), "unpaired": int(cell["runs"].get("unpaired", 0)),
            "runs_needed": cell["runs needed"]["mean"], "runs_needed_low": cell["runs needed"].get("low", math.nan),
            "runs_needed_high": cell["runs needed"].get("high", math.nan),
            "runs_only_ci_low": cell["runs-only CI ‡"].get("low", math.nan),
            "runs_only_ci_high": cell["runs-only CI ‡"].get("high", math.nan),
            "items_ci_low": items.get("low", math.nan), "items_ci_high": items.get("high", math.nan),
            "items_p": items.get("p", math.nan),
            "mcnemar": cell["McNemar p ‡"]["text"], "collapsed": str(delta["text"]).endswith("†"),
            "near_chance": bool(cell["verdict"].get("near_chance") is True),
            "note": delta["note"]})
    frame = pd.DataFrame(records)
    frame.attrs.update(title=title, notes=list(cells.attrs.get("notes", [])))
    return frame


def table(results: pd.DataFrame, kind: str = "paper-ii", baseline: str = "ce", results_dir: PathLike | None = None,
          bootstrap: int | None = None, include_collapsed: bool = False) -> pd.DataFrame:
    """A table of `clbench report --table KIND` (paper-ii, accuracy, ablation, robustness, compare, vs-paper,
    ranking) as the command prints it: one row per table row, one column per table column, each cell's text;
    `attrs` carries the title and notes. `baseline` matters to compare; `results_dir` and `bootstrap` to compare
    and accuracy, which read test predictions (see `compare`)."""
    import pandas as pd

    from bench.reporting.render import cell_text, grid

    cells = report_cells(kind, results, baseline, results_dir, bootstrap, include_collapsed)
    columns, rows = grid(cells)
    frame = pd.DataFrame([[cell_text(c) for c in found] for _, found in rows], columns=columns,
                         index=pd.Index([label for label, _ in rows], name=cells.attrs.get("row_header", "row")))
    frame.attrs.update(title=cells.attrs.get("title", ""), notes=list(cells.attrs.get("notes", [])))
    return frame


def report_cells(kind: str, results: pd.DataFrame, baseline: str, results_dir: PathLike | None,
                 bootstrap: int | None, include_collapsed: bool) -> pd.DataFrame:
    """The cell frame of table `kind` over `results` by `clbench report`'s steps, its warnings as warnings; what
    they and its notes and errors say of collapsed runs in the API's terms (`include_collapsed=True`)."""
    from bench.cli.report import bootstrap_resamples, report_warnings, table_cells
    from bench.reporting.collapsed import api_terms, flag_runs

    resamples = bootstrap_resamples(bootstrap)
    source = results_dir if results_dir is not None else results.attrs.get(RESULTS_DIR)
    if kind in ("compare", "accuracy") and source is None:
        raise BenchError(f"{kind} reads the runs' test predictions: pass results_dir= (the folder the rows came "
                         "from)")
    frame = flag_runs(results)
    for line in report_warnings([kind], frame, include_collapsed):
        warnings.warn(api_terms(line), stacklevel=3)
    try:
        cells = table_cells(kind, frame, Path(source if source is not None else "."), baseline, resamples,
                            include_collapsed)
    except BenchError as exc:
        raise BenchError(api_terms(str(exc))) from None
    cells.attrs["notes"] = [api_terms(note) for note in cells.attrs.get("notes", [])]
    return cells


# ----------------------------------------------------------------------------------------------- names

def list_methods() -> list[str]:
    """The registered methods, as `clbench list methods` names them (without loading torch)."""
    from bench.catalog import registry

    return [name for name, _ in registry("method").items()]


def list_datasets() -> list[str]:
    """The dataset cards, as `clbench list datasets` names them (a folder of train/test files works as well)."""
    from bench.data import cards  # noqa: F401  (registers the cards)
    from bench.registry import DATASETS

    return [name for name, _ in DATASETS.items()]


def list_encoders() -> list[str]:
    """The encoders' short names (any other name is read as a Hugging Face model id or a local model folder)."""
    from bench.catalog import registry

    return [name for name, _ in registry("encoder").items()]


def list_evaluators() -> list[str]:
    """The registered evaluators, as `clbench list evaluators` names them."""
    from bench.catalog import registry

    return [name for name, _ in registry("evaluator").items()]
