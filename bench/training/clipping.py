"""Gradient clipping in a constant number of dispatcher calls (issue 43): torch's `clip_grad_norm_` takes a norm and
a multiply per tensor on a CPU (its foreach path is for accelerators only), about two hundred calls a step for
bert-base; this takes one `_foreach_norm`, one stacked norm and one `_foreach_mul_` on every device, with the
same arithmetic, so the result is bitwise the same (tests/test_clipping.py)."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def clip_gradients_(parameters: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale the gradients of `parameters` in place so that their joint L2 norm is at most `max_norm`, exactly as
    `torch.nn.utils.clip_grad_norm_` does (coefficient max_norm / (norm + 1e-6), clamped at 1, always applied, so
    no host read); returns the total norm before clipping, on the gradients' device."""
    params = list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    if len({(g.device, g.dtype) for g in grads}) > 1:  # mixed devices or dtypes: torch's own grouping
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(float(max_norm) / (total + 1e-6), max=1.0))
    return total
