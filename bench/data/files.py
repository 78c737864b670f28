"""Reading user data files: JSON Lines, JSON, CSV and TSV (optionally gzipped), and checking their rows (a text
and a label each), with one clear error per problem."""

from __future__ import annotations

import difflib
import gzip
import io
import json
import numbers
import os
import zlib
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from bench.errors import BenchError

SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".csv", ".tsv")
GZIP_MAGIC = b"\x1f\x8b"  # the first two bytes of every gzip file
LABEL_TYPES = "a string, an integer or a boolean"  # what one row's label may be (1.0 counts as the integer 1)


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (the CLI prints every error as one line)."""
    return " ".join(str(exc).split()) or exc.__class__.__name__


def user_cache_dir() -> Path:
    """Where clbench keeps what it prepares once per user (the WordNet copy, counter-fitted vectors):
    `BENCH_CACHE_DIR`, else ~/.cache/clbench."""
    return Path(os.environ.get("BENCH_CACHE_DIR") or Path.home() / ".cache" / "clbench").expanduser()


def read_text(path: Path) -> str:
    """The text of a UTF-8 file, gunzipped when its name ends in .gz. A file that is not what its name says (a
    .gz that is not gzip, gzip without .gz, not UTF-8) raises a BenchError saying what it should be and how to
    fix it; a UTF-8 byte-order mark is dropped."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BenchError(f"cannot read {path}: {exc.strerror or one_line(exc)}") from exc
    if path.name.lower().endswith(".gz"):
        if not data.startswith(GZIP_MAGIC):
            raise BenchError(f"{path} is not gzip-compressed: expected gzip (its name ends in .gz); rename it to "
                             f"{path.name[:-3]} if it is plain text")
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise BenchError(f"{path} is a damaged gzip file ({one_line(exc)}); re-create or re-download "
                             "it") from exc
    elif data.startswith(GZIP_MAGIC):
        raise BenchError(f"{path} is gzip-compressed but its name does not end in .gz; rename it to "
                         f"{path.name}.gz")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        hint = " (it looks like UTF-16)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise BenchError(f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} on line {line} is not valid "
                         f"UTF-8{hint}; re-save it as UTF-8") from exc


def numbered_json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line of a JSON Lines file (optionally gzipped); a line
    that is not JSON, or a file that is not (gzipped) UTF-8 text, raises a BenchError naming it."""
    for number, line in enumerate(io.StringIO(read_text(path), newline=None), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchError(f"malformed JSON on line {number} of {path}: {exc.msg}; "
                             "each line must be one JSON object") from exc


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON Lines (optionally gzipped), CSV or TSV file, as dicts."""
    name = path.name.lower()
    if name.endswith((".csv", ".tsv")):
        import pandas as pd

        text = read_text(path)
        if not text.strip():
            raise BenchError(f"{path} is empty; it needs a header line naming the columns (e.g. text,label) "
                             "and one row per example")
        try:
            frame = pd.read_csv(io.StringIO(text), sep="\t" if name.endswith(".tsv") else ",", dtype=str,
                                keep_default_na=False)
        except (ValueError, pd.errors.ParserError) as exc:
            raise BenchError(f"cannot parse {path} as {'TSV' if name.endswith('.tsv') else 'CSV'}: "
                             f"{one_line(exc)}") from exc
        return frame.to_dict(orient="records")
    rows = []
    for number, row in numbered_json_lines(path):
        if not isinstance(row, dict):
            raise BenchError(f"line {number} of {path} is not a JSON object; "
                             'each line must look like {"text": ..., "label": ...}')
        rows.append(row)
    return rows


def find_split_file(folder: Path, split: str) -> Path | None:
    """The file holding `split` in `folder` (train.jsonl.gz, test.csv, ...), or None."""
    for suffix in SUFFIXES:
        candidate = folder / f"{split}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def require_fields(rows: list[dict[str, Any]], fields: tuple[str, ...], where: str) -> None:
    """A BenchError when no row has one of `fields`: it names the field and lists the columns (CSV/TSV) or
    keys (JSON) that are there."""
    tabular = where.lower().endswith((".csv", ".tsv"))
    found = list(dict.fromkeys(str(key) for row in rows[:1000] for key in row))
    for name in fields:
        if rows and not any(name in row for row in rows):
            close = difflib.get_close_matches(name, found, n=1, cutoff=0.6)
            hint = f" (is it {close[0]!r}?)" if close else ""
            listed = ", ".join(repr(k) for k in found[:20]) or "none"
            if tabular:
                raise BenchError(f"{where} has no {name!r} column; columns found: {listed}{hint}; rename the "
                                 f"column that holds the {name} to {name!r}")
            raise BenchError(f"no row of {where} has a {name!r} key; keys found: {listed}{hint}; rename the key "
                             f"that holds the {name} to {name!r}")


def kind_of(value: Any) -> str:
    """How a JSON value that cannot be a label or text is described to the user."""
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object (dict)"
    if isinstance(value, (bool, np.bool_)):
        return "a boolean"
    if isinstance(value, float):
        return "a number with a fraction"
    return f"a {type(value).__name__}"


def label_string(value: Any, number: int, where: str, label_field: str) -> str:
    """One row's label as a string: strings are stripped, integers (and whole floats such as 1.0) written as
    integers, booleans as True/False; anything else raises a BenchError naming the file, row and value."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    shown = json.dumps(value, default=str, ensure_ascii=False) if isinstance(value, (list, dict, float)) \
        else repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    raise BenchError(f"row {number} of {where}: the {label_field!r} value {shown} is {kind_of(value)}; a label "
                     f"must be {LABEL_TYPES}, one class per row")


def rows_to_columns(rows: list[dict[str, Any]], text_field: str, label_field: str, where: str,
                    split: str) -> tuple[list[str], list[str], list[str]]:
    """Ids, texts and label strings from raw rows; bad rows raise a BenchError naming the first one."""
    require_fields(rows, (text_field, label_field), where)
    ids, texts, labels = [], [], []
    empty = []
    for number, row in enumerate(rows, start=1):
        if text_field not in row or row[text_field] is None:
            raise BenchError(f"row {number} of {where} has no {text_field!r} field; every row needs "
                             f"{text_field!r} and {label_field!r}")
        if label_field not in row or row[label_field] is None or str(row[label_field]).strip() == "":
            raise BenchError(f"row {number} of {where} has no {label_field!r} value; every row needs a label")
        text = row[text_field]
        if isinstance(text, (bool, np.bool_)) or not isinstance(text, (str, int, float)):
            raise BenchError(f"row {number} of {where}: the {text_field!r} value is {kind_of(text)}; the text "
                             "must be one string")
        text = str(text)
        if not text.strip():
            empty.append(number)
        ids.append(str(row.get("id", f"{split}-{number - 1}")))
        texts.append(text)
        labels.append(label_string(row[label_field], number, where, label_field))
    if empty:
        raise BenchError(f"{len(empty)} row(s) of {where} have empty text (first: row {empty[0]}); "
                         "remove or fill them")
    return ids, texts, labels
