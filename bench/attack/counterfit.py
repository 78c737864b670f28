"""Counter-fitting (Mrkšić et al. 2016): word vectors moved so that antonyms are far apart and synonyms close,
while each word keeps its neighbourhood, which is what TextFooler's synonym space is built from.

Three terms over unit vectors, with the cosine distance d(u, w) = 1 - cos(u, w) and t(x) = max(0, x):

- antonym repel, k1 · sum over antonym pairs of t(delta - d(u, w));
- synonym attract, k2 · sum over synonym pairs of t(d(u, w) - gamma);
- vector-space preservation, k3 · sum over pairs that were within rho of each other in the original space of
  t(d'(u, w) - d(u, w)): a close pair may get closer, not further apart.

The sum is minimised by full-batch gradient descent from the original vectors, renormalised after every step.
The constraints (PPDB synonyms and antonyms, WordNet antonyms, the vocabulary of the published vectors) and
SimLex-999 ship with the package in `constraints/` (Apache 2.0, see its LICENSE.txt); `counter_fitted_glove`
applies them to the packaged GloVe 6B-50d once and caches the result.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from bench.data.files import read_text, user_cache_dir
from bench.results.store import atomic_path

CONSTRAINTS = Path(__file__).resolve().parent / "constraints"
SYNONYM_FILES = ("ppdb_synonyms.txt.gz",)
ANTONYM_FILES = ("ppdb_antonyms.txt.gz", "wordnet_antonyms.txt.gz")
VOCABULARY_FILE = "vocabulary.txt.gz"
DEFAULT_SOURCE = "glove-6b-50d"  # the vectors the attack counter-fits (bench.attack.wordvectors loads them)
VERSION = 2  # of the procedure: a change that alters the vectors bumps it, so cached builds are not reused
NEIGHBOUR_CHUNK = 1024  # rows per matrix product when finding original neighbours (~300 MB at 72k words)


@dataclass(frozen=True)
class CounterFitConfig:
    """The objective's weights and margins (the paper's values) and the optimiser's schedule."""

    k1: float = 0.1       # antonym repel
    k2: float = 0.1       # synonym attract
    k3: float = 0.1       # vector-space preservation
    delta: float = 1.0    # antonyms are pushed to at least this distance (cosine <= 0)
    gamma: float = 0.0    # synonyms are pulled to at most this distance (identical directions)
    rho: float = 0.2      # original neighbours: pairs within this distance keep it as an upper bound
    steps: int = 20       # gradient steps over all constraints at once (the objective has levelled off by then)
    lr: float = 1.0       # step size on the summed objective (each term moves a word by about lr · k)


@dataclass(frozen=True)
class Constraints:
    """Word pairs by kind, as read (lower-cased; pairs of a word with itself dropped)."""

    synonyms: tuple[tuple[str, str], ...]
    antonyms: tuple[tuple[str, str], ...]


def read_lines(path: Path) -> list[str]:
    """The non-empty lines of a text file, gzipped or not."""
    return [line for line in read_text(path).splitlines() if line.strip()]


def read_pairs(paths: Iterable[Path]) -> tuple[tuple[str, str], ...]:
    """Unique unordered word pairs from `word word` lines of each file."""
    pairs = set()
    for path in paths:
        for line in read_lines(path):
            first, second = line.lower().split()[:2]
            if first != second:
                pairs.add((min(first, second), max(first, second)))
    return tuple(sorted(pairs))


def shipped_constraints(folder: Path = CONSTRAINTS) -> Constraints:
    """The PPDB synonyms and the PPDB + WordNet antonyms that ship with the package (or lie in `folder`)."""
    return Constraints(read_pairs(folder / name for name in SYNONYM_FILES),
                       read_pairs(folder / name for name in ANTONYM_FILES))


def shipped_vocabulary(folder: Path = CONSTRAINTS) -> set[str]:
    """The words of the published counter-fitted vectors."""
    return {line.strip().lower() for line in read_lines(folder / VOCABULARY_FILE)}


def vocabulary_rows(words: list[str], folder: Path = CONSTRAINTS) -> list[int]:
    """Indices of the `words` (in their order) that the shipped vocabulary holds: the words counter-fitted."""
    vocabulary = shipped_vocabulary(folder)
    return [i for i, w in enumerate(words) if w.lower() in vocabulary]


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def original_neighbours(unit: np.ndarray, rho: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Index pairs (i < j) within cosine distance `rho` of each other, and their distances (each block of rows
    is compared with itself and the rows after it only)."""
    firsts, seconds, distances = [], [], []
    for start in range(0, len(unit), NEIGHBOUR_CHUNK):
        similarity = unit[start:start + NEIGHBOUR_CHUNK] @ unit[start:].T
        rows, cols = np.nonzero(similarity >= 1.0 - rho)
        keep = rows < cols
        rows, cols = rows[keep], cols[keep]
        firsts.append(rows + start)
        seconds.append(cols + start)
        distances.append(1.0 - similarity[rows, cols])
    return np.concatenate(firsts), np.concatenate(seconds), np.concatenate(distances).astype(np.float32)


def pair_indices(pairs: Iterable[tuple[str, str]], row_of: dict[str, int]) -> np.ndarray:
    """(n, 2) rows of the pairs whose two words are both in the vocabulary."""
    found = [(row_of[a], row_of[b]) for a, b in pairs if a in row_of and b in row_of]
    return np.array(found, dtype=np.int64).reshape(-1, 2)


def distances(vectors, pairs):
    """Cosine distance 1 - cos(u, w) of each (n, 2) index pair of `vectors` (torch)."""
    import torch

    return 1.0 - torch.nn.functional.cosine_similarity(vectors[pairs[:, 0]], vectors[pairs[:, 1]], dim=1)


def hinges(vectors, synonyms, antonyms, neighbours, original, config: CounterFitConfig) -> dict:
    """Each pair's hinge t(.) of the three terms at `vectors` (torch tensors; pairs as (n, 2) index tensors),
    unweighted: a pair is active, pulls or pushes, exactly where its hinge is positive."""
    import torch

    return {"antonym_repel": torch.relu(config.delta - distances(vectors, antonyms)),
            "synonym_attract": torch.relu(distances(vectors, synonyms) - config.gamma),
            "vector_space": torch.relu(distances(vectors, neighbours) - original)}


WEIGHTS = {"antonym_repel": "k1", "synonym_attract": "k2", "vector_space": "k3"}


def weighted_terms(per_pair: dict, config: CounterFitConfig) -> dict:
    """The three terms of the objective from each pair's hinge (`hinges`): k times the sum."""
    return {name: getattr(config, WEIGHTS[name]) * hinge.sum() for name, hinge in per_pair.items()}


def objective_terms(vectors, synonyms, antonyms, neighbours, original, config: CounterFitConfig) -> dict:
    """The three terms of the objective at `vectors` (torch tensors; pairs as (n, 2) index tensors)."""
    return weighted_terms(hinges(vectors, synonyms, antonyms, neighbours, original, config), config)


def active_terms_per_word(per_pair: dict, synonyms, antonyms, neighbours, size: int):
    """How many terms with a positive hinge (`per_pair`, as `hinges` gives them) touch each of `size` words, at
    least 1: a word's step is the mean of its terms' gradients rather than their sum, so words in many pairs do
    not take huge steps (as in the authors' implementation)."""
    import torch

    pairs = {"antonym_repel": antonyms, "synonym_attract": synonyms, "vector_space": neighbours}
    counts = torch.zeros(size, dtype=torch.float64)
    for name, hinge in per_pair.items():
        counts += torch.bincount(pairs[name][hinge > 0].reshape(-1), minlength=size).to(counts.dtype)
    return counts.clamp_min(1.0)


def not_among(pairs: np.ndarray, unwanted: np.ndarray) -> np.ndarray:
    """A mask of the rows of `pairs` that are not in `unwanted` (in either order)."""
    unwanted_set = {(int(a), int(b)) for a, b in unwanted} | {(int(b), int(a)) for a, b in unwanted}
    return np.array([(int(a), int(b)) not in unwanted_set for a, b in pairs], dtype=bool).reshape(len(pairs))


def counter_fit(words: list[str], matrix: np.ndarray, constraints: Constraints,
                config: CounterFitConfig = CounterFitConfig()) -> tuple[np.ndarray, dict]:
    """Counter-fitted unit vectors for `words` (rows of `matrix`), and a report: pairs used, each term and the
    share of antonym / synonym pairs meeting their margin, before and after. A pair that is both antonyms and
    synonyms counts as antonyms only, and antonyms are not held together by the vector-space term."""
    import torch

    unit = unit_rows(matrix)
    row_of = {w: i for i, w in enumerate(words)}
    first, second, original = original_neighbours(unit, config.rho)
    antonym_rows = pair_indices(constraints.antonyms, row_of)
    synonym_rows = pair_indices(constraints.synonyms, row_of)
    neighbour_rows = np.stack([first, second], axis=1)
    kept = not_among(neighbour_rows, antonym_rows)
    synonyms = torch.from_numpy(synonym_rows[not_among(synonym_rows, antonym_rows)])
    antonyms = torch.from_numpy(antonym_rows)
    neighbours = torch.from_numpy(neighbour_rows[kept])
    original_t = torch.from_numpy(original[kept])
    vectors = torch.from_numpy(unit.copy()).requires_grad_(True)
    terms = (synonyms, antonyms, neighbours, original_t, config)

    def state() -> dict:
        with torch.no_grad():
            values = objective_terms(vectors, *terms)
            far = distances(vectors, antonyms) >= config.delta - 1e-6
            close = distances(vectors, synonyms) <= config.gamma + 0.1
        return {**{k: round(float(v), 3) for k, v in values.items()},
                "antonyms_at_margin": round(float(far.float().mean()) if len(far) else 1.0, 4),
                "synonyms_within_0.1": round(float(close.float().mean()) if len(close) else 1.0, 4)}

    before = state()
    for _ in range(config.steps):
        per_pair = hinges(vectors, *terms)
        (gradient,) = torch.autograd.grad(sum(weighted_terms(per_pair, config).values()), vectors)
        with torch.no_grad():
            counts = active_terms_per_word(per_pair, synonyms, antonyms, neighbours, len(vectors))
            vectors -= config.lr * gradient / counts.to(vectors.dtype)[:, None]
            vectors /= vectors.norm(dim=1, keepdim=True).clamp_min(1e-12)
    report = {"words": len(words), "synonym_pairs": len(synonyms), "antonym_pairs": len(antonyms),
              "neighbour_pairs": len(neighbours), "config": asdict(config), "before": before, "after": state()}
    return vectors.detach().numpy().astype(np.float32), report


# ------------------------------------------------------------------------------------- GloVe, once, cached

def cache_folder() -> Path:
    """Where built vectors are kept: `word-vectors/` of the user's cache (`user_cache_dir`)."""
    return user_cache_dir() / "word-vectors"


def build_identity(source: str, config: CounterFitConfig, folder: Path = CONSTRAINTS) -> str:
    """A short digest of everything the built vectors depend on: the source vectors' name, the constraint files
    and vocabulary, the configuration and the procedure's VERSION."""
    digest = hashlib.sha256(json.dumps({"source": source, "config": asdict(config), "version": VERSION},
                                       sort_keys=True).encode())
    for name in (*SYNONYM_FILES, *ANTONYM_FILES, VOCABULARY_FILE):
        digest.update((folder / name).read_bytes())
    return digest.hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def default_build_identity() -> str:
    """`build_identity` of the default build: GloVe 6B-50d, the shipped constraints, the default config."""
    return build_identity(DEFAULT_SOURCE, CounterFitConfig())


def build_path(source_name: str, config: CounterFitConfig, folder: Path, cache: Path) -> Path:
    """Where the build of `source_name` with these constraints and config is kept."""
    return cache / f"{source_name}-counter-fitted-{build_identity(source_name, config, folder)}.npz"


def cached_build() -> Path | None:
    """The cached default build (GloVe 6B-50d, shipped constraints, default config), None before it exists."""
    path = build_path(DEFAULT_SOURCE, CounterFitConfig(), CONSTRAINTS, cache_folder())
    return path if path.is_file() else None


def counter_fitted(source_name: str, words: list[str], matrix: np.ndarray,
                   config: CounterFitConfig = CounterFitConfig(), folder: Path = CONSTRAINTS,
                   cache: Path | None = None) -> tuple[list[str], np.ndarray]:
    """The shipped vocabulary's words of `words` (in their order) counter-fitted with the shipped constraints:
    built once and kept in `cache` (default `cache_folder()`) as one .npz per source, constraints and config;
    an unwritable cache only means building again next time."""
    cache = cache_folder() if cache is None else cache
    path = build_path(source_name, config, folder, cache)
    if path.is_file():
        with np.load(path, allow_pickle=False) as stored:
            return stored["words"].tolist(), stored["vectors"]
    rows = vocabulary_rows(words, folder)
    kept = [words[i].lower() for i in rows]
    vectors, report = counter_fit(kept, np.asarray(matrix[rows]), shipped_constraints(folder), config)
    try:
        with atomic_path(path) as temporary, open(temporary, "wb") as handle:
            np.savez(handle, words=np.array(kept), vectors=vectors, report=json.dumps(report))
    except OSError:
        pass
    return kept, vectors
