"""`clbench report --html`: the self-contained HTML page, on synthetic results folders (rows, predictions and run
files written directly; nothing is trained). The last test opens the page in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from bench.errors import BenchError
from bench.reporting.html import build_report, html_path
from bench.results import store
from test_report import attack, checklist, contrast, right, write_run

LABELS = ("negative", "positive")
RESAMPLES = 200
CE1, CE2 = "ce_mr_minilm_s1_c0", "ce_mr_minilm_s2_c0"
CLLD1, CLLD2 = "clld-adaptive_mr_minilm_s1_c0", "clld-adaptive_mr_minilm_s2_c0"
SECTIONS = ("accuracy", "ablation", "compare", "vs-paper", "robustness", "figures", "provenance")
TABLES = ("table-paper-ii", "table-ablation", "table-compare", "table-vs-paper", "table-robustness",
          "table-evaluators", "table-provenance")


def make_run(results: Path, method: str, seed: int, n_right: int, evals=(), dataset: str = "mr") -> Path:
    """write_run's rows and predictions plus the files `clbench run` writes beside them (spec, confusion,
    training log, and the label-distance matrix of clld methods)."""
    correct = right(n_right, start=seed)
    run = write_run(results, method, dataset, seed, correct, evals=evals)
    spec = {"key": run.name, "method": method, "dataset": dataset, "encoder": "minilm", "seed": seed,
            "config_hash": "c0", "data": {"label_names": list(LABELS)}, "split_ids": {"test": f"test-{dataset}"}}
    store.write_json(run / store.SPEC, spec)
    counts = np.zeros((2, 2), dtype=int)
    for i, ok in enumerate(correct):
        counts[i % 2, i % 2 if ok else 1 - i % 2] += 1
    store.write_json(run / store.CONFUSION, {"labels": list(LABELS), "test": counts.tolist(), "validation": None})
    history = [{"epoch": e, "val_accuracy": 0.6 + 0.1 * e, "train_loss": 1.0 / e, "train_ce": 0.6 / e}
               for e in (1, 2, 3)]
    store.write_json(run / store.TRAIN_LOG, {"history": history, "best_epoch": 3})
    if method.startswith("clld"):
        store.write_json(run / store.METHOD_STATE, {"ldm": [[5.0, 7.5], [7.5, 5.0]], "updates": []})
    return run


def evaluations(ori: float, under: float, failure: float) -> dict:
    """Contrast, textfooler and checklist rows for write_run's `evals`."""
    return {("contrast", "c1"): contrast(ori, ori - 0.1, ori - 0.2), ("textfooler", "t1"): attack(under, 0.5),
            ("checklist", "k1"): checklist(failure)}


def fill(results: Path) -> Path:
    """mr: ce and clld-adaptive, seeds 1 and 2 each, every run with contrast, textfooler and checklist rows."""
    make_run(results, "ce", 1, 16, evaluations(0.8, 0.2, 0.10))
    make_run(results, "ce", 2, 18, evaluations(0.9, 0.4, 0.20))
    make_run(results, "clld-adaptive", 1, 19, evaluations(0.85, 0.5, 0.05))
    make_run(results, "clld-adaptive", 2, 17, evaluations(0.8, 0.45, 0.08))
    return results


@pytest.fixture
def folder(tmp_path) -> Path:
    """A fresh `fill` folder (for tests that change it)."""
    return fill(tmp_path / "results")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    """A `fill` folder and its page, built once for the tests that only read them."""
    results = fill(tmp_path_factory.mktemp("html") / "results")
    return results, build_report(results, resamples=RESAMPLES).text


class Elements(HTMLParser):
    """The start tags of a document with their attributes, and the text of each <caption>."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.captions: list[str] = []
        self._caption: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        if tag == "caption":
            self._caption = []

    def handle_endtag(self, tag):
        if tag == "caption" and self._caption is not None:
            self.captions.append("".join(self._caption))
            self._caption = None

    def handle_data(self, data):
        if self._caption is not None:
            self._caption.append(data)

    def ids(self, tag: str) -> list[str]:
        """The id of every `tag` element, in document order."""
        return [attrs.get("id", "") for name, attrs in self.tags if name == tag]


def expected_figures() -> set[str]:
    """The figure ids the `folder` page must hold (besides its training curves)."""
    return {"fig-summary", f"fig-confusion_{CE1}", f"fig-confusion_{CLLD1}", f"fig-ldm_{CLLD1}"}


def check_elements(found: Elements) -> None:
    """Every section, table and figure of the `folder` page is in the document."""
    assert found.ids("section") == list(SECTIONS)
    assert found.ids("table") == list(TABLES)
    figures = set(found.ids("figure"))
    assert expected_figures() <= figures and any(f.startswith("fig-curves_") for f in figures)
    images = [attrs for name, attrs in found.tags if name == "img"]
    assert len(images) == len(figures) == 5 and all(a["src"].startswith("data:image/png;base64,") for a in images)
    captions = " | ".join(found.captions)
    for title in ("Test accuracy (%)", "Ablation", "Paired comparison with ce", "Ours vs published",
                  "Robustness", "Every evaluator metric", "Provenance of each run"):
        assert title in captions


# ----------------------------------------------------------------------------------------------- page

def test_page_holds_every_section_table_and_figure(built):
    folder, text = built
    check_elements(Elements(text))
    assert "95% CI" in text and "q (BH)" in text and "McNemar p" in text      # the comparison's statistics
    assert "Results folder" in text and str(folder.resolve()) in text and "none (every finished run)" in text
    assert 'id="warnings"' in text and "No mixed code versions" in text
    for absent in ("No evaluator rows", "No clld run", "No comparison", "No ablation", "No published numbers",
                   "No confusion heatmap", "No label-distance heatmap", "No training curves"):
        assert absent not in text
    for run in (CE1, CE2, CLLD1, CLLD2):                     # provenance: every run, its commit and device
        assert f"<td class=\"left\">{run}</td>" in text
    assert "<details>" in text and "4 runs · clbench: 0.1.0 · commits: aaa · devices: cpu" in text


def test_mix_warnings_are_shown_prominently(folder):
    make_run(folder, "ce", 3, 15)
    rows = store.read_json(folder / "ce_mr_minilm_s3_c0" / store.ROWS)
    store.write_json(folder / "ce_mr_minilm_s3_c0" / store.ROWS, [{**r, "git_commit": "bbb"} for r in rows])
    report = build_report(folder, resamples=RESAMPLES)
    assert any("2 git commits" in w for w in report.warnings)
    header = report.text.split("</header>")[0]
    assert 'role="alert"' in header and "Warning: mixed results" in header and "2 git commits (aaa, bbb)" in header


def test_missing_pieces_leave_their_section_out_with_a_note(tmp_path):
    results = tmp_path / "results"
    make_run(results, "ce", 1, 15)
    text = build_report(results, resamples=RESAMPLES).text
    found = Elements(text)
    assert found.ids("section") == list(SECTIONS)                  # the headings stay, the content is a note
    assert found.ids("table") == ["table-paper-ii", "table-vs-paper", "table-provenance"]
    assert "No ablation table: it needs runs of at least two of ce, cl, clld-static, clld-adaptive" in text
    assert "No comparison with ce: no method besides the baseline" in text
    assert "No evaluator rows in the selection: score runs with `clbench evaluate RUN`" in text
    assert "No clld run in the selection, so no label-distance heatmaps." in text
    assert f"fig-confusion_{CE1}" in text and "fig-ldm" not in text
    notes = re.findall(r'<p class="note">(.*?)</p>', text)
    assert len(notes) == 4 and all("\n" not in n for n in notes)


def test_a_missing_run_file_becomes_a_note(folder):
    (folder / CLLD1 / store.METHOD_STATE).unlink()
    text = build_report(folder, resamples=RESAMPLES).text
    assert f"No label-distance heatmap for {CLLD1}: run {CLLD1} has no method_state.json" in text
    assert f"fig-confusion_{CLLD1}" in text


def test_text_from_results_is_escaped(tmp_path):
    results = tmp_path / "results"
    evil = "<script>alert(1)</script>"
    make_run(results, "ce", 1, 15)
    run = make_run(results, "evil", 1, 12, evaluations(0.7, 0.3, 0.3))
    for name in (store.ROWS, *(f"{store.EVALS}/{p.name}" for p in (run / store.EVALS).iterdir())):
        stored = store.read_json(run / name)
        if isinstance(stored, dict):
            stored["rows"] = [{**r, "method": evil, "note": '"><img src=x>'} for r in stored["rows"]]
        else:
            stored = [{**r, "method": evil} for r in stored]
        store.write_json(run / name, stored)
    store.write_json(run / store.SPEC, {**store.read_json(run / store.SPEC), "method": evil})
    text = build_report(results, resamples=RESAMPLES).text
    assert "<script" not in text.lower() and "<img src=x" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_the_page_references_nothing_outside_itself(built):
    _, text = built
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:|//|file:)""", text, re.IGNORECASE)
    assert "http://" not in text and "https://" not in text
    found = Elements(text)
    assert all(a["href"].startswith("#") for _, a in found.tags if "href" in a)
    assert all(a["src"].startswith("data:image/png;base64,") for _, a in found.tags if "src" in a)
    assert not {"script", "link", "iframe", "object", "embed"} & {tag for tag, _ in found.tags}
    assert "@import" not in text and "url(" not in text


# ----------------------------------------------------------------------------------------------- command

def test_cli_writes_the_page_to_an_idempotent_path(cli, folder, tmp_path, monkeypatch):
    from bench.reporting import html

    monkeypatch.setattr(html, "method_figures", lambda *_: "")    # paths are under test here, not figures
    monkeypatch.setattr(html, "summary_figure", lambda *_: "")
    reports = tmp_path / "reports"
    argv = ("report", "--html", "--bootstrap", str(RESAMPLES), "--results-dir", folder, "--reports-dir", reports)
    code, out, _ = cli(*argv)
    assert code == 0 and out == f"{reports / 'report.html'}\n" and html_path(reports) == reports / "report.html"
    first = (reports / "report.html").read_text(encoding="utf-8")
    code, out, _ = cli(*argv)
    assert code == 0 and out == f"{reports / 'report.html'}\n"
    assert [p.name for p in reports.iterdir()] == ["report.html"]           # replaced in place, no temp files
    assert Elements(first).ids("table") == Elements((reports / "report.html").read_text()).ids("table")
    code, out, _ = cli(*argv, "--filter", "method=ce,clld", "--filter", "seed=1")
    assert code == 0 and out == f"{reports / 'report-method-ce+clld_seed-1.html'}\n"
    written = Path(out.strip())
    assert written.is_file() and "method=ce,clld, seed=1" in written.read_text(encoding="utf-8")
    target = tmp_path / "mail" / "for-anna.html"
    code, out, _ = cli("report", "--html", target, "--bootstrap", str(RESAMPLES), "--results-dir", folder)
    assert code == 0 and out == f"{target}\n" and target.is_file()
    code, out, _ = cli("report", "--html", target.parent, "--bootstrap", str(RESAMPLES), "--results-dir", folder)
    assert out == f"{target.parent / 'report.html'}\n"


def test_an_empty_results_folder_is_a_one_line_error(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    code, out, err = cli("report", "--html", "--results-dir", tmp_path / "empty", "--reports-dir", tmp_path / "r")
    assert code == 2 and out == "" and not (tmp_path / "r").exists()
    assert err.count("\n") == 1 and "no finished runs under" in err and "run `clbench run` first" in err
    with pytest.raises(BenchError, match="no finished runs"):
        build_report(tmp_path / "missing")


# ----------------------------------------------------------------------------------------------- browser

BROWSER = next((found for name in ("chromium", "chromium-browser", "google-chrome")
                if (found := shutil.which(name))), None)


def headless(page: Path, profile: Path, *flags: str) -> subprocess.CompletedProcess:
    """Run the browser headless on a local file (root needs --no-sandbox)."""
    return subprocess.run([BROWSER, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--user-data-dir={profile}", "--window-size=1280,2400", *flags, page.as_uri()],
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.skipif(BROWSER is None, reason="no chromium, chromium-browser or google-chrome on PATH "
                                            "(apt-get install chromium)")
def test_a_browser_renders_the_page(built, tmp_path):
    from PIL import Image

    page = tmp_path / "report.html"
    page.write_text(built[1], encoding="utf-8")
    shot = tmp_path / "shot.png"
    done = headless(page, tmp_path / "profile", f"--screenshot={shot}")
    assert shot.is_file(), done.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=int)
    assert pixels.shape[0] >= 2400 and pixels.shape[1] >= 1280
    colours = len(np.unique((pixels[..., 0] << 16) | (pixels[..., 1] << 8) | pixels[..., 2]))
    not_white = (pixels.sum(axis=2) < 3 * 245).mean()
    assert colours > 50 and 0.02 < not_white < 0.9, (colours, not_white)
    dom = headless(page, tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    check_elements(Elements(dom.stdout))
