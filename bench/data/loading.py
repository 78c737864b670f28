"""Loading text-classification data from local folders, user files, the Hugging Face Hub or a generator,
checking it, and carving a stratified validation split where a dataset has none."""

from __future__ import annotations

import difflib
import hashlib
import importlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.data.cards import Card
from bench.data.checks import check_splits, refuse_leakage, warn_once
from bench.data.files import find_split_file, read_columns, rows_to_columns, short, shown
from bench.data.regimes import apply_regime
from bench.data.textdata import SPLITS, Split, TextData  # noqa: F401  (TextData and Split are imported from here too)
from bench.errors import BenchError
from bench.hub import cached_dataset, datasets_cache_dir, datasets_offline, hub_reachable, offline_reason
from bench.registry import DATASETS
from bench.spec import ADDED_DEFAULTS

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------------------------- sources

def data_dirs(data_dir: str | None) -> list[Path]:
    """Folders searched for local copies: --data-dir, then $BENCH_DATA_DIR."""
    dirs = [data_dir, os.environ.get("BENCH_DATA_DIR")]
    return [Path(d).expanduser() for d in dirs if d]


FIXED_SAMPLE_SEED = 0  # evaluator samples depend on the data only, so every method and seed sees the same ones


def fixed_sample(size: int, n: int) -> list[int]:
    """The first n positions of a fixed permutation (seed FIXED_SAMPLE_SEED) of range(size), in ascending
    order; all positions when n <= 0 or n >= size."""
    if n <= 0 or n >= size:
        return list(range(size))
    return sorted(int(i) for i in np.random.default_rng(FIXED_SAMPLE_SEED).permutation(size)[:n])


def find_named(name_or_path: str, data_dir: str | None = None) -> Path | None:
    """An existing path, or `name_or_path` found under the data folders (--data-dir, $BENCH_DATA_DIR); None
    when neither exists (e.g. `imdb_contrast`, `textfooler_mr`)."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path
    return next((folder / name_or_path for folder in data_dirs(data_dir) if (folder / name_or_path).exists()), None)


def load_folder(folder: Path, text_field: str = "text", label_field: str = "label") -> dict[str, tuple]:
    """Raw (ids, texts, labels) per split from a folder of split files."""
    raw = {}
    for split in SPLITS:
        path = find_split_file(folder, split)
        if path is not None:
            raw[split] = read_columns(path, text_field, label_field, split)
    if "train" not in raw or "test" not in raw:
        found = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        raise BenchError(f"{folder} needs train and test files (train.jsonl/.csv/.tsv, optionally .gz, and test.*; "
                         f"validation optional); found: {', '.join(found) or 'nothing'}")
    return raw


def local_alternative(card: Card, dirs: list[Path]) -> str:
    """How to give a card's dataset as a local copy, and the data folders searched."""
    where = ", ".join(str(d) for d in dirs) or "no --data-dir given"
    return (f"put a local copy under DIR/{card.name}/{{train,test}}.jsonl.gz and pass --data-dir DIR "
            f"(or set BENCH_DATA_DIR); searched: {where}")


def check_hub_source(card: Card, dirs: list[Path]) -> bool:
    """Whether the card's Hub dataset is read from the datasets cache (True: the Hub is offline or unreachable
    and the cache holds it) or from the Hub (False), decided without importing datasets; a one-line BenchError
    when the card has no Hub id, or when neither the Hub nor the cache can give it."""
    hub = card.hub or {}
    if not hub.get("id"):
        raise BenchError(f"dataset {card.name!r} has no local copy and no Hub source: "
                         f"{local_alternative(card, dirs)}")
    if hub_reachable():
        return False
    if cached_dataset(hub["id"]) is not None:
        return True
    args = ", ".join(repr(a) for a in (hub["id"], hub.get("config")) if a)
    raise BenchError(f"could not load {card.name!r} from the Hugging Face Hub ({hub['id']}; {offline_reason()}): "
                     f"it is not in the datasets cache {datasets_cache_dir()} and the Hub is unreachable. To run "
                     f"offline, {local_alternative(card, dirs)}; or fill that cache on a machine with Hub access "
                     f"(the same HF_HOME or HF_DATASETS_CACHE): python -c \"import datasets; "
                     f"datasets.load_dataset({args})\"")


def read_hub_split(hub: dict[str, Any], split: str, from_cache: bool) -> Any:
    """One split of a Hub dataset as a datasets.Dataset: from the Hub, or from the datasets cache in offline
    mode (no network attempt)."""
    import datasets as hf_datasets

    if not from_cache:
        return hf_datasets.load_dataset(hub["id"], hub.get("config"), split=split)
    with datasets_offline():
        return hf_datasets.load_dataset(hub["id"], hub.get("config"), split=split, cache_dir=str(datasets_cache_dir()))


def load_hub(card: Card, dirs: list[Path]) -> dict[str, tuple]:
    """Raw (ids, texts, labels) per split from the Hugging Face Hub, as the card's `hub` entry says (from the
    datasets cache when the Hub is offline or unreachable)."""
    hub = card.hub or {}
    alternative = local_alternative(card, dirs)
    from_cache = check_hub_source(card, dirs)
    if from_cache:
        log.info("%s: %s from the datasets cache %s (%s)", card.name, hub["id"], datasets_cache_dir(), offline_reason())
    try:
        raw = {}
        for split, hub_split in (hub.get("splits") or {"train": "train", "test": "test"}).items():
            table = read_hub_split(hub, hub_split, from_cache)
            labels = list(table[hub["label_column"]])
            if labels and isinstance(labels[0], (list, tuple)):
                raise BenchError(f"the Hub source of {card.name!r} ({hub['id']}) has several labels per row "
                                 f"and needs the recipe in the card's note; {alternative}")
            names = hub.get("label_names")
            if names is None and hasattr(table.features[hub["label_column"]], "names"):
                names = table.features[hub["label_column"]].names
            if names is not None and labels and isinstance(labels[0], int):
                labels = [names[i] for i in labels]
            texts = list(table[hub["text_column"]])
            rows = [{"text": t, "label": l} for t, l in zip(texts, labels)]
            raw[split] = rows_to_columns(rows, "text", "label", f"hub:{hub['id']}[{hub_split}]", split)
        return raw
    except BenchError:
        raise
    except Exception as exc:  # network, missing dataset, schema drift: one clear line
        reason = str(exc).splitlines()[0][:200] if str(exc) else exc.__class__.__name__
        where = f" (read from the datasets cache {datasets_cache_dir()}: {offline_reason()})" if from_cache else ""
        raise BenchError(f"could not load {card.name!r} from the Hugging Face Hub ({hub['id']}){where}: {reason}. "
                         f"To run offline, {alternative}") from exc


def load_generated(card: Card, seed: int) -> dict[str, tuple]:
    """Raw splits from a generator function named in the card (`module:function`)."""
    module_name, function_name = card.generator.split(":")
    generate = getattr(importlib.import_module(module_name), function_name)
    return {split: rows_to_columns(rows, "text", "label", f"generator {card.generator}", split)
            for split, rows in generate(seed=seed).items()}


LOCAL = "local:"  # source of a card dataset found in a data folder: local:<data folder>/<card name>
FOLDER = "folder:"  # source of a dataset without a card: folder:<absolute path>


def source_data_dir(source: str) -> str:
    """The data folder a `local:` dataset source was found in (named sets sit beside it), else ''."""
    return str(Path(source[len(LOCAL):]).parent) if source.startswith(LOCAL) else ""


def load_raw(name: str, data_dir: str | None, data_seed: int) -> tuple[str, Card | None, dict[str, tuple]]:
    """Find a dataset by card name or path and return (source description, card, raw splits)."""
    if name in DATASETS:
        card: Card = DATASETS.get(name)
        dirs = data_dirs(data_dir)
        for base in dirs:
            folder = base / card.name
            if folder.is_dir():
                return f"{LOCAL}{folder.resolve()}", card, load_folder(folder, card.text_field, card.label_field)
        if card.generator:
            return f"generated:{card.generator}(seed={data_seed})", card, load_generated(card, data_seed)
        return f"hub:{(card.hub or {}).get('id')}", card, load_hub(card, dirs)
    path = Path(name).expanduser()
    if path.is_dir():
        return f"{FOLDER}{path.resolve()}", None, load_folder(path)
    if path.exists():
        raise BenchError(f"{name} is a file; pass the folder that holds its train and test files")
    for base in data_dirs(data_dir):  # a user's folder DIR/NAME, given as --datasets NAME --data-dir DIR
        folder = base / name
        if folder.is_dir():
            return f"{FOLDER}{folder.resolve()}", None, load_folder(folder)
        if folder.exists():
            raise BenchError(f"{folder} is a file; a dataset is a folder that holds train and test files")
    raise BenchError(unknown_dataset_message(name, data_dir))


def unknown_dataset_message(name: str, data_dir: str | None) -> str:
    """One line for a dataset name that is neither a card, a path nor a folder under the data folders: the
    closest card or folder name, the known cards and the folders found, and the ways to name a dataset. A name
    written as a path gets `missing_folder_message` instead."""
    if looks_like_path(name):
        return missing_folder_message(name, data_dir)
    dirs = [d for d in data_dirs(data_dir) if d.is_dir()]
    folders = sorted({p.name for d in dirs for p in d.iterdir() if p.is_dir() and not p.name.startswith(".")})
    message = DATASETS.unknown_message(name, also=folders)
    if dirs:
        shown = ", ".join(folders[:20]) + (f" and {len(folders) - 20} more" if len(folders) > 20 else "")
        message += f"; folders in {', '.join(str(d) for d in dirs)}: {shown or 'none'}"
    return (message + ". Give a card name, a path to a folder with train/test files, or a folder's name with "
            "--data-dir DIR (for DIR/NAME)")


def looks_like_path(name: str) -> bool:
    """Whether a dataset name is written as a path: a path separator in it, or a leading `.` or `~`."""
    return name.startswith((".", "~")) or any(sep in name for sep in {"/", os.sep, os.altsep} - {None})


def missing_folder_message(name: str, data_dir: str | None) -> str:
    """One line for a dataset given as a path that does not exist: where it was looked for, its first missing
    part, the closest existing folder (did you mean ...?) and how to name a dataset."""
    path = Path(name).expanduser()
    dirs = [] if path.is_absolute() else [d for d in data_dirs(data_dir) if d.is_dir()]
    hints = [path_hint(name, base) for base in [Path.cwd(), *dirs]]
    missing = hints[0][0]
    message = f"dataset folder {name} does not exist"
    if missing != str(Path(name)):
        message += f": there is no folder {missing}"
    message += "" if path.is_absolute() else f" in {Path.cwd()}"
    message += f" (nor under {', '.join(map(str, dirs))})" if dirs else ""
    suggestion = next((hint for _, hint in hints if hint), None)
    message += f" (did you mean {suggestion}?)" if suggestion else ""
    return (message + "; give the path of a folder that holds train and test files (train.jsonl and test.jsonl, "
            "or .jsonl.gz/.csv/.tsv), or a card name (`clbench list datasets`)")


def path_hint(name: str, base: Path) -> tuple[str, str | None]:
    """For a path `name` (as typed; relative to `base`) that does not exist: its first missing part as typed, and
    `name` with that part replaced by the closest folder name beside it (letter case aside) where that gives an
    existing folder, else None."""
    typed = Path(name).parts
    path = base / Path(name).expanduser()
    found = next(parent for parent in path.parents if parent.is_dir())
    rest = path.relative_to(found).parts  # the missing part and what follows it
    prefix = typed[:len(typed) - len(rest)]
    missing = str(Path(*prefix, rest[0]))
    names = {p.name.lower(): p.name for p in found.iterdir() if p.is_dir() and not p.name.startswith(".")}
    close = difflib.get_close_matches(rest[0].lower(), list(names), n=1, cutoff=0.6)
    if not close or not found.joinpath(names[close[0]], *rest[1:]).is_dir():
        return missing, None
    suggestion = str(Path(*prefix, names[close[0]], *rest[1:]))
    return missing, "./" + suggestion if name.startswith("./") and not suggestion.startswith(".") else suggestion


# ----------------------------------------------------------------------------------------------- checks

def label_order(train_labels: list[str]) -> list[str]:
    """Label names for a dataset without a card: sorted, numerically when all are integers."""
    unique = set(train_labels)
    if all(x.isascii() and x.removeprefix("-").isdigit() and len(x) <= 18 for x in unique):  # int() reads them
        return sorted(unique, key=int)
    return sorted(unique)


def fingerprint(label_names: list[str], raw: dict[str, tuple]) -> str:
    """A short content hash of the labels and every split (identifies the data in run keys)."""
    digest = hashlib.sha256(json.dumps(label_names).encode())
    for split in SPLITS:
        if split in raw:
            digest.update(json.dumps([split, *raw[split]], ensure_ascii=False).encode())
    return digest.hexdigest()[:12]


def size_warnings(card: Card | None, raw: dict[str, tuple], source: str) -> list[str]:
    """Messages for split sizes that differ from the card's published sizes."""
    if card is None or source.startswith("generated"):
        return []
    notes = []
    for split, expected in card.sizes.items():
        if expected and split in raw and len(raw[split][0]) != expected:
            notes.append(f"{card.name}: {split} has {len(raw[split][0])} rows from {source}, "
                         f"the published size is {expected}; results may not be comparable to papers")
    return notes


def percent(fraction: float) -> str:
    """A fraction as a percentage, e.g. 0.1 -> `10%`, 0.125 -> `12.5%`."""
    return f"{100 * fraction:.3g}%"


def carve_validation(train: Split, fraction: float, seed: int, label_names: list[str] | None = None,
                     name: str = "train") -> tuple[Split, Split]:
    """A stratified `fraction` of train as validation (classes with one example stay in train). Refused, with the
    fix, when it would leave a class it takes from with fewer than 2 training examples, or when its minimum of one
    example per class makes it take more than twice the examples `fraction` asks for (`name`: the dataset)."""
    from sklearn.model_selection import train_test_split

    counts = np.bincount(train.labels)
    eligible = np.flatnonzero(counts[train.labels] >= 2)
    asked = int(round(fraction * len(eligible)))
    classes = len(np.unique(train.labels[eligible]))
    n_val = max(asked, classes)
    if len(eligible) < 2 or n_val >= len(eligible):
        raise BenchError(f"train has too few examples ({len(train)}) to carve a validation split; "
                         "add a validation file or more training data")
    kept, held = train_test_split(eligible, test_size=n_val, random_state=seed,
                                  stratify=train.labels[eligible])
    what = (f"{name}: carving a {percent(fraction)} validation split from train (the dataset has no validation "
            f"file) would take {n_val:,} of its {len(train):,} examples ({percent(n_val / len(train))})")
    taken = np.bincount(train.labels[held], minlength=len(counts))
    thin = np.flatnonzero((taken > 0) & (counts - taken < 2))
    if len(thin):
        c = int(thin[0])
        label = label_names[c] if label_names else str(c)
        raise BenchError(f"{what} and leave {len(thin):,} class(es) with fewer than 2 training examples (e.g. "
                         f"{label!r}: {counts[c]} examples, {taken[c]} taken); add a validation file (e.g. "
                         "validation.jsonl beside train) or more training examples of those classes")
    if n_val > 2 * asked:  # the minimum of one example per class, not the fraction, decided the size
        needed = np.ceil(100 * classes / len(eligible)) / 100
        raise BenchError(f"{what}, more than the {asked:,} asked for, to hold one example of each of its "
                         f"{classes:,} classes; give --val-fraction {needed:g} or more, or add a validation file "
                         "(e.g. validation.jsonl beside train)")
    kept = np.sort(np.concatenate([kept, np.flatnonzero(counts[train.labels] < 2)]))
    return train.subset(kept), train.subset(np.sort(held))


def load_dataset(name: str, data_dir: str | None = None, data_seed: int = 0,
                 val_fraction: float = 0.1, strict: bool = False) -> TextData:
    """Load, check and split a dataset given by card name or folder path; its texts' checks (bench.data.checks)
    warn once, or with `strict` (--strict-data) refuse leakage."""
    source, card, raw = load_raw(name, data_dir, data_seed)
    display = card.name if card else Path(source[len(FOLDER):]).name
    for split in ("train", "test"):
        if split not in raw or not raw[split][0]:
            raise BenchError(f"dataset {display!r} has an empty {split} split ({source})")
    label_names = list(card.labels) if card and card.labels else label_order(raw["train"][2])
    index = {label: i for i, label in enumerate(label_names)}
    train_labels = set(raw["train"][2])
    for split, (_, _, labels) in raw.items():
        absent = sorted(set(labels) - train_labels)
        if absent:
            raise BenchError(f"dataset {display!r}: {split} label(s) {shown(absent)} never occur in train, so no "
                             "model can learn them; move such examples into train or drop them")
        unknown = sorted(set(labels) - set(index))
        if unknown:
            raise BenchError(f"dataset {display!r}: {split} label(s) {shown(unknown)} are not among the known "
                             f"labels {shown(label_names, 20)}; fix the data or the card")
    if len(train_labels) < 2:
        only = short(repr(next(iter(train_labels))))
        raise BenchError(f"dataset {display!r}: train has a single class ({only} in all "
                         f"{len(raw['train'][2])} rows of {source}); a classifier needs at least two classes in "
                         "train: add examples of the other class(es)")
    splits = {s: Split(list(ids), list(texts), np.array([index[l] for l in labels], dtype=np.int64))
              for s, (ids, texts, labels) in raw.items()}
    warnings = size_warnings(card, raw, source)
    carved = not ("validation" in splits and len(splits["validation"]))
    if not carved:
        train, validation, val_source = splits["train"], splits["validation"], "validation split of the source"
    else:
        train, validation = carve_validation(splits["train"], val_fraction, data_seed, label_names, display)
        val_source = (f"stratified {percent(val_fraction)} of train ({len(validation):,} of "
                      f"{len(splits['train']):,}; data seed {data_seed})")
        lost = sorted(set(splits["train"].labels.tolist()) - set(train.labels.tolist()))
        if lost:  # a safeguard: carve_validation keeps every class in train
            raise BenchError(f"dataset {display!r}: carving a {val_fraction:.0%} validation split left no train "
                             f"examples of {shown(label_names[i] for i in lost)}; add a validation file or more data")
    report = check_splits(display, label_names, splits["train"], splits["test"], validation, carved)
    if strict:
        refuse_leakage(report)
    warnings += report.warnings
    for message in warnings:
        warn_once(source, message)
    return TextData(display, label_names, train, validation, splits["test"], source, val_source,
                    fingerprint(label_names, raw), warnings, checks=report.counts)


@dataclass(frozen=True)
class DataRef:
    """How a job reloads a shard's dataset instead of pickling it: the card name or absolute folder, the
    data folder, the validation carve and the data regime (few or noisy labels: bench.data.regimes)."""

    name: str
    data_dir: str | None = None
    data_seed: int = 0
    val_fraction: float = 0.1
    regime: tuple[tuple[str, Any], ...] = ()  # TrainConfig's regime settings, as (name, value) pairs
    draw: tuple[int, ...] = ()  # the regime's draw (TrainConfig.draw): () = (data_seed,), one fixed draw

    def load(self) -> TextData:
        """Load the dataset as `plan` did, its regime applied."""
        data = load_dataset(self.name, self.data_dir, self.data_seed, self.val_fraction)
        return apply_regime(data, dict(self.regime), self.draw or (self.data_seed,))


def data_ref(name: str, data_dir: str | None, data_seed: int, val_fraction: float,
             regime: dict[str, Any] | None = None, draw: tuple[int, ...] = ()) -> DataRef:
    """A DataRef that works from any folder: paths made absolute, $BENCH_DATA_DIR recorded."""
    if name not in DATASETS and Path(name).expanduser().is_dir():
        name = str(Path(name).expanduser().resolve())
    folder = data_dir or os.environ.get("BENCH_DATA_DIR")
    return DataRef(name, str(Path(folder).expanduser().resolve()) if folder else None, data_seed, val_fraction,
                   tuple(sorted((k, v) for k, v in (regime or {}).items() if ADDED_DEFAULTS.get(k, object()) != v)),
                   tuple(draw) if tuple(draw) != (data_seed,) else ())  # a fixed draw needs no record
