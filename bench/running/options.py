"""What one `clbench run` asks for, as one frozen value: the sweep (methods x datasets x encoders x seeds), its
settings and where it runs. The command line builds it (bench.cli.run_options) after checking every field;
the runner and the SLURM executor read it. Imports no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.running.outcome import ShardRequest
    from bench.running.slurm_options import SlurmOptions


@dataclass(frozen=True)
class RunOptions:
    """A checked `clbench run`: every field holds its final value (defaults, config file, flags and --set
    merged; the settings dicts are copies, not to be changed). `request` (the evaluators and per-shard options) is None until it is built, which imports torch."""

    methods: tuple[str, ...]
    datasets: tuple[str, ...]
    encoders: tuple[str, ...]
    seeds: tuple[int, ...]
    results_dir: Path
    overrides: dict[str, Any] = field(default_factory=dict)  # training settings (TrainConfig fields)
    knobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # method -> changed knobs
    grid: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # knob grid axes (bench.running.grid): setting or method.knob
    sample: int = 0  # draw this many of each method's grid combinations (0: all)
    grid_seed: int = 0  # the seed of that draw
    regimes: tuple[dict[str, Any], ...] = ({},)  # data regimes (bench.running.grid.regimes): each one is run
    data_dir: str | None = None
    strict_data: bool = False  # refuse leakage (test or validation texts in train) instead of warning
    jobs: int = 1
    adapt_threads: bool = False  # fewer torch threads on a busy CPU (bench.running.machine_load); digits may change
    device: str = "auto"
    overwrite: bool = False
    resume: bool = False
    executor: str = "local"  # local | slurm
    shards_per_gpu: int = 1
    slurm: SlurmOptions | None = None  # with executor slurm
    wait: bool = False
    progress: bool = True
    reports_dir: Path | None = None  # write the sweep's table and figures here when it ends (the demo)
    request: ShardRequest | None = None

    def __post_init__(self) -> None:
        for name in ("methods", "datasets", "encoders", "seeds"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "overrides", dict(self.overrides))  # copies: the caller's dicts stay its own
        object.__setattr__(self, "knobs", {method: dict(k) for method, k in self.knobs.items()})
        object.__setattr__(self, "grid", tuple((key, tuple(values)) for key, values in self.grid))
        object.__setattr__(self, "regimes", tuple(dict(r) for r in self.regimes) or ({},))
        object.__setattr__(self, "results_dir", Path(self.results_dir))
        if self.executor not in ("local", "slurm"):
            raise ValueError(f"executor {self.executor!r}: local or slurm")
        if self.executor == "slurm" and self.slurm is None:
            raise ValueError("executor slurm needs its SlurmOptions")

    @property
    def keep_models(self) -> str:
        """The keep policy of the sweep's models (all | best | none: bench.running.keeping); all until `request`
        is built."""
        return self.request.keep_models if self.request else "all"
