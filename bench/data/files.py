"""Reading user data files: JSON Lines, JSON, CSV and TSV (optionally gzipped), and checking their rows (a text
and a label each), with one clear error per problem. Any file, however malformed (random bytes, NUL bytes, deep
JSON nesting, numbers too long to read, lone surrogates, invalid UTF-8), either loads or raises one BenchError
line (tests/test_fuzz_loading.py)."""

from __future__ import annotations

import difflib
import gzip
import io
import json
import json.scanner
import math
import numbers
import os
import sys
import unicodedata
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from bench.errors import BenchError

SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".csv", ".csv.gz", ".tsv", ".tsv.gz")
TABULAR = (".csv", ".tsv", ".csv.gz", ".tsv.gz")
GZIP_MAGIC = b"\x1f\x8b"  # the first two bytes of every gzip file
LABEL_TYPES = "a string, an integer or a boolean"  # what one row's label may be (1.0 counts as the integer 1)
# json.loads without its Python-level wrapping: (value, end) of the JSON value at an index (2-3x faster per line
# of a JSON Lines file; anything it does not take cleanly goes through json.loads for the value or the error)
SCAN_JSON = json.scanner.make_scanner(json.JSONDecoder())


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


def text_lines(text: str) -> list[str]:
    """The lines of a text split at \\n, \\r\\n or \\r (as universal newlines do; not at the other characters
    str.splitlines() breaks at, which a JSON string may hold)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")


def parse_json(text: str, where: str, fix: str) -> Any:
    """One JSON value; a BenchError naming `where` (e.g. "line 3 of FILE") when it is malformed (then with
    `fix`), nested too deeply or holds a number too long to read."""
    try:
        value, end = SCAN_JSON(text, 0)
        if end == len(text) or text[end:].isspace():
            return value
    except (StopIteration, RecursionError, ValueError):
        pass  # leading whitespace, or an error: json.loads gives the value or the error's message below
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        position = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno}, column {exc.colno}"
        raise BenchError(f"malformed JSON on {where}: {exc.msg} ({position}); {fix}") from exc
    except RecursionError as exc:
        raise BenchError(f"malformed JSON on {where}: nested too deeply for Python's JSON reader; flatten "
                         "the value") from exc
    except ValueError as exc:  # an integer of more digits than int() reads (sys.get_int_max_str_digits)
        raise BenchError(f"malformed JSON on {where}: a number too long to read (more than "
                         f"{sys.get_int_max_str_digits()} digits); write it as a string") from exc


def numbered_json_lines(path: Path, text: str | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line of a JSON Lines file (optionally gzipped; `text`: its
    text, when already read; a byte-order mark at the start of a line, as in files joined with `cat`, is dropped);
    a line that is not JSON, or a file that is not (gzipped) UTF-8 text, raises a BenchError naming it."""
    lines = text_lines(read_text(path) if text is None else text)
    for index, line in enumerate(lines):
        lines[index] = ""  # each line is freed once parsed: no second copy of the file lives beside the rows
        if line.startswith("\ufeff"):
            line = line[1:]
        if line and not line.isspace():
            yield index + 1, parse_json(line, f"line {index + 1} of {path}", "each line must be one JSON object")


def json_array_rows(path: Path, text: str) -> list[dict[str, Any]]:
    """The rows of a .json file that holds one JSON array of row objects."""
    rows = parse_json(text, str(path), "a .json file holds JSON Lines or one array of row objects")
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise BenchError(f"element {number} of the array in {path} is {kind_of(row)}, not a JSON object; "
                             'each must look like {"text": ..., "label": ...}')
    return rows


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON Lines, JSON (JSON Lines or one array of objects), CSV or TSV file (each optionally
    gzipped), as dicts."""
    name = path.name.lower()
    if name.endswith(TABULAR):
        return list(table_rows(path))
    text = read_text(path) if name.endswith((".json", ".json.gz")) else None
    if text is not None and text.lstrip("\ufeff \t\r\n").startswith("["):  # one array, not JSON Lines
        return json_array_rows(path, text)
    return list(json_line_rows(path, text))


def table_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a CSV or TSV file (optionally gzipped), every cell read as text, one dict at a time (the
    table is parsed whole first: a parse error comes before any row)."""
    import pandas as pd

    text = read_text(path)
    if not text.strip():
        raise BenchError(f"{path} is empty; it needs a header line naming the columns (e.g. text,label) "
                         "and one row per example")
    kind = "TSV" if path.name.lower().endswith((".tsv", ".tsv.gz")) else "CSV"
    try:
        frame = pd.read_csv(io.StringIO(text), sep="\t" if kind == "TSV" else ",", dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as exc:
        raise BenchError(f"cannot parse {path} as {kind}: {short(one_line(exc), 300)}") from exc
    del text
    columns = list(frame.columns)
    for values in frame.itertuples(index=False, name=None):
        yield dict(zip(columns, values))


def json_line_rows(path: Path, text: str | None = None) -> Iterator[dict[str, Any]]:
    """The rows of a JSON Lines file (optionally gzipped; `text`: its text, when already read), one at a time;
    a line that is not a JSON object raises a BenchError naming it."""
    for number, row in numbered_json_lines(path, text):
        if not isinstance(row, dict):
            raise BenchError(f"line {number} of {path} is not a JSON object; "
                             'each line must look like {"text": ..., "label": ...}')
        yield row


def read_columns(path: Path, text_field: str, label_field: str,
                 split: str) -> tuple[list[str], list[str], list[str]]:
    """Ids, texts and label strings of one split file: `rows_to_columns` of its rows, checked one at a time as
    they are parsed (JSON Lines) or taken from the parsed table (CSV, TSV), never all held as dicts at once."""
    name = path.name.lower()
    rows = (json_line_rows(path) if name.endswith((".jsonl", ".jsonl.gz")) else table_rows(path)
            if name.endswith(TABULAR) else read_rows(path))
    return rows_to_columns(rows, text_field, label_field, str(path), split)


def find_split_file(folder: Path, split: str) -> Path | None:
    """The file holding `split` in `folder` (train.jsonl.gz, test.csv, ...), or None."""
    for suffix in SUFFIXES:
        candidate = folder / f"{split}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def printable(text: str) -> str:
    """`text` with each character that is not printable (controls, and line breaks such as U+0085 or U+2028 that
    would split a message) written as its Python escape."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def short(text: str, width: int = 40) -> str:
    """`text` made printable and cut to `width` characters (ending in ...), for messages that quote the user's
    data: one line, however long or odd the value."""
    text = printable(text)
    return text if len(text) <= width else text[:width - 3] + "..."


INVISIBLE = ("Cc", "Cf")  # Unicode categories a text may not consist of: control and format (zero-width) characters


def blank(text: str) -> bool:
    """Whether `text` holds nothing but whitespace, control characters and format characters (the zero-width
    U+200B..U+200D, U+2060 and U+FEFF among them): empty once those are removed."""
    if text.isprintable():  # the common case: printable, so only spaces can be invisible
        return not text.strip()
    return all(c.isspace() or unicodedata.category(c) in INVISIBLE for c in text)


def shown(values: Any, limit: int = 5, width: int = 40) -> str:
    """The first `limit` values as a Python list, each value's repr cut to `width` characters (for messages)."""
    return "[" + ", ".join(short(repr(v), width) for v in list(values)[:limit]) + "]"


def require_fields(rows: list[dict[str, Any]], fields: tuple[str, ...], where: str) -> None:
    """A BenchError when no row has one of `fields`: it names the field and lists the columns (CSV/TSV) or
    keys (JSON) that are there."""
    tabular = where.lower().endswith(TABULAR)
    found = list(dict.fromkeys(str(key) for row in rows[:1000] for key in row))
    for name in fields:
        if rows and not any(name in row for row in rows):
            close = difflib.get_close_matches(name, found, n=1, cutoff=0.6)
            hint = f" (is it {close[0]!r}?)" if close else ""
            listed = ", ".join(short(repr(k)) for k in found[:20]) or "none"
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
        return "a number with a fraction" if math.isfinite(value) else "not a finite number"
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
    shown = short(json.dumps(value, default=str, ensure_ascii=False) if isinstance(value, (list, dict, float))
                  else repr(value))
    raise BenchError(f"row {number} of {where}: the {label_field!r} value {shown} is {kind_of(value)}; a label "
                     f"must be {LABEL_TYPES}, one class per row")


def valid_unicode(value: str, field: str, number: int, where: str) -> str:
    """`value` unchanged; a BenchError when it holds a lone surrogate (a JSON \\ud800 escape), which no file can
    be written with."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BenchError(f"row {number} of {where}: the {field!r} value holds an unpaired surrogate "
                         f"({value[exc.start]!r} at character {exc.start + 1}), which is not valid Unicode; fix "
                         "that \\u escape in the data") from None
    return value


def rows_to_columns(rows: Iterable[dict[str, Any]], text_field: str, label_field: str, where: str,
                    split: str) -> tuple[list[str], list[str], list[str]]:
    """Ids, texts and label strings from raw rows (a list, or an iterator read once); bad rows raise a BenchError
    naming the first one, or, when no row has the text or label field at all, naming the field."""
    ids, texts, labels = [], [], []
    empty, invisible = [], ""  # rows of empty text; the first one that only looks empty (zero-width, controls)
    names: dict[str, str] = {}  # one str object per label name, however many rows carry it
    rows = iter(rows)
    for number, row in enumerate(rows, start=1):
        if number == 1 and not (text_field in row and label_field in row):  # is the field in any row at all?
            require_fields([row, *rows], (text_field, label_field), where)
        text, label = row.get(text_field), row.get(label_field)
        if text is None:
            raise BenchError(f"row {number} of {where} has no {text_field!r} field; every row needs "
                             f"{text_field!r} and {label_field!r}")
        if label is None or (isinstance(label, str) and not label.strip()):
            raise BenchError(f"row {number} of {where} has no {label_field!r} value; every row needs a label")
        # plain ASCII strings (the common case, a million times over) skip the checks they cannot fail
        if type(text) is not str:  # noqa: E721
            if isinstance(text, (bool, np.bool_)) or not isinstance(text, (str, int, float)):
                raise BenchError(f"row {number} of {where}: the {text_field!r} value is {kind_of(text)}; the "
                                 "text must be one string")
            text = str(text)
        if not text.isascii():
            valid_unicode(text, text_field, number, where)
        if blank(text):
            empty.append(number)
            if not invisible and text.strip():
                invisible = f"row {number}'s text {short(repr(text))}"
        ident = str(row["id"]) if "id" in row else f"{split}-{number - 1}"
        ids.append(ident if ident.isascii() else valid_unicode(ident, "id", number, where))
        texts.append(text)
        label = label.strip() if type(label) is str else label_string(label, number, where, label_field)  # noqa: E721
        if label not in names:
            names[label] = valid_unicode(label, label_field, number, where)
        labels.append(names[label])
    if empty:
        detail = (f"; {invisible} counts as empty: nothing but whitespace, control or zero-width characters"
                  if invisible else "")
        raise BenchError(f"{len(empty)} row(s) of {where} have empty text (first: row {empty[0]}{detail}); "
                         "remove or fill them")
    return ids, texts, labels
