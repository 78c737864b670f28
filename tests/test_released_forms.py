"""`variant: released` of supcon and dcl against float64 references written from the released code at its pinned
commit (docs/METHODS.md, sections 5 and 8), sharing no code with `methods/`.

- supcon: HobbitLong/SupContrast `losses.py`, `SupConLoss.forward`, at 66a8fe5 (the fix 72fd989, "fix: nan loss
  values"): an anchor without a positive divides a zero sum by 1 (its term is 0) and still counts in the mean
  over all anchors. So with a singleton class in the batch the released term is |A| / R times the mean over the
  anchors A that have a positive (clbench's `paper` form), R the number of anchors.
- dcl: zxlzr/DCL `models/mlp_head.py`, `PowerFunction.backward`, at 8fc953e: the approximate gradient
  g' = g - (1 - alpha_bkw) ema_gz z, dL/dx = g' / sqrt(psi2_b + eps) with this pass's batch statistic, and
  `ema_gz.add_(mean_rows(g' z))`: a running sum with no decay factor of its own.
"""

from __future__ import annotations

import math

import pytest
import torch

from bench.methods.losses import PowerNorm, supcon_loss

D64 = torch.float64
TOL = dict(rtol=1e-5, atol=1e-5)
SUPCONTRAST_BASE_TEMPERATURE = 0.07


def close(a, b, **tol):
    a, b = torch.as_tensor(a).to(D64), torch.as_tensor(b).to(D64)
    return torch.allclose(a, b, **(tol or TOL))


# ---------------------------------------------------------------------------------------------------------------
# supcon, variant released
# ---------------------------------------------------------------------------------------------------------------

def supcon_released_ref(h, labels, tau, base_temperature=SUPCONTRAST_BASE_TEMPERATURE):
    """SupConLoss.forward at SupContrast 66a8fe5 (one view, contrast_mode 'all'), anchor by anchor in float64:
    features L2-normalised by the caller's model (here: normalised first), logits s_ik = h_i . h_k / tau over
    k != i, mean_log_prob_pos_i = sum_{p in P(i)} log_prob_ip / max(|P(i)|, 1) (0 for an anchor without a
    positive), loss = -(tau / base_temperature) * mean over ALL anchors."""
    h = h.to(D64)
    labels = [int(y) for y in labels]
    rows = len(labels)
    hn = [h[i] / torch.sqrt(sum(h[i][k] * h[i][k] for k in range(h.shape[1]))) for i in range(rows)]

    def dot(a, b):
        return sum(a[k] * b[k] for k in range(a.shape[0]))

    total = torch.zeros((), dtype=D64)
    for i in range(rows):
        logits = {k: dot(hn[i], hn[k]) / tau for k in range(rows) if k != i}
        log_partition = torch.log(sum(torch.exp(v) for v in logits.values()))
        positives = [p for p in range(rows) if p != i and labels[p] == labels[i]]
        mean_log_prob_pos = sum((logits[p] - log_partition for p in positives), torch.zeros((), dtype=D64))
        total = total + mean_log_prob_pos / max(len(positives), 1)
    return -(tau / base_temperature) * total / rows


def _h(seed, rows=8, dim=5):
    return torch.randn(rows, dim, generator=torch.Generator().manual_seed(seed))


SINGLETON_BATCHES = {
    "one_singleton": [0, 0, 0, 1, 1, 1, 2, 0],  # class 2 once: |A| / R = 7/8
    "two_singletons": [0, 1, 2, 2, 2, 2, 2, 2],  # classes 0 and 1 once: 6/8
}


@pytest.mark.parametrize("case", SINGLETON_BATCHES)
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tau", [0.3, 0.07])
def test_supcon_released_matches_the_fixed_supcontrast_loss(case, seed, tau):
    h, labels = _h(seed), torch.tensor(SINGLETON_BATCHES[case])
    scale = tau / SUPCONTRAST_BASE_TEMPERATURE
    released = supcon_loss(h, labels, tau=tau, mean_over="all") * scale
    expected = supcon_released_ref(h, labels, tau)
    assert close(released, expected)
    # The mean over the anchors with a positive only (version 2 of `released`, and `paper`) is R/|A| times larger.
    positive_only = supcon_loss(h, labels, tau=tau, mean_over="positive") * scale
    assert not close(positive_only, expected)
    with_positive = sum(1 for y in labels.tolist() if labels.tolist().count(y) > 1)
    assert close(released, positive_only * with_positive / len(labels))


def test_supcon_released_gradient_matches_the_reference():
    h, labels = _h(3), torch.tensor(SINGLETON_BATCHES["two_singletons"])
    x = h.clone().requires_grad_(True)
    supcon_loss(x, labels, tau=0.3, mean_over="all").backward()
    ref = h.to(D64).requires_grad_(True)
    (supcon_released_ref(ref, labels, 0.3) / (0.3 / SUPCONTRAST_BASE_TEMPERATURE)).backward()
    assert close(x.grad, ref.grad)
    assert (x.grad[:2].abs().sum(1) > 0).all()  # the singletons add 0, yet are still negatives of the others


def test_supcon_released_without_any_positive_is_zero_and_equal_without_singletons():
    h = _h(4, rows=3).requires_grad_(True)
    loss = supcon_loss(h, torch.tensor([0, 1, 2]), mean_over="all")
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(h.grad, torch.zeros_like(h))
    h = _h(5)
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])  # every anchor has a positive: the two means agree
    assert close(supcon_loss(h, labels, mean_over="all"), supcon_loss(h, labels))
    with pytest.raises(ValueError):
        supcon_loss(h, labels, mean_over="anchors")


# ---------------------------------------------------------------------------------------------------------------
# dcl: PowerNorm, variant released, backward
# ---------------------------------------------------------------------------------------------------------------

def released_powernorm_step_ref(x, upstream, weight, bias, running, ema_gz, step, alpha, warmup, alpha_bkw=0.9,
                                eps=1e-5):
    """One training pass of MaskPowerNorm (group_num 1) at zxlzr/DCL 8fc953e in float64: the output, dL/dx for
    the upstream gradient `upstream` (dL/dy), dL/dweight, and the running statistic and ema_gz after the pass.

    The gradient is built without a custom autograd function: z carries the value x_s / sqrt(scale + eps) and the
    slope 1 / sqrt(psi2_b + eps), and a zero-valued term sum(x_s * k) - sum(x_s * k).detach() adds the constant
    k = -(1 - alpha_bkw) ema_gz z / sqrt(psi2_b + eps); autograd carries both through the row scaling."""
    x = x.to(D64).detach().requires_grad_(True)
    w = weight.to(D64).detach().requires_grad_(True)
    xs = x / torch.sqrt(x.pow(2).mean(1, keepdim=True) + 1e-5)  # GroupScaling1D, one group
    var = xs.detach().pow(2).mean(0)  # from mask_x: no gradient
    scale = var if step <= warmup else running
    z_value = xs.detach() / torch.sqrt(scale + eps)
    z = z_value + (xs - xs.detach()) / torch.sqrt(var + eps)
    y = w * z + bias.to(D64)
    g = upstream.to(D64) * w.detach()  # dL/dz
    approx = g - (1 - alpha_bkw) * ema_gz * z_value
    k = -(1 - alpha_bkw) * ema_gz * z_value / torch.sqrt(var + eps)
    surrogate = (y * upstream.to(D64)).sum() + (xs * k).sum() - (xs * k).sum().detach()
    surrogate.backward()
    new_ema_gz = ema_gz + (approx * z_value).mean(0)  # ema_gz.add_: no decay factor
    if step < warmup:
        running = running * (step - 1) / step + var / step
    running = alpha * running + (1 - alpha) * var
    return y.detach(), x.grad, w.grad, running, new_ema_gz


@pytest.mark.parametrize("warmup", [0, 2, 10])
def test_powernorm_released_backward_follows_the_released_code(warmup):
    gen = torch.Generator().manual_seed(0)
    features, steps = 4, 6
    norm = PowerNorm(features, alpha=0.9, warmup_steps=warmup).double().train()
    with torch.no_grad():
        norm.weight.copy_(1 + 0.3 * torch.randn(features, generator=gen))
        norm.bias.copy_(0.2 * torch.randn(features, generator=gen))
    running = torch.ones(features, dtype=D64)
    ema_gz = torch.zeros(features, dtype=D64)
    for step in range(1, steps + 1):
        x = (torch.randn(6, features, generator=gen) * (1 + step) + 0.3).to(D64)  # growing: statistics differ
        upstream = torch.randn(6, features, generator=gen).to(D64)
        y_ref, gx_ref, gw_ref, running, ema_gz = released_powernorm_step_ref(
            x, upstream, norm.weight.detach(), norm.bias.detach(), running, ema_gz, step, 0.9, warmup)
        xin = x.clone().requires_grad_(True)
        norm.zero_grad()
        out = norm(xin)
        out.backward(upstream)
        assert close(out, y_ref), step
        assert close(xin.grad, gx_ref), step
        assert close(norm.weight.grad, gw_ref), step
        assert close(norm.running_psi2, running) and close(norm.ema_gz, ema_gz), step
    assert ema_gz.abs().min() > 1e-3  # the correction term was exercised


def test_powernorm_released_ema_gz_is_a_running_sum_not_a_moving_average():
    """With one fixed batch and upstream gradient, ema_gz grows as e_t = e_{t-1} + mean_rows((g - 0.1 e_{t-1} z) z):
    an undecayed accumulation (ema_gz.add_), not e_t = 0.9 e_{t-1} + 0.1 mean_rows(g z)."""
    norm = PowerNorm(3, warmup_steps=100).train()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(5, 3, generator=gen)
    upstream = torch.randn(5, 3, generator=gen)
    xs = x.double() / torch.sqrt(x.double().pow(2).mean(1, keepdim=True) + 1e-5)
    z = xs / torch.sqrt(xs.pow(2).mean(0) + 1e-5)  # warm-up: the batch statistic
    g = upstream.double()
    expected = torch.zeros(3, dtype=D64)
    moving_average = torch.zeros(3, dtype=D64)
    for _ in range(3):
        norm(x.clone().requires_grad_(True)).backward(upstream)  # in dcl the input is a Linear layer's output
        expected = expected + ((g - 0.1 * expected * z) * z).mean(0)
        moving_average = 0.9 * moving_average + 0.1 * (g * z).mean(0)
        assert close(norm.ema_gz, expected)
    assert not close(norm.ema_gz, moving_average)
    # Evaluation and no-gradient passes never touch it; a forward without a backward does not either.
    before = norm.ema_gz.clone()
    norm.eval()
    norm(x)
    norm.train()
    with torch.no_grad():
        norm(x.clone().requires_grad_(True))
    norm(x.clone().requires_grad_(True))
    assert torch.equal(norm.ema_gz, before)


def test_powernorm_released_gradient_differs_from_autograd_and_paper_keeps_autograd():
    """After the warm-up the released forward divides by the running statistic, yet its backward scales by the
    batch statistic and subtracts the ema_gz term; `paper` is plain autograd of its own forward."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(6, 4, generator=gen) * 3
    upstream = torch.randn(6, 4, generator=gen)

    released = PowerNorm(4, warmup_steps=0).train()
    with torch.no_grad():
        released.running_psi2.fill_(4.0)
        released.ema_gz.fill_(0.5)
    xin = x.clone().requires_grad_(True)
    released(xin).backward(upstream)
    leaf = x.clone().requires_grad_(True)
    xs_leaf = leaf / torch.sqrt(leaf.pow(2).mean(1, keepdim=True) + 1e-5)
    (xs_leaf / math.sqrt(4.0 + 1e-5) * upstream).sum().backward()
    exact = leaf.grad
    assert not close(xin.grad, exact, rtol=1e-2, atol=1e-3)

    paper = PowerNorm(4, warmup_steps=5, variant="paper").train()
    xin = x.clone().requires_grad_(True)
    paper(xin).backward(upstream)
    leaf = x.clone().requires_grad_(True)
    (leaf / torch.sqrt(leaf.pow(2).mean(0) + 1e-5) * upstream).sum().backward()  # through psi2_b
    assert close(xin.grad, leaf.grad)
