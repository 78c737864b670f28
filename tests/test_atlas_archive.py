"""The few-label atlas as published (issue 58): docs/results/issue58-atlas.tar.xz unpacked and read with the
documented commands gives the README's table cell for cell (bold included), docs/REPRODUCING.md's verdicts and
ranking line, and writes the critical-difference diagram. Nothing is trained; the archive is in the checkout."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parent.parent
ARCHIVE = ROOT / "docs" / "results" / "issue58-atlas.tar.xz"
README = ROOT / "README.md"
DOC = ROOT / "docs" / "REPRODUCING.md"
SECTION = "## The few-label atlas"
COLUMNS = {"MR": "mr[n=100]", "R8": "r8[n=100]", "SST-2": "sst2[n=100]", "SST-5": "sst5[n=100]",
           "TREC": "trec[n=100]"}
ROWS = {"TF-IDF + LR (floor)": "tf-idf + LR (floor)"}


def markdown_cells(lines: list[str]) -> dict[tuple[str, str], str]:
    """(row label, column header) -> cell text of the first Markdown table in `lines`."""
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = [line for line in lines[start:end] if line.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    cells = {}
    for line in rows[1:]:
        values = [c.strip() for c in line.strip("|").split("|")]
        if set(values[0]) <= set(":- "):
            continue
        cells.update({(values[0], h): v for h, v in zip(header[1:], values[1:])})
    return cells


def section(text: str, start: str) -> list[str]:
    """The lines of `text` from the line starting with `start` to the next second-level heading."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    end = next((i for i in range(first + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[first:end]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("atlas") / "results"
    folder.mkdir()
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(folder, filter="data")
    return folder


def test_the_archive_holds_the_whole_atlas_without_models():
    with tarfile.open(ARCHIVE) as tar:
        names = tar.getnames()
    runs = {Path(n).parts[-2] for n in names if n.endswith("/rows.json")}
    assert len(runs) == 100  # 4 methods x 5 datasets x 5 draws
    assert not [n for n in names if n.endswith((".safetensors", ".pt", "lease.json"))]


def test_the_readme_table_is_the_archives(results, tmp_path, cli):
    code, out, err = cli("report", "--table", "accuracy", "--results-dir", results, "--reports-dir", tmp_path)
    assert code == 0, err
    ours = markdown_cells(out.splitlines())
    readme = markdown_cells(section(README.read_text(encoding="utf-8"), "## Results"))
    assert len(readme) == 25
    for (row, column), text in readme.items():
        cell = ours[(ROWS.get(row, row), COLUMNS[column])]
        shown = cell.replace(" (5 draws)", "").replace(" (5)", "")  # the README leaves n out where it is 5
        assert shown == text, (row, column)
    doc = markdown_cells(section(DOC.read_text(encoding="utf-8"), SECTION))
    assert all(doc[key] == text for key, text in readme.items())  # the doc's table is the README's


def test_the_documented_verdicts_and_ranking_are_the_archives(results, tmp_path, cli):
    code, out, err = cli("report", "--table", "compare", "--results-dir", results, "--reports-dir", tmp_path)
    assert code == 0, err
    ours = markdown_cells(out.splitlines())
    lines = section(DOC.read_text(encoding="utf-8"), SECTION)
    start = next(i for i, line in enumerate(lines) if line.startswith("| vs ce |"))
    verdicts = markdown_cells(lines[start:start + 5])
    assert len(verdicts) == 15
    for (method, column), text in verdicts.items():
        row = f"{COLUMNS[column]} minilm {method}"
        text = text.replace("−", "-").replace("**", "")
        assert text.startswith(ours[(row, "Δ acc")]), (method, column)
        if "[" in text:
            assert ours[(row, "95% CI")] in text, (method, column)
        assert ours[(row, "verdict")] in text, (method, column)
    code, out, err = cli("report", "--table", "ranking", "--results-dir", results, "--reports-dir", tmp_path)
    assert code == 0, err
    title = re.search(r"Friedman p = ([\d.]+), Nemenyi CD = ([\d.]+)", out)
    doc = " ".join(lines)
    assert f"Friedman p = {title[1]}**" in doc and f"CD = {title[2]}" in doc
    ranks = markdown_cells(out.splitlines())
    mentioned = re.search(r"mean rank (lcl [\d.]+, clld-adaptive [\d.]+, ce [\d.]+, supcon [\d.]+)", doc)[1]
    for method, rank in re.findall(r"([\w-]+) ([\d.]+)", mentioned):
        assert ranks[(method, "mean rank")].strip("*") == rank
    assert (tmp_path / "ranking-cd.png").stat().st_size > 1000
