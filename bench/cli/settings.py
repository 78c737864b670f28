"""Settings from the command line (`--set key=value`) and YAML config files (`--config sweep.yaml`):
training settings by name, method knobs as `method.knob`."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from bench import catalog
from bench.errors import BenchError
from bench.registry import Registry
from bench.running.slurm_options import SLURM_KEYS
from bench.spec import freeze
from bench.spec import TrainConfig

from bench.evaloptions import EvalOptions

# A knob by the name papers and other code give it -> the knobs it may be here, for "did you mean" (close_knob).
KNOB_SYNONYMS = {"temperature": ("tau",), "temp": ("tau",), "t": ("tau",), "lambda": ("ce_weight",),
                 "lam": ("lambda", "ce_weight")}
# Keys of a SLURM profile (YAML), of `clbench run` flags (dashes for underscores) and of --config run keys.
RUN_KEYS = ("methods", "datasets", "encoders", "seeds", "data_dir", "results_dir", "jobs", "adapt_threads", "device",
            "overwrite", "grid", "sample", "grid_seed", "yes", "report_to", "save_format", "strict_data",
            "evaluators", "save_model", "keep_models", "model_precision", "compile", "cuda_graphs", "length_bucket", "deterministic", "checkpoint_every_s",
            *EvalOptions.field_names(),
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
            knob = field_name(knob, fields)
            if knob not in fields:
                close = close_knob(knob, fields)
                hint = f" (did you mean {method_name}.{close}?)" if close else ""
                raise BenchError(f"method {method!r} has no setting {knob!r}{hint}; its settings: "
                                 f"{', '.join(fields) or '(none)'}")
            knobs.setdefault(method, {})[knob] = coerce(key, value, fields[knob])
        elif key in TrainConfig.field_names():
            train[key] = coerce(key, value, getattr(defaults, key))
        else:
            raise BenchError(f"unknown setting {key!r}: use a training setting "
                             f"({', '.join(TrainConfig.field_names())}) or METHOD.KNOB")
    return train, knobs


def close_knob(knob: str, fields: dict[str, Any]) -> str | None:
    """The knob of `fields` (as typed in --set: `lambda`, not `lambda_`) meant by an unknown `knob`: the one
    KNOB_SYNONYMS names (temp -> tau), else the first one `knob` begins (warmup -> warmup_fraction), else the
    closest spelling (difflib); None when none is close."""
    names = [name.removesuffix("_") for name in fields]
    meant = [name for name in KNOB_SYNONYMS.get(knob.lower(), ()) if name in names]
    begun = [name for name in names if name.startswith(knob) and len(knob) > 2]
    return next(iter(meant + begun + difflib.get_close_matches(knob, names, n=1, cutoff=0.6)), None)


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
        key = "yes" if key is True else key  # YAML 1.1 reads the key `yes:` as true
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


def grid_axes(flags: list[str], from_file: Any, methods: Registry | None = None) -> tuple[tuple[str, tuple], ...]:
    """The knob grid: `--grid KEY=V1,V2` flags over a config file's `grid:` mapping (KEY: [V1, V2] or "V1,V2"),
    each key checked and each value typed as `split_settings` does; keys as `setting` or `method.knob` with the
    method's registered name, in a fixed (sorted) order. A key given twice on the command line is an error."""
    raw: dict[str, tuple[str, list[Any]]] = {}  # resolved name -> (the key as given, its values)
    if from_file not in (None, {}):
        if not isinstance(from_file, dict):
            raise BenchError("config file: grid must be a mapping of KEY: [values], e.g. grid: {lr: [2e-5, 5e-5]}")
        for key, values in from_file.items():
            raw[setting_name(str(key), methods)] = (str(key), [number_or_text(v) for v in as_list(values)])
    flagged: set[str] = set()
    for text in flags:
        key, sep, values = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BenchError(f"--grid {text!r}: expected KEY=V1,V2,..., e.g. --grid clld.tau=1,5,10 or "
                             "--grid lr=2e-5,5e-5")
        name = setting_name(key, methods)
        if name in flagged:
            raise BenchError(f"--grid {key}: given twice; list every value in one flag, e.g. --grid {key}=V1,V2")
        flagged.add(name)
        raw[name] = (key, [parse_assignment(f"{key}={v}")[1] for v in values.split(",") if v.strip()])
    axes = {name: tuple(typed_setting(key, value, methods)[1] for value in values)
            for name, (key, values) in raw.items()}
    return tuple(sorted(axes.items()))


def setting_name(key: str, methods: Registry | None = None) -> str:
    """A setting's name as the run key has it: `method.knob` with the method's registered name (an alias
    resolved, `lambda` as `lambda_`), a training setting as given; an unknown name as given (it is refused when
    typed)."""
    if "." not in key:
        return key
    methods = catalog.registry("method") if methods is None else methods
    method_name, knob = key.split(".", 1)
    if method_name not in methods:
        return key
    method = methods.canonical(method_name)
    fields = methods.get(method).config_fields()
    return f"{method}.{field_name(knob, fields)}"


def field_name(knob: str, fields: dict[str, Any]) -> str:
    """A knob's Config field: `lambda` names the field `lambda_` (a Python keyword cannot be a field)."""
    return f"{knob}_" if knob not in fields and f"{knob}_" in fields else knob


def typed_setting(key: str, value: Any, methods: Registry | None = None) -> tuple[str, Any]:
    """One setting checked and typed as `split_settings` does: (`setting` or `method.knob` with the method's
    registered name, the typed value); a data-regime key is passed through (see bench.running.grid.check_axes)."""
    from bench.spec import REGIME_FIELDS

    if key in REGIME_FIELDS:
        return key, value
    train, knobs = split_settings({key: value}, methods)
    if train:
        (name, typed), = train.items()
        return name, typed
    (method, inner), = knobs.items()
    (knob, typed), = inner.items()
    return f"{method}.{knob}", typed


def regime_lists(settings: dict[str, Any]) -> dict[str, list[Any]]:
    """Take the data-regime settings (bench.spec.REGIME_FIELDS) out of `settings`: each a value or a list of
    values (a sweep dimension), typed like its TrainConfig default."""
    from bench.spec import REGIME_FIELDS

    defaults = TrainConfig()
    lists = {}
    for key in REGIME_FIELDS:
        if key in settings:
            values = as_list(settings.pop(key))
            if not values:
                raise BenchError(f"{key} names no value; give one or more, e.g. {key}: [20, 100]")
            lists[key] = [coerce(key, number_or_text(v), getattr(defaults, key)) for v in values]
            if len(set(map(repr, lists[key]))) < len(values):
                raise BenchError(f"{key}: a value is repeated ({', '.join(map(repr, lists[key]))}); list each once")
    return lists
