"""Settings from the command line (`--set key=value`) and YAML config files (`--config sweep.yaml`):
training settings by name, method knobs as `method.knob`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bench import catalog
from bench.errors import BenchError
from bench.registry import Registry
from bench.running.slurm_options import SLURM_KEYS
from bench.spec import freeze
from bench.spec import TrainConfig

from bench.evaluators.base import EvalOptions

# Keys of a SLURM profile (YAML), of `clbench run` flags (dashes for underscores) and of --config run keys.
RUN_KEYS = ("methods", "datasets", "encoders", "seeds", "data_dir", "results_dir", "jobs", "device", "overwrite",
            "evaluators", "save_model", "compile", "length_bucket", "deterministic", *EvalOptions.field_names(),
            "executor", "resume", "shards_per_gpu", "slurm_profile", *SLURM_KEYS)


def parse_assignment(text: str) -> tuple[str, Any]:
    """`clld.tau=5` -> ('clld.tau', 5); values are read as YAML scalars/lists."""
    if "=" not in text:
        raise BenchError(f"--set {text!r}: expected KEY=VALUE, e.g. --set clld.tau=5 or --set lr=1e-4")
    key, raw = text.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), number_or_text(value)


def number_or_text(value: Any) -> Any:
    """Strings that are numbers in plain notation (YAML 1.1 reads `1e-4` as text) become floats."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def coerce(name: str, value: Any, default: Any) -> Any:
    """`value` converted to the type of `default` (ints accepted for floats; lists become tuples)."""
    if default is None:
        return freeze(value)
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(default, (tuple, list)):
        if isinstance(value, (list, tuple)):
            return freeze(value)
    elif isinstance(value, type(default)):
        return value
    raise BenchError(f"{name} must be a {type(default).__name__} (default {default!r}), got {value!r}")


def split_settings(assignments: dict[str, Any], methods: Registry | None = None
                   ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Separate training settings from method knobs (`method.knob`), checking every name and type.

    Method names and knobs are looked up in `methods`, by default `catalog.registry("method")`: the methods'
    names and knob defaults read from their source files, so that this needs no torch (the real registry
    once `methods` is imported)."""
    methods = catalog.registry("method") if methods is None else methods
    defaults = TrainConfig()
    train: dict[str, Any] = {}
    knobs: dict[str, dict[str, Any]] = {}
    for key, value in assignments.items():
        if "." in key:
            method_name, knob = key.split(".", 1)
            method = methods.canonical(method_name)
            fields = methods.get(method).config_fields()
            if knob not in fields and f"{knob}_" in fields:  # `lambda` names the field `lambda_`
                knob = f"{knob}_"
            if knob not in fields:
                raise BenchError(f"method {method!r} has no setting {knob!r}; its settings: "
                                 f"{', '.join(fields) or '(none)'}")
            knobs.setdefault(method, {})[knob] = coerce(key, value, fields[knob])
        elif key in TrainConfig.field_names():
            train[key] = coerce(key, value, getattr(defaults, key))
        else:
            raise BenchError(f"unknown setting {key!r}: use a training setting "
                             f"({', '.join(TrainConfig.field_names())}) or METHOD.KNOB")
    return train, knobs


def load_config_file(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read a YAML run config: (run options such as methods/datasets/seeds, settings for `split_settings`).

    Settings are training-setting names at the top level, and method knobs either as `method.knob: value`
    or nested under the method's name (`clld: {tau: 5}`).
    """
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise BenchError(f"cannot read config file {path}: {exc}".splitlines()[0]) from exc
    if not isinstance(raw, dict):
        raise BenchError(f"config file {path} must be a YAML mapping of settings")
    run: dict[str, Any] = {}
    settings: dict[str, Any] = {}
    for key, value in raw.items():
        key = str(key).replace("-", "_") if str(key).replace("-", "_") in RUN_KEYS + ("encoder",) else str(key)
        if key in RUN_KEYS or key == "encoder":
            run["encoders" if key == "encoder" else key] = value
        elif isinstance(value, dict) and key in catalog.registry("method"):  # a method's section, e.g. clld:
            settings.update({f"{key}.{knob}": number_or_text(v) for knob, v in value.items()})
        else:
            settings[key] = number_or_text(value)
    return run, settings


def as_list(value: Any) -> list:
    """A config value that may be a comma string or a list, as a list."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return list(value) if isinstance(value, (list, tuple)) else [value]
