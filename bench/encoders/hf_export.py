"""A trained encoder and classifier head as a standard Hugging Face sequence-classification folder: safetensors
weights, config.json with the label names, and the tokenizer, which `AutoModelForSequenceClassification` and
`AutoTokenizer` load with no custom code and which predicts what the suite's model predicts.

The suite's head is dropout + Linear on the pooled vector; lcl's released head is Linear(d, d), dropout, ReLU,
Linear(d, N) (bench.encoders.hf_heads reads a head's layers). Which stock class computes exactly that:
- `--pooling pooler` (the encoder's own pooler, dense + tanh of the first token): the encoder's own
  `*ForSequenceClassification` (BERT: `BertForSequenceClassification`; RoBERTa: its classification head), for
  the one-layer head only (a two-layer head after the pooler's tanh: a BenchError naming the settings to change);
- `--pooling cls` (the default: the first token's state, no dense, no tanh): no BERT/RoBERTa/DistilBERT class
  classifies the raw first token (BERT's always applies its pooler's tanh). `DebertaV2ForSequenceClassification`
  with relative attention off is the same post-LayerNorm transformer with absolute positions, and its pooler
  (`ContextPooler`: dropout, dense(d, d), the activation `pooler_hidden_act`, then dropout and the classifier)
  computes either head: for the one-layer head an identity dense and the `linear` activation, for a two-layer
  head dense = its first Linear and its activation (lcl: `relu`); the weights are copied unchanged (RoBERTa's
  position table shifted past its padding offset, the constant token-type-0 vector folded into the positions);
- `--pooling mean` and non-transformer encoders (TextCNN): no stock class; a BenchError says so.
Every export is loaded back and checked against the suite's logits (`check_logits`)."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from bench.errors import BenchError
from bench.encoders.hf_heads import HeadLayers, head_layers, linear_weights, pooler_head_problem
from bench.encoders.models import EncoderBundle, HFEncoder

BERT_LIKE = ("bert", "roberta", "xlm-roberta", "camembert", "distilbert")
ROBERTA_LIKE = ("roberta", "xlm-roberta", "camembert")  # positions start after the padding index
TOLERANCE = 1e-4  # the largest logit difference the export check accepts (fp32 differences are ~1e-6)
ABOUT = "clbench_export.json"  # what the folder was made from (run key, settings, metrics), beside the HF files
LAYER = r"deberta.encoder.layer.\1."
# source name (relative to the encoder) -> name in DebertaV2ForSequenceClassification
DEBERTA_NAMES = [
    (r"^embeddings\.(word_embeddings|position_embeddings|LayerNorm)\.", r"deberta.embeddings.\1."),
    (r"^encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.", LAYER + r"attention.self.\2_proj."),
    (r"^encoder\.layer\.(\d+)\.", LAYER),  # BERT, RoBERTa: the other names are DeBERTa's
    (r"^transformer\.layer\.(\d+)\.attention\.q_lin\.", LAYER + "attention.self.query_proj."),  # DistilBERT
    (r"^transformer\.layer\.(\d+)\.attention\.k_lin\.", LAYER + "attention.self.key_proj."),
    (r"^transformer\.layer\.(\d+)\.attention\.v_lin\.", LAYER + "attention.self.value_proj."),
    (r"^transformer\.layer\.(\d+)\.attention\.out_lin\.", LAYER + "attention.output.dense."),
    (r"^transformer\.layer\.(\d+)\.sa_layer_norm\.", LAYER + "attention.output.LayerNorm."),
    (r"^transformer\.layer\.(\d+)\.ffn\.lin1\.", LAYER + "intermediate.dense."),
    (r"^transformer\.layer\.(\d+)\.ffn\.lin2\.", LAYER + "output.dense."),
    (r"^transformer\.layer\.(\d+)\.output_layer_norm\.", LAYER + "output.LayerNorm."),
]


def pooling_problem(pooling: str) -> str:
    """Why a model trained with this pooling has no exact stock Hugging Face class ('' if it may have one)."""
    if pooling == "mean":
        return ("--pooling mean has no stock Hugging Face sequence-classification head (they classify from the first "
                "token); train with --pooling cls (the default) or pooler to export, or keep the saved model")
    return ""


def export_problem(model_type: str, pooling: str) -> str:
    """Why an encoder of this Hugging Face `model_type` with this pooling has no exact stock class ('' if it has)."""
    if pooling_problem(pooling):
        return pooling_problem(pooling)
    if model_type not in BERT_LIKE:
        return (f"encoder type {model_type!r} is not one clbench maps onto a stock Hugging Face class (it maps "
                f"{', '.join(BERT_LIKE)}); keep the saved model")
    if pooling == "pooler" and model_type == "distilbert":
        return "distilbert has no pooler layer: --pooling pooler cannot have trained it"
    return ""


def tokenizer_of(bundle: EncoderBundle) -> Any:
    """The Hugging Face tokenizer behind a bundle's `tokenize` (bench.encoders.models.hf_tokenize keeps it)."""
    import inspect

    tokenizer = inspect.getclosurevars(bundle.tokenize).nonlocals.get("tokenizer")
    if tokenizer is None or not hasattr(tokenizer, "save_pretrained"):
        raise BenchError(f"encoder {bundle.name!r} has no Hugging Face tokenizer to export; keep the saved model")
    return tokenizer


def source_model(encoder: nn.Module) -> Any:
    """The Hugging Face model inside a suite encoder; a BenchError for any other encoder (TextCNN)."""
    if not isinstance(encoder, HFEncoder):
        raise BenchError(f"encoder {type(encoder).__name__} is not a Hugging Face transformer: it has no Hugging "
                         "Face format; keep the saved model")
    return encoder.model


def deberta_config(config: Any, activation: str = "linear") -> dict[str, Any]:
    """DebertaV2Config fields that make it compute what a BERT-like `config` computes (relative attention off),
    with `activation` (an ACT2FN name) after the pooler's dense layer."""
    if config.model_type == "distilbert":
        shape = {"hidden_size": config.dim, "num_hidden_layers": config.n_layers,
                 "num_attention_heads": config.n_heads, "intermediate_size": config.hidden_dim,
                 "hidden_act": config.activation, "hidden_dropout_prob": config.dropout,
                 "attention_probs_dropout_prob": config.attention_dropout, "layer_norm_eps": 1e-12}
    else:
        kind = getattr(config, "position_embedding_type", "absolute") or "absolute"
        if kind != "absolute":
            raise BenchError(f"position_embedding_type {kind!r}: only absolute positions export; keep the saved model")
        shape = {k: getattr(config, k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                 "intermediate_size", "hidden_act", "hidden_dropout_prob",
                                                 "attention_probs_dropout_prob", "layer_norm_eps")}
    offset = position_offset(config)
    return {**shape, "vocab_size": config.vocab_size, "pad_token_id": config.pad_token_id,
            "max_position_embeddings": config.max_position_embeddings - offset,
            "initializer_range": config.initializer_range, "type_vocab_size": 0, "relative_attention": False,
            "position_biased_input": True, "pos_att_type": [], "pooler_hidden_size": shape["hidden_size"],
            "pooler_hidden_act": activation, "pooler_dropout": 0.0}


def position_offset(config: Any) -> int:
    """Where a model's positions start: RoBERTa numbers them after its padding index, the others from 0."""
    return config.pad_token_id + 1 if config.model_type in ROBERTA_LIKE else 0


def deberta_state(model: Any, layers: HeadLayers) -> dict[str, torch.Tensor]:
    """A BERT-like encoder's weights and the head's `layers` as DebertaV2ForSequenceClassification's state dict
    (the pooler's dense: the head's first Linear, or the identity for a one-layer head)."""
    source = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    state: dict[str, torch.Tensor] = {}
    for name, tensor in source.items():
        if name.startswith(("pooler.", "embeddings.token_type_embeddings")):
            continue
        for pattern, target in DEBERTA_NAMES:
            if re.match(pattern, name):
                state[re.sub(pattern, target, name)] = tensor.clone()
                break
        else:
            raise BenchError(f"encoder weight {name!r} has no place in the exported model; keep the saved model")
    positions = source["embeddings.position_embeddings.weight"][position_offset(model.config):]
    token_type = source.get("embeddings.token_type_embeddings.weight")
    if token_type is not None:  # every input has token type 0: a constant vector, added to every position
        positions = positions + token_type[0]
    state["deberta.embeddings.position_embeddings.weight"] = positions.clone()
    width = layers.classifier.in_features
    if layers.dense is None:
        state["pooler.dense.weight"], state["pooler.dense.bias"] = torch.eye(width), torch.zeros(width)
    else:
        state["pooler.dense.weight"], state["pooler.dense.bias"] = linear_weights(layers.dense)
    state["classifier.weight"], state["classifier.bias"] = linear_weights(layers.classifier)
    return state


def pooler_state(model: Any, linear: nn.Linear) -> dict[str, torch.Tensor]:
    """An encoder with its pooler and the head as its own `*ForSequenceClassification` state dict."""
    source = {k: v.detach().float().cpu().clone() for k, v in model.state_dict().items()}
    head = dict(zip(("weight", "bias"), linear_weights(linear)))
    prefix = model.base_model_prefix
    if model.config.model_type in ROBERTA_LIKE:  # its head is dense + tanh of the first token: the pooler
        state = {f"{prefix}.{k}": v for k, v in source.items() if not k.startswith("pooler.")}
        state.update({f"classifier.dense.{p}": source[f"pooler.dense.{p}"] for p in ("weight", "bias")})
        state.update({f"classifier.out_proj.{p}": t for p, t in head.items()})
        return state
    state = {f"{prefix}.{k}": v for k, v in source.items()}
    state.update({f"classifier.{p}": t for p, t in head.items()})
    return state


def build_hf_model(encoder: nn.Module, head: nn.Module, label_names: list[str], head_dropout: float,
                   head_fix: str = "") -> Any:
    """The stock Hugging Face sequence classifier equal to the suite's encoder + head (see the module notes);
    `head_fix`: the setting that trains the shared head, named by the error for a two-layer head it cannot hold."""
    from transformers import AutoModelForSequenceClassification, DebertaV2Config

    model = source_model(encoder)
    config = model.config
    problem = export_problem(config.model_type, encoder.pooling)
    if problem:
        raise BenchError(problem)
    layers = head_layers(head)
    labels = {"id2label": dict(enumerate(label_names)), "label2id": {n: i for i, n in enumerate(label_names)}}
    if encoder.pooling == "pooler":
        if layers.dense is not None or layers.activation != "linear":
            raise BenchError(pooler_head_problem(head_fix))
        settings = {**config.to_dict(), **labels, "classifier_dropout": head_dropout}
        settings.pop("architectures", None)
        target_config = type(config).from_dict(settings)
        state = pooler_state(model, layers.classifier)
    else:
        target_config = DebertaV2Config(**deberta_config(config, layers.activation), **labels,
                                        cls_dropout=head_dropout)
        state = deberta_state(model, layers)
    hf_model = AutoModelForSequenceClassification.from_config(target_config, dtype=torch.float32)
    missing, unexpected = hf_model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise BenchError(f"exported weights do not fit {type(hf_model).__name__} (missing {missing[:3]}, "
                         f"unexpected {unexpected[:3]}); keep the saved model")
    return hf_model.eval()


@torch.no_grad()
def suite_logits(encoder: nn.Module, head: nn.Module, bundle: EncoderBundle, texts: list[str]) -> torch.Tensor:
    """The suite model's fp32 logits for `texts` (eval mode, right padding), on the CPU."""
    ids = bundle.tokenize(list(texts))
    width = max(max(len(x) for x in ids), bundle.min_length)
    input_ids = torch.full((len(ids), width), bundle.pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for row, tokens in enumerate(ids):
        input_ids[row, :len(tokens)] = torch.tensor(tokens)
        mask[row, :len(tokens)] = 1
    device = next(encoder.parameters()).device
    was_training = encoder.training, head.training
    encoder.eval()
    head.eval()
    try:
        logits = head(encoder(input_ids.to(device), mask.to(device)).pooled).float().cpu()
    finally:
        encoder.train(was_training[0])
        head.train(was_training[1])
    return logits


@torch.no_grad()
def hf_logits(folder: Path, texts: list[str]) -> torch.Tensor:
    """The logits of the folder's model, loaded as any user would (Auto classes, no custom code)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32).eval()
    batch = tokenizer(list(texts), truncation=True, padding=True, return_tensors="pt")
    return model(**batch).logits.float()


def check_logits(expected: torch.Tensor, folder: Path, texts: list[str]) -> float:
    """The largest difference between the suite's logits and the exported folder's; a BenchError above TOLERANCE."""
    got = hf_logits(folder, texts)
    if got.shape != expected.shape:
        raise BenchError(f"export check failed: the exported model gives logits of shape {tuple(got.shape)}, the "
                         f"suite's {tuple(expected.shape)}")
    gap = float((got - expected).abs().max())
    if not gap <= TOLERANCE:
        raise BenchError(f"export check failed: the exported model's logits differ from the suite's by {gap:.2e} "
                         f"(> {TOLERANCE}); keep the saved model")
    return gap


def check_target(folder: Path, overwrite: bool) -> None:
    """A BenchError unless `folder` can take an export: absent, an empty folder, or any folder with `overwrite`."""
    if folder.exists() and not folder.is_dir():
        raise BenchError(f"{folder} is a file, not a folder; choose another folder")
    if folder.exists() and any(folder.iterdir()) and not overwrite:
        raise BenchError(f"{folder} exists and is not empty; choose another folder, or add --overwrite")


def export_hf(encoder: nn.Module, head: nn.Module, bundle: EncoderBundle, label_names: list[str],
              head_dropout: float, max_length: int, folder: Path, check_texts: list[str],
              about: dict[str, Any] | None = None, overwrite: bool = False,
              files: dict[str, Callable[[dict[str, Any]], str]] | None = None, head_fix: str = "") -> dict[str, Any]:
    """Write the encoder + head as a Hugging Face folder at `folder` (whole or not at all), load it back and check
    its logits on `check_texts` against the suite's; returns what was written (class, largest logit gap).
    `about` goes into ABOUT; `files`: more text files (e.g. a model card), each made from that record;
    `head_fix`: the setting that trains the shared head (`build_hf_model`)."""
    folder = Path(folder)
    check_target(folder, overwrite)
    tokenizer = tokenizer_of(bundle)
    hf_model = build_hf_model(encoder, head, label_names, head_dropout, head_fix)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        hf_model.save_pretrained(staging)
        saved = tokenizer.model_max_length, tokenizer.padding_side
        tokenizer.model_max_length, tokenizer.padding_side = max_length, "right"  # truncation as in training
        try:
            tokenizer.save_pretrained(staging)
        finally:
            tokenizer.model_max_length, tokenizer.padding_side = saved
        summary = {"class": type(hf_model).__name__, "pooling": encoder.pooling, "labels": list(label_names),
                   "max_length": max_length, **(about or {})}
        (staging / ABOUT).write_text(json.dumps(summary, indent=1), encoding="utf-8")
        for name, make in (files or {}).items():
            (staging / name).write_text(make(summary), encoding="utf-8")
        texts = [t for t in check_texts if t.strip()][:32] or ["a"]
        summary["max_logit_gap"] = check_logits(suite_logits(encoder, head, bundle, texts), staging, texts)
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return summary
