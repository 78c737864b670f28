"""CheckList test cases and suite files: the `Case` type, and reading and writing JSON Lines suites.

A suite file (`options.checklist_suite`) holds one case per line:
`{"test", "capability", "type": "MFT"|"INV"|"DIR", "case_id", "texts": [...], "label": name|null}`,
optionally `"accept": [names]` (the label names that satisfy the expectation; default `[label]`).
`label` may be left out (= null). INV and DIR need the original and at least one perturbation. Case ids are
unique per test; every label named must be one of the dataset's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from bench.data.files import numbered_json_lines
from bench.errors import BenchError
from bench.results.store import atomic_path, write_jsonl_gz

TYPES = ("MFT", "INV", "DIR")
REQUIRED = ("test", "capability", "type", "case_id", "texts")


@dataclass(frozen=True)
class Case:
    """One test case: `texts[0]` is the original (or the only sentence of an MFT case).

    `accept` is the set of label names meeting the expectation (MFT: allowed predictions; DIR: labels whose
    probabilities are summed); it defaults to `(label,)`, and is empty (not scorable) when label is null."""

    test: str
    capability: str
    type: str
    case_id: str
    texts: tuple[str, ...]
    label: str | None = None
    accept: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.accept and self.label is not None:
            object.__setattr__(self, "accept", (self.label,))

    def to_json(self) -> dict[str, Any]:
        """The case as one suite-file line (what `load_suite` reads back)."""
        return {"test": self.test, "capability": self.capability, "type": self.type, "case_id": self.case_id,
                "texts": list(self.texts), "label": self.label, "accept": list(self.accept)}


# ------------------------------------------------------------------------------------------- suite files

def _line_error(path: Path, number: int, problem: str) -> BenchError:
    return BenchError(f"CheckList suite {path}, line {number}: {problem}")


def parse_case(row: Any, label_names: list[str], path: Path, number: int) -> Case:
    """One validated suite line as a Case; BenchError naming the file, the line and the fix otherwise."""
    if not isinstance(row, dict):
        raise _line_error(path, number, 'not a JSON object; each line must look like {"test": ..., '
                                        '"capability": ..., "type": "MFT", "case_id": ..., "texts": [...], '
                                        '"label": ...}')
    missing = [k for k in REQUIRED if k not in row]
    if missing:
        raise _line_error(path, number, f"missing field(s) {', '.join(missing)}; every case needs "
                                        f"{', '.join(REQUIRED)} (and label, which may be null)")
    kind = str(row["type"]).upper()
    if kind not in TYPES:
        raise _line_error(path, number, f"unknown type {row['type']!r}; use one of {', '.join(TYPES)}")
    for key in ("test", "capability"):
        if not isinstance(row[key], str):
            raise _line_error(path, number, f"{key} must be a string")
    if not row["test"].strip():
        raise _line_error(path, number, "test must not be empty")
    if isinstance(row["case_id"], bool) or not isinstance(row["case_id"], (str, int)):
        raise _line_error(path, number, "case_id must be a string or an integer")
    texts = row["texts"]
    if not isinstance(texts, list) or not all(isinstance(t, str) and t.strip() for t in texts):
        raise _line_error(path, number, "texts must be a list of non-empty strings")
    least = 1 if kind == "MFT" else 2
    if len(texts) < least:
        raise _line_error(path, number, f"a {kind} case needs at least {least} text(s)"
                          + ("" if kind == "MFT" else ": the original, then its perturbations"))
    label = row.get("label")
    accept = row.get("accept") or []
    if not isinstance(accept, list):
        raise _line_error(path, number, "accept must be a list of label names")
    for name in ([label] if label is not None else []) + accept:
        if name not in label_names:
            raise _line_error(path, number, f"unknown label {name!r}; the dataset's labels are: "
                                            f"{', '.join(label_names)}")
    return Case(row["test"], row["capability"], kind, str(row["case_id"]), tuple(texts), label, tuple(accept))


def load_suite(path: Path, label_names: list[str]) -> list[Case]:
    """Every case of a JSON Lines suite file (optionally .gz), validated line by line."""
    path = Path(path)
    if not path.is_file():
        raise BenchError(f"CheckList suite {path} does not exist; give the checklist_suite option an existing "
                         "JSON Lines file, or leave it empty to use the built-in tests")
    cases: list[Case] = []
    seen: dict[tuple[str, str], int] = {}
    try:
        for number, row in numbered_json_lines(path):
            case = parse_case(row, label_names, path, number)
            key = (case.test, case.case_id)
            if key in seen:
                raise _line_error(path, number, f"case_id {case.case_id!r} of test {case.test!r} "
                                                f"repeats line {seen[key]}; case ids must be unique per test")
            seen[key] = number
            cases.append(case)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise BenchError(f"cannot read CheckList suite {path}: {exc.__class__.__name__}: {exc}") from exc
    if not cases:
        raise BenchError(f"CheckList suite {path} has no cases; write one JSON object per line")
    return cases


def write_suite(path: Path, cases: Iterable[Case]) -> None:
    """Write cases as a JSON Lines suite file (gzipped when the name ends in .gz), e.g. to edit the
    built-in suite and run it with checklist_suite."""
    if str(path).endswith(".gz"):
        write_jsonl_gz(Path(path), [c.to_json() for c in cases])
        return
    with atomic_path(Path(path)) as tmp:
        tmp.write_text("".join(json.dumps(c.to_json(), ensure_ascii=False) + "\n" for c in cases),
                       encoding="utf-8")
