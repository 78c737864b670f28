"""The ranking with its uncertainty (`clbench report --table ranking`, the headline of the HTML page's ranking):
the Friedman test and the Nemenyi post-hoc test across blocks, with a critical-difference (CD) diagram, as
Demšar (2006, "Statistical comparisons of classifiers over multiple data sets", JMLR 7) recommends; computed
with the PyPI package autorank.

A block is one dataset x data regime x encoder (the `dataset` column names the regime, `sst2[n=100]`:
`bench.reporting.resultsview.with_regimes`). A method's score on a block is its mean test accuracy over its seeds
with collapsed runs left out (`bench.reporting.leaderboard.accuracy_cells`), at the tables' precision (0.01
points: equal means tie). On each block the methods are ranked, 1 = best, ties sharing the average rank. The
Friedman test asks whether the mean ranks differ at all; the Nemenyi test tells two methods apart when their
mean ranks differ by more than the critical difference CD. The unit of both tests is the block, not the run:
more seeds make each score steadier, never N larger.

Only blocks where every ranked method has a score are used (the others are named in a note). When fewer than
MIN_BLOCKS such blocks remain, the method on the fewest blocks is left out, one at a time, until MIN_BLOCKS blocks
are complete or MIN_METHODS methods remain. The numbers are autorank's formulas (nonparametric mode) applied here
with scipy.special (Friedman's chi-square with its tie correction; the studentized range at infinite degrees of
freedom, integrated, for the CD), on any number of blocks: equal to autorank's (tests/test_ranking.py) without its
2 s of imports or scipy.stats' 0.9 s; autorank draws the CD diagram.
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special

from bench.errors import BenchError
from bench.reporting.cellframes import format_p, make_table, text_cell
from bench.reporting.figures import Plot, styled
from bench.reporting.htmlcd import cd_figure_html
from bench.reporting.htmlparts import figures_row, note, notes_list
from bench.reporting.htmltemplate import render
from bench.reporting.leaderboard import accuracy_cells
from bench.reporting.render import filters_slug
from bench.reporting.resultsview import first_few
from bench.reporting.tables import method_key

ALPHA = 0.05
MIN_BLOCKS = 3  # the Friedman test over fewer blocks says nothing
MIN_METHODS = 3  # the Friedman test compares three or more methods (two: `--table compare`)
AUTORANK_MIN_BLOCKS = 5  # autorank refuses fewer rows
CD_WIDTH = 6.0  # inches: autorank's CD diagram draws in a box of this width
CAPTION_HEIGHT = 0.4  # inches under the diagram for its caption (cd_caption)
BLOCKS = "dataset × regime × encoder"
REFERENCE = "Demšar 2006, JMLR 7:1-30"


@dataclass
class Ranking:
    """The blocks and methods ranked, and the test: `scores` (blocks x methods, accuracy in %), `mean_ranks`
    (best first), Friedman `p`, Nemenyi `cd` and `groups` (methods the Nemenyi test does not tell apart; every
    method in at least one). `reason` says why there is no test ('' when there is one), `label` says it briefly."""

    scores: pd.DataFrame
    mean_ranks: pd.Series
    p: float = math.nan
    cd: float = math.nan
    groups: list[list[str]] = field(default_factory=list)
    reason: str = ""
    label: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def tested(self) -> bool:
        """Whether the Friedman and Nemenyi tests were run."""
        return not self.reason

    def headline(self) -> str:
        """One sentence: the Friedman p and the Nemenyi CD, or why there is no test."""
        if not self.tested:
            return f"No ranking with uncertainty: {self.reason}."
        text = (f"Friedman {p_text(self.p)}; methods joined by a bar do not "
                f"differ at α = {ALPHA:g} (Nemenyi, CD = {self.cd:.2f}), over {len(self.scores)} blocks ({BLOCKS}).")
        if self.p >= ALPHA:
            text += (f" The Friedman test shows no difference between the methods (p ≥ {ALPHA:g}): no bar or gap is "
                     "evidence that one is better.")
        return text


def p_text(p: float) -> str:
    """`p = 0.012` or `p < 0.001`."""
    shown = format_p(p)
    return f"p < {shown[1:]}" if shown.startswith("<") else f"p = {shown}"


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """autorank prints its result table and warns on constant columns: neither reaches the user."""
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def block_scores(cells: pd.DataFrame) -> pd.DataFrame:
    """Blocks (rows: `dataset`, or `dataset · encoder` when there are several encoders) x methods (columns, in
    the tables' order): the mean accuracy in % as the tables show it, NaN where a method has no cell."""
    several = cells["encoder"].nunique() > 1
    blocks = [f"{d} · {e}" if several else str(d) for d, e in zip(cells["dataset"], cells["encoder"])]
    wide = cells.assign(block=blocks).pivot_table(index="block", columns="method", values="shown", aggfunc="first")
    wide = wide[sorted(wide.columns, key=method_key)]
    wide.columns.name = None
    return wide


def kept_methods(wide: pd.DataFrame) -> list[str]:
    """All methods, less the one on the fewest blocks (the last in method order among equals), one at a time,
    while fewer than MIN_BLOCKS blocks have every method and more than MIN_METHODS remain; all methods when that
    does not reach MIN_BLOCKS complete blocks."""
    def complete(methods: list[str]) -> int:
        return int(wide[methods].notna().all(axis=1).sum())

    kept = list(wide.columns)
    while len(kept) > MIN_METHODS and complete(kept) < MIN_BLOCKS:
        coverage = wide[kept].notna().sum()
        kept.remove(min(reversed(kept), key=lambda m: coverage[m]))
    return kept if complete(kept) >= MIN_BLOCKS else list(wide.columns)  # leaving methods out did not help


def nemenyi_groups(mean_ranks: pd.Series, cd: float) -> list[list[str]]:
    """Runs of methods (in mean-rank order) whose mean ranks lie within `cd` of each other, each maximal: the
    bars of the CD diagram, plus every method in no bar alone. Two methods share a group exactly when the Nemenyi
    test does not tell them apart."""
    names, ranks = list(mean_ranks.index), list(mean_ranks)
    groups: list[list[str]] = []
    reach = -1
    for i in range(len(names)):
        last = max([j for j in range(i, len(names)) if ranks[j] - ranks[i] <= cd + 1e-9])
        if last > reach:
            groups.append(names[i:last + 1])
            reach = last
    return groups


def friedman_nemenyi(scores: pd.DataFrame, alpha: float = ALPHA) -> tuple[float, float, pd.Series]:
    """Friedman p, Nemenyi critical difference and mean ranks (1 = best, best first) of `scores` (blocks x
    methods, higher is better), by autorank's formulas (the module docstring). A p of 1 when every
    block ties every method (the statistic is undefined there: nothing tells the methods apart)."""
    k, n = scores.shape[1], len(scores)
    ranks_each = scores.rank(axis=1, ascending=False, method="average")
    p = friedman_p(ranks_each.to_numpy(dtype=float))
    cd = float(studentized_range_quantile(1 - alpha, k) * math.sqrt(k * (k + 1) / (12 * n)))  # autorank's formula
    ranks = ranks_each.mean()
    order = sorted(ranks.index, key=lambda m: (ranks[m], method_key(m)))
    return (1.0 if math.isnan(p) else p), cd, ranks.reindex(order)


def friedman_p(ranks: np.ndarray) -> float:
    """The p of Friedman's chi-square test with the tie correction, as scipy's `friedmanchisquare` computes it
    (ranks: blocks x methods, average ranks within each block, so tied scores share a rank); NaN when every block
    ties every method."""
    n, k = ranks.shape
    ties = sum(float(np.sum(counts ** 3 - counts)) for counts in
               (np.unique(row, return_counts=True)[1] for row in ranks))
    correction = 1 - ties / (k * (k * k - 1) * n)
    if correction <= 0:
        return math.nan
    statistic = (12 / (n * k * (k + 1)) * float(np.sum(ranks.sum(axis=0) ** 2)) - 3 * n * (k + 1)) / correction
    return float(special.chdtrc(k - 1, statistic))


def studentized_range_quantile(p: float, k: int) -> float:
    """The p-quantile of the range of k standard normals (the studentized range at infinite degrees of freedom,
    Nemenyi's q): bisection on P(R <= q) = k ∫ φ(z) (Φ(z + q) - Φ(z))^(k-1) dz, integrated on a fine grid
    (equal to scipy's `studentized_range.ppf(p, k, inf)` to 1e-12; statsmodels' `qsturng`, which autorank uses,
    is an approximation within 1e-4 of it)."""
    z = np.linspace(-9.0, 9.0, 4001)
    density = np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    low, high = 0.0, 20.0
    for _ in range(60):
        middle = (low + high) / 2
        below = k * np.trapezoid(density * (special.ndtr(z + middle) - special.ndtr(z)) ** (k - 1), z)
        low, high = (middle, high) if below < p else (low, middle)
    return (low + high) / 2


def rank_blocks(frame: pd.DataFrame, include: bool = False) -> Ranking:
    """The Friedman/Nemenyi ranking of the methods in `frame` (result rows) across blocks (dataset x regime x
    encoder), or a Ranking with a `reason` when there are fewer than 3 complete blocks or 3 methods."""
    cells, notes = accuracy_cells(frame, include)
    if cells.empty:
        return Ranking(pd.DataFrame(), pd.Series(dtype=float), reason="no clean test-accuracy rows in the selection",
                       label="no test: no results", notes=notes)
    wide = block_scores(cells)
    kept = kept_methods(wide)
    scores = wide[kept].dropna()
    dropped = [m for m in wide.columns if m not in kept]
    if dropped:
        counts = wide.notna().sum()
        notes.append(f"left out, on too few blocks for {MIN_BLOCKS} complete ones: "
                     + ", ".join(f"{m} ({counts[m]} of {len(wide)} blocks)" for m in dropped))
    partial = [b for b in wide.index if b not in scores.index]
    if partial:
        missing = [f"{b} (no {', '.join(m for m in kept if pd.isna(wide.loc[b, m]))})" for b in partial]
        notes.append(f"blocks left out, a ranked method has no result there: {first_few(missing)}; rank the others "
                     "on them with --filter method=...")
    ranks = scores.rank(axis=1, ascending=False, method="average").mean().sort_values(kind="stable")
    methods = ", ".join(kept)
    if len(scores) < MIN_BLOCKS:
        return Ranking(scores, ranks, notes=notes, label=f"no test: fewer than {MIN_BLOCKS} datasets/regimes",
                       reason=f"{len(scores)} block(s) ({BLOCKS}) where all of {methods} ran; the Friedman test "
                              f"needs {MIN_BLOCKS} or more: run more datasets or regimes")
    if len(kept) < MIN_METHODS:
        return Ranking(scores, ranks, notes=notes, label=f"no test: fewer than {MIN_METHODS} methods",
                       reason=f"{len(kept)} method(s) ({methods}): the Friedman test compares {MIN_METHODS} or more; "
                              "run more methods (two methods: clbench report --table compare)")
    p, cd, ranks = friedman_nemenyi(scores)
    if len(scores) < AUTORANK_MIN_BLOCKS:
        notes.append(f"{len(scores)} blocks: so few give the test little power (autorank itself refuses fewer "
                     f"than {AUTORANK_MIN_BLOCKS}; its formulas are applied here)")
    return Ranking(scores[list(ranks.index)], ranks, p, cd, nemenyi_groups(ranks, cd), notes=notes)


def letters(ranking: Ranking) -> dict[str, str]:
    """Per method, the letters of its Nemenyi groups (a = the group of the best mean rank)."""
    found: dict[str, str] = {m: "" for m in ranking.mean_ranks.index}
    for i, group in enumerate(ranking.groups):
        for method in group:
            found[method] += chr(ord("a") + i) if i < 26 else f"({i + 1})"
    return found


def ranking_notes(ranking: Ranking) -> list[str]:
    """What the ranking table's numbers mean, then the left-out methods and blocks."""
    return [
        f"blocks: {', '.join(map(str, ranking.scores.index))} ({BLOCKS}; a regime such as sst2[n=100] is its own "
        "block)",
        "rank: per block by mean test accuracy over seeds (collapsed runs left out), 1 = best; means equal at 0.01 "
        "points tie and share the average rank; mean acc: over the blocks",
        f"Friedman test ({REFERENCE}): whether the mean ranks differ at all; its N is the number of blocks, not of "
        "runs or seeds",
        f"group: methods sharing a letter differ in mean rank by at most CD = {ranking.cd:.2f}, so the Nemenyi test "
        f"does not tell them apart at α = {ALPHA:g} (a bar in the CD diagram); it says nothing about effect size",
        *([f"Friedman p ≥ {ALPHA:g}: no difference shown; the groups are not evidence for any order"]
          if ranking.p >= ALPHA else []),
        *ranking.notes,
    ]


def ranking_cells(ranking: Ranking) -> pd.DataFrame:
    """The table of `clbench report --table ranking`: per method (best mean rank first) its mean rank, Nemenyi
    group letters and mean accuracy; the Friedman p and CD in the title. BenchError when there is no test."""
    if not ranking.tested:
        raise BenchError(f"no ranking with uncertainty: {ranking.reason}")
    marks = letters(ranking)
    best = ranking.mean_ranks.min()
    cells = []
    for method, rank in ranking.mean_ranks.items():
        accuracy = float(ranking.scores[method].mean())
        cells += [{**text_cell(method, "mean rank", f"{rank:.2f}", mean=float(rank), n=len(ranking.scores)),
                   "best": bool(abs(rank - best) < 1e-9)},
                  text_cell(method, "group", marks[method]),
                  text_cell(method, "mean acc (%)", f"{accuracy:.2f}", mean=accuracy, n=len(ranking.scores))]
    title = (f"Ranking across {len(ranking.scores)} blocks ({BLOCKS}): Friedman {p_text(ranking.p)}, "
             f"Nemenyi CD = {ranking.cd:.2f} at α = {ALPHA:g}")
    return make_table(cells, title, "method", ranking_notes(ranking), left=["group"])


def ranking_table(frame: pd.DataFrame, include: bool = False) -> pd.DataFrame:
    """`clbench report --table ranking` over result rows: `ranking_cells(rank_blocks(frame, include))`."""
    return ranking_cells(rank_blocks(frame, include))


def cd_height(methods: int, bars: int) -> float:
    """The height (inches) autorank's CD diagram fills for `methods` methods and `bars` bars at CD_WIDTH."""
    return 0.65 + (methods + 1) / 2 * 0.2 + max(0.4, 0.4 + (bars - 1) * 0.1)


def cd_caption(p: float, cd: float, blocks: int) -> str:
    """The line under the PNG/PDF diagram: the Friedman test it rests on, so that the figure alone is not read as
    an order where the test shows none."""
    text = f"Friedman p = {p:.3f} over {blocks} blocks ({BLOCKS}); CD = {cd:.2f} (Nemenyi, α = {ALPHA:g})"
    return text + ("\np ≥ 0.05: no difference shown, the order is not evidence" if p >= ALPHA else "")


def cd_plot(ranking: Ranking, filters: list[str] | None = None) -> Plot:
    """The critical-difference diagram (autorank's `plot_stats`; `ranking-cd[-<filters>]`): the mean-rank axis
    (best on the right), each method at its mean rank, the CD as a scale bar, and a bar joining the methods the
    Nemenyi test does not tell apart. Data: the mean ranks."""
    if not ranking.tested:
        raise BenchError(f"no critical-difference diagram: {ranking.reason}")
    return cd_figure(ranking.mean_ranks.to_dict(), ranking.p, ranking.cd, ranking.groups, len(ranking.scores),
                     filters)


@styled
def cd_figure(mean_ranks: dict[str, float], p: float, cd: float, groups: list[list[str]], blocks: int,
              filters: list[str] | None = None) -> Plot:
    """`cd_plot` from the numbers it draws (plain data: the page keys its figure by them)."""
    from autorank import plot_stats
    from autorank.autorank import RankResult
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fields = dict.fromkeys(RankResult._fields)
    fields.update(rankdf=pd.DataFrame({"meanrank": pd.Series(mean_ranks)}), pvalue=p, cd=cd, omnibus="friedman",
                  posthoc="nemenyi", alpha=ALPHA, num_samples=blocks, force_mode="nonparametric")
    bars = sum(len(g) > 1 for g in groups)
    height = cd_height(len(mean_ranks), bars)
    figure = Figure(figsize=(CD_WIDTH, height + CAPTION_HEIGHT))
    FigureCanvasAgg(figure)
    below = CAPTION_HEIGHT / (height + CAPTION_HEIGHT)  # the caption's share of the height, under the diagram
    axes = figure.add_axes((0, below, 1, 1 - below))
    with quiet():
        plot_stats(RankResult(**fields), allow_insignificant=True, ax=axes)
    figure.text(0.5, below / 2, cd_caption(p, cd, blocks), ha="center", va="center", fontsize=7)
    slug = filters_slug(filters)
    return Plot(f"ranking-cd{'-' + slug if slug else ''}", figure, pd.Series(mean_ranks))


def ranking_html(ranking: Ranking) -> str:
    """The headline of the HTML page's ranking: the CD diagram (SVG: bench.reporting.htmlcd) and the
    Friedman/Nemenyi sentence with its notes, or one line saying why there is no test."""
    if not ranking.tested:
        return note(f"{ranking.headline()} Below: the bare mean ranks ({ranking.label}).")
    groups = "; ".join("{" + ", ".join(g) + "}" for g in ranking.groups if len(g) > 1) or "none"
    caption = (f"Critical-difference diagram: mean rank over {len(ranking.scores)} blocks ({BLOCKS}), 1 = best, on "
               f"the right; a bar joins methods within CD = {ranking.cd:.2f} of each other (Nemenyi, α = {ALPHA:g})")
    figure = cd_figure_html("ranking-cd", ranking.mean_ranks.to_dict(), ranking.cd, ranking.groups, caption)
    return (render("paragraph", "", "ranking-test", lead=ranking.headline())
            + figures_row([figure])
            + notes_list([f"not told apart (Nemenyi): {groups}",
                          "mean ranks: " + ", ".join(f"{m} {r:.2f}" for m, r in ranking.mean_ranks.items()),
                          *ranking_notes(ranking)[:3], *ranking.notes]))
