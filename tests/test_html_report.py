"""`clbench report --html`: the self-contained HTML page, on synthetic results folders (rows, predictions and run
files written directly; nothing is trained). The last test opens the page in headless Chromium, sorts a table and
downloads it as CSV there."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from bench.errors import BenchError
from bench.reporting import leaderboard
from bench.reporting.datasetinfo import METHODS_DOC, github_anchor, method_href
from bench.reporting.html import build_report, html_path
from bench.reporting.htmltemplate import SCRIPT
from bench.results import store
from test_report import attack, checklist, contrast, right, write_run

LABELS = ("negative", "positive")
RESAMPLES = 200
CE1, CE2 = "ce_mr_minilm_s1_c0", "ce_mr_minilm_s2_c0"
CLLD1, CLLD2 = "clld-adaptive_mr_minilm_s1_c0", "clld-adaptive_mr_minilm_s2_c0"
# the `folder` page (one dataset: no ranking across datasets, named under the contents instead)
SECTIONS = ("accuracy", "cost", "datasets", "ablation", "compare", "confusion-diff", "vs-paper", "robustness",
            "figures", "provenance")
TABLES = ("table-main", "table-cost", "table-datasets", "table-ablation", "table-compare", "table-vs-paper",
          "table-robustness", "table-evaluators", "table-provenance")
REPORTS = METHODS_DOC.parents[1] / "reports"  # where `clbench report --html` writes in a checkout
PARAMS = {"ce": 22_713_216, "clld-adaptive": 22_713_216}


def make_run(results: Path, method: str, seed: int, n_right: int, evals=(), dataset: str = "mr",
             train_seconds: float = 10.0, tau: float | None = None) -> Path:
    """write_run's rows and predictions plus the files `clbench run` writes beside them (spec with the data's
    sizes and an absolute local source, confusion, training log with the encoder's parameters and speed, the
    rows' train seconds, and the label-distance matrix of clld methods)."""
    correct = right(n_right, start=seed)
    run = write_run(results, method, dataset, seed, correct, evals=evals)
    rows = store.read_json(run / store.ROWS)
    store.write_json(run / store.ROWS, [{**r, "train_seconds": train_seconds, "wall_seconds": 2 * train_seconds}
                                        for r in rows])
    data = {"label_names": list(LABELS), "source": f"local:{results.parent.resolve()}/data/{dataset}",
            "sizes": {"train": 100 * seed, "validation": 10, "test": len(correct)}}
    spec = {"key": run.name, "method": method, "dataset": dataset, "encoder": "minilm", "seed": seed,
            "config_hash": "c0", "data": data, "split_ids": {"test": f"test-{dataset}"},
            "method_config": {} if tau is None else {"tau": tau}}
    store.write_json(run / store.SPEC, spec)
    counts = np.zeros((2, 2), dtype=int)
    for i, ok in enumerate(correct):
        counts[i % 2, i % 2 if ok else 1 - i % 2] += 1
    store.write_json(run / store.CONFUSION, {"labels": list(LABELS), "test": counts.tolist(), "validation": None})
    history = [{"epoch": e, "val_accuracy": 0.6 + 0.1 * e, "train_loss": 1.0 / e, "train_ce": 0.6 / e,
                "seconds": float(e), "train_seq_per_s": 100.0 * e} for e in (1, 2, 3)]  # 1400 sequences in 6 s
    store.write_json(run / store.TRAIN_LOG, {"history": history, "best_epoch": 3,
                                             "encoder": {"source": "/models/minilm", "params": PARAMS.get(method)}})
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
    return results, build_report(results, resamples=RESAMPLES, page_dir=REPORTS).text


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
    return {"fig-summary", f"fig-confusion_{CE1}", f"fig-confusion_{CLLD1}", f"fig-ldm_{CLLD1}",
            f"fig-confusion-diff_{CE1}_vs_{CLLD1}"}


def check_elements(found: Elements) -> None:
    """Every section, table and figure of the `folder` page is in the document."""
    assert found.ids("section") == list(SECTIONS)
    assert [i for i in found.ids("table") if i] == list(TABLES)  # heatmap tables have no id
    figures = set(found.ids("figure"))
    assert expected_figures() <= figures and any(f.startswith("fig-curves_") for f in figures)
    images = [attrs for name, attrs in found.tags if name == "img"]  # the summary: PNG; the curves: SVG
    assert len(figures) == 6 and len(images) == 1 and all(a["src"].startswith("data:image/png;base64,") for a in images)
    charts = [attrs for name, attrs in found.tags if name == "svg" and attrs.get("role") == "img"]
    assert {c["aria-label"] for c in charts} >= {"validation accuracy (%)", "training loss (total)"}
    heatmaps = [attrs for name, attrs in found.tags if name == "table" and attrs.get("class") == "heatmap"]
    assert len(heatmaps) == 6  # two confusion tables per run (counts, %), the LDM, the confusion change
    captions = " | ".join(found.captions)
    for title in ("Test accuracy and macro-F1 (%)", "Cost of each dataset",
                  "Datasets: sizes", "Ablation", "Paired comparison with ce", "Ours vs published", "Robustness",
                  "Every evaluator metric", "Provenance of each run"):
        assert title in captions
    tables = [attrs for name, attrs in found.tags if name == "table" and attrs.get("class") != "heatmap"]
    assert all(a.get("class") == "sortable" for a in tables)           # every data table sorts and has a CSV button
    buttons = [attrs["data-table"] for name, attrs in found.tags if name == "button" and attrs.get("class") == "csv"]
    assert buttons == list(TABLES)


# ----------------------------------------------------------------------------------------------- page

def test_page_holds_every_section_table_and_figure(built):
    folder, text = built
    check_elements(Elements(text))
    assert "95% CI" in text and "q (BH)" in text and "McNemar p ‡" in text    # the comparison's statistics
    assert 'original_accuracy (%)</td><td>2</td><td class="left">85 ± 7.1</td>' in text  # evaluator rates in %
    assert text.index('id="verdicts"') < text.index('class="meta"')          # the page opens with the verdicts
    assert "<strong>inconclusive</strong>: clld-adaptive" in text
    assert "<dt>Results folder</dt><dd>results</dd>" in text and "none (every finished run)" in text
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


def test_sections_with_nothing_to_show_are_left_out_and_named(tmp_path):
    """Guards issue 55: a section renders only when it has something to show. One ce run on one dataset: no
    ranking (one dataset), ablation (one of its methods), comparison, confusion change or robustness section;
    each is named with why in one line under the contents, and the contents list only the sections shown."""
    results = tmp_path / "results"
    make_run(results, "ce", 1, 15)
    text = build_report(results, resamples=RESAMPLES).text
    found = Elements(text)
    assert found.ids("section") == ["accuracy", "cost", "datasets", "vs-paper", "figures", "provenance"]
    assert re.findall(r'<nav class="toc">(.*?)</nav>', text)[0].count("<a ") == 6
    assert [i for i in found.ids("table") if i] == ["table-main", "table-cost", "table-datasets", "table-vs-paper",
                                                   "table-provenance"]
    absent, = re.findall(r'<p class="note" id="not-shown">Not on this page: (.*?)</p>', text)
    for title, why in (("Ranking across datasets", "it needs at least two methods"),
                       ("Ablation", "it needs runs of at least two of ce, cl, clld-static, clld-adaptive; the selection "
                                    "has ce"),
                       ("Comparison with ce", "no method besides the baseline"),
                       ("Confusion change vs ce", "no method besides ce in the selection"),
                       ("Robustness", "no evaluator rows in the selection")):
        assert f"{title} ({why}" in absent, absent
    assert "No clld run in the selection, so no label-distance heatmaps." in text
    assert f"fig-confusion_{CE1}" in text and "fig-ldm" not in text
    notes = re.findall(r'<p class="note">(.*?)</p>', text)
    assert len(notes) == 1 and all("\n" not in n for n in notes)


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
    assert text.lower().count("<script") == 1 and f"<script>{SCRIPT}</script>" in text  # only the page's own
    assert "<img src=x" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_the_page_references_nothing_outside_itself(built):
    _, text = built
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:|//|file:)""", text, re.IGNORECASE)
    assert "http://" not in text and "https://" not in text
    found = Elements(text)
    links = [a["href"] for _, a in found.tags if "href" in a]
    assert all(h.startswith("#") or h.startswith("../docs/METHODS.md#") for h in links)   # in-page or relative
    assert "../docs/METHODS.md#2-ce" in links
    assert all(a["src"].startswith("data:image/png;base64,") for _, a in found.tags if "src" in a)
    assert not {"link", "iframe", "object", "embed"} & {tag for tag, _ in found.tags}
    scripts = [attrs for tag, attrs in found.tags if tag == "script"]
    assert scripts == [{}]                                         # one inline script, no src
    script = text.split("<script>")[1].split("</script>")[0]
    assert script == SCRIPT and not re.search(r"fetch\(|XMLHttpRequest|import\(|https?:|\.src\s*=", script)
    assert "@import" not in text and "url(" not in text


ABSOLUTE = re.compile(r"(?<![\w.~\]-])/(?:[\w.-]+/)+[\w.-]*")  # /a/b..., not ../docs/x, a/b or 1/2


def visible(text: str) -> str:
    """The page without its inline images and script (whose base64 and code are not paths)."""
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", text)
    return text.replace(SCRIPT, "")


def test_the_page_shows_no_absolute_path(folder, tmp_path, monkeypatch):
    from bench.reporting import htmlheatmap

    def broken(run_dir, caption):  # a damaged file: the message names it by its absolute path
        raise OSError(f"cannot read {Path(run_dir).resolve() / store.CONFUSION}")

    monkeypatch.setattr(htmlheatmap, "confusion_html", broken)
    text = visible(build_report(folder, resamples=RESAMPLES, page_dir=REPORTS).text)
    assert f"could not be drawn (OSError: cannot read results/{CE1}/{store.CONFUSION})" in text  # the note stays
    assert "local copy (mr)" in text                                # the data source by its folder's name only
    assert str(tmp_path) not in text and str(folder.resolve()) not in text
    assert not ABSOLUTE.findall(text), ABSOLUTE.findall(text)[:5]


# ----------------------------------------------------------------------------------------------- leaderboard

# mean accuracy (correct of 20, every seed alike) per dataset and method; supcon has no r8 run
BOARD = {"mr": {"ce": 14, "clld-adaptive": 16, "supcon": 18}, "trec": {"ce": 17, "clld-adaptive": 15, "supcon": 17},
         "r8": {"ce": 12, "clld-adaptive": 13}}
SECONDS = {"ce": 10.0, "clld-adaptive": 30.0, "supcon": 20.0}


def board(results: Path, seeds=(1, 2, 3)) -> Path:
    """BOARD's runs, three seeds each."""
    for dataset, methods in BOARD.items():
        for method, n_right in methods.items():
            for seed in seeds:
                run = make_run(results, method, seed, n_right, dataset=dataset, train_seconds=SECONDS[method])
                store.write_jsonl_gz(run / store.PREDICTIONS, [  # the same items right for every seed
                    {"id": f"test-{i}", "gold": "negative", "predicted": "negative" if i < n_right else "positive",
                     "probabilities": [0.5, 0.5]} for i in range(20)])
    return results


def test_ranking_mean_rank_win_rate_ties_and_missing_cells(tmp_path):
    from bench.reporting.resultsview import load_results

    table = leaderboard.ranking(load_results(board(tmp_path / "results"))).set_index("method")
    # ranks: mr supcon 1, clld 2, ce 3; trec ce and supcon tie (1.5 each), clld 3; r8 clld 1, ce 2, supcon missing
    assert table["mean_rank"].to_dict() == pytest.approx({"supcon": 1.25, "clld-adaptive": 2.0, "ce": 13 / 6})
    assert list(table.index) == ["supcon", "clld-adaptive", "ce"]                  # best mean rank first
    # win rate: supcon 2 wins + 1 tie + 1 win of 4 meetings; clld 2 of 5; ce 1 win + 1 tie of 5
    assert table["win_rate"].to_dict() == pytest.approx({"supcon": 87.5, "clld-adaptive": 40.0, "ce": 30.0})
    assert table["datasets"].to_dict() == {"supcon": 2, "clld-adaptive": 3, "ce": 3} and set(table["of"]) == {3}
    assert table.loc["supcon", "r8"] != table.loc["supcon", "r8"]                 # missing, not last
    assert any("missing cell is left out, not counted as last" in n for n in table.attrs["notes"])


def test_means_equal_at_the_shown_precision_tie():
    import pandas as pd

    rows = pd.DataFrame([{"run_key": f"{m}{i}", "method": m, "dataset": "d", "encoder": "e", "seed": 1,
                          "evaluator": "clean", "split": "test", "metric": "accuracy", "label": "", "value": v}
                         for i, (m, v) in enumerate((("a", 0.850001), ("b", 0.850004), ("c", 0.84)))])
    table = leaderboard.ranking(rows).set_index("method")
    assert table.loc["a", "mean_rank"] == table.loc["b", "mean_rank"] == 1.5 and table.loc["c", "mean_rank"] == 3
    assert table.loc["a", "win_rate"] == table.loc["b", "win_rate"] == 75.0


def test_the_page_ranks_methods_with_their_cost_datasets_and_links(tmp_path, monkeypatch):
    from bench.reporting import html

    monkeypatch.setattr(html, "method_figures", lambda *_: "")      # the tables are under test here
    monkeypatch.setattr(html, "summary_figure", lambda *_: "")
    monkeypatch.setattr(html, "confusion_diff_section", lambda *_: "")
    text = build_report(board(tmp_path / "results"), resamples=RESAMPLES, page_dir=REPORTS).text
    ranking = text.split('id="table-ranking"')[1].split("</table>")[0]
    rows = re.findall(r"<tr>(.*?)</tr>", ranking.split("<tbody>")[1])
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    assert [re.sub("<[^>]+>", "", c[0]) for c in cells] == ["supcon", "clld-adaptive", "ce"]
    assert [c[2:6] for c in cells] == [["1.25", "87.5", "2 of 3", "3"], ["2.00", "40.0", "3 of 3", "3"],
                                       ["2.17", "30.0", "3 of 3", "3"]]
    # cost: median train s per run, sequences/s (1400 in 6 s), encoder parameters (supcon's not recorded)
    assert [c[6:9] for c in cells] == [["20.0", "233.3", "—"], ["30.0", "233.3", "22,713,216"],
                                       ["10.0", "233.3", "22,713,216"]]
    assert cells[0][1] == "minilm" and cells[0][9:] == ["90.00", "—", "85.00"]        # mr, r8 (no run), trec
    assert '<a href="../docs/METHODS.md#5-supcon">supcon</a>' in ranking               # relative links
    cost = text.split('id="table-cost"')[1].split("</table>")[0]
    assert "<td>3</td><td>10.0</td><td>20.0</td><td>233.3</td><td>22,713,216</td>" in cost  # ce on mr
    datasets = text.split('id="table-datasets"')[1].split("</table>")[0]
    assert ">2: negative, positive<" in datasets and ">100–300<" in datasets and ">local copy (trec)<" in datasets
    assert "datasets/trec.yaml" in datasets and "Movie Review" in datasets
    assert 'class="badge few"' not in text and 'id="few-seeds"' not in text            # three seeds everywhere


def test_method_links_are_relative_and_name_real_sections(tmp_path):
    headings = [line[3:] for line in METHODS_DOC.read_text(encoding="utf-8").splitlines() if line.startswith("## ")]
    assert github_anchor("4. clld-static / clld-adaptive") == "4-clld-static--clld-adaptive"
    for method in ("ce", "cl", "clld-static", "clld-adaptive", "supcon", "lcl", "cline", "dcl", "simcse", "mirror-bert"):
        href = method_href(method, REPORTS)
        assert href.startswith("../docs/METHODS.md#") and href.split("#")[1] in map(github_anchor, headings)
    assert method_href("clld-adaptive", METHODS_DOC.parent) == "METHODS.md#4-clld-static--clld-adaptive"
    assert method_href("ce", tmp_path) == "" and method_href("nope", REPORTS) == ""  # outside the checkout: none
    page = build_report(fill(tmp_path / "results"), resamples=RESAMPLES).text
    assert "METHODS.md#" not in page and "no link: the page lies outside it" in page


def test_ablation_lists_only_methods_that_ran(built):
    ablation = built[1].split('id="table-ablation"')[1].split("</table>")[0]
    assert re.findall(r'<th scope="row">(.*?)</th>', ablation) == ["ce", "clld-adaptive"]
    assert "not run, left out: cl, clld-static" in built[1]


def test_cells_on_fewer_than_three_seeds_carry_a_warning(folder):
    text = build_report(folder, resamples=RESAMPLES).text
    header = text.split("</header>")[0]
    assert 'id="few-seeds"' in header and "Fewer than 3 seeds: 2 of 2 method × dataset cells" in header
    main = text.split('id="table-main"')[1].split("</table>")[0]       # accuracy and macro-F1 of 2 methods
    assert main.count('<span class="badge few" title="2 seed(s): one seed cannot separate methods">') == 4
    compare = text.split('id="table-compare"')[1].split("</table>")[0]
    assert compare.count('class="badge few"') == 1                       # on its seeds column only
    make_run(folder, "ce", 3, 15)
    make_run(folder, "clld-adaptive", 3, 18)
    text = build_report(folder, resamples=RESAMPLES).text
    assert 'id="few-seeds"' not in text and 'class="badge few"' not in text.split('id="table-robustness"')[0]


def test_the_ldm_caption_says_where_the_matrix_starts(built, tmp_path):
    caption = re.search(rf'<figure [^>]*id="fig-ldm_{CLLD1}">.*?<figcaption>(.*?)</figcaption>', built[1]).group(1)
    assert "every entry is τ = 5, the tau knob (methods/clld.py fills the matrix with tau)" in caption
    assert "diagonal (a class with itself) stays τ and is masked" in caption
    results = tmp_path / "results"
    make_run(results, "clld-adaptive", 1, 15, tau=7.5)
    assert "every entry is τ = 7.5" in build_report(results, resamples=RESAMPLES).text


# ----------------------------------------------------------------------------------------------- command

def test_cli_writes_the_page_to_an_idempotent_path(cli, folder, tmp_path, monkeypatch):
    from bench.reporting import html

    monkeypatch.setattr(html, "method_figures", lambda *_: "")    # paths are under test here, not figures
    monkeypatch.setattr(html, "summary_figure", lambda *_: "")
    monkeypatch.setattr(html, "confusion_diff_section", lambda *_: "")
    reports = tmp_path / "reports"
    argv = ("report", "--html", "--bootstrap", str(RESAMPLES), "--results-dir", folder, "--reports-dir", reports)
    code, out, _ = cli(*argv)
    assert code == 0 and out == f"{reports / 'report.html'}\n" and html_path(reports) == reports / "report.html"
    first = (reports / "report.html").read_text(encoding="utf-8")
    code, out, _ = cli(*argv)
    assert code == 0 and out == f"{reports / 'report.html'}\n"
    assert sorted(p.name for p in reports.iterdir()) == [".pages.json", "report.html"]  # in place, no temp files
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


PROBE = """<script>
(function () {
  function column(id, index) {
    var rows = document.getElementById(id).tBodies[0].rows;
    return Array.prototype.map.call(rows, function (r) { return r.cells[index].textContent.trim(); });
  }
  var main = document.getElementById("table-main").tHead.rows[0].cells;
  var found = {before: column("table-main", 0)};
  main[1].click(); found.up = column("table-main", 0);
  main[1].click(); found.down = column("table-main", 0);
  main[1].click();
  var seed = Array.prototype.findIndex.call(document.getElementById("table-provenance").tHead.rows[0].cells,
                                            function (th) { return th.textContent === "seed"; });
  var header = document.getElementById("table-provenance").tHead.rows[0].cells[seed];
  header.click(); found.seeds = column("table-provenance", seed); found.arrow = header.getAttribute("aria-sort");
  var Original = window.Blob;
  window.Blob = function (parts, options) { found.csv = parts.join(""); return new Original(parts, options); };
  document.querySelector('button.csv[data-table="table-main"]').click();
  var out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
})();
</script>
"""


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
    probed = tmp_path / "probed.html"                   # the page plus PROBE, which clicks as a reader would
    probed.write_text(built[1].replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = headless(probed, tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    check_elements(Elements(dom.stdout))
    found = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout, re.S).group(1)))
    assert found["before"] == ["ce", "clld-adaptive"]                # as built: the methods' order
    assert found["up"] == ["ce", "clld-adaptive"] and found["down"] == ["clld-adaptive", "ce"]  # by mr acc: 85, 90
    assert found["seeds"] == ["1", "1", "2", "2"] and found["arrow"] == "ascending"  # provenance by seed
    lines = found["csv"].split("\r\n")
    assert found["csv"].startswith("\ufeff") and lines[-1] == ""   # UTF-8 byte-order mark, CRLF rows
    assert lines[0] == "\ufeffmethod (knobs),mr acc (%),mr macro-F1 (%)"
    assert lines[1:3] == ["ce,85.00 ± 7.07 (2),85.00 ± 7.07 (2)",                     # the order shown,
                          "clld-adaptive,90.00 ± 7.07 (2),90.00 ± 7.07 (2)"]         # no badges
