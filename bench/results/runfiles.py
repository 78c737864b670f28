"""Every file of a run folder is written and read here: JSON, JSON Lines, torch files (model, checkpoint) and
evaluator artefacts, each write recorded in the run's manifest and each read checked against it
(bench.results.manifest). A file that fails is a `manifest.Damaged` naming it; `problems` lists a run's damage."""

from __future__ import annotations

import gzip
import io
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench.results import atomic, manifest
from bench.results.manifest import Damaged
from bench.results.names import CHECKPOINT, EVALS, ROWS, SPEC, TRAINING_FILES

ARTEFACT_KINDS = (".jsonl.gz", ".json")  # what write_artefact writes: a list of records, a JSON value
WEIGHTS = (".pt", ".safetensors")  # model and checkpoint files: large, hashed when they are loaded
UNKNOWN = object()  # `manifest` argument not given: read it


def is_finished(run_dir: Path) -> bool:
    """Whether the run's rows have been written."""
    return (Path(run_dir) / ROWS).is_file()


@dataclass
class FolderCheck:
    """A run folder as a runner finds it (`check_folder`): whether it is finished, its damage, and its rows when it
    is finished and whole (read and verified once)."""

    finished: bool
    problems: list[Damaged] = field(default_factory=list)
    rows: list[dict[str, Any]] | None = None

    @property
    def healthy(self) -> bool:
        """Finished, no damage found, its rows read whole."""
        return self.finished and not self.problems and self.rows is not None


def check_folder(run_dir: Path) -> FolderCheck:
    """One run folder's state in one call: finished or not, its damage (`problems`), and its rows, read and verified
    (a rows file whose stat is the one written but whose content is not is damage found here)."""
    run_dir = Path(run_dir)
    if not is_finished(run_dir):
        return FolderCheck(False)
    found = problems(run_dir)
    if found:
        return FolderCheck(True, found)
    try:
        return FolderCheck(True, [], read_json(run_dir, ROWS))
    except Damaged as damage:
        return FolderCheck(True, [damage])


# ------------------------------------------------------------------------------------------------ writing

def write_json(run_dir: Path, name: str, data: Any) -> None:
    """Write the run file `name` (a path inside the run folder) as JSON, atomically, recorded in the manifest."""
    atomic.write_json(Path(run_dir) / name, data, Path(run_dir))


def write_jsonl_gz(run_dir: Path, name: str, rows: list[dict[str, Any]]) -> None:
    """Write the run file `name` as gzip JSON Lines, atomically, recorded in the manifest."""
    atomic.write_jsonl_gz(Path(run_dir) / name, rows, Path(run_dir))


def save_torch(run_dir: Path, name: str, obj: Any) -> None:
    """torch.save `obj` as the run file `name`, atomically, recorded in the manifest."""
    atomic.atomic_torch_save(obj, Path(run_dir) / name, Path(run_dir))


def write_bytes(run_dir: Path, name: str, data: bytes) -> None:
    """Write `data` as the run file `name`, atomically, recorded in the manifest."""
    with atomic.atomic_path(Path(run_dir) / name, Path(run_dir)) as tmp:
        tmp.write_bytes(data)


def link(run_dir: Path, source: str, target: str) -> None:
    """Make the run file `target` hold `source`'s content (a hard link, or a copy), recorded in the manifest."""
    atomic.link_or_copy(Path(run_dir) / source, Path(run_dir) / target, Path(run_dir))


def check_artefact_name(name: str) -> None:
    """ValueError unless `name` can name an evaluator artefact: a plain file name (no folder) of a kind
    `write_artefact` writes."""
    if not name or name != Path(name).name or name.startswith("."):
        raise ValueError(f"artefact name {name!r} is not a plain file name; an artefact is one file directly in "
                         "the run folder (use a constant of bench.results.names, e.g. names.TSNE)")
    if not name.endswith(ARTEFACT_KINDS):
        raise ValueError(f"artefact {name!r} has an unknown kind; name it *.json (a JSON value) or *.jsonl.gz "
                         "(a list of records)")


def write_artefact(run_dir: Path, name: str, content: Any) -> Path:
    """Write an evaluator's artefact into a run folder by its name's kind: a `.json` name holds a JSON value, a
    `.jsonl.gz` name a list of records; ValueError for any other name. Returns the file's path."""
    check_artefact_name(name)
    if name.endswith(".jsonl.gz"):
        write_jsonl_gz(run_dir, name, content)
    else:
        write_json(run_dir, name, content)
    return Path(run_dir) / name


def forget(run_dir: Path, name: str) -> None:
    """Delete the run file `name` on purpose (a finished run's checkpoint) and drop it from the manifest."""
    (Path(run_dir) / name).unlink(missing_ok=True)
    manifest.forget(Path(run_dir), name)


# ------------------------------------------------------------------------------------------------ reading

def manifest_or_none(run_dir: Path) -> dict[str, Any] | None:
    """The run's manifest; None when it has none or it is damaged (then it verifies nothing; files are still
    parsed, and `problems` names the damaged manifest)."""
    try:
        return manifest.load(Path(run_dir))
    except Damaged:
        return None


def read_bytes(run_dir: Path, name: str, listing: Any = UNKNOWN) -> bytes:
    """The run file `name`'s bytes, checked against the manifest (`listing`: the manifest, when read already);
    FileNotFoundError when it is not there, Damaged when it does not verify."""
    run_dir = Path(run_dir)
    data = (run_dir / name).read_bytes()
    manifest.check(run_dir, name, manifest_or_none(run_dir) if listing is UNKNOWN else listing, data)
    return data


def read_json(run_dir: Path, name: str, listing: Any = UNKNOWN) -> Any:
    """The run file `name` as JSON, verified (Damaged when it is not whole JSON or does not verify)."""
    data = read_bytes(run_dir, name, listing)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise Damaged(run_dir, name, f"not JSON: {manifest.short(exc)}") from None


def read_jsonl_gz(run_dir: Path, name: str) -> list[dict[str, Any]]:
    """The run file `name` as gzip JSON Lines, verified."""
    data = read_bytes(run_dir, name)
    try:
        lines = [line for line in gzip.decompress(data).decode("utf-8").splitlines() if line]
        return json.loads("[" + ",".join(lines) + "]")  # one parse of all records: 3x faster than one per line
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise Damaged(run_dir, name, f"not gzip JSON Lines: {manifest.short(exc)}") from None


def load_torch(run_dir: Path, name: str, weights_only: bool = True) -> Any:
    """The run file `name` loaded with torch (on the CPU), verified."""
    import torch

    data = read_bytes(run_dir, name)
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=weights_only)
    except Exception as exc:  # torch reports a cut or garbled file as RuntimeError, EOFError, UnpicklingError...
        raise Damaged(run_dir, name, f"not a torch file: {manifest.short(exc)}") from None


# ------------------------------------------------------------------------------------------------ a trained run

def store_run(run_dir: Path, files: dict[str, Any], save_model: Callable[[], None] | None,
              rows: list[dict[str, Any]]) -> None:
    """Store a trained run's results in one call, in the order that keeps a killed process safe: each of `files`
    (name -> content by its kind: a `.jsonl.gz` list of records, a `.json` value), the model (`save_model`, which
    writes it: bench.results.modelfile; None: no model kept), then the rows, which mark the run finished; last,
    its resume checkpoint is dropped."""
    for name, content in files.items():
        (write_jsonl_gz if name.endswith(".jsonl.gz") else write_json)(run_dir, name, content)
    if save_model is not None:
        save_model()
    write_json(run_dir, ROWS, rows)
    forget(run_dir, CHECKPOINT)


# ------------------------------------------------------------------------------------------------ damage

def damages_results(damage: Damaged) -> bool:
    """Whether a damaged file spoils the run's results (its rows, or what they were computed from), so that tables
    leave the run out; a damaged model or manifest leaves the rows as they were."""
    if damage.what.startswith(MISNAMED):
        return True
    if damage.what == FOREIGN or damage.what.startswith(manifest.MISSING) and damage.name.startswith(EVALS + "/"):
        return False  # never read; a deleted evaluation's rows are simply not there
    return damage.name in TRAINING_FILES or damage.name.startswith(EVALS + "/")


def problems(run_dir: Path, deep: bool = False) -> list[Damaged]:
    """The damage in a finished run's folder, one Damaged per file: an unreadable manifest; a listed file that is
    missing, of another size or (all but the torch files, which are hashed when loaded; only where its size or
    modification time changed since it was written) of another hash; an unlisted rows, spec or evaluation file
    (a run from before manifests) that is not JSON. `deep` (`clbench verify`) hashes every listed file, whatever
    its stat, and checks every unlisted file by reading it."""
    run_dir = Path(run_dir)
    found: list[Damaged] = []
    try:
        listing = manifest.load(run_dir)
    except Damaged as damage:
        found.append(damage)
        listing = None
    # the hash it was written with (so it parses): every file when `deep`; else all but the model and checkpoint
    # files (hashed when loaded), and only those whose stat changed since they were written
    found += listed_problems(run_dir, listing, lambda name: deep or not name.endswith(WEIGHTS), trust_stat=not deep)
    listed = set((listing or {}).get("files", {}))
    for name in unlisted(run_dir, listed, deep):
        if listing is not None and is_evaluation(name):  # a manifest lists every evaluation clbench stored
            found.append(Damaged(run_dir, name, FOREIGN))
            continue
        try:
            check_readable(run_dir, name)
        except Damaged as damage:
            found.append(damage)
    other = misnamed(run_dir, listing) if not found else None
    return found + ([other] if other else [])


FOREIGN = "foreign: not written by clbench (its manifest does not list it), never read as an evaluation"
MISNAMED = "misnamed"  # how a run folder whose name is not its run's key starts its Damaged.what


def misnamed(run_dir: Path, listing: Any = UNKNOWN) -> Damaged | None:
    """A Damaged (name '': the folder itself) when the finished run in `run_dir` is another run's (its spec's key
    is not the folder's name: a copied or renamed folder), else None. Such a folder is never gathered. `listing`:
    the run's manifest, when read already."""
    try:
        key = read_json(Path(run_dir), SPEC, listing).get("key")
    except (Damaged, OSError, AttributeError):
        return None  # a damaged or missing spec is named as such
    if isinstance(key, str) and key and key != Path(run_dir).name:
        return Damaged(run_dir, "", f"{MISNAMED}: the folder holds run {key} (copied or renamed: a run folder is "
                                    "named by its run's key), never gathered")
    return None


def is_evaluation(name: str) -> bool:
    """Whether `name` (inside a run folder) is where clbench stores an evaluation: evals/<evaluator>-<hash>.json
    (its failures, evals/<...>.error.json, are notes, not evaluations)."""
    return name.startswith(EVALS + "/") and name.count("/") == 1 and name.endswith(".json") \
        and not name.endswith(".error.json")


def size_problems(run_dir: Path, listing: dict[str, Any] | None) -> list[Damaged]:
    """The listed files of a finished run that are missing or of another size than recorded: a stat each, no
    read (what the gathered table checks besides the files it reads, verified, anyway)."""
    return listed_problems(Path(run_dir), listing, lambda name: False, trust_stat=True)


def listed_problems(run_dir: Path, listing: dict[str, Any] | None, hashed: Callable[[str], bool],
                    trust_stat: bool) -> list[Damaged]:
    """The files `listing` (a run's manifest) names that are missing or of another size, or, for the names
    `hashed` picks, of another hash (`manifest.check_entry`). A missing checkpoint is not damage (a finished run's
    is deleted, and dropped from the listing, on purpose); a missing model or evaluation is (deleted by hand, or an
    evaluation killed before its file landed): it costs the evaluations that need the model, or that evaluation
    redone, never the run's results (`damages_results`)."""
    found = []
    for name, entry in sorted((listing or {}).get("files", {}).items()):
        try:
            manifest.check_entry(run_dir, name, entry, hash_it=hashed(name), trust_stat=trust_stat)
        except FileNotFoundError:
            if name != CHECKPOINT:
                found.append(manifest.missing(run_dir, name, entry))
        except Damaged as damage:
            found.append(damage)
    return found


def unlisted(run_dir: Path, listed: set[str], deep: bool) -> list[str]:
    """The run's files its manifest does not list (runs written before manifests) that are checked by reading
    them: rows, spec and evaluations always, every JSON, JSON Lines and torch file when `deep`."""
    if not deep:  # what a re-run reads: rows, spec and the stored evaluations
        try:
            evaluations = sorted(f"{EVALS}/{n}" for n in os.listdir(run_dir / EVALS) if n.endswith(".json"))
        except FileNotFoundError:
            evaluations = []
        return [n for n in (ROWS, SPEC, *evaluations) if n not in listed and os.path.isfile(os.path.join(run_dir, n))]
    names = []
    for path in sorted(run_dir.rglob("*")):
        name = manifest.name_in(run_dir, path)
        if path.is_file() and name not in listed and not name.startswith((manifest.DAMAGED + "/", ".")) \
                and "/." not in name and name.endswith((".json", ".jsonl.gz", *WEIGHTS)) and name != manifest.MANIFEST \
                and path.name != "lease.json" and not name.startswith("hf/"):
            names.append(name)
    return names


def check_readable(run_dir: Path, name: str) -> None:
    """Damaged unless the run file `name` reads as its kind (JSON, gzip JSON Lines, a torch zip archive whose
    members' checksums hold)."""
    if name.endswith(".json"):
        read_json(run_dir, name, None)
    elif name.endswith(".jsonl.gz"):
        read_jsonl_gz(run_dir, name)
    elif name.endswith(".pt"):
        try:
            with zipfile.ZipFile(Path(run_dir) / name) as archive:
                bad = archive.testzip()
        except (OSError, zipfile.BadZipFile, EOFError) as exc:
            raise Damaged(run_dir, name, f"not a torch file: {manifest.short(exc)}") from None
        if bad is not None:
            raise Damaged(run_dir, name, f"not a torch file: member {bad} fails its checksum")
    elif name.endswith(".safetensors"):
        problem = safetensors_problem(Path(run_dir) / name)
        if problem:
            raise Damaged(run_dir, name, f"not a safetensors file: {problem}")


def safetensors_problem(path: Path) -> str:
    """Why a file is not a whole safetensors file ('' when it is): its 8-byte header length, the JSON header, and
    the tensors' data ending exactly at the end of the file."""
    try:
        with open(path, "rb") as handle:
            length = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(length).decode("utf-8")) if 0 < length < (1 << 27) else None
            size = os.fstat(handle.fileno()).st_size
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return manifest.short(exc)
    if not isinstance(header, dict):
        return "no header"
    ends = [int(entry["data_offsets"][1]) for key, entry in header.items() if key != "__metadata__"]
    if size != 8 + length + max(ends, default=0):
        return f"{size} bytes where its header describes {8 + length + max(ends, default=0)}"
    return ""
