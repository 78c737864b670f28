"""cline — contrastive learning with semantic negative examples (Wang et al.), fine-tuning form: a synonym
view is pulled towards the original and an antonym view pushed away, and a token head detects replaced words."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bench.errors import BenchError
from bench.registry import METHODS
from bench.methods.base import Method, PrepareContext
from bench.methods.losses import cline_bce_loss, cline_contrastive_loss, replaced_token_loss
from bench.methods.views import require_wordnet, stacked, word_views


@dataclass(frozen=True)
class CLINEConfig:
    """syn_rate / ant_rate: share of content words replaced in x_syn / x_ant; syn_inflections: x_syn also makes
    morphological changes (another inflection: films -> film) where WordNet has no synonym or hypernym of a
    word, as the paper lists them among x_syn's replacements; lambda_cts, lambda_rtd: weights of
    the sentence contrastive and replaced-token losses (weights: fixed) or learned uncertainty weights
    Σ exp(-s_k) L_k + s_k (weights: learned); sentence_loss: eq6 (the paper) or bce (the released code)."""

    syn_rate: float = 0.4
    ant_rate: float = 0.2
    syn_inflections: bool = True
    lambda_cts: float = 1.0
    lambda_rtd: float = 1.0
    weights: str = "fixed"
    sentence_loss: str = "eq6"

    def __post_init__(self) -> None:
        if not (0 < self.syn_rate <= 1 and 0 < self.ant_rate <= 1):
            raise BenchError("cline: syn_rate and ant_rate must be in (0, 1]")
        if self.weights not in ("fixed", "learned") or self.sentence_loss not in ("eq6", "bce"):
            raise BenchError("cline: weights is fixed or learned; sentence_loss is eq6 or bce")
        if self.lambda_cts < 0 or self.lambda_rtd < 0:
            raise BenchError("cline: lambda_cts and lambda_rtd must be >= 0")


@METHODS.register("cline")
class CLINE(Method):
    """CE + contrastive loss against WordNet synonym/antonym views + replaced-token detection."""

    Config = CLINEConfig

    def __init__(self, encoder, num_labels, config=None, head_dropout=0.1):
        super().__init__(encoder, num_labels, config, head_dropout)
        self.rtd_head = nn.Linear(getattr(encoder, "token_size", encoder.hidden_size), 1)
        self.log_vars = nn.Parameter(torch.zeros(3)) if self.config.weights == "learned" else None
        self.syn = self.ant = None

    @classmethod
    def validate(cls, config: CLINEConfig, label_names: list[str], results_dir: Path) -> None:
        require_wordnet()

    def prepare(self, context: PrepareContext) -> None:
        self.syn = word_views(context, "syn-inflect" if self.config.syn_inflections else "syn", self.config.syn_rate)
        self.ant = word_views(context, "ant", self.config.ant_rate)

    def loss(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if self.syn is None:
            raise RuntimeError("cline needs prepare() before training")
        device, m = batch["labels"].device, batch["labels"].shape[0]
        syn = self.syn.batch(batch["index"], device)
        ant = self.ant.batch(batch["index"], device)
        rows = stacked(batch, syn, ant, pad_id=self.syn.pad_id)
        out = self.encode(rows)
        h = out.pooled.float()
        ce = F.cross_entropy(self.head(out.pooled[:m]).float(), batch["labels"])
        if self.config.sentence_loss == "eq6":
            cts = cline_contrastive_loss(h[:m], h[m:2 * m], h[2 * m:])
        else:
            cts = 0.5 * (cline_bce_loss(h[:m], h[m:2 * m], 1.0) + cline_bce_loss(h[:m], h[2 * m:], 0.0))
        width = rows["input_ids"].shape[1]
        replaced = torch.cat([F.pad(v["replaced"], (0, width - v["replaced"].shape[1])) for v in (syn, ant)])
        token_logits = self.rtd_head(out.tokens[m:]).squeeze(-1)
        rtd = replaced_token_loss(token_logits, replaced, rows["attention_mask"][m:])
        if self.log_vars is None:
            return {"ce": ce, "cts": self.config.lambda_cts * cts, "rtd": self.config.lambda_rtd * rtd}
        s = self.log_vars
        return {name: torch.exp(-s[k]) * value + s[k] for k, (name, value) in enumerate(
            (("ce", ce), ("cts", cts), ("rtd", rtd)))}
