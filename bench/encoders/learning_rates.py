"""Learning rates measured to train an encoder without collapse (the model predicting one class whatever the
input), named by the collapse warnings and by `clbench list encoders --verbose`. Only measured figures: an
encoder that is not listed gets no suggestion. Imports nothing heavy (the command line reads it)."""

from __future__ import annotations

# encoder -> (learning rate as typed after --lr, where it was measured)
WORKING_LR: dict[str, tuple[str, str]] = {
    "tiny-bert": ("2e-3", "CPU, 2026-11-27: the demo set at its card's settings, seeds 1-2 not collapsed (39% and "
                          "52% test accuracy; 1e-3: 32%, 19%; 5e-4: seed 1 collapsed); the tiny fixture at 6 "
                          "epochs not collapsed (tests/test_degenerate_runs.py), where the default 5e-5 collapses"),
    "minilm": ("5e-5", "the default: the demo set reaches 76-82% test accuracy (README)"),
}


def lr_hint(encoder: str) -> str:
    """What a collapse warning suggests for runs of `encoder`: a measured learning rate when there is one."""
    if encoder in WORKING_LR:
        lr, _ = WORKING_LR[encoder]
        return f"try --lr {lr} (trained {encoder} without collapse; `clbench list encoders --verbose`) or more --epochs"
    return "try another --lr or more --epochs"
