"""How busy this machine is, and how many torch threads a CPU run should train with on it.

The rule (`advise`): J workers x T torch threads on C usable cores are oversubscribed when the 1-minute load
average L, read before training (other work only), plus min(T*J, C) exceeds C + max(1, C/4). The slack absorbs
load that is not competing work (the average's lag, the run's own planning, short-lived processes); beyond it
torch's threads spin at barriers while one waits descheduled, for 3-4x the CPU. A busy run says so; with
--adapt-threads it then trains with the free cores, floor((C - L) / J) threads per worker, at least 1. By default
the threads stay as on an idle machine: fewer threads change the order of sums and so a run's last digits, and the
same command and seed must give the same digits under any load (issue 52). The cap at C keeps a run's own --jobs from reading
as a busy machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

SLACK_SHARE = 0.25  # of the cores, at least one core: load the rule tolerates before it calls a machine busy


def slurm_cpus() -> int | None:
    """CPUs SLURM allocated to this task (SLURM_CPUS_PER_TASK, else the job's SLURM_CPUS_ON_NODE); None outside
    SLURM."""
    for name in ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


def cpu_count() -> int:
    """CPUs this process may use: its CPU affinity, and under SLURM no more than the task's allocation (a
    cluster without CPU binding lets a task see every core of the node)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 1
    allocated = slurm_cpus()
    return min(usable, allocated) if allocated else usable


def load_average() -> float | None:
    """The machine's 1-minute load average (runnable threads, every process); None where the system has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):  # not available (Windows, some containers)
        return None


def explicit_threads() -> int | None:
    """OMP_NUM_THREADS when set to a positive integer: the user's own choice of threads, never changed."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


@dataclass(frozen=True)
class Advice:
    """The load a run meets and the torch threads per worker it should use (`threads` when not busy)."""

    load: float | None
    cores: int
    threads: int
    workers: int
    busy: bool
    recommended: int

    def line(self, adapt: bool = True) -> str:
        """The one line `clbench run` prints on a busy machine; `adapt`: it trains with `recommended` threads
        (--adapt-threads), else with `threads` whatever the load, so that its digits do not depend on it."""
        per = " per worker" if self.workers > 1 else ""
        if self.recommended >= self.threads:
            using = f"training with {thread_text(self.threads)}{per}, already the fewest"
        elif adapt:
            using = f"training with {thread_text(self.recommended)}{per} instead of {self.threads} (--adapt-threads)"
        else:
            using = (f"training with {thread_text(self.threads)}{per} as on an idle machine, so the digits are the "
                     f"same; --adapt-threads would use {self.recommended}, faster here (its digits may differ)")
        jobs = " or pass --jobs 1" if self.workers > 1 else ""
        return (f"clbench: this machine is busy (load {self.load:.1f} on {self.cores} cores): {using}; "
                f"close other work{jobs} for honest timings")


def thread_text(n: int) -> str:
    """`1 torch thread`, `2 torch threads`."""
    return f"{n} torch thread{'s' if n != 1 else ''}"


def advise(threads: int, workers: int = 1, load: float | None = None, cores: int | None = None) -> Advice:
    """Whether `workers` x `threads` torch threads oversubscribe this machine at `load` (default: now) on `cores`
    (default: `cpu_count()`), and the threads per worker to use (see the module's rule)."""
    cores = cores or cpu_count()
    load = load_average() if load is None else load
    threads, workers = max(1, threads), max(1, workers)
    if load is None:
        return Advice(None, cores, threads, workers, False, threads)
    busy = load + min(threads * workers, cores) > cores + max(1.0, SLACK_SHARE * cores)
    fewer = max(1, min(threads, int((cores - load) // workers))) if busy else threads
    return Advice(load, cores, threads, workers, busy, fewer)
