"""A run's trained model: the weights prediction needs (encoder and classifier head), stored as safetensors
(`model.safetensors`, the Hugging Face Hub's format: no pickle, read without running any code), in float32 or, where
the run checked that the rounded model predicts what it predicted, float16 (bench.training.precision). Older
runs' `model.pt` (a torch pickle of the same weights) still load. A model the keep policy did not keep
(`--keep-models`, bench.running.keeping) is dropped with a note in the manifest, so that a command that needs it
says why it is gone and how to get it back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.results import manifest, runfiles
from bench.results.manifest import Damaged
from bench.results.names import LEGACY_MODEL, MODEL

MODEL_PARTS = ("encoder.", "head.")  # what prediction needs; method-only modules (projectors, targets) are left out
DTYPES = ("float32", "float16")  # how a model's floating-point weights may be stored
RETRAIN = "retrain the run with `clbench run ... --overwrite`"
KEEP = " (and --keep-models all to keep its model)"  # said where the keep policy dropped it
NOT_KEPT = "not kept (--keep-models none)"  # why a run trained without keeping its model has none
HF_ONLY = "stored in Hugging Face format only (--save-format hf): its folder hf/ is the model"


def model_name(run_dir: Path) -> str | None:
    """The run's model file: model.safetensors, else an older run's model.pt; None when it has none."""
    return next((name for name in (MODEL, LEGACY_MODEL) if (Path(run_dir) / name).is_file()), None)


def has_model(run_dir: Path) -> bool:
    """Whether the run folder holds a model file."""
    return model_name(run_dir) is not None


def model_state(method: Any) -> dict[str, Any]:
    """The tensors prediction reads: the encoder's and the head's, without the weights the encoder never uses to
    predict (`unused_for_prediction`: e.g. BERT's pooler under --pooling cls)."""
    unused = tuple("encoder." + p for p in getattr(method.encoder, "unused_for_prediction", lambda: ())())
    return {k: v for k, v in method.state_dict().items() if k.startswith(MODEL_PARTS) and not k.startswith(unused)}


def save_model(run_dir: Path, method: Any, dtype: str = "float32", about: dict[str, Any] | None = None) -> None:
    """Store the run's model as model.safetensors with its floating-point weights in `dtype` (float32 or float16),
    `about` (how that was chosen) in the file's metadata (entry `clbench`, JSON); an older model.pt of the folder
    is dropped. The same weights give the same bytes."""
    import torch
    from safetensors.torch import save

    if dtype not in DTYPES:
        raise ValueError(f"a model is stored as {' or '.join(DTYPES)}, not {dtype!r}")
    cast = getattr(torch, dtype)
    state = {k: v.detach().to("cpu", cast if v.is_floating_point() else v.dtype, copy=True).contiguous()
             for k, v in model_state(method).items()}
    # one metadata entry: safetensors writes several in hash-map order, so two saves of one model would differ
    metadata = {"clbench": json.dumps({"dtype": dtype, **(about or {})}, sort_keys=True)}
    runfiles.write_bytes(run_dir, MODEL, save(state, metadata=metadata))
    if (Path(run_dir) / LEGACY_MODEL).exists():
        runfiles.forget(run_dir, LEGACY_MODEL)


def read_state(run_dir: Path) -> dict[str, Any]:
    """The stored weights (as stored: float16 ones stay float16), verified; Damaged when the file is not whole."""
    name = model_name(run_dir)
    if name is None:
        require_model(run_dir)
    if name == LEGACY_MODEL:
        return runfiles.load_torch(run_dir, LEGACY_MODEL)
    from safetensors import SafetensorError
    from safetensors.torch import load

    data = runfiles.read_bytes(run_dir, MODEL)
    try:
        return load(data)
    except (SafetensorError, ValueError) as exc:
        raise Damaged(run_dir, MODEL, f"not a safetensors file: {manifest.short(exc)}") from None


def stored_dtype(run_dir: Path) -> str:
    """How the run's model file holds its weights: float32 or float16 (an older model.pt: float32)."""
    if model_name(run_dir) != MODEL:
        return "float32"
    from safetensors import safe_open

    with safe_open(Path(run_dir) / MODEL, framework="pt") as handle:
        return str(json.loads((handle.metadata() or {}).get("clbench", "{}")).get("dtype", "float32"))


def load_model(run_dir: Path, method: Any) -> None:
    """Load the run's saved weights into a freshly built method (encoder + head must match; float16 weights are
    widened to the method's float32); Damaged when the file does not verify."""
    state = read_state(run_dir)
    missing, unexpected = method.load_state_dict(state, strict=False)
    expected = model_state(method)
    missing = [k for k in missing if k in expected]
    if missing or unexpected:
        raise BenchError(f"saved model {Path(run_dir) / (model_name(run_dir) or MODEL)} does not fit the rebuilt "
                         f"encoder (missing {missing[:3]}, unexpected {unexpected[:3]}); was the encoder changed "
                         "since the run?")


def why_gone(run_dir: Path) -> str:
    """Why the run has no model file: not kept by the keep policy, or moved aside as damaged ("" when unknown)."""
    try:
        record = manifest.load(Path(run_dir)) or {}
    except Damaged:
        return ""
    dropped = record.get("dropped") or {}
    moved = record.get("moved") or {}
    return str(dropped.get(MODEL) or moved.get(MODEL) or moved.get(LEGACY_MODEL) or "")


def require_model(run_dir: Path) -> None:
    """A one-line BenchError when a run has no model file: never saved, not kept, or moved aside as damaged."""
    run_dir = Path(run_dir)
    if has_model(run_dir):
        return
    why = why_gone(run_dir)
    if why:
        raise BenchError(f"{run_dir.name} has no model: {why}; {RETRAIN}{KEEP if why.startswith('not kept') else ''}")
    raise BenchError(f"{run_dir.name} has no saved model ({MODEL}); it ran with --keep-models none (or "
                     f"--no-save-model); {RETRAIN}{KEEP}")


def drop_model(run_dir: Path, why: str) -> int:
    """Delete the run's model file on purpose (the keep policy), noting `why` in its manifest so that commands
    that need the model can say so; returns the bytes freed."""
    freed = 0
    for name in (MODEL, LEGACY_MODEL):
        path = Path(run_dir) / name
        if path.is_file():
            freed += path.stat().st_size
            runfiles.forget(run_dir, name)
    manifest.note_dropped(Path(run_dir), MODEL, why)
    return freed
