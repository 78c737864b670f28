"""The page's critical-difference diagram as SVG (bench.reporting.htmlcd): each method's elbow at its mean rank
(1, the best, on the right), the worse half labelled on the left, a bar per group not told apart spanning its
ranks, and the CD as a scale bar of its length."""

from __future__ import annotations

import math
import re

import pytest

from bench.reporting import htmlcd

RANKS = {"lcl": 1.8, "supcon": 2.2, "ce": 2.8, "clld-adaptive": 3.2}


def geometry(svg: str) -> tuple[float, float]:
    """The axis' left and right ends."""
    x1, x2 = re.search(r'<line x1="([\d.]+)" x2="([\d.]+)" y1="50" y2="50"', svg).groups()
    return float(x1), float(x2)


def elbows(svg: str) -> dict[str, tuple[float, str]]:
    """method -> (x of its elbow on the axis, text-anchor of its label)."""
    found = re.findall(r'<title>([^:<]+): mean rank [^<]*</title><polyline points="([\d.]+),50 .*?text-anchor="(\w+)"',
                       svg)
    return {name: (float(x), side) for name, x, side in found}


def test_each_method_sits_at_its_mean_rank_best_on_the_right():
    svg = htmlcd.cd_svg(RANKS, 2.1, [list(RANKS)])
    left, right = geometry(svg)
    found = elbows(svg)
    for method, rank in RANKS.items():  # the axis runs from 4 (left) to 1 (right)
        assert found[method][0] == pytest.approx(left + (right - left) * (4 - rank) / 3, abs=0.06)
    assert found["lcl"][0] > found["supcon"][0] > found["ce"][0] > found["clld-adaptive"][0]
    assert {m: side for m, (_, side) in found.items()} == {"lcl": "start", "supcon": "start", "ce": "end",
                                                          "clld-adaptive": "end"}


def test_groups_are_bars_spanning_their_ranks_and_the_cd_bar_has_its_length():
    svg = htmlcd.cd_svg(RANKS, 1.0, [["lcl", "supcon"], ["ce", "clld-adaptive"], ["ce"]])
    left, right = geometry(svg)
    bars = re.findall(r'<line class="group" x1="([\d.]+)" x2="([\d.]+)"', svg)
    assert len(bars) == 2  # a group of one draws no bar
    x = {m: left + (right - left) * (4 - r) / 3 for m, r in RANKS.items()}
    assert [(float(a), float(b)) for a, b in bars] == [
        pytest.approx((x["supcon"] - 4, x["lcl"] + 4), abs=0.06), pytest.approx((x["clld-adaptive"] - 4, x["ce"] + 4),
                                                                                 abs=0.06)]
    cd = re.search(r'<g class="cd-bar"><line x1="([\d.]+)" x2="([\d.]+)"', svg).groups()
    assert float(cd[1]) - float(cd[0]) == pytest.approx((right - left) * 1.0 / 3, abs=0.1)
    assert "CD = 1.00" in svg


def test_no_cd_bar_without_a_cd_and_names_are_escaped():
    svg = htmlcd.cd_svg({"a<b": 1.0, "c": 2.0}, math.nan, [])
    assert 'class="cd-bar"' not in svg and "a&lt;b" in svg and "a<b" not in svg
