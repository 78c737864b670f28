"""What damage in a finished run does, file by file (the one place that decides it):

- its rows, spec, predictions, confusion matrices, training log or method state: the damaged files are moved
  aside and the run is emptied, so it is retrained as unfinished;
- its model: moved aside; the evaluations that need it are `no-model`, with the reason;
- an evaluation's rows or files: moved aside (the evaluation's rows and folder together), so it is redone;
- a listed file that is gone (deleted by hand): dropped from the manifest, with the cost of its kind above (a
  model: no-model; an evaluation: redone when a run asks for it; a training file: the run retrained);
- an evaluation file kept under its plain name in the run folder: moved aside (restored from its evaluation);
- a file in evals/ that the manifest does not list (not written by clbench): moved aside, nothing redone;
- a folder holding another run (its spec's key is not its name: copied or renamed): its files moved aside, the
  run retrained under its own key (`clbench verify --repair` moves such a folder to the results' .aside/);
- its manifest: moved aside, and a new one made from the files that still read whole (`adopt`);
- an unfinished run's checkpoint: moved aside (by the Trainer, or `repair`), so the shard trains from the start.

Damaged files go to the run's `damaged/<UTC time>/`, never deleted. The caller holds the shard's lease."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.results import lease, manifest, runfiles, store
from bench.results.manifest import Damaged
from bench.results.names import CHECKPOINT, EVALS, LEGACY_MODEL, MODEL, TRAINING_FILES

RETRAIN = "the run is retrained"
NO_MODEL = "evaluations that need the model are no-model (retrain it with --overwrite)"
REDO = "the evaluation is redone"
RESTORE = "restored from its evaluation"
ADOPTED = "a new manifest lists the files that read whole"
RESTART = "the shard trains from the start"
IGNORED = "nothing is redone (clbench never read it)"
MOVED_WHOLE = ("never gathered; `clbench verify --repair` moves the folder to the results' .aside/ (or delete it; a "
               "re-run of its key retrains it)")


@dataclass
class Repair:
    """What `repair` did to a run: one note per file it moved (the damage, then the action), one action per damage
    found, and whether the run must be retrained."""

    notes: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    retrain: bool = False


def consequence(name: str, what: str = "") -> str:
    """What happens to a run when its file `name` is damaged (`what`: how; one of the phrases above)."""
    if what == runfiles.FOREIGN:
        return IGNORED
    if what.startswith(runfiles.MISNAMED):
        return MOVED_WHOLE
    if name in TRAINING_FILES:
        return RETRAIN
    if name in (MODEL, LEGACY_MODEL):
        return NO_MODEL
    if name.startswith(EVALS + "/"):
        return REDO
    if name == manifest.MANIFEST:
        return ADOPTED
    if name == CHECKPOINT:
        return RESTART
    return RESTORE


def evaluation_files(name: str) -> list[str]:
    """The files moved aside with a damaged evaluation file: the evaluation's rows and its folder."""
    stem = name[len(EVALS) + 1:].split("/", 1)[0]
    stem = stem[:-len(".json")] if stem.endswith(".json") else stem
    return [f"{EVALS}/{stem}.json", f"{EVALS}/{stem}"]


def repair(run_dir: Path, found: list[Damaged] | None = None) -> Repair:
    """Move a run's damaged files aside and leave it as a run would then treat it (see the module);
    `found`: its `runfiles.problems`, when known."""
    run_dir = Path(run_dir)
    found = runfiles.problems(run_dir) if found is None else found
    done = Repair()
    for damage in found:
        if damage.what.startswith(runfiles.MISNAMED):  # another run's files under this key: retrain this one
            done.actions.append(f"{RETRAIN} (the other run's files moved aside)")
            done.notes.append(f"{damage}: {done.actions[-1]}")
            done.retrain = True
            continue
        what = consequence(damage.name, damage.what)
        names = evaluation_files(damage.name) if what == REDO else [damage.name]
        gone = damage.what.startswith(manifest.MISSING)  # deleted: only its manifest entry is left to drop
        if what == REDO and not gone and not any((run_dir / n).exists() for n in names):
            done.actions.append(f"moved aside with its evaluation, {what}")  # with another file of it
            continue
        folder = manifest.move_aside(run_dir, names, damage.what)
        if what == ADOPTED:
            adopt(run_dir)
        done.actions.append(f"{'dropped from the manifest' if gone else f'moved to {folder}/'}, {what}")
        done.notes.append(f"{damage}: {done.actions[-1]}")
        done.retrain = done.retrain or what == RETRAIN
    if done.retrain:
        if any(d.what.startswith(runfiles.MISNAMED) for d in found):
            manifest.move_aside(run_dir, sorted(e.name for e in run_dir.iterdir() if e.name != manifest.DAMAGED
                                                and not lease.is_lease_file(e.name)), runfiles.MISNAMED)
        store.reset_run(run_dir)
    return done


def model_damaged(run_dir: Path, damage: Damaged) -> str:
    """Move a model file that failed verification when loaded aside; the note saying so."""
    folder = manifest.move_aside(Path(run_dir), [damage.name if damage.name in (MODEL, LEGACY_MODEL) else MODEL],
                                 damage.what)
    return f"{damage}: moved to {folder}/, {NO_MODEL}"


def adopt(run_dir: Path) -> list[str]:
    """Give a run without a (readable) manifest a new one listing its files that read whole (JSON, gzip JSON
    Lines, torch archives with sound checksums); returns the files it could not adopt."""
    run_dir = Path(run_dir)
    refused = []
    for name in runfiles.unlisted(run_dir, set(), deep=True):
        try:
            runfiles.check_readable(run_dir, name)
        except Damaged:
            refused.append(name)
            continue
        manifest.record(run_dir, run_dir / name, *manifest.digest_file(run_dir / name))
    return refused


def lease_free(run_dir: Path) -> lease.Lease | None:
    """The run's lease when no live runner holds it (for `clbench verify --repair`), else None."""
    try:
        return lease.acquire(run_dir)
    except lease.Held:
        return None
