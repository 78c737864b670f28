"""CLLD — contrastive learning with label distance (Lan et al.; docs/METHODS.md): `cl` (uniform
distances, the CT+CL ablation), `clld-static` (chosen confusing pairs) and `clld-adaptive` (alias `clld`,
distances learnt from validation confusion, Algorithm 1)."""

from __future__ import annotations

import csv
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
import yaml

from bench.results import store
from bench.errors import BenchError
from bench.registry import METHODS
from bench.methods.base import Method, PrepareContext, Progress, validation_steps
from bench.methods.losses import clld_loss
from bench.methods.views import doubled, projection_head

PROJECTIONS = ("mlp", "linear", "none")


@dataclass(frozen=True)
class CLConfig:
    """tau: base label distance (every LDM entry starts here; acts as an inverse temperature on sim in [0,1]);
    ce_weight: weight of the classification loss, L = w L_c + (1-w) L_s (the paper's λ; `lambda` in other
    methods weighs their contrastive term instead); projection: mlp | linear | none."""

    tau: float = 5.0
    ce_weight: float = 0.5
    projection: str = "mlp"

    def __post_init__(self) -> None:
        if self.tau <= 0:
            raise BenchError("tau must be > 0")
        if not 0 <= self.ce_weight <= 1:
            raise BenchError("ce_weight must be in [0, 1]")
        if self.projection not in PROJECTIONS:
            raise BenchError(f"projection must be one of {', '.join(PROJECTIONS)}")


@METHODS.register("cl")
class ContrastiveUniform(Method):
    """CE + supervised contrastive KL loss on dropout twins with a uniform label distance (CLLD's CT+CL)."""

    capturable = True  # tests/test_graphs.py

    Config = CLConfig
    key_names = {"ce_weight": "lambda_"}  # renamed from lambda_ (same objective)

    def __init__(self, encoder, num_labels, config=None, head_dropout=0.1):
        super().__init__(encoder, num_labels, config, head_dropout)
        self.projection = projection_head(self.config.projection, encoder.hidden_size)
        self.register_buffer("ldm", torch.full((num_labels, num_labels), float(self.config.tau)))

    def loss(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        pooled = self.encode(doubled(batch)).pooled
        m = batch["labels"].shape[0]
        ce = F.cross_entropy(self.head(pooled[:m]).float(), batch["labels"])
        contrastive = clld_loss(self.projection(pooled), torch.cat([batch["labels"], batch["labels"]]), self.ldm)
        w = self.config.ce_weight
        return {"ce": w * ce, "contrastive": (1 - w) * contrastive}

    def state_for_report(self) -> dict[str, Any]:
        return {"ldm": self.ldm.tolist()}


# ----------------------------------------------------------------------------------------------- static

@dataclass(frozen=True)
class StaticConfig(CLConfig):
    """Static LDM: entries of the named confusing `pairs` (class names) or of the `top_k` most confused pairs of
    a finished run's validation confusion (`ldm_from`: a run folder, a run key, or a method name such as `ce`
    meaning that method's run with the same dataset, encoder, seed and training settings) are set to
    tau * boost, symmetrically; or `matrix` gives an N x N CSV/YAML file of multipliers of tau."""

    pairs: tuple = ()
    matrix: str = ""
    ldm_from: str = ""
    top_k: int = 3
    boost: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if sum(bool(x) for x in (self.pairs, self.matrix, self.ldm_from)) != 1:
            raise BenchError("clld-static needs exactly one LDM source: --set clld-static.pairs=[[a,b]], "
                             ".matrix=FILE or .ldm_from=RUN")
        if self.boost <= 0 or self.top_k < 1:
            raise BenchError("clld-static: boost must be > 0 and top_k >= 1")


def read_matrix(path: str, label_names: list[str]) -> np.ndarray:
    """An N x N multiplier matrix from CSV (optionally with a header row/column of class names) or YAML/JSON
    (a list of rows, or a mapping {matrix: [rows]})."""
    file = Path(path).expanduser()
    try:
        if file.suffix in (".yaml", ".yml", ".json"):
            raw = yaml.safe_load(file.read_text())
            rows = raw["matrix"] if isinstance(raw, dict) else raw
        else:
            rows = [r for r in csv.reader(file.read_text().splitlines()) if r]
            if rows and rows[0] and rows[0][-1] in label_names:
                rows = [r[1:] if r[0] in label_names or r[0] == "" else r for r in rows[1:]]
        matrix = np.array(rows, dtype=np.float64)
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise BenchError(f"cannot read LDM matrix {path}: {exc}".splitlines()[0]) from exc
    n = len(label_names)
    if matrix.shape != (n, n):
        raise BenchError(f"LDM matrix {path} is {matrix.shape}, the dataset has {n} classes ({n} x {n} needed)")
    return matrix


def confused_pairs(confusion: np.ndarray, k: int) -> list[tuple[int, int]]:
    """The k class pairs (i < j) with the most confusions C_ij + C_ji (ties by index)."""
    sym = confusion + confusion.T
    pairs = [(int(sym[i, j]), i, j) for i in range(len(sym)) for j in range(i + 1, len(sym))]
    return [(i, j) for count, i, j in sorted(pairs, key=lambda p: (-p[0], p[1], p[2]))[:k] if count > 0]


def sibling_key(method: str, spec: Any) -> str:
    """The run key of `method` (default knobs) with the same dataset, encoder, seed and settings as `spec`."""
    from bench.spec import method_config

    name = METHODS.canonical(method)
    cls = METHODS.get(name)
    return dataclasses.replace(spec, method=name, method_config=method_config(name, {}), method_version=cls.version,
                               key_names=tuple(sorted(cls.key_names.items()))).key


def run_confusion(ldm_from: str, results_dir: Path, label_names: list[str], spec: Any = None) -> np.ndarray:
    """The best-epoch validation confusion of a finished run (folder, run key, or sibling method's run)."""
    if ldm_from in METHODS:
        if spec is None:
            raise BenchError(f"ldm_from={ldm_from!r} names a method; it needs the shard's run spec")
        folder = results_dir / sibling_key(ldm_from, spec)
    else:
        folder = Path(ldm_from).expanduser()
        if not folder.is_dir():
            folder = results_dir / ldm_from
    path = folder / store.CONFUSION
    if not path.is_file():
        first = ldm_from if ldm_from in METHODS else "ce"
        raise BenchError(f"ldm_from={ldm_from!r}: no finished run there (no {path}); run it first (e.g. list "
                         f"{first} before clld-static in --methods) or give a run folder")
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        labels = stored["labels"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        reason = (str(exc).splitlines() or [""])[0]
        raise BenchError(f"ldm_from={ldm_from!r}: cannot read {path} ({type(exc).__name__}: {reason}); "
                         "re-run that run or give another") from exc
    if labels != label_names:
        raise BenchError(f"ldm_from={ldm_from!r}: that run's classes differ from this dataset's")
    if not stored.get("validation"):  # never fall back to the test confusion: that would leak test labels
        raise BenchError(f"ldm_from={ldm_from!r}: {path} has no validation confusion matrix; re-run that run")
    return np.array(stored["validation"])


def static_ldm(config: StaticConfig, label_names: list[str], results_dir: Path, spec: Any = None) -> np.ndarray:
    """The static label-distance matrix for a dataset."""
    n = len(label_names)
    ldm = np.full((n, n), config.tau)
    if config.matrix:
        return config.tau * read_matrix(config.matrix, label_names)
    if config.pairs:
        index = {name: i for i, name in enumerate(label_names)}
        pairs = []
        for pair in config.pairs:
            if len(pair) != 2 or any(p not in index for p in pair):
                raise BenchError(f"clld-static pair {list(pair)} must name two of the classes: "
                                 f"{', '.join(label_names)}")
            pairs.append((index[pair[0]], index[pair[1]]))
    else:
        pairs = confused_pairs(run_confusion(config.ldm_from, results_dir, label_names, spec), config.top_k)
    for i, j in pairs:
        ldm[i, j] = ldm[j, i] = config.tau * config.boost
    return ldm


@METHODS.register("clld-static")
class CLLDStatic(ContrastiveUniform):
    """CLLD with a static label distance: chosen confusing class pairs get a larger distance (CT+CLSLD)."""

    Config = StaticConfig

    @classmethod
    def validate(cls, config: StaticConfig, label_names: list[str], results_dir: Path) -> None:
        if config.ldm_from not in METHODS:  # a sibling run may be produced earlier in the same invocation
            static_ldm(config, label_names, results_dir)

    def prepare(self, context: PrepareContext) -> None:
        matrix = static_ldm(self.config, context.label_names, context.results_dir, context.spec)
        self.ldm.copy_(torch.as_tensor(matrix, dtype=self.ldm.dtype))


# ----------------------------------------------------------------------------------------------- adaptive

@dataclass(frozen=True)
class AdaptiveConfig(CLConfig):
    """Adaptive LDM (Algorithm 1): after warm-up (step > warmup_fraction * total steps), at every k-th validation
    of the run (`evals_per_epoch` per epoch, at most one per batch), LDM <- LDM + eps (LDM' - LDM),
    eps = 1 - step/total_steps, LDM'_ij = tau (1 + r_ij / max r) from the symmetric confusion rate r.
    k = `update_every` (Algorithm 1's 10), shortened where the run is short so that every epoch after warm-up
    updates at least once and the run at least `min_updates` times (see `update_plan`)."""

    update_every: int = 10
    evals_per_epoch: int = 10
    warmup_fraction: float = 0.2
    min_updates: int = 4

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.update_every < 1 or self.evals_per_epoch < 1 or not 0 <= self.warmup_fraction < 1:
            raise BenchError("clld-adaptive: update_every and evals_per_epoch must be >= 1, "
                             "warmup_fraction in [0, 1)")
        if self.min_updates < 0:
            raise BenchError("clld-adaptive: min_updates must be >= 0")


def update_plan(config: AdaptiveConfig, steps_per_epoch: int, epochs: int) -> list[int]:
    """The steps (ascending) after whose validation clld-adaptive updates its LDM in a run of `epochs` epochs of
    `steps_per_epoch` batches. Validations are numbered from the run's start; those after warm-up with eps > 0
    (not the run's last step, where an update would change nothing) are eligible; every k-th validation among
    all updates, k = min(update_every, validations per epoch, eligible // min_updates), at least 1."""
    local = validation_steps(steps_per_epoch, config.evals_per_epoch)
    steps = [epoch * steps_per_epoch + s for epoch in range(epochs) for s in local]
    total = steps_per_epoch * epochs
    eligible = [(number, step) for number, step in enumerate(steps, start=1)
                if config.warmup_fraction * total < step < total]
    every = min(config.update_every, len(local), max(1, len(eligible) // max(1, config.min_updates)))
    return [step for number, step in eligible if number % every == 0]


def target_ldm(confusion: np.ndarray, tau: float) -> np.ndarray:
    """LDM' from a confusion matrix: tau (1 + r_ij / max r) off the diagonal, tau on it."""
    confusion = np.asarray(confusion, dtype=np.float64)
    totals = confusion.sum(1)
    denominator = totals[:, None] + totals[None, :]
    rate = np.divide(confusion + confusion.T, denominator, out=np.zeros_like(confusion), where=denominator > 0)
    np.fill_diagonal(rate, 0.0)
    peak = rate.max()
    target = tau * (1 + (rate / peak if peak > 0 else rate))
    np.fill_diagonal(target, tau)
    return target


@METHODS.register("clld-adaptive", "clld")
class CLLDAdaptive(ContrastiveUniform):
    """CLLD with an adaptive label distance learnt from validation confusion (CT+CLALD, Algorithm 1)."""

    Config = AdaptiveConfig
    # 2: Algorithm 1 read literally (epoch index > n/5, every 10th validation counted from the start; with
    # 10 validations per epoch, updates at epoch ends). Version 1 waited n/5 epochs of training and counted
    # from there; the two agree when n is a multiple of 5, version 1 updated later otherwise.
    # 3: the schedule follows the run (`update_plan`): warm-up counted in steps (the same as version 2 when
    # warmup_fraction x epochs is a whole number), k shortened so that short runs adapt (an epoch of 4 batches
    # validated 4 times and updated every 10th validation: a 1-epoch run never adapted), no update at the last
    # step (eps = 0). Long runs with 10 or more batches an epoch update as in version 2.
    version = 3

    def __init__(self, encoder, num_labels, config=None, head_dropout=0.1):
        super().__init__(encoder, num_labels, config, head_dropout)
        self.evaluations_per_epoch = self.config.evals_per_epoch
        self.evaluations = 0
        self.history: list[dict[str, Any]] = []
        self.plan: tuple[int, int, frozenset[int]] | None = None  # (total steps, epochs, update steps)

    def planned(self, progress: Progress) -> frozenset[int]:
        """The steps of this run's updates (`update_plan`), computed once per run shape."""
        if self.plan is None or self.plan[:2] != (progress.total_steps, progress.max_epochs):
            per_epoch = progress.total_steps // max(1, progress.max_epochs)
            steps = frozenset(update_plan(self.config, per_epoch, progress.max_epochs))
            self.plan = (progress.total_steps, progress.max_epochs, steps)
        return self.plan[2]

    def on_eval(self, confusion: np.ndarray, progress: Progress) -> None:
        self.evaluations += 1  # every validation counts, as training_steps does in Algorithm 1
        if progress.step not in self.planned(progress):
            return
        eps = 1 - progress.step / progress.total_steps
        current = self.ldm.double().cpu().numpy()
        updated = current + eps * (target_ldm(confusion, self.config.tau) - current)
        self.ldm.copy_(torch.as_tensor(updated, dtype=self.ldm.dtype))
        epochs_done = progress.step / max(1, progress.total_steps) * progress.max_epochs
        self.history.append({"step": progress.step, "epoch": round(epochs_done, 3), "eps": eps,
                             "confusion": np.asarray(confusion).tolist(), "ldm": updated.tolist()})

    def get_extra_state(self) -> dict[str, Any]:
        return {"evaluations": self.evaluations, "history": self.history}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.evaluations = state["evaluations"]
        self.history = list(state["history"])

    def state_for_report(self) -> dict[str, Any]:
        return {"ldm": self.ldm.tolist(), "updates": self.history}

    def row_fields(self) -> dict[str, Any]:
        return {"ldm_updates": len(self.history)}

    def training_warning(self) -> str:
        return few_updates_warning(len(self.history))


def few_updates_warning(updates: int) -> str:
    """The warning for a clld-adaptive run with fewer than FEW_LDM_UPDATES label-distance updates ("" otherwise)."""
    if updates >= store.FEW_LDM_UPDATES:
        return ""
    return (f"clld-adaptive made {updates} label-distance update(s) (fewer than {store.FEW_LDM_UPDATES}): it "
            "trained nearly as `cl` (uniform distances); give it more steps (--epochs, a smaller --batch-size) or "
            "a lower --set clld-adaptive.warmup_fraction")
