"""An unchanged page is not built again (bench.reporting.pagememo): the same results, options and code rewrite
the page with the new time and say its warnings again; any change to a run file, the options, the code or the
page itself builds it again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.reporting import html, pagememo
from bench.reporting.verdicts import VerdictSettings
from bench.results import store
from test_figure_cache import RESAMPLES, without_time
from test_html_report import CE1, fill


def write(results: Path, reports: Path, **options) -> tuple[str, list[str]]:
    path, warnings = html.write_html_report(results, None, reports, resamples=RESAMPLES, **options)
    return path.read_text(encoding="utf-8"), warnings


@pytest.fixture
def built(tmp_path, monkeypatch):
    """A results folder, its page, and a counter of the pages built since."""
    results, reports = fill(tmp_path / "results"), tmp_path / "reports"
    first = write(results, reports)
    builds: list[int] = []
    original = html.build_report
    monkeypatch.setattr(html, "build_report", lambda *a, **k: builds.append(1) or original(*a, **k))
    return results, reports, first, builds


def test_an_unchanged_page_is_rewritten_not_built(built):
    results, reports, (first, warnings), builds = built
    text, again = write(results, reports)
    assert builds == [] and again == warnings
    assert without_time(text) == without_time(first) and text.count("<dt>Generated</dt>") == 1


@pytest.mark.parametrize("change", ["run-touched", "run-added-file", "run-removed", "options", "code", "page-edited",
                                    "memo-damaged"])
def test_any_change_builds_the_page_again(built, change, monkeypatch):
    results, reports, _, builds = built
    options = {}
    rows = results / CE1 / store.ROWS
    if change == "run-touched":
        stat = rows.stat()
        os.utime(rows, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    elif change == "run-added-file":
        (results / CE1 / "notes.txt").write_text("a note")
    elif change == "run-removed":
        victim = next(p for p in sorted(results.iterdir()) if p.is_dir() and p.name != CE1 and not p.name.startswith("."))
        for path in sorted(victim.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        victim.rmdir()
    elif change == "options":
        options = {"settings": VerdictSettings(rope=1.0)}
    elif change == "code":
        monkeypatch.setattr(pagememo, "package_digest", lambda: "other code")
    elif change == "page-edited":
        page = reports / "report.html"
        page.write_text(page.read_text(encoding="utf-8").replace("</body>", "<p>mine</p></body>"), encoding="utf-8")
    elif change == "memo-damaged":
        (reports / pagememo.PAGES).write_text("{not json")
    write(results, reports, **options)
    assert builds == [1]
    write(results, reports, **options)  # and then reused again
    assert builds == [1]


def test_hidden_entries_of_the_results_folder_do_not_count(built):
    results, reports, _, builds = built
    (results / ".sweeps").mkdir(exist_ok=True)
    (results / ".sweeps" / "memo.json").write_text("{}")
    write(results, reports)
    assert builds == []
