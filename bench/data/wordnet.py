"""WordNet 3.0 for nltk without network: the dict files in `BENCH_WORDNET_DIR` when it is set (`none` hides
WordNet), else nltk's own data, else Debian's `wordnet-base` dict files."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import warnings
from pathlib import Path
from collections.abc import Callable
from typing import Any, TypeVar

from bench.data.files import user_cache_dir
from bench.errors import BenchError
from bench.results.store import atomic_path

DEBIAN_DIR = Path("/usr/share/wordnet")
ENV = "BENCH_WORDNET_DIR"  # a folder of WordNet dict files, used instead of any other; `none`: no WordNet at all
HIDDEN = "none"
T = TypeVar("T")
ADDED_ROOTS: set[str] = set()  # nltk data roots this module put on nltk.data.path for its own copies
INSTALL = ("`apt-get install wordnet-base wordnet-sense-index` (Debian/Ubuntu) "
           "or `python -m nltk.downloader wordnet`")
INSTALL_HINT = f"WordNet not found (no nltk data, no Debian dict files); install it with {INSTALL}"

# The dict files nltk's reader cannot open WordNet without.
REQUIRED_FILES = tuple(f"{kind}.{pos}" for kind in ("index", "data") for pos in ("noun", "verb", "adj", "adv")) + \
    tuple(f"{pos}.exc" for pos in ("noun", "verb", "adj", "adv"))

# WordNet 3.0 lexicographer files, in file-number order (00-44).
LEXICOGRAPHER_FILES = (
    "adj.all", "adj.pert", "adv.all",
    "noun.Tops", "noun.act", "noun.animal", "noun.artifact", "noun.attribute", "noun.body", "noun.cognition",
    "noun.communication", "noun.event", "noun.feeling", "noun.food", "noun.group", "noun.location",
    "noun.motive", "noun.object", "noun.person", "noun.phenomenon", "noun.plant", "noun.possession",
    "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition", "verb.consumption",
    "verb.contact", "verb.creation", "verb.emotion", "verb.motion", "verb.perception", "verb.possession",
    "verb.social", "verb.stative", "verb.weather",
    "adj.ppl",
)
# Syntactic category numbers used by the lexnames file.
CATEGORY_NUMBERS = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


def lexnames_text() -> str:
    """The 45-line WordNet 3.0 `lexnames` file: number, lexicographer file, syntactic category."""
    rows = (f"{i:02d}\t{name}\t{CATEGORY_NUMBERS[name.split('.')[0]]}\n"
            for i, name in enumerate(LEXICOGRAPHER_FILES))
    return "".join(rows)


def chosen_dir() -> str | None:
    """`BENCH_WORDNET_DIR` as set (a dict folder, or `none` to hide WordNet), or None when it is unset or empty."""
    return os.environ.get(ENV) or None


def cache_root() -> Path:
    """The data root that holds the prepared copy, `<root>/corpora/wordnet` (`BENCH_CACHE_DIR` overrides)."""
    return user_cache_dir() / "wordnet"


def prepared_root(source: Path) -> Path:
    """The nltk data root whose `corpora/wordnet` nltk reads for the dict files in source: source's own root
    when source is already such a folder (it has `lexnames`), else a copy under cache_root() (one per folder)."""
    if source.name == "wordnet" and source.parent.name == "corpora" and (source / "lexnames").is_file():
        return source.parent.parent
    if source == DEBIAN_DIR:
        return cache_root()
    return cache_root() / "dirs" / hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:12]


def load_wordnet() -> Any:
    """An nltk `WordNetCorpusReader`: from `BENCH_WORDNET_DIR` when set, else nltk's data, else Debian's dict
    files; a one-line BenchError saying how to install it if none is there (or `BENCH_WORDNET_DIR=none`)."""
    return _load(chosen_dir())


@functools.lru_cache(maxsize=4)
def _load(chosen: str | None) -> Any:
    """load_wordnet for one value of `BENCH_WORDNET_DIR` (None: unset)."""
    try:
        import nltk  # noqa: F401  (heavy import, only when WordNet is needed)
    except ImportError as exc:
        raise BenchError("WordNet needs nltk: pip install nltk") from exc
    if chosen is not None:
        return _chosen_reader(chosen)
    reader = _nltk_data_reader()
    if reader is not None:
        return reader
    if not has_dict_files(DEBIAN_DIR):
        raise BenchError(INSTALL_HINT)
    return _dict_reader(DEBIAN_DIR)


def _chosen_reader(chosen: str) -> Any:
    """The reader over the dict folder `BENCH_WORDNET_DIR` names, or a BenchError for `none` or a folder
    without the dict files."""
    if chosen.lower() == HIDDEN:
        raise BenchError(f"WordNet is hidden ({ENV}=none); unset {ENV} to use an installed WordNet, or install "
                         f"one with {INSTALL}")
    folder = Path(chosen).expanduser()
    if not has_dict_files(folder):
        missing = next(name for name in REQUIRED_FILES if not (folder / name).is_file())
        raise BenchError(f"{ENV}={chosen} is not a WordNet dict folder (no {missing}); point it at one "
                         f"(Debian's is {DEBIAN_DIR}) or unset it to use nltk's data")
    return _dict_reader(folder)


def per_wordnet(maxsize: int | None) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """functools.lru_cache for a function of WordNet's content: results are kept per `BENCH_WORDNET_DIR` value,
    so a process that switches WordNets (the tests do) never gets an answer from another one."""
    def decorate(function: Callable[..., T]) -> Callable[..., T]:
        cached = functools.lru_cache(maxsize=maxsize)(lambda chosen, *args: function(*args))

        @functools.wraps(function)
        def wrapper(*args: Any) -> T:
            return cached(chosen_dir(), *args)

        return wrapper
    return decorate


def _nltk_data_reader() -> Any | None:
    """A reader over nltk's own `wordnet` data (not a copy this module made), or None where nltk has none."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    try:
        found = nltk.data.find("corpora/wordnet", paths=[p for p in nltk.data.path if p not in ADDED_ROOTS])
    except LookupError:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return WordNetCorpusReader(found, None)


def has_dict_files(folder: Path) -> bool:
    """Whether folder holds the WordNet dict files nltk needs."""
    return all((folder / name).is_file() for name in REQUIRED_FILES)


def _dict_reader(source: Path) -> Any:
    """A reader over the dict files in source (a prepared copy where source lacks nltk's layout)."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    root = prepared_root(source)
    target = root / "corpora" / "wordnet"
    if target != source:  # not already in nltk's layout
        try:
            prepare_copy(source, target)
        except OSError as exc:
            raise BenchError(f"cannot prepare WordNet under {target}: {exc}") from exc
    # nltk opens files only under its data roots, and looks `wordnet` up on them while it builds the reader (its
    # sense-key map): this root first while it does, then last, and never taken for nltk's own data.
    ADDED_ROOTS.add(str(root))
    if str(root) in nltk.data.path:
        nltk.data.path.remove(str(root))
    nltk.data.path.insert(0, str(root))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "multilingual functions are not available": expected
            return WordNetCorpusReader(str(target), None)
    finally:
        nltk.data.path.remove(str(root))
        nltk.data.path.append(str(root))


def prepare_copy(source: Path, target: Path) -> None:
    """Make target a real-file copy of the dict files in source plus the `lexnames` file."""
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.iterdir()):
        if path.is_file() and not _same_size(path, target / path.name):
            _atomic_copy(path, target / path.name)
    lexnames = target / "lexnames"
    if not lexnames.is_file() or lexnames.read_text(encoding="utf-8") != lexnames_text():
        _atomic_write(lexnames, lexnames_text())


def _same_size(source: Path, copy: Path) -> bool:
    """Whether copy exists as a regular file of source's size."""
    return copy.is_file() and not copy.is_symlink() and copy.stat().st_size == source.stat().st_size


def _atomic_copy(source: Path, destination: Path) -> None:
    """Copy source's bytes to destination so that readers never see a partial file."""
    with atomic_path(destination) as tmp:
        shutil.copyfile(source, tmp)


def _atomic_write(destination: Path, text: str) -> None:
    """Write text to destination so that readers never see a partial file."""
    with atomic_path(destination) as tmp:
        tmp.write_text(text, encoding="utf-8")
