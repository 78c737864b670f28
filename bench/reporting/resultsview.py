"""The results table as a pandas frame: loading, `column=value` filters, and warnings about mixed provenance.

Tables and plots read results through `load_results` (never writing into the results folder), narrow them
with `apply_filters`, and call `mix_warnings` on the rows they use so that runs from different code
versions, settings or data never end up averaged together unnoticed.
"""

from __future__ import annotations

import functools
import logging
import json
import math
from pathlib import Path

import pandas as pd

from bench.results import runfiles, store
from bench.errors import BenchError
from bench.reporting import nearchance, pairs
from bench.spec import REGIME_DEFAULTS, REGIME_FIELDS, RELEASED, regime_label

log = logging.getLogger(__name__)
CELL_KEYS = ["dataset", "encoder", "method"]  # one table cell (over seeds) per method on a dataset x encoder
SHARD_KEYS = [*CELL_KEYS, "seed"]
TEXT_COLUMNS = ("run_key", "method", "dataset", "encoder", "evaluator", "split", "metric", "label", "note",
                "eval_hash", "config_hash", "data_fingerprint", "clbench_version", "git_commit")
SHOWN_EXAMPLES = 3  # cells named in one warning line


def load_results(results_dir: Path | str) -> pd.DataFrame:
    """Every row of every finished run under `results_dir` (the gathered Parquet table when it is current)."""
    results_dir = Path(results_dir)
    finished = sorted(path.parent for path in results_dir.glob(f"*/{store.ROWS}"))
    if not finished:
        raise BenchError(f"no finished runs under {results_dir}; run `clbench run` first")
    left_out = {run.name: str(found[0]) for run in finished
                if (found := [d for d in runfiles.problems(run) if runfiles.damages_results(d)])}
    finished = [run for run in finished if run.name not in left_out]
    unscored_note(results_dir, finished)
    if not finished:
        raise BenchError(f"no undamaged finished runs under {results_dir}; {store.LEFT_OUT_FIX}")
    frame = _current_table(results_dir, finished)
    if frame is None:  # read from the run folders, verified: damage their stat does not show is found here
        frame = pd.DataFrame(store.finished_rows(results_dir, left_out))
        if left_out and "run_key" in frame:
            frame = frame[~frame["run_key"].isin(left_out)].reset_index(drop=True)
    if left_out:  # said once here; every table and the page carry it too (bench.reporting.provenance_notes)
        log.warning(store.left_out_line(left_out, results_dir, "this report"))
    frame = normalise(frame)
    frame.attrs[store.LEFT_OUT] = left_out
    return frame


def unscored_note(results_dir: Path, finished: list[Path]) -> None:
    """Warn, in one line each, about finished runs whose evaluations are not all in: still being evaluated (a live
    runner holds the run), or failed (an `evals/*.error.json` beside no stored result)."""
    from bench.results import lease

    busy = [run.name for run in finished
            if (holder := lease.read(run)) is not None and not lease.stale_reason(holder)]
    failed = sorted({f"{run.name} {path.name.split('-')[0]}" for run in finished
                     for path in (run / store.EVALS).glob("*.error.json")
                     if not path.with_name(path.name.replace(".error.json", ".json")).is_file()})
    if busy:
        log.warning("%d run(s) still being evaluated: their evaluator rows are not in this report yet (e.g. %s; "
                    "`clbench status` shows them as evaluating)", len(busy), busy[0])
    if failed:
        log.warning("%d evaluation(s) failed, so their rows are missing (e.g. %s; the reason is in evals/*.error.json; "
                    "`clbench run` retries them)", len(failed), failed[0])


def _current_table(results_dir: Path, finished: list[Path]) -> pd.DataFrame | None:
    """The gathered table if it is newer than every run's rows and holds exactly the finished runs and their
    stored evaluations."""
    table = results_dir / store.TABLE
    if not table.is_file():
        return None
    evaluations = {(run.name, *path.stem.rsplit("-", 1)) for run in finished
                   for path in (run / store.EVALS).glob("*.json") if not path.name.endswith(".error.json")}
    sources = [run / store.ROWS for run in finished]
    sources += [results_dir / key / store.EVALS / f"{name}-{settings}.json" for key, name, settings in evaluations]
    if max(p.stat().st_mtime for p in sources) > table.stat().st_mtime:
        return None
    try:
        frame = pd.read_parquet(table)
    except (OSError, ValueError):  # a damaged or foreign file: fall back to the run folders
        return None
    if "run_key" in frame:  # runs damaged since the table was gathered are left out
        frame = frame[frame["run_key"].isin({run.name for run in finished})].reset_index(drop=True)
    if "run_key" not in frame or set(frame["run_key"]) != {run.name for run in finished}:
        return None
    stored = frame[frame["evaluator"] != "clean"] if "evaluator" in frame else frame.iloc[:0]
    if "eval_hash" in stored:
        gathered = set(zip(stored["run_key"], stored["evaluator"], stored["eval_hash"]))
    else:
        gathered = set()
    return frame if gathered == evaluations else None


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows with the core columns present, text columns without missing values and numeric values."""
    frame = frame.copy()
    for column in TEXT_COLUMNS:
        if column not in frame:
            frame[column] = ""
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]) and not pd.api.types.is_bool_dtype(frame[column]):
            frame[column] = frame[column].fillna("")
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    frame["seed"] = pd.to_numeric(frame["seed"], errors="coerce").astype("Int64")
    # rows written before methods had versions are version 1
    versions = frame["method_version"] if "method_version" in frame else pd.Series(1, index=frame.index)
    frame["method_version"] = pd.to_numeric(versions, errors="coerce").fillna(1).astype(int)
    frame["method"] = [shown_method(m, v) for m, v in zip(frame["method"], frame.get("variant", [""] * len(frame)))]
    return pairs.draw_free(nearchance.fill(with_regimes(frame))).reset_index(drop=True)


def knobs_text(knobs: object) -> str:
    """A row's `knobs` JSON as `supcon.tau=0.1, lr=2e-05` ('defaults' for none, '' when unknown)."""
    if not isinstance(knobs, str) or not knobs:
        return ""
    try:
        values = json.loads(knobs)
    except ValueError:
        return knobs
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "defaults"


def with_regimes(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with its data-regime columns filled (rows written before regimes existed: the whole, clean
    training set) and `dataset` naming the regime, e.g. `sst2[n=100+noise=0.2]` (bench.spec.regime_label), so
    that every table keeps regimes apart; `base_dataset` keeps the plain name."""
    frame = pairs.filled(frame, REGIME_DEFAULTS)
    base = frame["base_dataset"] if "base_dataset" in frame else \
        frame["dataset"].astype(str).str.replace(r"\[[^\[\]]*\]$", "", regex=True)  # idempotent
    frame["base_dataset"] = base
    if frame.empty:
        return frame
    labels = [regime_label(dict(zip(REGIME_FIELDS, values)))
              for values in zip(*(frame[name].tolist() for name in REGIME_FIELDS))]
    frame["dataset"] = [f"{d}[{label}]" if label else d for d, label in zip(base, labels)]
    return frame


def shown_method(method: str, variant: object) -> str:
    """The method as reports name it: `method:variant` for a variant other than the method's default."""
    variant = "" if variant is None or (isinstance(variant, float) and math.isnan(variant)) else str(variant)
    if variant in ("", default_variant(method)) or method.endswith(f":{variant}"):
        return method
    return f"{method}:{variant}"


@functools.lru_cache(maxsize=None)
def default_variant(method: str) -> str:
    """The default of `method`'s `variant` knob, read from the method catalog (without importing the methods);
    RELEASED for a method that is not registered here."""
    from bench.catalog import registry

    try:
        return str(registry("method").get(method).config_fields().get("variant", RELEASED))
    except (KeyError, BenchError):
        return RELEASED


def parse_filter(text: str) -> tuple[str, list[str]]:
    """`column=value[,value...]` -> (column, values)."""
    column, sep, values = text.partition("=")
    column = column.strip()
    wanted = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not column or not wanted:
        raise BenchError(f"--filter {text!r} must look like column=value[,value...] (e.g. method=ce,clld)")
    return column, wanted


def apply_filters(frame: pd.DataFrame, filters: list[str] | None) -> pd.DataFrame:
    """The rows matching every `column=value[,value...]` filter (values compared as text; method aliases
    resolved); BenchError for an unknown column or a filter that leaves no rows."""
    for text in filters or []:
        column, wanted = parse_filter(text)
        if column not in frame.columns:
            raise BenchError(f"--filter {text!r}: no column {column!r}; columns: {', '.join(map(str, frame.columns))}")
        present = as_text(frame[column])
        if column == "dataset" and "base_dataset" in frame:  # `dataset=sst2` keeps every regime of sst2
            present = present.where(present.isin(wanted), as_text(frame["base_dataset"]))
        if column == "method":
            wanted = [canonical_method(v, set(present)) for v in wanted]
        keep = present.isin(wanted)
        if not keep.any():
            values = sorted(set(present) - {""})
            shown = ", ".join(values[:20]) + (" ..." if len(values) > 20 else "")
            raise BenchError(f"--filter {text!r} matches no rows (after earlier filters); values of {column}: "
                             f"{shown or '(none)'}")
        frame = frame[keep]
    return frame.reset_index(drop=True)


BREAKDOWNS = ("label", "test", "capability")  # a row with one of these set is a breakdown, not a summary


def breakdown_rows(frame: pd.DataFrame) -> pd.Series:
    """True for the rows that break an evaluation down (per class, test or capability) rather than sum it up."""
    mask = pd.Series(False, index=frame.index)
    for column in BREAKDOWNS:
        if column in frame:
            mask |= as_text(frame[column]) != ""
    return mask


def as_text(series: pd.Series) -> pd.Series:
    """Values as the text a filter is compared with (integral floats without `.0`, missing as '')."""
    def text(value: object) -> str:
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            return ""
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    return series.map(text)


def canonical_method(name: str, present: set[str]) -> str:
    """A method name as stored: kept when the results have it, else resolved through the method registry."""
    if name in present:
        return name
    from bench.catalog import registry  # the registered names and aliases, read without importing the methods

    return registry("method").canonical(name)


def mix_warnings(frame: pd.DataFrame) -> list[str]:
    """One line per kind of mixing among these rows: several clbench versions, git commits or method
    versions in one cell, several configs for one shard, several data fingerprints for one dataset, or
    several evaluator settings for one evaluator metric; each line says how to separate them."""
    rows = frame[frame["metric"] != "skipped"] if "metric" in frame else frame
    if rows.empty:
        return []
    cell = [*CELL_KEYS, "evaluator"]
    lines = [_mixed(rows, cell, column, what, "rows of one cell (dataset/encoder/method/evaluator)")
             for column, what in (("clbench_version", "clbench versions"), ("git_commit", "git commits"))]
    lines.append(_mixed(rows, CELL_KEYS, "method_version", "method versions",
                        "runs of one method (the method changed between them: re-run the older ones)"))
    clean = pairs.with_draws(rows[rows["evaluator"] == "clean"])  # another draw (data seed) is another shard
    lines.append(_mixed(clean, [*SHARD_KEYS, *pairs.DRAW_COLUMNS], "config_hash", "configs",
                        "runs of one shard (dataset/encoder/method/seed, one draw), averaged as if they were extra "
                        "seeds (a knob grid? choose one combination per method with --select-by validation)",
                        depth=len(SHARD_KEYS)))
    lines.append(_mixed(rows, ["dataset"], "data_fingerprint", "data fingerprints", "rows of one dataset"))
    evaluated = rows[rows["evaluator"] != "clean"]
    lines += [_mixed(group, [*CELL_KEYS, "evaluator", "split", "metric"], "eval_hash", "evaluator settings",
                     f"{evaluator} rows of one metric (tables keep settings apart, never averaged)", depth=4)
              for evaluator, group in evaluated.groupby("evaluator", sort=True)]
    return [line for line in lines if line]  # collapsed runs: bench.reporting.collapsed.warning_lines


def first_few(names: list[str]) -> str:
    """`a, b, c and 4 more`: the first SHOWN_EXAMPLES names of a warning line."""
    extra = len(names) - SHOWN_EXAMPLES
    return ", ".join(names[:SHOWN_EXAMPLES]) + (f" and {extra} more" if extra > 0 else "")


def _mixed(rows: pd.DataFrame, keys: list[str], column: str, what: str, where: str, depth: int = 0) -> str | None:
    """A warning line when some group of `rows` by `keys` holds several non-empty values of `column`
    (groups are named by their first `depth` keys, all when 0)."""
    if rows.empty or column not in rows or any(k not in rows for k in keys):
        return None
    known = rows[as_text(rows[column]) != ""]
    if known.empty:
        return None
    values = known.assign(_value=as_text(known[column])).groupby(keys, sort=True)["_value"].unique()
    mixed = values[values.map(len) > 1]
    if mixed.empty:
        return None
    keys_of = [key if isinstance(key, tuple) else (key,) for key in mixed.index]
    names = list(dict.fromkeys("/".join(str(k) for k in key[:depth or None]) for key in keys_of))
    shown = first_few(names)
    found = sorted({v for vs in mixed for v in vs})
    listed = [short_value(v) for v in found[:SHOWN_EXAMPLES]] + (
        [f"{len(found) - SHOWN_EXAMPLES} more"] if len(found) > SHOWN_EXAMPLES else [])
    return (f"{len(found)} {what} ({', '.join(listed)}) among {where}: {shown}; "
            f"keep one with --filter {column}={found[0]}")


def short_value(value: str) -> str:
    """A value as a warning lists it: a 40-digit git commit shortened to 10 digits (its suffix kept)."""
    head, plus, rest = value.partition("+")
    if len(head) == 40 and all(c in "0123456789abcdef" for c in head):
        return head[:10] + plus + rest
    return value
