"""bench.training.clipping.clip_gradients_: bitwise the same as torch's clip_grad_norm_, in a constant number of
dispatcher calls (issue 43: torch's CPU path takes a norm and a multiply per tensor)."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from bench.training.clipping import clip_gradients_

BERT_BASE_LIKE = [(64, 64)] * 100 + [(64,)] * 100 + [(3,)]  # 201 tensors, as bert-base has


def parameters(shapes, scale, seed=0, dtype=torch.float32, skip=()):
    """Parameters with random gradients of norm about `scale` x sqrt(size); those at `skip` have no gradient."""
    generator = torch.Generator().manual_seed(seed)
    params = []
    for i, shape in enumerate(shapes):
        p = torch.nn.Parameter(torch.randn(shape, generator=generator, dtype=dtype))
        if i not in skip:
            p.grad = torch.randn(shape, generator=generator, dtype=dtype) * scale
        params.append(p)
    return params


def twins(params):
    """An independent copy of `params` with their gradients."""
    copies = []
    for p in params:
        q = torch.nn.Parameter(p.detach().clone())
        q.grad = None if p.grad is None else p.grad.clone()
        copies.append(q)
    return copies


@pytest.mark.parametrize("scale", [10.0, 1.0, 1e-3, 0.0])  # clipped hard, clipped, untouched (coefficient 1), zero
@pytest.mark.parametrize("max_norm", [1.0, 0.5])
def test_bitwise_equal_to_clip_grad_norm(scale, max_norm):
    ours = parameters(BERT_BASE_LIKE, scale, skip=(3, 150))  # parameters without a gradient are left out
    theirs = twins(ours)
    total = clip_gradients_(ours, max_norm)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    assert torch.equal(total, expected)
    for a, b in zip(ours, theirs):
        assert (a.grad is None and b.grad is None) or torch.equal(a.grad, b.grad)
    if scale >= 1.0:  # the clipped gradients have the asked norm (within float rounding)
        norms = [torch.linalg.vector_norm(p.grad) for p in ours if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack(norms))
        assert norm.item() == pytest.approx(max_norm, rel=1e-5)


def test_no_gradients_and_mixed_dtypes():
    assert clip_gradients_(parameters([(2, 2)], 1.0, skip=(0,)), 1.0).item() == 0.0
    mixed = parameters([(4,)], 5.0) + parameters([(3,)], 5.0, seed=1, dtype=torch.float64)
    theirs = twins(mixed)
    assert torch.equal(clip_gradients_(mixed, 1.0), torch.nn.utils.clip_grad_norm_(theirs, 1.0))
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(mixed, theirs))


def top_level_aten_calls(fn) -> int:
    """Dispatcher calls `fn()` makes from Python (ATen ops not called by another ATen op)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sum(1 for e in prof.events() if e.name.startswith("aten::") and e.cpu_parent is None)


def test_a_constant_number_of_dispatcher_calls():
    """201 tensors: torch's CPU path makes one call or more per tensor (210 measured); this makes 8 whatever the
    count (the norms, the stack, the total norm, the coefficient's add, div and clamp, the multiply)."""
    ours = parameters(BERT_BASE_LIKE, 1.0)
    theirs = twins(ours)
    calls = top_level_aten_calls(lambda: clip_gradients_(ours, 1.0))
    assert calls <= 10
    assert top_level_aten_calls(lambda: torch.nn.utils.clip_grad_norm_(theirs, 1.0)) > len(BERT_BASE_LIKE)
    few = parameters(BERT_BASE_LIKE[:5], 1.0)
    assert top_level_aten_calls(lambda: clip_gradients_(few, 1.0)) == calls  # independent of the tensor count
