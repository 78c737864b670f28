"""The HTML page's figures are drawn once per content (bench.reporting.figurecache): a rebuilt page reuses every
figure whose run files, caption and drawing code are unchanged, and redraws exactly the ones that changed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.reporting import figurecache, pagememo
from bench.reporting.html import write_html_report
from bench.results import store
from test_html_report import CE1, fill

RESAMPLES = 200


def build(results: Path, reports: Path) -> str:
    path, _ = write_html_report(results, None, reports, resamples=RESAMPLES)
    return path.read_text(encoding="utf-8")


def without_time(text: str) -> str:
    return re.sub(r"<dt>Generated</dt><dd>[^<]*</dd>", "", text)


def counting(monkeypatch) -> list[str]:
    """The builders drawn from now on (by name)."""
    calls: list[str] = []
    original = figurecache.builder_named

    def named(builder):
        calls.append(builder)
        return original(builder)

    monkeypatch.setattr(figurecache, "builder_named", named)
    return calls


def test_a_rebuilt_page_draws_nothing_and_is_the_same(tmp_path, monkeypatch):
    results, reports = fill(tmp_path / "results"), tmp_path / "reports"
    first = build(results, reports)
    assert len(re.findall(r'<figure data-key="[0-9a-f]{64}"', first)) >= 1  # the summary (the curves are SVG)
    (reports / pagememo.PAGES).unlink()  # built again, not reused whole (bench.reporting.pagememo)
    drawn = counting(monkeypatch)
    second = build(results, reports)
    assert drawn == [] and without_time(second) == without_time(first)


def test_a_changed_run_redraws_its_figures_only(tmp_path, monkeypatch):
    results, reports = fill(tmp_path / "results"), tmp_path / "reports"
    first = build(results, reports)
    confusion = store.read_json(results / CE1 / store.CONFUSION)
    confusion["test"] = [[9, 1], [1, 9]]
    store.write_json(results / CE1 / store.CONFUSION, confusion)
    log = store.read_json(results / CE1 / store.TRAIN_LOG)
    store.write_json(results / CE1 / store.TRAIN_LOG, {**log, "history": [{**e, "val_accuracy": 0.123}
                                                                          for e in log["history"]]})
    drawn = counting(monkeypatch)
    second = build(results, reports)
    # no PNG figure reads ce seed 1's folder (the summary reads the rows: reused); the confusion tables and the
    # training curves (HTML and SVG, never cached) show the new counts and accuracies
    assert drawn == [], drawn
    changed = re.search(rf'<figure [^>]*id="fig-confusion_{CE1}">.*?</figure>', second, re.S).group(0)
    assert changed not in first and ">9</td>" in changed
    curves = re.search(r'<figure id="fig-curves_.*?</figure>', second, re.S).group(0)
    assert "epoch 1: 12.3</title>" in curves and curves not in first


def test_the_key_follows_the_run_the_caption_and_the_code(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    (run / "confusion.json").write_text("{}")
    key = figurecache.figure_key("plots:confusion_plot", (run,), "caption")
    assert figurecache.figure_key("plots:confusion_plot", (run,), "caption") == key
    assert figurecache.figure_key("plots:confusion_plot", (run,), "another caption") != key
    assert figurecache.figure_key("plots:ldm_plot", (run,), "caption") != key
    (run / "confusion.json").write_text('{"test": []}')  # no manifest: names, sizes and times
    changed = figurecache.figure_key("plots:confusion_plot", (run,), "caption")
    assert changed != key
    (run / "manifest.json").write_text('{"files": {"confusion.json": "a"}}')  # a manifest: its content
    with_manifest = figurecache.figure_key("plots:confusion_plot", (run,), "caption")
    (run / "manifest.json").write_text('{"files": {"confusion.json": "b"}}')
    assert figurecache.figure_key("plots:confusion_plot", (run,), "caption") != with_manifest
    monkeypatch.setattr(figurecache, "code_version", lambda: "other plotting code")
    assert figurecache.figure_key("plots:confusion_plot", (run,), "caption") != key


@pytest.mark.parametrize("previous", ["", "<html>not a page of ours</html>", None])
def test_no_previous_page_draws_everything(tmp_path, previous):
    page = tmp_path / "report.html"
    if previous is not None:
        page.write_text(previous)
    with figurecache.reusing(page):
        assert figurecache.PREVIOUS.get() == {}
