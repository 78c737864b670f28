"""`clbench verify`: check a whole results folder -- every run's files against its manifest (hashes included),
the gathered table against the run folders, temporaries left by interrupted writes, stale or damaged leases --
and, with `repair`, do what a run would do about each problem, without training."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.results import lease, manifest, repair, runfiles, store
from bench.results.names import CHECKPOINT, ROWS, SPEC, TABLE

RUN_MARKERS = (ROWS, SPEC, CHECKPOINT, manifest.MANIFEST, lease.LEASE)
ASIDE = ".aside"  # folders that hold another run than their name says, moved here whole by --repair


@dataclass
class Problem:
    """One problem found: where (a path under the results folder), what is wrong, what fixes it, and what
    `--repair` did about it ("" when it was not repaired)."""

    where: str
    what: str
    fix: str
    repaired: str = ""
    spoils: bool = False  # the run's results are damaged: the gathered table must leave it out

    def line(self) -> str:
        """`where: what; fix` (or `; repaired: ...`)."""
        return f"{self.where}: {self.what}; " + (f"repaired: {self.repaired}" if self.repaired else self.fix)


@dataclass
class Report:
    """What `verify` checked and found."""

    runs: int = 0
    files: int = 0
    megabytes: float = 0.0
    unverified: list[str] = field(default_factory=list)  # finished runs without a manifest (checked by reading)
    problems: list[Problem] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        """One line: how much was checked, how long it took, how many problems (how many repaired)."""
        repaired = sum(bool(p.repaired) for p in self.problems)
        found = f"{len(self.problems)} problem(s)" + (f", {repaired} repaired" if repaired else "")
        legacy = (f"; {len(self.unverified)} finished run(s) have no manifest (written before manifests; checked "
                  "by reading them; `--repair` gives them one)") if self.unverified else ""
        return (f"verified {self.runs} run(s), {self.files} file(s), {self.megabytes:.1f} MB in "
                f"{self.seconds:.1f} s: {found if self.problems else 'no problems'}{legacy}")


def run_folders(results_dir: Path) -> list[Path]:
    """The run folders under `results_dir` (folders holding any file a run writes)."""
    if not results_dir.is_dir():
        return []
    return [p for p in sorted(results_dir.iterdir())
            if p.is_dir() and not p.name.startswith(".") and any((p / m).exists() for m in RUN_MARKERS)]


def verify(results_dir: Path, fix: bool = False) -> Report:
    """Check every run folder and the gathered table under `results_dir`; with `fix`, repair what is found."""
    started = time.perf_counter()
    report = Report()
    for run_dir in run_folders(results_dir):
        report.runs += 1
        check_run(run_dir, report, fix)
    check_table(results_dir, report, fix)
    report.seconds = time.perf_counter() - started
    return report


def check_run(run_dir: Path, report: Report, fix: bool) -> None:
    """Check one run folder (see the module) and add its problems to `report`."""
    key = run_dir.name
    files = [p for p in run_dir.rglob("*") if p.is_file() and manifest.DAMAGED not in p.relative_to(run_dir).parts]
    report.files += len(files)
    report.megabytes += sum(p.stat().st_size for p in files) / 1e6
    holder = lease.read(run_dir)
    stale = lease.stale_reason(holder) if holder is not None else ""
    live = holder is not None and not stale
    if holder is not None and stale:
        what = stale if not holder.record else f"stale lease of {holder.holder} ({stale})"
        problem = Problem(f"{key}/{lease.LEASE}", what, "the next `clbench run` takes it over")
        if fix:
            claim = repair.lease_free(run_dir)
            if claim is not None:
                claim.release()
                problem.repaired = "removed"
        report.problems.append(problem)
    temporaries = [p for p in files if p.name.startswith(".") and p.name.endswith(".tmp")]
    if temporaries and not live:
        problem = Problem(f"{key}/{manifest.name_in(run_dir, temporaries[0])}",
                          f"{len(temporaries)} temporary file(s) of interrupted writes",
                          "the next `clbench run` of the shard removes them")
        if fix:
            for tmp in temporaries:
                tmp.unlink(missing_ok=True)
            problem.repaired = "removed"
        report.problems.append(problem)
    if live:
        return  # a runner writes into it now: its files are checked once it has ended
    if not runfiles.is_finished(run_dir):
        found = unfinished_problems(run_dir)
    else:
        found = runfiles.problems(run_dir, deep=True)
        if not (run_dir / manifest.MANIFEST).exists():
            report.unverified.append(key)
            if fix and not found:
                repair.adopt(run_dir)
    if not found:
        return
    problems = [Problem(f"{key}/{d.name}", d.what, hint(d), spoils=runfiles.damages_results(d)) for d in found]
    if fix and any(d.what.startswith(runfiles.MISNAMED) for d in found):  # no run's folder: moved aside whole
        target = run_dir.parent / ASIDE / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) / run_dir.name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(run_dir, target)
        for problem in problems:
            problem.repaired = f"the folder moved to {ASIDE}/{target.parent.name}/"
        report.problems.extend(problems)
        return
    if fix:
        claim = repair.lease_free(run_dir)
        if claim is not None:
            with claim:
                done = repair.repair(run_dir, found)
            for problem, action in zip(problems, done.actions):
                problem.repaired = action
    report.problems.extend(problems)


def hint(damage: manifest.Damaged) -> str:
    """What fixes a damaged file of a finished run, and when."""
    what = repair.consequence(damage.name, damage.what)
    if what == repair.MOVED_WHOLE:  # another run's folder: no run of this key repairs it
        return what
    if what == repair.IGNORED:
        return f"moved aside by the next `clbench run` (or `clbench verify --repair` now); {what}"
    return f"{what} by the next `clbench run` (or `clbench verify --repair` now)"


def unfinished_problems(run_dir: Path) -> list[manifest.Damaged]:
    """Damage in an unfinished run that its next run would meet: an unreadable manifest, a checkpoint that does
    not verify (it is moved aside then, and the shard trains from the start)."""
    try:
        listing = manifest.load(run_dir)
    except manifest.Damaged as damage:
        return [damage]
    if not (run_dir / CHECKPOINT).is_file():
        return []
    try:
        if listing is not None and CHECKPOINT in listing["files"]:
            manifest.check_file(run_dir, CHECKPOINT, listing)
        else:
            runfiles.check_readable(run_dir, CHECKPOINT)
    except manifest.Damaged as damage:
        return [damage]
    return []


def check_table(results_dir: Path, report: Report, fix: bool) -> None:
    """The gathered table against the run folders: readable, and holding exactly the healthy finished runs."""
    table = results_dir / TABLE
    finished = {p.parent.name for p in results_dir.glob(f"*/{ROWS}")} if results_dir.is_dir() else set()
    damaged = {p.where.split("/", 1)[0] for p in report.problems if p.spoils and not p.repaired}
    expected = finished - damaged
    if not table.is_file():
        if not expected:
            return
        what = "missing"
    else:
        what = table_mismatch(table, expected)
        if not what:
            return
    rerun_gathers = not table.is_file() or bool(store.table_damage(results_dir))  # what any run sees (table_is_stale)
    problem = Problem(TABLE, what, "`clbench verify --repair` (or any `clbench run`) gathers it again" if rerun_gathers
                      else "`clbench verify --repair` gathers it again")
    if fix:
        store.gather(results_dir)
        problem.repaired = "gathered again from the run folders"
    report.problems.append(problem)


def table_mismatch(table: Path, expected: set[str]) -> str:
    """How the gathered table differs from the finished runs ("" when it holds exactly them)."""
    import pandas as pd

    try:
        keys = set(pd.read_parquet(table, columns=["run_key"])["run_key"])
    except Exception as exc:  # pyarrow raises many kinds for a damaged file
        return f"unreadable ({manifest.short(exc)})"
    missing, extra = sorted(expected - keys), sorted(keys - expected)
    parts = [f"lacks {len(missing)} finished run(s) (e.g. {missing[0]})" if missing else "",
             f"holds {len(extra)} run(s) that are not finished or are damaged (e.g. {extra[0]})" if extra else ""]
    return "; ".join(p for p in parts if p)
