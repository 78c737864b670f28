"""WordNet 3.0 for nltk without network: nltk's own data, else Debian's `wordnet-base` dict files."""

from __future__ import annotations

import functools
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

from bench.data.files import user_cache_dir
from bench.errors import BenchError
from bench.results.store import atomic_path

DEBIAN_DIR = Path("/usr/share/wordnet")
INSTALL_HINT = ("WordNet not found (no nltk data, no Debian dict files); install it with "
                "`apt-get install wordnet-base wordnet-sense-index` (Debian/Ubuntu) "
                "or `python -m nltk.downloader wordnet`")

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


def debian_dir() -> Path:
    """Where Debian's WordNet dict files are looked for (`BENCH_WORDNET_DIR` overrides)."""
    return Path(os.environ.get("BENCH_WORDNET_DIR") or DEBIAN_DIR).expanduser()


def cache_root() -> Path:
    """The data root that holds the prepared copy, `<root>/corpora/wordnet` (`BENCH_CACHE_DIR` overrides)."""
    return user_cache_dir() / "wordnet"


@functools.lru_cache(maxsize=1)
def load_wordnet() -> Any:
    """An nltk `WordNetCorpusReader`, from nltk's data or else from Debian's packages; BenchError if neither."""
    try:
        import nltk  # noqa: F401  (heavy import, only when WordNet is needed)
    except ImportError as exc:
        raise BenchError("WordNet needs nltk: pip install nltk") from exc
    reader = _nltk_data_reader()
    if reader is not None:
        return reader
    if not has_dict_files(debian_dir()):
        raise BenchError(INSTALL_HINT)
    return _debian_reader(debian_dir(), cache_root())


def _nltk_data_reader() -> Any | None:
    """nltk's own `wordnet` corpus, loaded, or None where nltk has no WordNet data."""
    import nltk

    try:
        nltk.data.find("corpora/wordnet")
    except LookupError:
        return None
    from nltk.corpus import wordnet

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wordnet.ensure_loaded()
    return wordnet


def has_dict_files(folder: Path) -> bool:
    """Whether folder holds the WordNet dict files nltk needs."""
    return all((folder / name).is_file() for name in REQUIRED_FILES)


def _debian_reader(source: Path, root: Path) -> Any:
    """A reader over a prepared copy of the dict files in source, kept under root."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    target = root / "corpora" / "wordnet"
    try:
        prepare_copy(source, target)
    except OSError as exc:
        raise BenchError(f"cannot prepare WordNet under {target}: {exc}") from exc
    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))  # nltk only opens corpora under its data roots
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available": expected
        return WordNetCorpusReader(str(target), None)


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
