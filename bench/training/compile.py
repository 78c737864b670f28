"""`torch.compile` for training: the repeated block of a transformer (its layer) is compiled once and reused by
every layer ("regional" compilation), with dynamic batch and sequence dimensions, so compile time is that of
one layer and a new batch shape does not trigger a new compilation."""

from __future__ import annotations

from torch import nn


def repeated_blocks(model: nn.Module) -> list[nn.Module]:
    """The modules of the largest ModuleList (by parameters) whose members share one class and parameter shapes,
    e.g. the 12 `BertLayer`s of bert-base; empty when the model has no such list (TextCNN)."""
    best: list[nn.Module] = []
    best_size = 0
    for module in model.modules():
        if (isinstance(module, nn.ModuleList) and len(module) >= 2 and len({type(m) for m in module}) == 1
                and len({tuple(p.shape for p in m.parameters()) for m in module}) == 1):
            size = sum(p.numel() for p in module.parameters())
            if size > best_size:
                best, best_size = list(module), size
    return best


def compile_encoder(encoder: nn.Module, backend: str = "inductor") -> str:
    """Compile `encoder` in place (parameter names and checkpoints are unchanged) and say how: each repeated
    block with dynamic shapes where there is one, else the whole encoder. `backend="eager"` traces without
    generating code (tests of recompilation)."""
    blocks = repeated_blocks(encoder)
    if blocks:
        for block in blocks:
            block.compile(dynamic=True, backend=backend)
        return f"regional: {len(blocks)} x {type(blocks[0]).__name__}"
    encoder.compile(dynamic=True, backend=backend)
    return f"whole: {type(encoder).__name__}"
