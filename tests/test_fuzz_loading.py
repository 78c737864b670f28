"""Fuzzed data loading: generated train/test files (random bytes, NUL bytes, CRLF, BOM, mixed label types,
thousands of columns, empty lines, deep JSON, 100k-character lines, invalid UTF-8, huge numbers, missing fields)
thrown at the loaders. Each either loads, or fails with a BenchError whose message is one line (the CLI: exit 2),
within a few seconds, writing nothing. Hypothesis runs derandomized (the same examples on every run) with a
modest number of examples, so CI is neither slow nor flaky."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bench.data.files import read_rows
from bench.data.loading import load_dataset
from bench.errors import BenchError
from conftest import ROOT, launch_env

FUZZ = settings(max_examples=60, deadline=timedelta(seconds=5), derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".csv", ".tsv", ".csv.gz", ".tsv.gz")
GOOD = [{"text": f"good text {c} {i}", "label": c} for c in ("a", "b") for i in range(4)]
SECONDS = 5  # the most one load may take, however nasty the file


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and modification time."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def dataset(root: Path, train: bytes, suffix: str, test: bytes | None = None) -> Path:
    """A folder `root/set` holding train<suffix> (gzipped for .gz suffixes) and a test file (by default the
    good rows as JSON Lines)."""
    folder = root / "set"
    folder.mkdir()
    (folder / f"train{suffix}").write_bytes(gzip.compress(train, mtime=0) if suffix.endswith(".gz") else train)
    (folder / "test.jsonl").write_bytes(test if test is not None else jsonl(GOOD))
    return folder


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def loads_or_refuses(folder: Path) -> str:
    """Load `folder` the way `clbench run` does and check the outcome: a usable dataset, or one BenchError line;
    fast either way, with nothing written under the folder's parent or into the user cache. Returns the
    error message ("" when it loaded)."""
    root = folder.parent
    cache = root / "cache"
    before = snapshot(root)
    started = time.perf_counter()
    old = os.environ.get("BENCH_CACHE_DIR")
    os.environ["BENCH_CACHE_DIR"] = str(cache)
    try:
        data = load_dataset(str(folder))
    except BenchError as exc:
        message = str(exc)
        assert message.strip() and len(message.splitlines()) == 1, message[:3000]
        assert len(message) < 1500, message[:3000]
    else:
        message = ""
        for split in (data.train, data.validation, data.test):
            assert len(split.ids) == len(split.texts) == len(split.labels)
            assert all(isinstance(t, str) and t.strip() for t in split.texts)
            assert all(isinstance(i, str) for i in split.ids)
            "".join(split.texts + split.ids + data.label_names).encode("utf-8")  # no lone surrogate gets through
            assert ((split.labels >= 0) & (split.labels < data.num_labels)).all()
        assert data.num_labels >= 2 and len(data.train) and len(data.test)
    finally:
        if old is None:
            os.environ.pop("BENCH_CACHE_DIR", None)
        else:
            os.environ["BENCH_CACHE_DIR"] = old
    assert time.perf_counter() - started < SECONDS
    assert snapshot(root) == before and not cache.exists()
    return message


def check(train: bytes, suffix: str, test: bytes | None = None) -> str:
    with tempfile.TemporaryDirectory(prefix="clbench-fuzz-") as root:
        return loads_or_refuses(dataset(Path(root), train, suffix, test))


# ----------------------------------------------------------------------------------------------- strategies

NASTY_BYTES = [b"{", b"}", b"[", b"]", b'"text"', b'"label"', b'"id"', b":", b",", b"\n", b"\r\n", b"\r", b"\n\n",
               b"\x00", b"\xef\xbb\xbf", b"\xff\xfe", b"\xff", b"\xc3", b"\xed\xa0\x80", b'"', b"\\", b"\\u0000",
               b"\\ud800", b"\t", b" ", b"1", b"-", b"1e999", b"NaN", b"true", b"null", b"a", b"x" * 3000,
               b"9" * 5000, b"\x1f\x8b", b"text,label\n", b"text\tlabel\n", b'"a,b"', b"\xe2\x80\xa8"]

SCALARS = ['"a"', '"b"', '"a "', '" "', '""', "1", "0", "-1", "true", "false", "null", "1.0", "0.5", "1e400", "-1e400",
           "NaN", "Infinity", "1e308", '"\\ud800"', '"\\udfff x"', '"\\u0000"', '"\\u2028"', '"\\u00b2"', '"--1"',
           '"01"', '"\\ufeffa"', '{"\\u0085": "a"}', '["\\u2028", "\\u001e"]', "9" * 5000, "9" * 300, "[]", "{}",
           '["a", "b"]', '{"name": "a"}',
           "[" * 3000 + "]" * 3000, '{"a": ' * 3000 + "1" + "}" * 3000, "[" * 200_000, '"' + "x" * 100_000 + '"',
           '"' + "a\\n" * 2000 + '"']
json_scalar = st.one_of(st.sampled_from(SCALARS), st.text(max_size=30).map(json.dumps),
                        st.integers(-10**30, 10**30).map(str), st.floats(allow_nan=True).map(json.dumps))
json_value = st.recursive(json_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(lambda v: "[" + ", ".join(v) + "]"),
    st.dictionaries(st.text(max_size=5), inner, max_size=3).map(
        lambda d: "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in d.items()) + "}")), max_leaves=6)
key = st.sampled_from(['"text"', '"label"', '"id"', '"Text"', '"labels"', '"x"', '""', '"\\ud800"'])


GOOD_TEXT = st.text(min_size=1).map(json.dumps)
GOOD_LABEL = st.sampled_from(['"a"', '"b"', "1", "true"])


@st.composite
def json_rows(draw) -> bytes:
    """A JSON Lines file: maybe some good rows, then rows whose keys and values are drawn (mixed types, huge
    numbers, deep nesting, long strings), one of them holding a value planted from SCALARS (so that every nasty
    value is met in context, and mostly as the first problem of its file), joined with assorted line ends, maybe
    behind a BOM."""
    lines = [json.dumps(r) for r in GOOD] if draw(st.booleans()) else []
    count = draw(st.integers(1, 6))
    planted = (draw(st.integers(0, count - 1)), draw(st.sampled_from(['"text"', '"label"', '"id"'])),
               draw(st.sampled_from(SCALARS)))
    for row in range(count):
        if draw(st.integers(0, 9)) == 0:  # now and then a line that is not an object
            lines.append(draw(json_value))
            continue
        nasty = draw(st.integers(0, 3))  # 0: both values drawn at large, 1: the text, 2: the label, 3: neither
        fields = {'"text"': draw(json_value) if nasty in (0, 1) else draw(GOOD_TEXT),
                  '"label"': draw(json_value) if nasty in (0, 2) else draw(GOOD_LABEL)}
        fields.update(draw(st.dictionaries(key, json_value, max_size=2)))
        if row == planted[0]:
            fields[planted[1]] = planted[2]
        dropped = draw(st.sampled_from([None, None, '"text"', '"label"']))
        lines.append("{" + ", ".join(f"{k}: {v}" for k, v in fields.items() if k != dropped) + "}")
    if draw(st.booleans()):
        lines[draw(st.integers(0, len(lines))):0] = [""] * draw(st.integers(1, 3))  # empty lines
    end = draw(st.sampled_from(["\n", "\r\n", "\r", "\n \n"]))
    bom = "\ufeff" if draw(st.booleans()) else ""
    return (bom + end.join(lines) + end * draw(st.integers(0, 1))).encode("utf-8", "surrogatepass")


CELLS = ["a", "b", "", " ", "x" * 100_000, "1", "1.0", "-1", "nan", "NA", "NULL", "True", '"a,b"', '"a\nb"', '"x',
         'a"b', "\x00", "\ufeff", "\u2028", "caf\u00e9", "9" * 5000, "\r"]


@st.composite
def table_rows(draw) -> tuple[bytes, str]:
    """A CSV or TSV file: a header (the text and label columns, maybe missing, renamed, duplicated, or among
    thousands of others), rows of drawn cells with too few or too many fields, assorted line ends, maybe a BOM."""
    sep = draw(st.sampled_from([",", "\t"]))
    columns = draw(st.lists(st.sampled_from(["text", "label", "Label", "", "id", "x", "text"]), max_size=4))
    if draw(st.integers(0, 4)) == 0:
        columns += [f"c{i}" for i in range(draw(st.integers(1000, 4000)))]  # thousands of columns
    lines = [sep.join(columns)]
    if draw(st.booleans()):
        lines += [sep.join(["good text " + str(i), "ab"[i % 2]] + ["z"] * (len(columns) - 2)) for i in range(8)]
    for _ in range(draw(st.integers(0, 6))):
        cells = draw(st.lists(st.one_of(st.sampled_from(CELLS), st.text(max_size=12)), max_size=len(columns) + 2))
        lines.append(sep.join(cells))
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    bom = "\ufeff" if draw(st.booleans()) else ""
    suffix = (".csv" if sep == "," else ".tsv") + draw(st.sampled_from(["", ".gz"]))
    return (bom + end.join(lines) + end).encode("utf-8"), suffix


# ----------------------------------------------------------------------------------------------- properties

@FUZZ
@given(content=st.binary(max_size=3000), suffix=st.sampled_from(SUFFIXES))
def test_random_bytes_load_or_fail_in_one_line(content, suffix):
    check(content, suffix)


@FUZZ
@given(parts=st.lists(st.sampled_from(NASTY_BYTES), max_size=40), suffix=st.sampled_from(SUFFIXES))
def test_nasty_byte_soup_loads_or_fails_in_one_line(parts, suffix):
    check(b"".join(parts), suffix)


@settings(FUZZ, max_examples=100)
@given(train=json_rows(), test_too=st.booleans())
def test_generated_json_lines_load_or_fail_in_one_line(train, test_too):
    check(train, ".jsonl", train if test_too else None)  # the same file as test: its labels are then all known


@FUZZ
@given(table=table_rows())
def test_generated_csv_and_tsv_load_or_fail_in_one_line(table):
    content, suffix = table
    check(content, suffix)


def row_line(text: str, label: str) -> str:
    return '{"text": ' + text + ', "label": ' + label + "}"


def lines(*extra: str) -> bytes:
    return ("\n".join([json.dumps(r) for r in GOOD] + list(extra)) + "\n").encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("field", ["text", "label", "id"])
@pytest.mark.parametrize("value", SCALARS, ids=[f"scalar{i}" for i in range(len(SCALARS))])
def test_each_nasty_value_in_each_field(value, field):
    """Every nasty value of SCALARS in each field of one row of a good file (and the same file as test, so that its
    labels are known): it loads or fails in one line, whatever the generated cases above happened to draw."""
    row = {"text": '"x"', "label": '"a"', "id": '"r"', field: value}
    content = lines("{" + ", ".join(f'"{k}": {v}' for k, v in row.items()) + "}")
    check(content, ".jsonl", content)


# ----------------------------------------------------------------------------------------------- named cases

# id -> (train file's bytes, suffix, words the error must hold; None: the file loads)
NAMED = {
    "deep-nesting": (lines(row_line('"x"', "[" * 100_000 + "]" * 100_000)), ".jsonl", ["line 9", "nested too deeply"]),
    "deep-nesting-unclosed": (lines("[" * 200_000), ".jsonl", ["line 9", "nested too deeply"]),
    "huge-integer-label": (lines(row_line('"x"', "9" * 5000)), ".jsonl", ["line 9", "too long"]),
    "infinite-label": (lines(row_line('"x"', "1e999")), ".jsonl", ["row 9", "not a finite number"]),
    "lone-surrogate-text": (lines(row_line('"bad \\ud800 text"', '"a"')), ".jsonl", ["row 9", "surrogate"]),
    "lone-surrogate-label": (lines(row_line('"x"', '"\\udc00"')), ".jsonl", ["row 9", "surrogate"]),
    "digit-like-labels": (jsonl([{"text": f"t {i}", "label": label} for i, label in
                                 enumerate(["1", "2", "\u00b2", "--1", "1" * 5000, "-3", 7] * 5)]), ".jsonl", None),
    "100k-character-line": (lines(row_line(json.dumps("word " * 20_000), '"a"')), ".jsonl", None),
    "thousands-of-keys": (lines('{"text": "x", "label": "a", ' + ", ".join(f'"k{i}": {i}' for i in range(5000))
                                + "}"), ".jsonl", None),
    "long-key-named-in-error": (b'{"' + b"k" * 100_000 + b'": 1, "label": "a"}\n', ".jsonl", ["no row of", "'text'"]),
    "long-label-named-in-error": (lines(), ".jsonl", None),
    "line-breaks-in-a-quoted-label": (lines(row_line('"x"', '{"\\u0085": "a", "b": "\\u2028"}')), ".jsonl",
                                      ["row 9", "is an object", "\\x85"]),
    "extra-data-after-the-object": (lines('{"text": "x", "label": "a"} junk'), ".jsonl", ["line 9", "Extra data"]),
    "leading-spaces": (lines('   {"text": "x", "label": "a"}'), ".jsonl", None),
    "nul-bytes-jsonl": (lines() + b"\x00\x00\n", ".jsonl", ["malformed JSON on line 9"]),
    "crlf-and-bom": (b"\xef\xbb\xbf" + lines().replace(b"\n", b"\r\n"), ".jsonl", None),
    "bom-mid-file": (lines() + b"\xef\xbb\xbf" + lines(), ".jsonl", None),
    "only-empty-lines": (b"\n\r\n \n" * 1000, ".jsonl", ["empty train split"]),
    "csv-short-row": (b"text,label\n" + b"good a,a\ngood b,b\n" * 4 + b"only text\n", ".csv",
                      ["row 9", "no 'label' value"]),
    "csv-missing-text-cell": (b"label,text\n" + b"a,good a\nb,good b\n" * 4 + b"b\n", ".csv", ["row 9", "empty text"]),
    "csv-thousands-of-columns": (("text,label," + ",".join(f"c{i}" for i in range(5000)) + "\n"
                                  + "".join(f"t {i},{'ab'[i % 2]}" + ",1" * 5000 + "\n" for i in range(8))).encode(),
                                 ".csv", None),
    "csv-nul-bytes": (b"text,label\n" + b"".join(b"t\x00 %d,%s\n" % (i, b"ab"[i % 2:i % 2 + 1]) for i in range(8)),
                      ".csv", None),
    "tsv-gz": (b"text\tlabel\n" + b"".join(b"t %d\t%s\n" % (i, b"ab"[i % 2:i % 2 + 1]) for i in range(8)), ".tsv.gz",
               None),
    "invalid-utf8": (lines() + b'{"text": "\xc3\x28", "label": "a"}\n', ".jsonl", ["not UTF-8", "line 9"]),
}


@pytest.mark.parametrize("case", NAMED, ids=list(NAMED))
def test_named_nasty_files(case):
    content, suffix, words = NAMED[case]
    test = content if case == "digit-like-labels" else None  # the same rows as test: every label is known
    if case == "long-label-named-in-error":
        test = lines(row_line('"x"', json.dumps("L" * 100_000)))  # a test label that never occurs in train
        words = ["never occur in train", "..."]
    message = check(content, suffix, test)
    if words is None:
        assert message == "", message
    else:
        assert all(word in message for word in words), (words, message[:500])


def test_json_array_file_is_read_as_rows(tmp_path):
    """A .json file may hold one JSON array of row objects as well as JSON Lines."""
    path = tmp_path / "train.json"
    path.write_text(json.dumps(GOOD, indent=2))
    assert read_rows(path) == GOOD


# ----------------------------------------------------------------------------------------------- the real CLI

CLI_CASES = {
    "deep-nesting": (lines("[" * 100_000), ".jsonl.gz", "nested too deeply"),
    "lone-surrogate": (lines(row_line('"\\ud800"', '"a"')), ".jsonl", "surrogate"),
}


@pytest.mark.parametrize("case", CLI_CASES, ids=list(CLI_CASES))
def test_clbench_run_refuses_a_nasty_folder_in_one_line(tmp_path, case):
    content, suffix, words = CLI_CASES[case]
    folder = dataset(tmp_path, content, suffix)
    before = snapshot(folder)
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "bench", "run", "--methods", "ce", "--datasets", str(folder),
                           "--encoder", "tiny-bert", "--evaluators", "none", "--no-progress", "--results-dir",
                           str(results)], cwd=ROOT, env=launch_env(("BENCH_",), BENCH_CACHE_DIR=str(tmp_path / "c")),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.splitlines()) == 1 and words in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""
    assert snapshot(folder) == before and not (tmp_path / "c").exists()
    assert not results.exists() or not any(results.rglob("*"))
