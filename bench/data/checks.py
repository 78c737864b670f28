"""Checks of a loaded dataset's texts: test and validation texts that also occur in train, and validation texts
that also occur in test (leakage), rows that repeat a text of their own split (duplicates), and texts given two
labels (conflicting labels). Texts are compared after a light normalisation (`normalised`). Each finding is one
warning line, said once per dataset and process; with strict checks (`clbench run --strict-data`) leakage is a
BenchError instead. The counts are recorded in the data's `checks` (bench.data.textdata.TextData) and reach every
clean result row as the CHECK_COLUMNS."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from bench.data.files import short
from bench.data.textdata import Split
from bench.errors import BenchError

log = logging.getLogger(__name__)

# the row columns (bench.running.shard): test / validation rows whose text occurs in train, validation rows whose
# text occurs in test, rows repeating an earlier text of their split (all splits), texts with more than one label
# within a split (all splits)
CHECK_COLUMNS = ("test_in_train", "validation_in_train", "validation_in_test", "duplicate_rows", "conflicting_labels")
NORMALISATION = "stripped, whitespace collapsed, casefolded"
EXAMPLE_WIDTH = 60  # characters of an example text quoted in a warning


def normalised(text: str) -> str:
    """The form texts are compared in: stripped, every run of whitespace made one space, casefolded."""
    return " ".join(text.split()).casefold()


def keys(texts: list[str]) -> np.ndarray:
    """The hash of each text's normalised form (int64): what texts are compared by, far smaller than the texts;
    two different texts share one with odds of about 1 in 2**64."""
    return np.fromiter((hash(normalised(text)) for text in texts), dtype=np.int64, count=len(texts))


@dataclass
class SplitIndex:
    """What repeats within one split: the rows that repeat an earlier row's text (ascending), and the texts given
    more than one label: how many, and the rows of the first one found (its first row, the first row that
    gives it another label)."""

    repeats: np.ndarray
    conflicts: int
    conflict_rows: tuple[int, int] | None


def index_split(split_keys: np.ndarray, labels: np.ndarray) -> SplitIndex:
    """The SplitIndex of a split from its keys and labels."""
    order = np.argsort(split_keys, kind="stable")  # each text's rows together, in file order
    ordered = split_keys[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    group = np.cumsum(first) - 1  # the text (0, 1, ...) of each sorted row
    firsts = order[first]  # each text's first row
    other = labels[order] != labels[firsts][group]  # a label other than the text's first row's
    conflict_rows = None
    if other.any():
        b = int(order[other].min())
        conflict_rows = (int(firsts[group[order == b][0]]), b)
    return SplitIndex(np.sort(order[~first]), len(np.unique(group[other])), conflict_rows)


def found_in(ordered: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The positions of `query`'s keys that occur in the sorted keys `ordered`."""
    if not len(ordered):
        return np.flatnonzero(np.zeros(len(query), dtype=bool))
    at = np.minimum(np.searchsorted(ordered, query), len(ordered) - 1)
    return np.flatnonzero(ordered[at] == query)


def carved_leaks(train_keys: np.ndarray, validation_keys: np.ndarray) -> np.ndarray:
    """The rows of a validation split carved from train whose text still occurs in what train kept: train held
    more copies of it than the carve took."""
    texts, copies = np.unique(train_keys, return_counts=True)
    taken_texts, where, taken = np.unique(validation_keys, return_inverse=True, return_counts=True)
    held = copies[np.searchsorted(texts, taken_texts)]  # every validation text is a train text
    return np.flatnonzero((held > taken)[where.reshape(-1)])


def example(text: str) -> str:
    """A text quoted in a message: its repr, made printable and cut short."""
    return short(repr(text), EXAMPLE_WIDTH)


def share(part: int, whole: int) -> str:
    """`part` as a percentage of `whole`, e.g. `12.5%` (`<0.1%` for a small non-zero share)."""
    value = 100 * part / whole if whole else 0.0
    return "<0.1%" if 0 < value < 0.1 else f"{value:.3g}%"


@dataclass
class CheckReport:
    """What the checks found: the row columns (CHECK_COLUMNS), the warning lines, and the leakage lines (which
    strict checks refuse)."""

    counts: dict[str, int]
    warnings: list[str]
    leaks: list[str]


def leak_line(name: str, split: str, leaked: np.ndarray, texts: list[str], carved: bool, into: str = "train") -> str:
    """The line that says how many `split` texts also occur in `into` (train, or test for validation), with one."""
    fix = ("train repeats them and the validation carve took some of their copies: remove train's duplicate texts"
           if carved else f"remove them from {split} or from {into}")
    why = "leakage" if into == "train" else "leakage: choosing on validation would read test texts"
    return (f"{name}: {len(leaked):,} of {len(texts):,} {split} texts ({share(len(leaked), len(texts))}) also occur "
            f"in {into} ({why}; texts compared {NORMALISATION}), e.g. {example(texts[int(leaked[0])])}; {fix}")


def check_splits(name: str, label_names: list[str], train: Split, test: Split, validation: Split,
                 carved: bool) -> CheckReport:
    """Leakage (test and validation texts that occur in train, validation texts that occur in test), duplicate rows
    and conflicting labels within each
    split of a dataset. `train` is the split as loaded; `carved`: `validation` was carved from it (then test is
    compared with all of it, validation with what the carve left, and duplicates are counted in train only)."""
    splits = {"train": train, "test": test, **({} if carved else {"validation": validation})}
    split_keys = {split: keys(rows.texts) for split, rows in splits.items()}
    in_train = np.sort(split_keys["train"])
    leaked = {"test": found_in(in_train, split_keys["test"]),
              "validation": carved_leaks(split_keys["train"], keys(validation.texts)) if carved else
              found_in(in_train, split_keys["validation"])}
    leaks = [leak_line(name, "test", leaked["test"], test.texts, False)] if len(leaked["test"]) else []
    if len(leaked["validation"]):
        leaks.append(leak_line(name, "validation", leaked["validation"], validation.texts, carved))
    in_test = np.flatnonzero(np.zeros(len(validation.texts), dtype=bool)) if carved else \
        found_in(np.sort(split_keys["test"]), split_keys["validation"])  # carved: within test ∩ train already
    if len(in_test):
        leaks.append(leak_line(name, "validation", in_test, validation.texts, False, "test"))
    warnings = list(leaks)
    indexes = {split: index_split(split_keys[split], rows.labels) for split, rows in splits.items()}
    for split, index in indexes.items():
        texts, labels = splits[split].texts, splits[split].labels
        if len(index.repeats):
            row = int(index.repeats[0])
            warnings.append(f"{name}: {split} has {len(index.repeats):,} duplicate row(s) (a text that occurs "
                            f"earlier in {split}, compared {NORMALISATION}), e.g. {example(texts[row])} "
                            f"(row {row + 1})")
        if index.conflict_rows:
            a, b = index.conflict_rows
            warnings.append(f"{name}: {split} has {index.conflicts:,} text(s) with conflicting labels, e.g. "
                            f"{example(texts[a])} as {label_names[labels[a]]!r} and {label_names[labels[b]]!r} "
                            f"(rows {a + 1} and {b + 1} of {split}); fix their labels or drop them")
    counts = {"test_in_train": len(leaked["test"]), "validation_in_train": len(leaked["validation"]),
              "validation_in_test": len(in_test),
              "duplicate_rows": sum(len(i.repeats) for i in indexes.values()),
              "conflicting_labels": sum(i.conflicts for i in indexes.values())}
    return CheckReport(counts, warnings, leaks)


def refuse_leakage(report: CheckReport) -> None:
    """A BenchError (one line) for the first leakage the checks found: strict checks (--strict-data)."""
    if report.leaks:
        raise BenchError(f"{report.leaks[0]}; or run without --strict-data to go on with a warning")


_said: set[tuple[str, str]] = set()


def warn_once(source: str, message: str) -> None:
    """Log `message` (WARNING) the first time this process meets it for the data at `source` (a sweep loads each
    dataset once, `clbench evaluate` once per run)."""
    if (source, message) not in _said:
        _said.add((source, message))
        log.warning(message)
