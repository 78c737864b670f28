"""cline — contrastive learning with semantic negative examples (Wang et al.), fine-tuning form: a synonym
view is pulled towards the original and an antonym view pushed away, and a token head finds the replaced words.

`variant: released` (the default) follows the authors' released code (kandorm/CLINE) where it departs from the
paper: a 3-way token classifier (kept / replaced in the synonym view / replaced in the antonym view) scored on
candidate words only, up to half of a text's words replaced in each view, antonyms tried for a seeded half of the
texts only (the rest get random-word views, where a random word equal to the word it replaces skips that word),
the model's pooler output as the sentence vector, the BCE sentence loss and learned task weights regularised by
clamp(s, min=0). `variant: paper` is the paper's equations as this project first implemented them, with fixed
weights and Eq. 6 (docs/METHODS.md "cline": departures from the released code). Each variant implies its
`weights`, `sentence_loss` and `redraw_same_word` (VARIANT_KNOBS); an explicit --set wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bench.data.batching import Encoded
from bench.errors import BenchError
from bench.registry import METHODS
from bench.methods.base import Method, PrepareContext
from bench.methods.losses import (IGNORE_TOKEN, cline_bce_loss, cline_contrastive_loss, cline_token_loss,
                                  replaced_token_loss)
from bench.methods.views import collate_with_views, require_wordnet, with_views, word_views

VARIANTS = ("released", "paper")
RELEASED_RATE = 0.5    # released replace_word: int(0.5 x words) replaced per view, at most the candidate words
RELEASED_ANTONYM_SHARE = 0.5  # released ANTONYM_RATIO: the share of texts whose antonym view tries antonyms
KEPT, SYNONYM, ANTONYM = 0, 1, 2  # the released token classes


@dataclass(frozen=True)
class CLINEConfig:
    """variant: released (the authors' code) or paper (see the module); syn_rate / ant_rate (paper variant):
    share of content words replaced in x_syn / x_ant; syn_inflections: x_syn also makes morphological changes
    (films -> film) where WordNet has no synonym or hypernym; lambda_cts, lambda_rtd: weights of the sentence
    contrastive and token losses (weights: fixed) or learned uncertainty weights Σ exp(-s_k) L_k + r(s_k)
    (weights: learned; r(s) = max(s, 0) in the released variant, s in the paper one); sentence_loss: eq6 (the
    paper) or bce (the released code); redraw_same_word: a random replacement word equal to the word it replaces
    is drawn again (true) or that word is skipped (false, the released code's search_replacement).

    The defaults are the released variant's. VARIANT_KNOBS (a class attribute, not a knob) names what each
    variant implies: bench.spec.method_config applies it between these defaults and the knobs a user sets, so
    `--set cline.variant=paper` gives fixed weights and Eq. 6 unless --set says otherwise. Building the class
    directly (CLINEConfig(variant="paper")) applies nothing: pass every knob."""

    VARIANT_KNOBS = {"released": {"sentence_loss": "bce", "weights": "learned", "redraw_same_word": False},
                     "paper": {"sentence_loss": "eq6", "weights": "fixed", "redraw_same_word": True}}

    variant: str = "released"
    syn_rate: float = 0.4
    ant_rate: float = 0.2
    syn_inflections: bool = True
    lambda_cts: float = 1.0
    lambda_rtd: float = 1.0
    weights: str = "learned"
    sentence_loss: str = "bce"
    redraw_same_word: bool = False

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise BenchError(f"cline: variant is {' or '.join(VARIANTS)}, got {self.variant!r}")
        if not (0 < self.syn_rate <= 1 and 0 < self.ant_rate <= 1):
            raise BenchError("cline: syn_rate and ant_rate must be in (0, 1]")
        if self.weights not in ("fixed", "learned") or self.sentence_loss not in ("eq6", "bce"):
            raise BenchError("cline: weights is fixed or learned; sentence_loss is eq6 or bce")
        if self.lambda_cts < 0 or self.lambda_rtd < 0:
            raise BenchError("cline: lambda_cts and lambda_rtd must be >= 0")


def token_labels(replaced: torch.Tensor, candidate: torch.Tensor, replaced_class: int) -> torch.Tensor:
    """The released token labels of one view (B, T): `replaced_class` on a replaced word's tokens, KEPT on a
    kept candidate word's, IGNORE_TOKEN elsewhere (other words, special tokens, padding)."""
    scored = torch.where(replaced > 0, replaced_class, KEPT)
    return torch.where(candidate > 0, scored, IGNORE_TOKEN).long()  # no boolean indexing: no host sync


def uncertainty_weighted(losses: dict[str, torch.Tensor], log_vars: torch.Tensor,
                         clamped: bool) -> dict[str, torch.Tensor]:
    """exp(-s_k) L_k + r(s_k) per task k, with r(s) = max(s, 0) when `clamped` (the released code) else s."""
    return {name: torch.exp(-log_vars[k]) * value + (log_vars[k].clamp(min=0) if clamped else log_vars[k])
            for k, (name, value) in enumerate(losses.items())}


def released_token_head(dim: int) -> nn.Module:
    """The released token classifier: dense, GELU, LayerNorm, then 3 classes (shaped like RoBERTa's LM head)."""
    return nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.LayerNorm(dim), nn.Linear(dim, 3))


@METHODS.register("cline")
class CLINE(Method):
    """CE + contrastive loss against WordNet synonym/antonym views + replaced-token detection."""

    capturable = True  # tests/test_graphs.py

    Config = CLINEConfig
    # 2: the `variant` knob (released by default). 3: the released variant runs the released objective whole
    # (its defaults became weights: learned and sentence_loss: bce; `paper` implies fixed and eq6) and draws its
    # antonym views as the released code does (antonyms tried for a seeded half of the texts): what `cline`
    # trains by default changed, so runs of version 2 are never mixed with new ones. 4: the `redraw_same_word`
    # knob; `released` implies false, as the released code: a random word equal to the word it replaces skips that
    # word, with no second draw (before, it was drawn again, as `paper` still does).
    version = 4

    def __init__(self, encoder, num_labels, config=None, head_dropout=0.1):
        super().__init__(encoder, num_labels, config, head_dropout)
        dim = getattr(encoder, "token_size", encoder.hidden_size)
        released = self.config.variant == "released"
        self.rtd_head = released_token_head(dim) if released else nn.Linear(dim, 1)
        self.log_vars = nn.Parameter(torch.zeros(3)) if self.config.weights == "learned" else None
        self.syn = self.ant = None

    @classmethod
    def validate(cls, config: CLINEConfig, label_names: list[str], results_dir: Path) -> None:
        require_wordnet()

    def prepare(self, context: PrepareContext) -> None:
        syn_kind = "syn-inflect" if self.config.syn_inflections else "syn"
        if self.config.variant == "released":
            self.syn = word_views(context, syn_kind, RELEASED_RATE, quota="tokens")
            self.ant = word_views(context, "ant", RELEASED_RATE, quota="tokens", antonym_share=RELEASED_ANTONYM_SHARE,
                                  redraw_same=self.config.redraw_same_word)
        else:
            self.syn = word_views(context, syn_kind, self.config.syn_rate)
            self.ant = word_views(context, "ant", self.config.ant_rate, redraw_same=self.config.redraw_same_word)

    def collate(self, data: Encoded, index: np.ndarray, pad_id: int, min_length: int, bucket: int,
                max_width: int | None) -> dict[str, torch.Tensor]:
        """The training batch with its synonym and antonym views: `syn_` and `ant_` + input_ids, attention_mask,
        replaced and candidate, all of the batch's width."""
        if self.syn is None:
            raise RuntimeError("cline needs prepare() before training")
        return collate_with_views(data, index, pad_id, min_length, bucket, max_width,
                                  {"syn": self.syn, "ant": self.ant})

    def loss(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        m = batch["labels"].shape[0]
        released = self.config.variant == "released"
        rows = with_views(batch, "syn", "ant")  # originals, synonym views, antonym views: 3M rows, one width
        out = self.encode(rows)
        sentence = out.pooler if released and out.pooler is not None else out.pooled
        h = sentence.float()
        ce = F.cross_entropy(self.head(out.pooled[:m]).float(), batch["labels"])
        if self.config.sentence_loss == "eq6":
            cts = cline_contrastive_loss(h[:m], h[m:2 * m], h[2 * m:])
        else:
            cts = 0.5 * (cline_bce_loss(h[:m], h[m:2 * m], 1.0) + cline_bce_loss(h[:m], h[2 * m:], 0.0))
        if released:
            labels = torch.cat([token_labels(batch["syn_replaced"], batch["syn_candidate"], SYNONYM),
                                token_labels(batch["ant_replaced"], batch["ant_candidate"], ANTONYM)])
            rtd = cline_token_loss(self.rtd_head(out.tokens[m:]), labels)
        else:
            token_logits = self.rtd_head(out.tokens[m:]).squeeze(-1)
            replaced = torch.cat([batch["syn_replaced"], batch["ant_replaced"]])
            rtd = replaced_token_loss(token_logits, replaced, rows["attention_mask"][m:])
        if self.log_vars is None:
            return {"ce": ce, "cts": self.config.lambda_cts * cts, "rtd": self.config.lambda_rtd * rtd}
        return uncertainty_weighted({"ce": ce, "cts": cts, "rtd": rtd}, self.log_vars, clamped=released)
