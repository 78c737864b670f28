"""Run shards on a SLURM cluster through submitit: options and profiles, packing shards into array tasks,
the job callable (requeued on preemption or timeout, resuming from the last epoch checkpoint), and the
`submitted.json` record that `bench status` reads.

submitit is optional (`pip install clbench[slurm]`); this module imports without it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import yaml

from bench import store
from bench.data import DataRef
from bench.errors import BenchError
from bench.settings import SLURM_KEYS
from bench.spec import RunSpec
from bench.status import SUBMISSIONS, SUBMITTED

try:  # the job callable must be a submitit Checkpointable to be requeued; without submitit nothing is submitted
    from submitit.helpers import Checkpointable, DelayedSubmission
except ImportError:  # pragma: no cover - exercised only where submitit is absent
    class Checkpointable:  # type: ignore[no-redef]
        """Stand-in so this module imports without submitit (submission checks for it first)."""

    DelayedSubmission = None  # type: ignore[assignment,misc]

if TYPE_CHECKING:
    from bench.runner import Shard
    from bench.shard import ShardOutcome, ShardRequest

log = logging.getLogger(__name__)

EXECUTORS = ("local", "slurm")
INSTALL = "pip install clbench[slurm]"
# sbatch options that have their own flag; `--sbatch` must not set them a second time.
OWN_FLAGS = {"partition": "--partition", "time": "--time-min", "gpus-per-node": "--gpus-per-job",
             "mem": "--mem-gb", "cpus-per-task": "--cpus-per-task", "array": "--array-parallelism"}


# ----------------------------------------------------------------------------------------------- options

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


def require_submitit() -> None:
    """Fail with the install command when submitit is missing."""
    if importlib.util.find_spec("submitit") is None:
        raise BenchError(f"--executor slurm needs submitit: {INSTALL}")


# ----------------------------------------------------------------------------------------------- the job

@dataclass(frozen=True)
class ShardTask:
    """One shard as a job receives it: its spec and where its data comes from (both picklable)."""

    spec: RunSpec
    data: DataRef


def task_of(shard: "Shard") -> ShardTask:
    """The picklable task of a planned shard."""
    if shard.source is None:
        raise BenchError(f"shard {shard.spec.key} has no data source; plan it with bench.runner.plan")
    return ShardTask(shard.spec, shard.source)


class ShardJob(Checkpointable):
    """The callable each array task runs: reload the data, check its fingerprint, and run the task's shards
    with `bench.runner.execute` (K at once per GPU when shards_per_gpu = K). On preemption or timeout
    submitit calls `checkpoint`, which resubmits the same shards; finished ones are skipped and unfinished
    ones resume from their last epoch checkpoint."""

    def __init__(self, results_dir: str | Path, device: str = "auto", overwrite: bool = False,
                 request: "ShardRequest | None" = None, shards_per_gpu: int = 1) -> None:
        self.results_dir = str(Path(results_dir).resolve())
        self.device = device
        self.overwrite = overwrite
        self.request = request
        self.shards_per_gpu = shards_per_gpu

    def __call__(self, tasks: list[ShardTask]) -> list["ShardOutcome"]:
        """Run the shards of one array task; returns their outcomes (failures recorded, never raised)."""
        from bench.runner import Shard, execute
        from bench.shard import ShardRequest

        logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        use_allocated_cpus()
        results_dir = Path(self.results_dir)
        overwrite = self.overwrite and not requeued_run()
        shards: list[Shard] = []
        outcomes: list[ShardOutcome] = []
        loaded: dict[DataRef, Any] = {}
        for task in tasks:
            try:
                if task.data not in loaded:
                    loaded[task.data] = task.data.load()
                data = loaded[task.data]
                data.require_fingerprint(task.spec.data_fingerprint, "submission", "plan and submit again")
            except Exception as exc:  # one bad dataset fails its shards, not the array task
                reason = str(exc) if isinstance(exc, BenchError) else f"{exc.__class__.__name__}: {exc}"
                outcomes.append(fail_task(results_dir, task, reason))
                print(f"failed  {task.spec.key}  {reason}", flush=True)
                continue
            shards.append(Shard(task.spec, data, task.data))

        def report(i: int, n: int, outcome: ShardOutcome) -> None:
            print(f"[{i}/{n}] {outcome.status:7s} {outcome.key}  {outcome.message}"
                  + (f"  ({outcome.seconds:.0f}s)" if outcome.status == "done" else ""), flush=True)

        outcomes += execute(shards, results_dir, 1, self.device, overwrite, False, report,
                            self.request or ShardRequest(), shards_per_gpu=self.shards_per_gpu)
        return outcomes

    def checkpoint(self, tasks: list[ShardTask]) -> Any:
        """The resubmission submitit requeues: the same shards, never overwriting (that would discard the
        epoch checkpoints the requeued job resumes from)."""
        require_submitit()
        return DelayedSubmission(ShardJob(self.results_dir, self.device, False, self.request, self.shards_per_gpu),
                                 tasks)

    def __repr__(self) -> str:
        return f"ShardJob({self.results_dir!r}, overwrite={self.overwrite}, shards_per_gpu={self.shards_per_gpu})"


def use_allocated_cpus() -> None:
    """Train with as many CPU threads as SLURM allocated to the task (unless OMP_NUM_THREADS says otherwise): on a
    cluster without CPU binding torch would start a thread per core of the node, and tasks sharing a node would
    slow each other down many times over (measured: 28x with two tasks on two cores)."""
    if "OMP_NUM_THREADS" in os.environ:
        return
    import torch

    from bench.runner import cpu_count

    torch.set_num_threads(cpu_count())


def requeued_run() -> bool:
    """Whether this process is a rerun of a requeued SLURM job (SLURM_RESTART_COUNT > 0): it must resume, even
    when the submission asked to overwrite, or a requeue by the scheduler or an admin would throw away the
    checkpoints of the run it interrupted."""
    try:
        return int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0
    except ValueError:
        return False


def fail_task(results_dir: Path, task: ShardTask, reason: str) -> "ShardOutcome":
    """Record a shard that could not start (its data failed to load or changed) as failed."""
    from bench.shard import fail

    return fail(results_dir / task.spec.key, task.spec, reason, "", time.perf_counter())


# ----------------------------------------------------------------------------------------------- submission

def pack(items: list[Any], shards_per_gpu: int = 1, gpus_per_job: int = 1) -> list[list[Any]]:
    """Consecutive groups of shards, one per array task: shards_per_gpu per GPU of the task (the task runs
    them shards_per_gpu at a time per GPU, in worker processes)."""
    if shards_per_gpu < 1:
        raise BenchError("--shards-per-gpu must be >= 1")
    size = shards_per_gpu * max(1, gpus_per_job)
    return [items[i:i + size] for i in range(0, len(items), size)]


def new_executor(folder: Path, cluster: str = "slurm", max_timeouts: int = 3) -> Any:
    """A submitit AutoExecutor writing into `folder`, requeueing a task that hits its time limit up to
    `max_timeouts` times (checks that submitit and SLURM are here)."""
    require_submitit()
    import submitit

    if cluster == "slurm" and not (shutil.which("sbatch") and shutil.which("srun")):
        raise BenchError("--executor slurm: no `sbatch`/`srun` on this machine; run `bench run` on the "
                         "cluster's login node, or use --executor local")
    return submitit.AutoExecutor(folder=folder, cluster=cluster, slurm_max_num_timeout=max_timeouts)


@dataclass
class Submission:
    """What one `bench run --executor slurm` submitted: its folder, record and jobs."""

    folder: Path
    record: dict[str, Any]
    jobs: list[Any] = field(default_factory=list)

    @property
    def record_path(self) -> Path:
        """Where the submitted.json record is."""
        return self.folder / SUBMITTED


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


def submission_folder(results_dir: Path) -> Path:
    """A new `<results>/.slurm/<timestamp>` folder (suffixed when two submissions share a second)."""
    base = results_dir.resolve() / SUBMISSIONS / datetime.now().strftime("%Y%m%d-%H%M%S")
    folder, n = base, 1
    while folder.exists():
        n += 1
        folder = base.with_name(f"{base.name}-{n}")
    folder.mkdir(parents=True)
    return folder


def submit(shards: list["Shard"], results_dir: Path, options: SlurmOptions,
           request: "ShardRequest | None" = None, device: str = "auto", overwrite: bool = False,
           shards_per_gpu: int = 1, cluster: str = "slurm",
           make_executor: Callable[[Path, str, int], Any] | None = None) -> Submission:
    """Submit shards as one submitit job array (returns at once) and write its submitted.json record."""
    if not shards:
        raise BenchError("nothing to submit")
    if cluster == "slurm":
        options = with_gpu_request(options, partition_gpus(options.partition))
    groups = pack([task_of(s) for s in shards], shards_per_gpu, options.gpus_per_job or 0)
    folder = submission_folder(results_dir)
    try:
        executor = (make_executor or new_executor)(folder, cluster, options.max_timeouts)
        executor.update_parameters(**options.parameters())
        job = ShardJob(results_dir, device, overwrite, request, shards_per_gpu)
        jobs = executor.map_array(job, groups)
    except Exception as exc:  # sbatch refused (bad partition, account...): its message, on one line
        shutil.rmtree(folder, ignore_errors=True)  # a refused submission leaves nothing behind
        if isinstance(exc, BenchError):
            raise
        reason = " ".join(str(exc).split())[:300] or exc.__class__.__name__
        raise BenchError(f"SLURM refused the submission: {reason} (check --partition/--sbatch)") from exc
    record = {
        "submitted_at": datetime.now(timezone.utc).isoformat(), "submitted_ts": time.time(),
        "cluster": cluster, "folder": str(folder), "results_dir": str(results_dir.resolve()),
        "parameters": options.parameters(), "max_timeouts": options.max_timeouts, "shards_per_gpu": shards_per_gpu,
        "overwrite": overwrite,
        "argv": sys.argv, "jobs": [], "shards": {},
    }
    for index, (handle, group) in enumerate(zip(jobs, groups)):
        job_id = str(handle.job_id)
        array_job, _, array_task = job_id.partition("_")
        record["jobs"].append({"job_id": job_id, "shards": [t.spec.key for t in group],
                               "stdout": str(handle.paths.stdout), "stderr": str(handle.paths.stderr)})
        for task in group:
            record["shards"][task.spec.key] = {"job_id": job_id, "array_job": array_job,
                                               "array_task": int(array_task) if array_task.isdigit() else index}
    store.write_json(folder / SUBMITTED, record)
    return Submission(folder, record, list(jobs))
