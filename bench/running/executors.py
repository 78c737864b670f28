"""Run shards on a SLURM cluster through submitit (what each task asks for: bench.running.slurm_options):
packing shards into array tasks, the job callable (requeued on preemption or timeout, resuming from the last epoch checkpoint), and the
`submitted.json` record that `clbench status` reads.

submitit is optional (the extra `slurm`: `pip install -e ".[slurm]"` in the checkout); this module imports without it.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable


from bench.results import store
from bench.data.loading import DataRef
from bench.errors import BenchError, install_extra
from bench.running.slurm_options import SlurmOptions, partition_gpus, with_gpu_request
from bench.spec import RunSpec
from bench.running.status import SUBMISSIONS, SUBMITTED

try:  # the job callable must be a submitit Checkpointable to be requeued; without submitit nothing is submitted
    from submitit.helpers import Checkpointable, DelayedSubmission
except ImportError:  # pragma: no cover - exercised only where submitit is absent
    class Checkpointable:  # type: ignore[no-redef]
        """Stand-in so this module imports without submitit (submission checks for it first)."""

    DelayedSubmission = None  # type: ignore[assignment,misc]

if TYPE_CHECKING:
    from bench.running.runner import Shard
    from bench.running.outcome import ShardOutcome, ShardRequest

log = logging.getLogger(__name__)

EXECUTORS = ("local", "slurm")
INSTALL = install_extra("slurm")


# ----------------------------------------------------------------------------------------------- options

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
        raise BenchError(f"shard {shard.spec.key} has no data source; plan it with bench.running.runner.plan")
    return ShardTask(shard.spec, shard.source)


class ShardJob(Checkpointable):
    """The callable each array task runs: reload the data, check its fingerprint, and run the task's shards
    with `bench.running.runner.execute` (K at once per GPU when shards_per_gpu = K). On preemption or timeout
    submitit calls `checkpoint`, which resubmits the same shards; finished ones are skipped and unfinished
    ones resume from their last epoch checkpoint. The signals stay submitit's (SIGUSR2: checkpoint and requeue;
    SIGTERM: ignored, the requeue follows): `execute` runs without `handle_signals`, and a lease the killed job
    left is taken over by its requeued run (bench.results.lease)."""

    def __init__(self, results_dir: str | Path, device: str = "auto", overwrite: bool = False,
                 request: "ShardRequest | None" = None, shards_per_gpu: int = 1) -> None:
        self.results_dir = str(Path(results_dir).resolve())
        self.device = device
        self.overwrite = overwrite
        self.request = request
        self.shards_per_gpu = shards_per_gpu

    def __call__(self, tasks: list[ShardTask]) -> list["ShardOutcome"]:
        """Run the shards of one array task; returns their outcomes (failures recorded, never raised)."""
        from bench.running.runner import Shard, execute
        from bench.running.outcome import ShardRequest

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

    from bench.running.machine_load import cpu_count

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
    from bench.running.shard import fail

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
        raise BenchError("--executor slurm: no `sbatch`/`srun` on this machine; run `clbench run` on the "
                         "cluster's login node, or use --executor local")
    return submitit.AutoExecutor(folder=folder, cluster=cluster, slurm_max_num_timeout=max_timeouts)


@dataclass
class Submission:
    """What one `clbench run --executor slurm` submitted: its folder, record and jobs."""

    folder: Path
    record: dict[str, Any]
    jobs: list[Any] = field(default_factory=list)

    @property
    def record_path(self) -> Path:
        """Where the submitted.json record is."""
        return self.folder / SUBMITTED


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
