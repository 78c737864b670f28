"""Published numbers for the vs-paper table (`bench.reporting.tables.vs_paper`): the dataset cards' `paper`
entries, how they map to our encoder families and methods, and the cells of one comparison row."""

from __future__ import annotations

import math
from typing import Any

from bench.reporting.cellframes import MISSING, text_cell, value_cell

# dataset-card `paper` entries -> (paper encoder family, our method); entries not listed are left out
PAPER_MAP: dict[str, dict[str, tuple[str, str]]] = {
    "clld_table2": {"bert": ("bert", "ce"), "bert+clld": ("bert", "clld-adaptive"),
                    "albert": ("albert", "ce"), "albert+clld": ("albert", "clld-adaptive"),
                    "textcnn": ("textcnn", "ce"), "textcnn+clld": ("textcnn", "clld-adaptive")},
    "lcl_slides": {"ce": ("electra", "ce"), "scl": ("electra", "supcon"), "lcl": ("electra", "lcl")},
    "dcl_table1_glue": {"bert": ("bert", "ce"), "dcl": ("bert", "dcl")},
}
FAMILY_NAMES = {"bert": "BERT", "albert": "ALBERT", "textcnn": "TextCNN", "electra": "ELECTRA"}
SOURCE_NOTES = {"dcl_table1_glue": "paper trained on phrase-level GLUE SST-2, not this split"}


def encoder_family(name: str) -> str:
    """The model family of an encoder name (`bert`, `albert`, `electra`, `textcnn`), else the name itself."""
    import re

    base = name.lower().rstrip("/").split("/")[-1]
    for family in ("albert", "electra", "textcnn", "bert"):
        if re.match(rf"{family}([-_.]|$)", base):
            return family
    return base


def card_papers() -> dict[str, dict[str, Any]]:
    """The `paper` entries of every registered dataset card."""
    from bench.data import cards  # noqa: F401  (registers the cards)
    from bench.registry import DATASETS

    return {name: dict(card.paper) for name, card in DATASETS.items() if card.paper}


def nothing_published(datasets: list[str], papers: dict[str, Any]) -> str:
    """The error when no dataset of the selection has published numbers. The cards' numbers are for the full
    training sets, so a data regime (`sst2[n=100]`, bench.spec.regime_label) of a dataset that has some is said to
    have none comparable."""
    text = (f"no published numbers in the dataset cards of {', '.join(datasets)}; cards with numbers: "
            f"{', '.join(sorted(papers)) or '(none)'}")
    regimes = [d for d in datasets if "[" in d and papers.get(d.split("[", 1)[0])]
    if regimes:
        text += (f"; the cards' numbers are for the full training sets, so none is comparable with a data regime "
                 f"({', '.join(regimes)}): compare runs made without --train-size, --shots or --label-noise")
    return text


def paper_note(encoder: str, family: str, paper_family: str, source: str) -> str:
    """Whether our encoder matches the paper's, plus any caveat of the source."""
    paper_name = FAMILY_NAMES.get(paper_family, paper_family)
    text = f"same encoder family ({paper_name})" if family == paper_family else \
        f"encoders differ: ours {encoder}, paper {paper_name}"
    return "; ".join([text, *([SOURCE_NOTES[source]] if source in SOURCE_NOTES else [])])


def paper_cells(row: str, method: str, ours: list[float], published: float, note: str,
                digits: int, collapsed: bool = False, near_chance: bool = False) -> list[dict[str, Any]]:
    """The cells of one vs-paper row (`collapsed`: our mean includes a collapsed run, marked †; `near_chance`: a
    run not clearly above chance, marked °)."""
    mine = value_cell(row, "ours acc", ours, digits=digits, collapsed=collapsed, near_chance=near_chance)
    gap = mine["mean"] - published
    return [
        text_cell(row, "ours", method),
        mine,
        text_cell(row, "paper acc", f"{published:.1f}", published),
        text_cell(row, "gap", MISSING if math.isnan(gap) else f"{gap:+.{digits}f}", gap, mine["n"]),
        text_cell(row, "note", note, note=note),
    ]
