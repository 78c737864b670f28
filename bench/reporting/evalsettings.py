"""Evaluator settings in report tables: which result columns are settings, the settings of one evaluation, and
the column labels and footnotes that tell two settings of one evaluator apart.

An evaluation's settings are what its `eval_hash` is the hash of: the evaluator's settings dict, which every
row of the evaluation carries as `eval_settings` (canonical JSON; `bench.running.evaluation`). Rows stored
before rows carried it have only their setting columns (every column not in NOT_SETTINGS, e.g. TextFooler's
attack parameters, and `eval_version`), which may not tell two settings apart.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from bench.reporting.resultsview import as_text
from bench.spec import REGIME_FIELDS

# columns that identify a run, its provenance or a metric; every other evaluator column is a setting
NOT_SETTINGS = {"run_key", "method", "dataset", "encoder", "seed", "evaluator", "split", "metric", "label",
                "value", "n", "note", "test", "capability", "type", "config_hash", "method_version",
                "data_fingerprint",
                "best_epoch", "epochs_run", "wall_seconds", "train_seconds", "clbench_version", "git_commit",
                "torch_version", "transformers_version", "python_version", "device", "host", "slurm_job", "finished_at",
                "eval_hash", "eval_settings", "eval_seconds", "cpu_threads", "load_avg_1m", "load_avg_end", "collapsed",
                "threads_adapted", "near_chance", "chance", "data_seed", "val_fraction",
                "compiled", "cuda_graphs",
                "length_bucket",
                "deterministic",
                "build_seconds", "prepare_seconds", "tokenize_seconds", "test_seconds",
                "variant", "combo", "knobs", "base_dataset", "train_examples", "flipped", "data_draw", *REGIME_FIELDS,
                "test_in_train", "validation_in_train", "validation_in_test", "duplicate_rows",
                "conflicting_labels"}  # bench.data.checks
SETTINGS_COLUMN = "eval_settings"
VERSION = "eval_version"  # the name a stored settings dict's `version` is shown under (as in the rows)


def setting_columns(rows: pd.DataFrame) -> list[str]:
    """The evaluator-setting columns among `rows`' columns."""
    return [c for c in rows.columns if c not in NOT_SETTINGS]


def setting_text(value: Any) -> str:
    """A setting's value as shown: text as it is, None as "", anything else as JSON (`0.1`, `true`, `[1, 2]`)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def stored_settings(rows: pd.DataFrame, eval_hash: str) -> dict[str, str] | None:
    """The settings stored with the rows of `eval_hash` (their `eval_settings`, without the evaluator's name and
    with its version as `eval_version`), non-empty ones only; None where the rows carry none."""
    part = rows[rows["eval_hash"] == eval_hash]
    stored = [v for v in as_text(part[SETTINGS_COLUMN]) if v] if SETTINGS_COLUMN in part else []
    if not stored:
        return None
    settings = json.loads(stored[0])
    shown = {(VERSION if k == "version" else k): setting_text(v) for k, v in settings.items() if k != "evaluator"}
    return {k: v for k, v in shown.items() if v}


def settings_of(rows: pd.DataFrame, eval_hash: str) -> dict[str, str]:
    """The non-empty settings of the rows with `eval_hash`: those stored with them, else the first value of each
    setting column."""
    stored = stored_settings(rows, eval_hash)
    if stored is not None:
        return stored
    part = rows[rows["eval_hash"] == eval_hash]
    out = {}
    for column in setting_columns(part):
        values = [v for v in as_text(part[column]) if v]
        if values:
            out[column] = values[0]
    return out


def differing(settings: dict[str, dict[str, str]]) -> list[str]:
    """The setting names whose values differ among `settings` (eval_hash -> settings), in first-seen order."""
    names = list(dict.fromkeys(k for s in settings.values() for k in s))
    return [k for k in names if len({s.get(k, "") for s in settings.values()}) > 1]


def joined(settings: dict[str, str], names: list[str]) -> str:
    """`key=value, ...` for `names` (an empty value shown as '')."""
    return ", ".join(f"{k}={settings.get(k) or repr('')}" for k in names)


def settings_labels(rows: pd.DataFrame, hashes: list[str]) -> dict[str, str]:
    """A short label per evaluator setting: the settings that differ among `hashes` (else the hash)."""
    settings = {h: settings_of(rows, h) for h in hashes}
    differ = sorted(differing(settings))
    return {h: joined(settings[h], differ) or f"eval_hash={h}" for h in hashes}


def settings_notes(rows: pd.DataFrame, used: set[tuple[str, str]]) -> list[str]:
    """The footnotes of the evaluator settings `used` in a table ((evaluator, eval_hash) pairs): one per setting,
    `evaluator hash: key=value, ...`. Where the table holds several settings of one evaluator, each one's note
    names the keys whose values differ between them (with its values), and one more note the settings they
    share; a setting whose rows do not tell it from another (stored before rows carried their settings) says
    where its settings are."""
    notes = []
    for evaluator in sorted({e for e, _ in used}):
        hashes = sorted(h for e, h in used if e == evaluator)
        own = rows[rows["evaluator"] == evaluator]
        settings = {h: settings_of(own, h) for h in hashes}
        if len(hashes) == 1:
            only = settings[hashes[0]]
            notes.append(f"{evaluator} {hashes[0]}: {joined(only, list(only)) or 'default settings'}")
            continue
        differ = differing(settings)
        values = {h: tuple(settings[h].get(k, "") for k in differ) for h in hashes}
        for h in hashes:
            alone = list(values.values()).count(values[h]) == 1  # no other setting shows the same values
            notes.append(f"{evaluator} {h}: " + (joined(settings[h], differ) if alone else
                                                 f"its rows do not tell its settings from the other {evaluator} "
                                                 f"settings (scored by an older clbench); they are in "
                                                 f"evals/{evaluator}-{h}.json in its run folders"))
        first = settings[hashes[0]]
        shared = [k for k in first if k not in differ]  # the same non-empty value in every setting
        if shared:
            notes.append(f"{evaluator}, all {len(hashes)} settings: {joined(first, shared)}")
    return notes
