"""methods/losses.py against brute-force references written row by row (or term by term) in float64.

The references loop over anchors and pairs in plain Python on float64 scalars, so they share no masking or
broadcasting trick with the vectorised code; they stay on torch so their gradients can be compared too.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from bench.methods.losses import (
    PowerNorm,
    alignment_loss,
    clld_loss,
    cline_bce_loss,
    cline_token_loss,
    cline_contrastive_loss,
    ema_update,
    lcl_loss,
    replaced_token_loss,
    supcon_loss,
)

D64 = torch.float64
TOL = dict(rtol=1e-5, atol=1e-5)
SEEDS = [0, 1, 2, 3, 4]
R, DIM, N = 8, 5, 3

# Label vectors exercising the edge cases named in the spec.
LABEL_CASES = {
    "mixed": [0, 1, 2, 0, 1, 2, 0, 1],
    "one_class": [1] * R,
    "singleton": [0, 0, 0, 1, 1, 1, 2, 0],  # class 2 has one member: that anchor has no positive
    "two_singletons": [0, 1, 2, 2, 2, 2, 2, 2],
}


# ---------------------------------------------------------------------------------------------------------------
# Brute-force references (float64, loops over rows)
# ---------------------------------------------------------------------------------------------------------------

def _dot(a, b):
    return sum(a[k] * b[k] for k in range(a.shape[0]))


def _norm(a):
    return torch.sqrt(_dot(a, a))


def _logsumexp(values):
    top = max(v.item() for v in values)
    return top + torch.log(sum(torch.exp(v - top) for v in values))


def clld_ref(h, labels, ldm):
    h, ldm = h.to(D64), ldm.to(D64)
    labels = [int(y) for y in labels]
    rows = len(labels)
    total = torch.zeros((), dtype=D64)
    for i in range(rows):
        logits = []
        for j in range(rows):
            if i == j:
                logits.append(torch.tensor(-1e6, dtype=D64))  # diagonal set after the product
                continue
            cos = _dot(h[i], h[j]) / torch.clamp(_norm(h[i]) * _norm(h[j]), min=1e-8)
            logits.append(0.5 * (cos + 1) * ldm[labels[i], labels[j]])
        log_partition = _logsumexp(logits)
        positives = [j for j in range(rows) if j != i and labels[j] == labels[i]]
        for j in positives:
            z = 1.0 / len(positives)
            total = total + z * (math.log(z) - (logits[j] - log_partition))
    return total / rows


def supcon_ref(h, labels, tau):
    h = h.to(D64)
    labels = [int(y) for y in labels]
    rows = len(labels)
    hn = [h[i] / _norm(h[i]) for i in range(rows)]
    per_anchor = []
    for i in range(rows):
        positives = [p for p in range(rows) if p != i and labels[p] == labels[i]]
        if not positives:
            continue
        log_denominator = _logsumexp([_dot(hn[i], hn[k]) / tau for k in range(rows) if k != i])
        per_anchor.append(-sum(_dot(hn[i], hn[p]) / tau - log_denominator for p in positives) / len(positives))
    if not per_anchor:
        return torch.zeros((), dtype=D64)
    return sum(per_anchor) / len(per_anchor)


def lcl_ref(h, labels, weights, tau):
    h, weights = h.to(D64), weights.to(D64)
    labels = [int(y) for y in labels]
    rows = len(labels)
    hn = [h[i] / _norm(h[i]) for i in range(rows)]
    per_anchor = []
    for i in range(rows):
        positives = [p for p in range(rows) if p != i and labels[p] == labels[i]]
        if not positives:
            continue
        denominator = sum(weights[i, labels[k]] * torch.exp(_dot(hn[i], hn[k]) / tau)
                          for k in range(rows) if k != i)
        terms = [weights[i, labels[i]] * (_dot(hn[i], hn[p]) / tau - torch.log(denominator)) for p in positives]
        per_anchor.append(-sum(terms) / len(positives))
    if not per_anchor:
        return torch.zeros((), dtype=D64)
    return sum(per_anchor) / len(per_anchor)


def cline_ref(h_ori, h_syn, h_ant):
    total = 0.0
    for i in range(h_ori.shape[0]):
        f_syn = math.exp(sum(float(a) * float(b) for a, b in zip(h_ori[i], h_syn[i])))
        f_ant = math.exp(sum(float(a) * float(b) for a, b in zip(h_ori[i], h_ant[i])))
        total += -math.log(f_syn / (f_syn + f_ant))
    return total / h_ori.shape[0]


def cline_bce_ref(h_ori, h_x, target):
    total = 0.0
    for i in range(h_ori.shape[0]):
        m = sum(float(a) * float(b) for a, b in zip(h_ori[i], h_x[i])) / h_ori.shape[1]
        sigma = 1.0 / (1.0 + math.exp(-m))
        t = float(target[i])
        total += -(t * math.log(sigma) + (1 - t) * math.log(1 - sigma))
    return total / h_ori.shape[0]


def rtd_ref(logits, replaced, mask):
    total, count = 0.0, 0
    for b in range(logits.shape[0]):
        for t in range(logits.shape[1]):
            if mask[b, t] == 1:
                sigma = 1.0 / (1.0 + math.exp(-float(logits[b, t])))
                y = float(replaced[b, t])
                total += -(y * math.log(sigma) + (1 - y) * math.log(1 - sigma))
                count += 1
    return total / count if count else 0.0


def alignment_ref(p, z):
    total = 0.0
    for i in range(p.shape[0]):
        dot = sum(float(a) * float(b) for a, b in zip(p[i], z[i]))
        norm_p = math.sqrt(sum(float(a) ** 2 for a in p[i]))
        norm_z = math.sqrt(sum(float(b) ** 2 for b in z[i]))
        total += 2 - 2 * dot / (norm_p * norm_z)
    return total / p.shape[0]


# ---------------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------------

def batch(seed, labels=None, rows=R, dim=DIM, classes=N):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(rows, dim, generator=gen)
    if labels is None:
        labels = torch.randint(0, classes, (rows,), generator=gen)
    else:
        labels = torch.tensor(labels, dtype=torch.long)
    ldm = 5.0 + 5.0 * torch.rand(classes, classes, generator=gen)
    logits = torch.randn(rows, classes, generator=gen)
    return h, labels, ldm, logits


def close(a, b, **tol):
    return torch.allclose(torch.as_tensor(a, dtype=D64), torch.as_tensor(b, dtype=D64), **(tol or TOL))


def grads_of(fn, *tensors):
    leaves = [t.detach().clone().requires_grad_(True) for t in tensors]
    loss = fn(*leaves)
    loss.backward()
    return loss, [leaf.grad for leaf in leaves]


def no_positive_check(loss_fn, h):
    h = h.detach().clone().requires_grad_(True)
    loss = loss_fn(h)
    assert loss.dim() == 0 and loss.dtype == torch.float32
    assert loss.item() == 0.0 and torch.isfinite(loss)
    assert loss.requires_grad
    loss.backward()
    assert h.grad is not None and torch.isfinite(h.grad).all() and (h.grad == 0).all()


# ---------------------------------------------------------------------------------------------------------------
# clld_loss
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", [None, *LABEL_CASES])
def test_clld_matches_brute_force(seed, case):
    h, labels, ldm, _ = batch(seed, LABEL_CASES.get(case))
    assert close(clld_loss(h, labels, ldm), clld_ref(h, labels, ldm))


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_clld_gradients_match_brute_force_for_h_and_ldm(seed):
    h, labels, ldm, _ = batch(seed, LABEL_CASES["singleton"])
    hv, lv = h.clone().requires_grad_(True), ldm.clone().requires_grad_(True)
    clld_loss(hv, labels, lv).backward()
    hr, lr = h.to(D64).requires_grad_(True), ldm.to(D64).requires_grad_(True)
    clld_ref(hr, labels, lr).backward()
    assert close(hv.grad, hr.grad) and close(lv.grad, lr.grad)
    assert lv.grad.abs().sum() > 0


def test_clld_singleton_row_contributes_zero_but_counts_in_the_mean():
    h, _, ldm, _ = batch(7)
    labels = torch.tensor(LABEL_CASES["singleton"])
    full = clld_loss(h, labels, ldm)
    reference = clld_ref(h, labels, ldm)  # row 6 adds no term but the sum is still divided by R = 8
    assert torch.isfinite(full) and close(full, reference)
    assert not close(full * R / (R - 1), reference)  # dividing by the 7 rows with a positive is wrong


def test_clld_duplicate_rows():
    h, labels, ldm, _ = batch(3, LABEL_CASES["mixed"])
    h[3] = h[0]  # same class, identical vectors
    h[4] = h[0]  # other class, identical vectors
    loss, (grad,) = grads_of(lambda x: clld_loss(x, labels, ldm), h)
    assert close(loss, clld_ref(h, labels, ldm))
    assert torch.isfinite(grad).all()


def test_clld_no_positive_in_batch_is_exactly_zero():
    h, _, ldm, _ = batch(2, rows=3)
    no_positive_check(lambda x: clld_loss(x, torch.tensor([0, 1, 2]), ldm), h)


def test_clld_zero_vector_row_is_safe():
    h, labels, ldm, _ = batch(4, LABEL_CASES["mixed"])
    h[2] = 0.0
    loss, (grad,) = grads_of(lambda x: clld_loss(x, labels, ldm), h)
    assert close(loss, clld_ref(h, labels, ldm))
    assert torch.isfinite(grad).all()


@pytest.mark.parametrize("tau", [1.0, 5.0])
def test_clld_uniform_ldm_is_the_cl_ablation(tau):
    h, labels, _, _ = batch(5, LABEL_CASES["mixed"])
    uniform = torch.full((N, N), tau)
    assert close(clld_loss(h, labels, uniform), clld_ref(h, labels, uniform))


def test_clld_uniform_value_matters():
    # The uniform value acts as an inverse temperature: the loss is not invariant to it.
    h, labels, _, _ = batch(5, LABEL_CASES["mixed"])
    values = [clld_loss(h, labels, torch.full((N, N), tau)).item() for tau in (1.0, 5.0, 10.0)]
    assert len({round(v, 6) for v in values}) == 3


def test_clld_diagonal_masked_after_the_product():
    h, labels, ldm, _ = batch(6, LABEL_CASES["mixed"])
    ldm.fill_diagonal_(0.0)  # a zero self-distance: masking before the product would unmask the diagonal
    loss = clld_loss(h, labels, ldm)
    assert close(loss, clld_ref(h, labels, ldm))

    # The wrong order (mask, then multiply) gives a different value, so the check above can fail.
    hn = torch.nn.functional.normalize(h, dim=1)
    sim = 0.5 * (hn @ hn.T + 1)
    eye = torch.eye(R, dtype=torch.bool)
    wrong_logits = sim.masked_fill(eye, -1e6) * ldm[labels][:, labels]
    t = ((labels[:, None] == labels[None, :]) & ~eye).float()
    z = t / t.sum(1, keepdim=True)
    log_q = torch.log_softmax(wrong_logits, dim=1)
    wrong = torch.where(t > 0, z * (torch.log(z.clamp_min(1e-30)) - log_q), torch.zeros_like(z)).sum() / R
    assert abs(wrong.item() - loss.item()) > 1e-3


def test_clld_boosting_a_confusing_pair_strengthens_its_gradient():
    # Classes 0 and 1 sit close together, class 2 far away. Doubling the (0, 1) distance sharpens the
    # cross-class negatives between 0 and 1, so the push on those rows (and the loss) must grow.
    h = torch.tensor([
        [1.0, 0.10, 0.00], [1.0, -0.10, 0.05],   # class 0
        [1.0, 0.30, 0.10], [0.9, 0.35, -0.10],   # class 1
        [-1.0, 0.00, 1.00], [-1.0, 0.10, 0.90],  # class 2
    ])
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    base = torch.full((3, 3), 5.0)
    boosted = base.clone()
    boosted[0, 1] = boosted[1, 0] = 10.0

    loss_base, (g_base,) = grads_of(lambda x: clld_loss(x, labels, base), h)
    loss_boost, (g_boost,) = grads_of(lambda x: clld_loss(x, labels, boosted), h)
    assert loss_boost > loss_base
    for rows in ([0, 1], [2, 3]):
        assert g_boost[rows].norm() > 1.5 * g_base[rows].norm()
    assert close(loss_boost, clld_ref(h, labels, boosted))


# ---------------------------------------------------------------------------------------------------------------
# supcon_loss
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", [None, *LABEL_CASES])
@pytest.mark.parametrize("tau", [0.3, 1.0])
def test_supcon_matches_brute_force(seed, case, tau):
    h, labels, _, _ = batch(seed, LABEL_CASES.get(case))
    assert close(supcon_loss(h, labels, tau=tau), supcon_ref(h, labels, tau))


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_supcon_gradient_matches_brute_force(seed):
    h, _, _, _ = batch(seed)
    labels = torch.tensor(LABEL_CASES["two_singletons"])
    _, (grad,) = grads_of(lambda x: supcon_loss(x, labels), h)
    ref = h.to(D64).requires_grad_(True)
    supcon_ref(ref, labels, 0.3).backward()
    assert close(grad, ref.grad)


def test_supcon_singleton_anchor_is_excluded_not_averaged_as_zero():
    h, _, _, _ = batch(8)
    labels = torch.tensor(LABEL_CASES["two_singletons"])  # anchors 0 and 1 have no positive
    loss = supcon_loss(h, labels)
    assert close(loss, supcon_ref(h, labels, 0.3))
    # Averaging the six valid anchors over all eight rows would give 6/8 of the value.
    assert not close(loss * 6 / 8, supcon_ref(h, labels, 0.3))


def test_supcon_duplicate_rows_have_finite_gradient():
    h, _, _, _ = batch(9)
    labels = torch.tensor(LABEL_CASES["mixed"])
    h[3] = h[0]
    h[1] = h[0]
    loss, (grad,) = grads_of(lambda x: supcon_loss(x, labels), h)
    assert close(loss, supcon_ref(h, labels, 0.3))
    assert torch.isfinite(grad).all()
    # Every row identical: all similarities equal, the loss is log(R - 1) exactly.
    same = h[:1].repeat(R, 1)
    loss, (grad,) = grads_of(lambda x: supcon_loss(x, labels), same)
    assert close(loss, math.log(R - 1)) and torch.isfinite(grad).all()


def test_supcon_no_positive_and_single_row():
    h, _, _, _ = batch(2, rows=3)
    no_positive_check(lambda x: supcon_loss(x, torch.tensor([0, 1, 2])), h)
    no_positive_check(lambda x: supcon_loss(x, torch.tensor([1])), h[:1])


# ---------------------------------------------------------------------------------------------------------------
# lcl_loss
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", [None, *LABEL_CASES])
def test_lcl_matches_brute_force(seed, case):
    h, labels, _, logits = batch(seed, LABEL_CASES.get(case))
    weights = torch.softmax(logits, dim=1)
    assert close(lcl_loss(h, labels, weights), lcl_ref(h, labels, weights, 0.3))
    assert close(lcl_loss(h, labels, weights, tau=1.0), lcl_ref(h, labels, weights, 1.0))


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_lcl_gradient_reaches_weights_and_matches_brute_force(seed):
    h, _, _, logits = batch(seed)
    labels = torch.tensor(LABEL_CASES["singleton"])
    hv, lv = h.clone().requires_grad_(True), logits.clone().requires_grad_(True)
    lcl_loss(hv, labels, torch.softmax(lv, dim=1)).backward()
    hr, lr = h.to(D64).requires_grad_(True), logits.to(D64).requires_grad_(True)
    lcl_ref(hr, labels, torch.softmax(lr, dim=1), 0.3).backward()
    assert lv.grad is not None and lv.grad.abs().sum() > 1e-4
    assert close(hv.grad, hr.grad) and close(lv.grad, lr.grad)


def test_lcl_with_uniform_weights_is_a_rescaled_supcon():
    # w = 1/N everywhere: L_i = (SCL_i - log N) / N, so the means agree the same way.
    h, labels, _, _ = batch(11, LABEL_CASES["singleton"])
    uniform = torch.full((R, N), 1.0 / N)
    expected = (supcon_loss(h, labels) - math.log(N)) / N
    assert close(lcl_loss(h, labels, uniform), expected)


def test_lcl_duplicate_rows_and_no_positive():
    h, _, _, logits = batch(12)
    labels = torch.tensor(LABEL_CASES["mixed"])
    h[3] = h[0]
    h[5] = h[0]
    weights = torch.softmax(logits, dim=1)
    loss, (grad, gw) = grads_of(lambda x, w: lcl_loss(x, labels, w), h, weights)
    assert close(loss, lcl_ref(h, labels, weights, 0.3))
    assert torch.isfinite(grad).all() and torch.isfinite(gw).all()
    no_positive_check(lambda x: lcl_loss(x, torch.tensor([0, 1, 2]), weights[:3]), h[:3])


def test_lcl_weight_underflow_is_finite():
    h, labels, _, _ = batch(13, LABEL_CASES["mixed"])
    logits = torch.tensor([[0.0, -200.0, -200.0]]).repeat(R, 1).requires_grad_(True)  # softmax -> exact 0s
    hv = h.clone().requires_grad_(True)
    loss = lcl_loss(hv, labels, torch.softmax(logits, dim=1))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(hv.grad).all() and torch.isfinite(logits.grad).all()


# ---------------------------------------------------------------------------------------------------------------
# Reduced precision for the three batch losses
# ---------------------------------------------------------------------------------------------------------------

def _batch_losses():
    h, labels, ldm, logits = batch(21, LABEL_CASES["singleton"])
    # Weights rounded to bf16 values, which fp16 also holds exactly: casting them to x's dtype loses nothing.
    weights = torch.softmax(logits, dim=1).bfloat16().float()
    return h, {
        "clld": lambda x: clld_loss(x, labels, ldm),
        "supcon": lambda x: supcon_loss(x, labels),
        "lcl": lambda x: lcl_loss(x, labels, weights.to(x.dtype)),
    }


@pytest.mark.parametrize("name", ["clld", "supcon", "lcl"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision_inputs(name, dtype):
    h, losses = _batch_losses()
    fn = losses[name]
    reference = fn(h)
    low = h.to(dtype).requires_grad_(True)
    loss = fn(low)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert close(loss, reference, rtol=1e-2, atol=1e-2)
    loss.backward()
    assert torch.isfinite(low.grad).all()
    # Large activations: h h^T in fp16 would overflow (300^2 * 5 > 65504); computed in float32 it does not,
    # and all three losses only see directions, so the value matches the unscaled fp32 one.
    big = (300.0 * h).to(dtype)
    assert close(fn(big), reference, rtol=1e-2, atol=1e-2)


def test_half_inputs_are_computed_in_float32():
    h, losses = _batch_losses()
    for fn in losses.values():
        low = h.to(torch.float16)
        assert torch.equal(fn(low), fn(low.float()))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_losses_stay_in_float32_under_autocast(dtype):
    # Under autocast a cast to float32 alone is undone by the next matrix product; the losses turn it off.
    h, losses = _batch_losses()
    g = torch.Generator().manual_seed(5)
    other, third = torch.randn(h.shape, generator=g), torch.randn(h.shape, generator=g)
    losses = {**losses, "cline": lambda x: cline_contrastive_loss(x, other, third),
              "cline-bce": lambda x: cline_bce_loss(x, other, 1.0), "align": lambda x: alignment_loss(x, other)}
    for name, fn in losses.items():
        reference = fn(h)
        with torch.autocast("cpu", dtype=dtype):
            loss = fn(h)
        assert loss.dtype == torch.float32, name
        assert close(loss, reference, rtol=1e-6, atol=1e-6), name


# ---------------------------------------------------------------------------------------------------------------
# CLINE losses
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_cline_contrastive_matches_equation(seed):
    gen = torch.Generator().manual_seed(seed)
    h_ori, h_syn, h_ant = (torch.randn(6, DIM, generator=gen) for _ in range(3))
    assert close(cline_contrastive_loss(h_ori, h_syn, h_ant), cline_ref(h_ori, h_syn, h_ant))


def test_cline_contrastive_uses_raw_vectors_and_is_stable():
    h_ori = torch.tensor([[1.0, 0.0]])
    # Scaling a view changes the dot product, so the loss (raw, not cosine) must change.
    a = cline_contrastive_loss(h_ori, torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]]))
    b = cline_contrastive_loss(h_ori, torch.tensor([[3.0, 0.0]]), torch.tensor([[0.0, 1.0]]))
    assert close(a, math.log(1 + math.exp(-1.0))) and close(b, math.log(1 + math.exp(-3.0)))
    # exp(1000) overflows; softplus does not: -log(e^0 / (e^0 + e^1000)) = 1000 + log(1 + e^-1000).
    h_ori = torch.tensor([[10.0, 0.0]], dtype=torch.float16, requires_grad=True)
    loss = cline_contrastive_loss(h_ori, torch.tensor([[0.0, 1.0]]), torch.tensor([[100.0, 0.0]]))
    loss.backward()
    assert close(loss, 1000.0) and torch.isfinite(h_ori.grad).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_cline_bce_matches_formula(seed):
    gen = torch.Generator().manual_seed(seed)
    h_ori, h_x = torch.randn(6, DIM, generator=gen), torch.randn(6, DIM, generator=gen)
    target = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    assert close(cline_bce_loss(h_ori, h_x, target), cline_bce_ref(h_ori, h_x, target))
    # A scalar target broadcasts over the batch.
    assert close(cline_bce_loss(h_ori, h_x, torch.tensor(1.0)), cline_bce_ref(h_ori, h_x, torch.ones(6)))


def test_cline_bce_half_inputs():
    gen = torch.Generator().manual_seed(3)
    h_ori, h_x = 50 * torch.randn(6, DIM, generator=gen), 50 * torch.randn(6, DIM, generator=gen)
    target = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    for dtype in (torch.float16, torch.bfloat16):
        loss = cline_bce_loss(h_ori.to(dtype), h_x.to(dtype), target)
        assert loss.dtype == torch.float32 and torch.isfinite(loss)
        assert close(loss, cline_bce_loss(h_ori, h_x, target), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("seed", SEEDS)
def test_replaced_token_loss_matches_masked_mean(seed):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 7, generator=gen)
    replaced = torch.randint(0, 2, (3, 7), generator=gen)
    mask = torch.randint(0, 2, (3, 7), generator=gen)
    mask[0, 0] = 1
    assert close(replaced_token_loss(logits, replaced, mask), rtd_ref(logits, replaced, mask))


def test_replaced_token_loss_ignores_masked_positions_and_empty_mask():
    logits = torch.tensor([[2.0, -1.0, 500.0]])
    replaced = torch.tensor([[1, 0, 0]])
    mask = torch.tensor([[1, 1, 0]])  # the wildly wrong third logit is padding
    assert close(replaced_token_loss(logits, replaced, mask), rtd_ref(logits, replaced, mask))
    leaf = logits.clone().requires_grad_(True)
    loss = replaced_token_loss(leaf, replaced, torch.zeros_like(mask))
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert (leaf.grad == 0).all()
    half = replaced_token_loss(logits.to(torch.bfloat16), replaced, mask)
    assert half.dtype == torch.float32 and torch.isfinite(half)


# ---------------------------------------------------------------------------------------------------------------
# alignment_loss
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", SEEDS)
def test_alignment_matches_formula_and_stops_gradient(seed):
    gen = torch.Generator().manual_seed(seed)
    p = torch.randn(6, DIM, generator=gen).requires_grad_(True)
    z = torch.randn(6, DIM, generator=gen).requires_grad_(True)
    loss = alignment_loss(p, z)
    assert close(loss, alignment_ref(p.detach(), z.detach()))
    loss.backward()
    assert z.grad is None
    assert p.grad is not None and p.grad.abs().sum() > 0


def test_alignment_extremes_and_half():
    z = torch.randn(4, DIM, generator=torch.Generator().manual_seed(1))
    assert close(alignment_loss(3 * z, z), 0.0)
    assert close(alignment_loss(-z, z), 4.0)
    loss = alignment_loss((300 * z).half(), z.bfloat16())
    assert loss.dtype == torch.float32 and close(loss, 0.0, atol=1e-2, rtol=0)


# ---------------------------------------------------------------------------------------------------------------
# PowerNorm
# ---------------------------------------------------------------------------------------------------------------

def _x(seed, rows=6, features=4):
    return torch.randn(rows, features, generator=torch.Generator().manual_seed(seed)) * 2 + 0.5


def test_powernorm_initial_state_and_shape():
    norm = PowerNorm(4)
    assert torch.equal(norm.running_psi2, torch.ones(4))
    assert norm.steps.dtype == torch.long and norm.steps.item() == 0
    assert torch.equal(norm.weight.data, torch.ones(4)) and torch.equal(norm.bias.data, torch.zeros(4))
    assert {n for n, _ in norm.named_buffers()} == {"running_psi2", "steps", "ema_gz"}
    assert torch.equal(norm.ema_gz, torch.zeros(4))  # the released backward's accumulated statistic
    assert {n for n, _ in PowerNorm(4, variant="paper").named_buffers()} == {"running_psi2", "steps"}
    assert norm(_x(0)).shape == (6, 4)


def test_powernorm_warmup_running_statistic_and_eval():
    eps = 1e-5
    norm = PowerNorm(4, alpha=0.9, warmup_steps=2, eps=eps, variant="paper").train()
    x1, x2, x3, x4 = _x(1), _x(2), _x(3), _x(4)
    psi1, psi2, psi3 = (x1 ** 2).mean(0), (x2 ** 2).mean(0), (x3 ** 2).mean(0)

    # Steps 0 and 1 (< warmup_steps): the batch statistic.
    assert close(norm(x1), x1 / torch.sqrt(psi1 + eps))
    r1 = 0.9 * torch.ones(4) + 0.1 * psi1
    assert close(norm.running_psi2, r1) and norm.steps.item() == 1
    assert close(norm(x2), x2 / torch.sqrt(psi2 + eps))
    r2 = 0.9 * r1 + 0.1 * psi2
    assert close(norm.running_psi2, r2) and norm.steps.item() == 2

    # Step 2: the running statistic as it stood before this step, then the update.
    out3 = norm(x3)
    assert close(out3, x3 / torch.sqrt(r2 + eps))
    assert not close(out3, x3 / torch.sqrt(psi3 + eps))
    r3 = 0.9 * r2 + 0.1 * psi3
    assert close(norm.running_psi2, r3) and norm.steps.item() == 3

    # Eval: the running statistic, nothing updated.
    norm.eval()
    assert close(norm(x4), x4 / torch.sqrt(r3 + eps))
    assert close(norm.running_psi2, r3) and norm.steps.item() == 3


def test_powernorm_eval_before_training_uses_initial_running_statistic():
    norm = PowerNorm(4, eps=1e-5, variant="paper").eval()
    x = _x(5)
    assert close(norm(x), x / math.sqrt(1 + 1e-5))
    released = PowerNorm(4, eps=1e-5).eval()  # rows scaled to unit RMS first
    rms = torch.sqrt(x.pow(2).mean(1, keepdim=True) + 1e-5)
    assert close(released(x), x / rms / math.sqrt(1 + 1e-5))


def test_powernorm_no_centring_and_affine():
    norm = PowerNorm(3, variant="paper").train()
    x = torch.full((5, 3), 3.0)
    out = norm(x)
    assert (out > 0).all()  # centring (BatchNorm) would give 0 here
    assert close(out, torch.full((5, 3), 3.0 / math.sqrt(9 + 1e-5)))
    with torch.no_grad():
        norm.weight.fill_(2.0)
        norm.bias.fill_(-1.0)
    assert close(norm(x), 2.0 * 3.0 / math.sqrt(9 + 1e-5) - 1.0)


def released_powernorm_ref(batches, alpha, warmup, eps=1e-5):
    """The released MaskPowerNorm (zxlzr/DCL models/mlp_head.py, one group) in float64, step by step: rows scaled
    by their RMS, z by the batch statistic up to step `warmup` (1-based) and by the running one after; the
    running statistic a cumulative mean before step `warmup`, then the moving average at every step."""
    running, outputs = torch.ones(batches[0].shape[1], dtype=D64), []
    for t, x in enumerate(batches, start=1):
        xs = x.to(D64) / torch.sqrt(x.to(D64).pow(2).mean(1, keepdim=True) + 1e-5)
        var = xs.pow(2).mean(0)
        outputs.append(xs / torch.sqrt((var if t <= warmup else running) + eps))
        if t < warmup:
            running = running * (t - 1) / t + var / t
        running = alpha * running + (1 - alpha) * var
    return outputs, running


@pytest.mark.parametrize("warmup", [0, 1, 3, 10])
def test_powernorm_released_follows_the_released_code(warmup):
    batches = [_x(10 + i) * (1 + i) for i in range(6)]  # growing inputs: the statistics differ step by step
    norm = PowerNorm(4, alpha=0.9, warmup_steps=warmup).double().train()
    outputs, running = released_powernorm_ref(batches, 0.9, warmup)
    for x, expected in zip(batches, outputs):
        assert close(norm(x.double()), expected)
    assert close(norm.running_psi2, running) and norm.steps.item() == 6
    norm.eval()
    x = _x(20)
    xs = x.double() / torch.sqrt(x.double().pow(2).mean(1, keepdim=True) + 1e-5)
    assert close(norm(x.double()), xs / torch.sqrt(running + 1e-5))
    paper = PowerNorm(4, alpha=0.9, warmup_steps=warmup, variant="paper").double().train()
    assert not all(close(paper(x.double()), y) for x, y in zip(batches, outputs))  # the forms differ


def test_powernorm_gradients_and_half_input():
    norm = PowerNorm(4).train()
    x = _x(6).requires_grad_(True)
    norm(x).pow(2).sum().backward()
    assert torch.isfinite(x.grad).all() and norm.weight.grad is not None and norm.bias.grad is not None
    out = norm(_x(7).to(torch.bfloat16))
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()
    assert norm.running_psi2.dtype == torch.float32
    with pytest.raises(ValueError):
        norm(torch.zeros(2, 5))


# ---------------------------------------------------------------------------------------------------------------
# ema_update
# ---------------------------------------------------------------------------------------------------------------

def _net(seed):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(4, 8), PowerNorm(8, warmup_steps=1), nn.ReLU(), nn.Linear(8, 3),
                        nn.BatchNorm1d(3))
    with torch.no_grad():  # norm layers start at gamma = 1, beta = 0 in every copy: make them differ
        for param in net.parameters():
            param.add_(0.1 * torch.randn_like(param))
    return net


def test_ema_update_exact():
    target, online = _net(0), _net(1)
    online.train()
    online(torch.randn(5, 4))  # move the online buffers away from their initial values
    old = copy.deepcopy(target)
    online_before = copy.deepcopy(online)
    ema_update(target, online, 0.9)
    for (name, new), (_, before), (_, theta) in zip(target.named_parameters(), old.named_parameters(),
                                                     online.named_parameters()):
        assert torch.allclose(new, 0.9 * before + 0.1 * theta, rtol=0, atol=1e-7), name
        assert not torch.allclose(new, before), name
    for (name, buffer), (_, source) in zip(target.named_buffers(), online.named_buffers()):
        assert torch.equal(buffer, source), name
    for a, b in zip(online.state_dict().values(), online_before.state_dict().values()):
        assert torch.equal(a, b)  # the online network is untouched
    assert all(p.grad is None for p in target.parameters())


def test_ema_update_momentum_extremes_and_structure_check():
    target, online = _net(0), _net(1)
    old = copy.deepcopy(target)
    ema_update(target, online, 1.0)
    assert all(torch.equal(a, b) for a, b in zip(target.parameters(), old.parameters()))
    ema_update(target, online, 0.0)
    assert all(torch.equal(a, b) for a, b in zip(target.parameters(), online.parameters()))
    with pytest.raises(ValueError):
        ema_update(target, nn.Sequential(nn.Linear(4, 8)), 0.5)


def cline_token_ref(logits, labels):
    """Mean over labelled tokens (label != -100) of -log softmax(logits)[label], token by token in float64."""
    terms = []
    for b in range(labels.shape[0]):
        for t in range(labels.shape[1]):
            if labels[b, t] != -100:
                row = logits[b, t].to(D64)
                terms.append(torch.logsumexp(row, 0) - row[labels[b, t]])
    return torch.stack(terms).mean() if terms else torch.tensor(0.0, dtype=D64)


@pytest.mark.parametrize("seed", range(3))
def test_cline_token_loss_scores_labelled_tokens_only(seed):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(4, 7, 3, generator=gen, dtype=D64) * 3
    labels = torch.randint(0, 3, (4, 7), generator=gen)
    labels[torch.rand(4, 7, generator=gen) < 0.5] = -100
    assert close(cline_token_loss(logits, labels), cline_token_ref(logits, labels))
    scored_everywhere = torch.where(labels == -100, torch.zeros_like(labels), labels)  # unlabelled read as kept
    assert not close(cline_token_loss(logits, labels), cline_token_loss(logits, scored_everywhere))


def test_cline_token_loss_without_labelled_tokens_is_zero_with_a_gradient():
    logits = torch.randn(2, 3, 3, requires_grad=True)
    loss = cline_token_loss(logits, torch.full((2, 3), -100))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(logits.grad, torch.zeros_like(logits))
    with pytest.raises(ValueError, match=r"\(B, T, C\)"):
        cline_token_loss(torch.randn(2, 3), torch.zeros(2, 3, dtype=torch.long))
