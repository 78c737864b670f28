"""What each SLURM array task asks for: SlurmOptions from profiles (YAML), flags and `--sbatch KEY=VALUE`
items, and the GPU request checked against the partition (`sinfo`) before anything is submitted. Imports no
torch and no submitit (the command line validates these before any heavy import)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.errors import BenchError

# Keys of a SLURM profile (YAML), of `clbench run` flags (dashes for underscores) and of --config run keys.
SLURM_KEYS = ("partition", "time_min", "gpus_per_job", "mem_gb", "cpus_per_task", "array_parallelism",
              "max_timeouts", "sbatch")
# sbatch options that have their own flag; `--sbatch` must not set them a second time.
OWN_FLAGS = {"partition": "--partition", "time": "--time-min", "gpus-per-node": "--gpus-per-job",
             "mem": "--mem-gb", "cpus-per-task": "--cpus-per-task", "array": "--array-parallelism"}


@dataclass(frozen=True)
class SlurmOptions:
    """What each array task asks SLURM for; `parameters()` turns it into submitit's names."""

    partition: str | None = None
    time_min: int = 240
    gpus_per_job: int | None = None  # None: 1 where the partition has GPUs, else 0 (`partition_gpus`)
    mem_gb: float | None = None
    cpus_per_task: int | None = None
    array_parallelism: int | None = None
    max_timeouts: int = 3  # requeues after hitting the time limit (submitit's count; preemptions are not counted)
    sbatch: tuple[tuple[str, Any], ...] = ()  # further `#SBATCH --KEY=VALUE` lines (account, qos, constraint...)

    def __post_init__(self) -> None:
        checks = [
            (self.time_min >= 1, "--time-min must be >= 1 (minutes per array task)"),
            (self.gpus_per_job is None or self.gpus_per_job >= 0, "--gpus-per-job must be >= 0"),
            (self.mem_gb is None or self.mem_gb > 0, "--mem-gb must be > 0"),
            (self.cpus_per_task is None or self.cpus_per_task >= 1, "--cpus-per-task must be >= 1"),
            (self.array_parallelism is None or self.array_parallelism >= 1, "--array-parallelism must be >= 1"),
            (self.max_timeouts >= 0, "--max-timeouts must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise BenchError(message)
        for key, _ in self.sbatch:
            flag = OWN_FLAGS.get(key.replace("_", "-"))
            if flag:
                raise BenchError(f"--sbatch {key}=...: use {flag} instead")

    @property
    def signal_delay_s(self) -> int:
        """Seconds before the time limit at which SLURM warns a task (USR2) so that submitit requeues it: 90, or a
        quarter of a short limit (at least 10 s) -- a warning 90 s before the end of a 1-minute task would come
        at its start and requeue it before it has trained at all."""
        return int(min(90, max(10, self.time_min * 60 // 4)))

    def parameters(self) -> dict[str, Any]:
        """Keyword arguments for `submitit.AutoExecutor.update_parameters` (unset options left out)."""
        gpus = 1 if self.gpus_per_job is None else self.gpus_per_job
        params: dict[str, Any] = {"name": "bench", "timeout_min": self.time_min,
                                  "slurm_signal_delay_s": self.signal_delay_s}
        if gpus:  # no GPU request at all on a CPU partition (some clusters refuse even a zero GRES)
            params["gpus_per_node"] = gpus
        if self.mem_gb is not None:
            params["mem_gb"] = self.mem_gb
        if self.cpus_per_task is not None:
            params["cpus_per_task"] = self.cpus_per_task
        if self.partition:
            params["slurm_partition"] = self.partition
        if self.array_parallelism is not None:
            params["slurm_array_parallelism"] = self.array_parallelism
        if self.sbatch:
            params["slurm_additional_parameters"] = dict(self.sbatch)
        return params


def parse_sbatch(items: list[str]) -> dict[str, str]:
    """`["account=abc", "qos=high"]` (repeated --sbatch flags) -> {'account': 'abc', 'qos': 'high'}."""
    parsed: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not sep or not key:
            raise BenchError(f"--sbatch {item!r}: expected KEY=VALUE, e.g. --sbatch account=myproject")
        parsed[key] = value.strip()
    return parsed


def load_profile(path: str | Path) -> dict[str, Any]:
    """A SLURM profile (YAML mapping of SLURM_KEYS, dashes or underscores), keys normalised."""
    try:
        raw = yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise BenchError(f"cannot read SLURM profile {path}: {exc}".splitlines()[0]) from exc
    if not isinstance(raw, dict):
        raise BenchError(f"SLURM profile {path} must be a YAML mapping such as `partition: gpu`")
    profile = {str(k).replace("-", "_"): v for k, v in raw.items()}
    unknown = sorted(set(profile) - set(SLURM_KEYS))
    if unknown:
        raise BenchError(f"SLURM profile {path}: unknown key(s) {unknown}; known: {', '.join(SLURM_KEYS)}")
    return profile


def slurm_options(*layers: dict[str, Any]) -> SlurmOptions:
    """SlurmOptions from layers of SLURM_KEYS values, later layers winning (None = not given);
    `sbatch` entries are merged key by key."""
    values: dict[str, Any] = {}
    sbatch: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if value is None:
                continue
            if key not in SLURM_KEYS:
                raise BenchError(f"unknown SLURM option {key!r}; known: {', '.join(SLURM_KEYS)}")
            if key == "sbatch":
                if isinstance(value, (list, tuple)):
                    value = parse_sbatch([str(v) for v in value])
                if not isinstance(value, dict):
                    raise BenchError(f"sbatch must be a mapping (account: abc) or KEY=VALUE items, got {value!r}")
                sbatch.update({str(k): v for k, v in value.items()})
            else:
                values[key] = _typed(key, value)
    return SlurmOptions(**values, sbatch=tuple(sorted(sbatch.items())))


def _typed(key: str, value: Any) -> Any:
    """A SLURM option value checked against its type (numbers written as text are accepted)."""
    kind = {"partition": str, "mem_gb": float}.get(key, int)
    if isinstance(value, bool) or (kind is str and not isinstance(value, str)):
        raise BenchError(f"SLURM option {key} must be a {kind.__name__}, got {value!r}")
    try:
        number = float(value) if kind is not str else None
    except (TypeError, ValueError):
        raise BenchError(f"SLURM option {key} must be a {kind.__name__}, got {value!r}") from None
    if kind is int:
        if number is None or not number.is_integer():
            raise BenchError(f"SLURM option {key} must be a whole number, got {value!r}")
        return int(number)
    return value if kind is str else number


def parse_gres_gpus(gres: str) -> int:
    """GPUs per node in an `sinfo %G` GRES field: `gpu:a100:4(S:0-1),shard:8` -> 4, `(null)` -> 0."""
    count = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu":
            count = max(count, int(parts[-1]) if parts[-1].isdigit() else 1)
    return count


def partition_gpus(partition: str | None) -> tuple[str, int] | None:
    """(partition, GPUs per node at most) as `sinfo` reports them, for `partition` or the cluster's default
    one; None when sinfo cannot be asked. BenchError for a partition SLURM does not know."""
    if not shutil.which("sinfo"):
        return None
    command = ["sinfo", "-h", "-o", "%P %G"] + (["-p", partition] if partition else [])
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [line.split(None, 1) for line in out.stdout.splitlines() if line.strip()]
    if out.returncode != 0:
        return None
    if partition is None:
        rows = [r for r in rows if r[0].endswith("*")]  # the default partition carries a `*`
    if not rows:
        if partition:
            raise BenchError(f"--partition {partition}: SLURM has no such partition (`sinfo` lists none); "
                             "see `sinfo -s` for the partitions")
        return None
    name = rows[0][0].rstrip("*")
    return name, max(parse_gres_gpus(r[1] if len(r) > 1 else "") for r in rows)


def with_gpu_request(options: SlurmOptions, gpus: tuple[str, int] | None) -> SlurmOptions:
    """`options` with GPUs per array task decided before anything is submitted: the default is 1 where the
    partition has GPUs and 0 where it has none (1 when sinfo cannot be asked); asking for more GPUs than the
    partition's nodes have is a BenchError."""
    if gpus is None:
        return options if options.gpus_per_job is not None else dataclasses.replace(options, gpus_per_job=1)
    name, available = gpus
    if options.gpus_per_job is None:
        return dataclasses.replace(options, gpus_per_job=min(1, available))
    if options.gpus_per_job > available:
        has = f"has {available} GPU(s) per node" if available else "has no GPUs (GRES)"
        raise BenchError(f"--gpus-per-job {options.gpus_per_job}: partition {name} {has}; ask for "
                         f"{available or 0} or less, or choose a GPU partition with --partition")
    return options
