"""A sequence classifier trained outside this suite (a local Hugging Face folder or a Hub id) behind the evaluators'
`Classifier` interface: loading it, mapping the dataset's labels onto its `id2label`, and fingerprinting its files."""

from __future__ import annotations

import hashlib
import inspect
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bench.errors import BenchError, SkipEvaluator
from bench.evaluators.base import Classifier
from bench.evaluators.metrics import softmax

GENERIC = re.compile(r"^LABEL_\d+$")  # the names transformers gives labels when a model's config names none
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json")
POSITIONAL = "positional"


class OutsideClassifier(Classifier):
    """A Hugging Face `*ForSequenceClassification` model with its tokenizer: length-sorted batches, fp32, the
    model's columns reordered to the dataset's labels (`columns[i]`: the model's column of dataset label i)."""

    def __init__(self, model: Any, tokenizer: Any, columns: list[int], label_names: list[str], device: torch.device,
                 max_length: int, batch_size: int = 64):
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.columns = list(columns)
        self.label_names = list(label_names)
        self.device = device
        self.max_length = max_length
        self.batch_size = batch_size
        self.queries = 0
        accepted = inspect.signature(model.forward).parameters
        self.inputs = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in accepted]

    @torch.no_grad()
    def _run(self, texts: list[str], output: str, dropout: bool = False) -> np.ndarray:
        """Logits (in the model's column order) or the classifier layer's inputs for `texts`, in their order."""
        if not texts:
            return np.zeros((0, len(self.columns) if output == "logits" else 0), dtype=np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")
        parts: list[np.ndarray] = []
        captured: list[torch.Tensor] = []
        hook = classifier_layer(self.model).register_forward_pre_hook(
            lambda _, args: captured.append(args[0])) if output == "features" else None
        self.model.train(dropout)
        try:
            for start in range(0, len(texts), self.batch_size):
                batch = [texts[i] for i in order[start:start + self.batch_size]]
                encoded = self.tokenizer(batch, truncation=True, max_length=self.max_length, padding=True,
                                         return_tensors="pt")
                inputs = {k: v.to(self.device) for k, v in encoded.items() if k in self.inputs}
                logits = self.model(**inputs).logits
                values = logits if output == "logits" else captured.pop()
                parts.append(values.float().cpu().numpy())
        finally:
            self.model.eval()
            if hook is not None:
                hook.remove()
        stacked = np.concatenate(parts)
        result = np.empty_like(stacked)
        result[order] = stacked
        return result

    def predict_proba(self, texts: list[str]) -> np.ndarray:
        """Class probabilities (n, N) in the dataset's label order."""
        self.queries += len(texts)
        return softmax(self._run(texts, "logits")[:, self.columns])

    def embed(self, texts: list[str], dropout: bool = False) -> np.ndarray:
        """The classifier layer's input (n, d): for a model exported by clbench, the suite's pooled vector."""
        return self._run(texts, "features", dropout)


def classifier_layer(model: nn.Module) -> nn.Linear:
    """The layer that gives the logits: the last Linear with one output per label (SkipEvaluator if none)."""
    layers = [m for m in model.modules() if isinstance(m, nn.Linear) and m.out_features == model.config.num_labels]
    if not layers:
        raise SkipEvaluator(f"{type(model).__name__} has no linear classifier layer to read representations from")
    return layers[-1]


def load_outside(source: str, device: torch.device) -> tuple[Any, Any, str]:
    """(model, tokenizer, canonical source: a local folder's absolute path, else the Hub id) in fp32."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    local = Path(source).expanduser()
    name = str(local.resolve()) if local.is_dir() else source
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForSequenceClassification.from_pretrained(name, dtype=torch.float32)
    except (OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise BenchError(f"cannot load model {source!r}: {reason}; give a local folder with config.json, weights "
                         "and a tokenizer, or a Hub id reachable from here") from exc
    return model.to(device).eval(), tokenizer, name


def model_labels(model: Any) -> list[str]:
    """The model's label names by class index (its config's id2label)."""
    id2label = {int(k): str(v) for k, v in model.config.id2label.items()}
    return [id2label.get(i, f"LABEL_{i}") for i in range(model.config.num_labels)]


def label_columns(dataset: list[str], model: list[str], label_map: str | None = None) -> list[int]:
    """For each dataset label, the model's column that predicts it: by name (case-insensitive), by `label_map`
    (`positional`: column i is dataset label i; or `DATASET=MODEL,...`), else a one-line BenchError."""
    fix = (f"give --label-map {POSITIONAL} (model label i is dataset label i: {', '.join(dataset)}) or --label-map "
           + ",".join(f"{d}={m}" for d, m in zip(dataset, model)))
    if len(dataset) != len(model):
        raise BenchError(f"the model has {len(model)} labels ({', '.join(model)}), the dataset {len(dataset)} "
                         f"({', '.join(dataset)}); evaluate it on a dataset with the same classes")
    if label_map == POSITIONAL:
        return list(range(len(dataset)))
    pairs = parse_label_map(label_map, dataset, model) if label_map else {}
    lower = {m.lower(): i for i, m in enumerate(model)}
    columns = [lower.get(pairs.get(d, d).lower()) for d in dataset]
    if None in columns or len(set(columns)) != len(columns):
        generic = " (generic names: the model's config names no labels)" if all(GENERIC.match(m) for m in model) \
            else ""
        raise BenchError(f"the model's labels [{', '.join(model)}]{generic} do not match the dataset's "
                         f"[{', '.join(dataset)}]; {fix}")
    return [int(c) for c in columns if c is not None]


def parse_label_map(text: str, dataset: list[str], model: list[str]) -> dict[str, str]:
    """`--label-map negative=LABEL_0,positive=LABEL_1` as {dataset label: model label}, names checked."""
    pairs: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        left, sep, right = part.partition("=")
        if not sep or not left.strip() or not right.strip():
            raise BenchError(f"--label-map {text!r}: expected {POSITIONAL} or DATASET_LABEL=MODEL_LABEL,...")
        known = {d.lower(): d for d in dataset}
        if left.strip().lower() not in known:
            raise BenchError(f"--label-map: {left.strip()!r} is not a label of the dataset ({', '.join(dataset)})")
        if right.strip().lower() not in {m.lower() for m in model}:
            raise BenchError(f"--label-map: {right.strip()!r} is not a label of the model ({', '.join(model)})")
        pairs[known[left.strip().lower()]] = right.strip()
    return pairs


def model_folder(name: str) -> Path | None:
    """Where a model's files are: a local folder, or a Hub id's snapshot in the local cache (None if absent)."""
    if Path(name).is_dir():
        return Path(name)
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "config.json")
    except (ImportError, ValueError):
        return None
    return Path(cached).parent if isinstance(cached, str) else None


def fingerprint(name: str) -> dict[str, str]:
    """SHA-256 of the model's config.json and of its weight files (names and contents, in name order);
    'unknown' where the files cannot be found."""
    folder = model_folder(name)
    if folder is None or not (folder / "config.json").is_file():
        return {"config_sha256": "unknown", "weights_sha256": "unknown"}
    weights = hashlib.sha256()
    for path in sorted({p for pattern in WEIGHT_FILES for p in folder.glob(pattern)}):
        weights.update(path.name.encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                weights.update(block)
    return {"config_sha256": hashlib.sha256((folder / "config.json").read_bytes()).hexdigest(),
            "weights_sha256": weights.hexdigest()}


def max_length_of(model: Any, tokenizer: Any) -> int:
    """Tokens per text: the tokenizer's `model_max_length` (clbench's exports set it to the run's), within the
    model's position table."""
    limit = int(getattr(model.config, "max_position_embeddings", 512) or 512)
    given = int(getattr(tokenizer, "model_max_length", limit) or limit)
    return max(8, min(given, limit))
