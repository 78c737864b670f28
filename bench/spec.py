"""Frozen run specifications: what one shard trains, and the key its results are stored under."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field, fields
from typing import Any

from bench.errors import BenchError
from bench.registry import METHODS, Registry


NOISE_KINDS = ("symmetric", "asymmetric")
# The settings that define a data regime (few labels, noisy labels): sweep dimensions, never tuned by a grid.
REGIME_FIELDS = ("train_size", "shots", "val_size", "label_noise", "noise_kind")
# How a data regime's random choices (training sample, validation sample, flipped labels) are seeded:
# `per-seed` draws them anew for every model seed (the same draw for every method at one seed: paired), `fixed`
# draws them once from --data-seed for every seed (a study conditional on one sample; runs made before draws
# varied are `fixed`); `auto` is per-seed in a data regime. Without a regime nothing is drawn: always `fixed`.
DATA_DRAWS = ("auto", "per-seed", "fixed")
CUDA_GRAPH_MODES = ("auto", "on", "off")  # clbench run --cuda-graphs (bench.training.graphs)
KEEP_POLICIES = ("all", "best", "none")  # --keep-models: which models a sweep keeps (bench.running.keeping)
PRECISIONS = ("auto", "float32")  # --model-precision: how a kept model is stored (bench.training.precision)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation and model-shape settings shared by every method (the Trainer reads these)."""

    epochs: int = 10
    batch_size: int = 32
    lr: float = 5e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.06
    max_grad_norm: float = 1.0
    patience: int = 3
    max_length: int = 128
    head_dropout: float = 0.1
    pooling: str = "cls"
    precision: str = "auto"
    val_fraction: float = 0.1
    data_seed: int = 0
    # the data regime (bench.data.regimes), applied to the loaded data with `data_seed`; new fields such as these
    # stay out of the run key at their default (ADDED_DEFAULTS), so that keys made before them stay valid
    train_size: int = 0  # a stratified sample of this many training examples (0: all)
    shots: int = 0  # instead, this many training examples per class (0: off)
    val_size: int = 0  # validation examples: 0 = as many as the training sample (all without one), -1 = all
    label_noise: float = 0.0  # share of training labels flipped (validation and test untouched)
    noise_kind: str = "symmetric"  # symmetric: to a random other class; asymmetric: to the most confusable one
    data_draw: str = "auto"  # DATA_DRAWS: resolved to per-seed or fixed on construction

    def __post_init__(self) -> None:
        checks = [
            (self.epochs >= 1, "--epochs must be >= 1"),
            (self.batch_size >= 1, "--batch-size must be >= 1"),
            (self.lr > 0, "--lr must be > 0"),
            (self.weight_decay >= 0, "--weight-decay must be >= 0"),
            (0 <= self.warmup_ratio < 1, "--warmup-ratio must be in [0, 1)"),
            (self.max_grad_norm >= 0, "--max-grad-norm must be >= 0 (0 disables clipping)"),
            (self.patience >= 1, "--patience must be >= 1"),
            (self.max_length >= 8, "--max-length must be >= 8"),
            (0 <= self.head_dropout < 1, "--head-dropout must be in [0, 1)"),
            (self.pooling in ("cls", "pooler", "mean"), "--pooling must be one of cls, pooler, mean"),
            (self.precision in ("auto", "fp32", "bf16"), "--precision must be one of auto, fp32, bf16"),
            (0 < self.val_fraction < 0.5, "--val-fraction must be in (0, 0.5)"),
            (self.train_size >= 0, "--train-size must be >= 0 (0: the whole training split)"),
            (self.shots >= 0, "--shots must be >= 0 (0: off)"),
            (not (self.train_size and self.shots), "--train-size and --shots both size the training sample; "
                                                   "give one"),
            (self.val_size >= -1, "--val-size must be >= -1 (0: as many as the training sample, -1: all)"),
            (0 <= self.label_noise < 1, "--label-noise must be in [0, 1)"),
            (self.noise_kind in NOISE_KINDS, f"--noise-kind must be one of {', '.join(NOISE_KINDS)}"),
            (self.data_draw in DATA_DRAWS, f"--data-draw must be one of {', '.join(DATA_DRAWS)} (per-seed: each "
                                           "seed draws its own sample; fixed: one draw from --data-seed)"),
        ]
        for ok, message in checks:
            if not ok:
                raise BenchError(message)
        has_regime = any(getattr(self, name) != REGIME_DEFAULTS[name] for name in REGIME_FIELDS)
        resolved = "fixed" if not has_regime else ("per-seed" if self.data_draw == "auto" else self.data_draw)
        object.__setattr__(self, "data_draw", resolved)

    @classmethod
    def field_names(cls) -> list[str]:
        """Names of all settings, in declaration order."""
        return [f.name for f in fields(cls)]

    def regime(self) -> dict[str, Any]:
        """The data-regime settings (REGIME_FIELDS) by name."""
        return {name: getattr(self, name) for name in REGIME_FIELDS}

    def draw(self, seed: int) -> tuple[int, ...]:
        """The entropy of the data regime's random choices for model seed `seed`: (data_seed,) for a fixed draw,
        (data_seed, seed) for a per-seed one (bench.data.regimes seeds its streams with it)."""
        return (self.data_seed, seed) if self.data_draw == "per-seed" else (self.data_seed,)

    def key_items(self) -> list[tuple[str, Any]]:
        """The settings as the run key lists them: all, except a field added since keys were first made while it
        holds its default (ADDED_DEFAULTS), so an older run's key is unchanged."""
        return [(k, v) for k, v in dataclasses.asdict(self).items()
                if not (k in ADDED_DEFAULTS and v == ADDED_DEFAULTS[k])]


# TrainConfig fields added after run keys were first made, with the default the key leaves out.
# The data regime's defaults: the whole, clean training set (the one source every part reads them from).
REGIME_DEFAULTS = {name: getattr(TrainConfig, name) for name in REGIME_FIELDS}
# the regime's fields, and data_draw: `fixed` is what every run made before draws varied did (so its key stands)
ADDED_DEFAULTS = {**REGIME_DEFAULTS, "data_draw": "fixed"}


def regime_label(values: dict[str, Any]) -> str:
    """A data regime in a few characters (`n=100+noise=0.2`; '' for the whole, clean training set), for reports:
    n = training examples, k = per class, val = validation examples, noise = share of flipped labels (no commas:
    `--filter dataset=sst2[n=100+noise=0.2]` names one)."""
    def number(value: Any) -> float:
        try:
            return float(value)
        except (TypeError, ValueError):
            return 0.0

    parts = []
    if number(values.get("train_size")) > 0:
        parts.append(f"n={int(number(values['train_size']))}")
    if number(values.get("shots")) > 0:
        parts.append(f"k={int(number(values['shots']))}")
    if number(values.get("val_size")) != 0:
        parts.append(f"val={'all' if number(values['val_size']) < 0 else int(number(values['val_size']))}")
    if number(values.get("label_noise")) > 0:
        kind = str(values.get("noise_kind") or "symmetric")
        parts.append(f"noise={number(values['label_noise']):g}" + ("" if kind == "symmetric" else f"-{kind[:4]}"))
    return "+".join(parts)


def _format_value(value: Any) -> str:
    """Stable text for a config value (floats in repr form, lists/dicts as compact JSON)."""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return repr(value) if isinstance(value, float) else str(value)


def slug(text: str) -> str:
    """A file-name-safe short form of a name or path (used in run keys)."""
    text = text.rstrip("/").split("/")[-1] if ("/" in text and text.startswith((".", "/", "~"))) else text
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.replace("/", "--")).strip("-") or "x"


# The `variant` of a method that follows its authors' released code (the other is `paper`). It is the default of
# cline, dcl and lcl (supcon's is `paper`); reports name a run of a non-default variant `method:variant`.
RELEASED = "released"


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines one shard's result: method, data, encoder, seed and settings."""

    method: str
    dataset: str
    encoder: str
    seed: int
    data_fingerprint: str
    train: TrainConfig = field(default_factory=TrainConfig)
    method_config: tuple[tuple[str, Any], ...] = ()
    method_version: int = 1  # the method's `version` when the run was made (results of versions differ)
    key_names: tuple[tuple[str, str], ...] = ()  # renamed knobs: (knob, the name the run key keeps for it)

    def canonical(self) -> str:
        """The canonical, human-readable string that identifies this run (version 1 of a method is left out,
        so the keys of runs made before methods had versions stay valid; a renamed knob appears under its
        old name, see `key_names`)."""
        return self._canonical(with_seed=True)

    def _canonical(self, with_seed: bool) -> str:
        """`canonical`, or without the seed (`combo`)."""
        parts = [
            f"dataset={self.dataset}",
            f"encoder={self.encoder}",
            *([f"seed={self.seed}"] if with_seed else []),
            f"data={self.data_fingerprint}",
        ]
        parts += [f"{k}={_format_value(v)}" for k, v in self.train.key_items()]
        names = dict(self.key_names)
        if len({names.get(k, k) for k, _ in self.method_config}) < len(self.method_config):
            raise ValueError(f"{self.method}: two knobs share a name in the run key ({sorted(names.items())})")
        parts += [f"{self.method}.{name}={_format_value(v)}"
                  for name, v in sorted((names.get(k, k), v) for k, v in self.method_config)]
        if self.method_version != 1:
            parts.append(f"{self.method}.version={self.method_version}")
        return f"{self.method}:" + ",".join(parts)

    @property
    def config_hash(self) -> str:
        """A short hash of the canonical string."""
        return hashlib.sha256(self.canonical().encode()).hexdigest()[:10]

    @property
    def combo(self) -> str:
        """A short hash of the canonical string without the seed: the same for every seed of one combination of
        method, knobs, settings, data regime, dataset and encoder (what --select-by validation chooses among)."""
        return hashlib.sha256(self._canonical(with_seed=False).encode()).hexdigest()[:10]

    def changed_settings(self, method_defaults: dict[str, Any]) -> dict[str, Any]:
        """The knobs (as `method.knob`) and training settings of this run that differ from the method's defaults
        (`method_defaults`; pass `knob_defaults(entry, spec.variant or None)`, so that a knob the run's variant
        implies is not reported as changed: only the variant is) and TrainConfig's; the data regime is left out
        (it is not a knob)."""
        changed = {f"{self.method}.{k}": v for k, v in self.method_config
                   if k in method_defaults and freeze(method_defaults[k]) != v}
        defaults = TrainConfig()
        changed.update({k: v for k, v in self.train.key_items()
                        if k not in (*REGIME_FIELDS, "data_draw") and getattr(defaults, k) != v})
        return changed

    @property
    def variant(self) -> str:
        """The method's `variant` knob (which form of the method: see RELEASED), or '' for a method without one."""
        return str(dict(self.method_config).get("variant", ""))

    @property
    def key(self) -> str:
        """Run key: the run folder name and the key of every result row of this run."""
        return f"{slug(self.method)}_{slug(self.dataset)}_{slug(self.encoder)}_s{self.seed}_{self.config_hash}"

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict that `from_json` turns back into an equal spec."""
        return {
            "method": self.method,
            "dataset": self.dataset,
            "encoder": self.encoder,
            "seed": self.seed,
            "data_fingerprint": self.data_fingerprint,
            "train": dataclasses.asdict(self.train),
            "method_config": dict(self.method_config),
            "method_version": self.method_version,
            "key_names": dict(self.key_names),
            "canonical": self.canonical(),
            "config_hash": self.config_hash,
            "key": self.key,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RunSpec":
        """Rebuild a spec written by `to_json`."""
        return cls(
            method=data["method"],
            dataset=data["dataset"],
            encoder=data["encoder"],
            seed=int(data["seed"]),
            data_fingerprint=data["data_fingerprint"],
            train=TrainConfig(**{"data_draw": "fixed", **data["train"]}),  # written before draws varied: fixed
            method_config=tuple(sorted((k, freeze(v)) for k, v in data["method_config"].items())),
            method_version=int(data.get("method_version", 1)),
            key_names=tuple(sorted(data.get("key_names", {}).items())),
        )


def freeze(value: Any) -> Any:
    """Lists (nested) as tuples and dicts as sorted item tuples, so specs stay hashable."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    return value


def variant_knobs(entry: Any) -> dict[str, dict[str, Any]]:
    """variant -> the knobs it implies, from the `VARIANT_KNOBS` class attribute of a method's Config (a literal
    dict, not a dataclass field); {} for a method without one. `entry`: a Method class or a bench.catalog Entry."""
    reader = getattr(entry, "variant_knobs", None)
    return {variant: dict(implied) for variant, implied in reader().items()} if reader is not None else {}


def knob_defaults(entry: Any, variant: str | None = None) -> dict[str, Any]:
    """A method's knobs at their defaults for `variant` (None: the Config's own default variant): the Config's
    field defaults, then the knobs that variant implies (`variant_knobs`)."""
    defaults = dict(entry.config_fields())
    chosen = defaults.get("variant") if variant is None else variant
    return {**defaults, **variant_knobs(entry).get(chosen, {})}


def changed_against_defaults(spec: RunSpec, methods: Registry) -> dict[str, Any]:
    """`spec.changed_settings` against its method's defaults for the run's own variant (`knob_defaults`: a knob
    the variant implies is not a change, the variant is), the method looked up in `methods` (the real registry
    or bench.catalog's); only the training settings when `methods` does not hold it."""
    defaults = knob_defaults(methods.get(spec.method), spec.variant or None) if spec.method in methods else {}
    return spec.changed_settings(defaults)


def method_config(method: str, knobs: dict[str, Any], methods: Registry | None = None
                  ) -> tuple[tuple[str, Any], ...]:
    """A method's full knob set, ready for a RunSpec: the Config's field defaults, then the knobs implied by the
    chosen variant (`knobs["variant"]`, else the default one: `knob_defaults`), then `knobs` (an explicit
    --set always wins). `methods`: the registry to look the method up in (default: the real one;
    bench.catalog's needs no torch)."""
    entry = (METHODS if methods is None else methods).get(method)
    values = {**knob_defaults(entry, knobs.get("variant")), **knobs}
    entry.Config(**values)  # let the method's own checks run now, before any shard starts
    return tuple(sorted((k, freeze(v)) for k, v in values.items()))
