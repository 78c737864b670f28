"""Loss functions and small modules shared by the contrastive methods (see docs/METHODS.md).

Everything here is pure and vectorised over the batch: no Python loop runs over rows. Every loss runs with
autocast off and casts its inputs to float32 first (under autocast a cast alone is undone: the next matrix
product runs in fp16/bf16 again), so fp16/bf16 activations neither overflow nor lose the softmax, and every
loss returns a float32 scalar. A loss that happens to be zero (for example no anchor has a positive) still hangs
off its inputs' graph, so `loss.backward()` always works and yields zero gradients instead of raising.
"""

from __future__ import annotations

import functools
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "info_nce",
    "nt_xent",
    "clld_loss",
    "supcon_loss",
    "lcl_loss",
    "cline_contrastive_loss",
    "cline_bce_loss",
    "replaced_token_loss",
    "cline_token_loss",
    "alignment_loss",
    "PowerNorm",
    "ema_update",
]

# Finite stand-in for -inf on masked logits: exp() of it underflows to exactly 0 in float32, yet a row that
# is entirely masked (a batch of one) still gives a finite logsumexp and finite gradients.
_MASKED = -1e9
# The label of a token a token-level loss does not score (PyTorch's cross_entropy ignore_index default).
IGNORE_TOKEN = -100
# The diagonal value of SimLDM prescribed by CLLD Eq. 5.
_CLLD_DIAGONAL = -1e6
# Norm-product floor of CLLD Eq. 4.
_NORM_FLOOR = 1e-8


def _in_float32(loss: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """`loss` run with autocast off on its inputs' device, so its products and softmax stay in float32."""
    @functools.wraps(loss)
    def wrapper(*args, **kwargs):
        device = next((a.device.type for a in (*args, *kwargs.values()) if isinstance(a, Tensor)), "cpu")
        with torch.autocast(device_type=device, enabled=False):
            return loss(*args, **kwargs)
    return wrapper


def _check_rows(h: Tensor, labels: Tensor, name: str = "h") -> None:
    if h.dim() != 2:
        raise ValueError(f"{name} must be (rows, features), got shape {tuple(h.shape)}")
    if labels.dim() != 1 or labels.shape[0] != h.shape[0]:
        raise ValueError(f"labels must be ({h.shape[0]},), got shape {tuple(labels.shape)}")


def _positive_mask(labels: Tensor) -> tuple[Tensor, Tensor]:
    """(same label and not self, self) boolean (R, R) masks."""
    rows = labels.shape[0]
    eye = torch.eye(rows, dtype=torch.bool, device=labels.device)
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    return same & ~eye, eye


def _mean_over_anchors(per_anchor: Tensor, has_positive: Tensor) -> Tensor:
    """Mean of `per_anchor` over anchors with a positive; 0 (still on the graph) when there is none."""
    kept = torch.where(has_positive, per_anchor, torch.zeros_like(per_anchor))
    return kept.sum() / has_positive.sum().clamp_min(1).to(per_anchor.dtype)


@_in_float32
def info_nce(anchors: Tensor, positives: Tensor, tau: float = 0.05) -> Tensor:
    """SimCSE's objective (princeton-nlp/SimCSE `cl_forward`): cross-entropy over cos(anchor_i, positive_j) / tau
    with row i's own positive as its target, so the other rows' positives are its negatives (one direction:
    anchors are never candidates). Labels play no part; a batch of one gives 0."""
    if anchors.dim() != 2 or anchors.shape != positives.shape:
        raise ValueError(f"anchors and positives must be (rows, features) alike, got {tuple(anchors.shape)} and "
                         f"{tuple(positives.shape)}")
    anchors, positives = anchors.float(), positives.float()
    similarity = F.cosine_similarity(anchors.unsqueeze(1), positives.unsqueeze(0), dim=-1) / tau
    return F.cross_entropy(similarity, torch.arange(anchors.shape[0], device=anchors.device))


@_in_float32
def nt_xent(first: Tensor, second: Tensor, tau: float = 0.04) -> Tensor:
    """Mirror-BERT's objective (cambridgeltl/mirror-bert: pytorch-metric-learning's NTXentLoss over both views,
    labelled by the text's position): each of the 2M vectors is an anchor whose positive is its other view and
    whose negatives are the other 2M - 2 vectors, on cosine similarity / tau; the mean over the 2M anchors.
    Labels play no part (a text repeated in the batch is a negative); a batch of one gives 0."""
    if first.dim() != 2 or first.shape != second.shape:
        raise ValueError(f"the two views must be (rows, features) alike, got {tuple(first.shape)} and "
                         f"{tuple(second.shape)}")
    rows = first.shape[0]
    z = F.normalize(torch.cat([first, second]).float(), dim=-1, eps=_NORM_FLOOR)
    self_pairs = torch.eye(2 * rows, dtype=torch.bool, device=z.device)
    similarity = (z @ z.T / tau).masked_fill(self_pairs, float("-inf"))
    partner = torch.arange(2 * rows, device=z.device).roll(rows)
    return F.cross_entropy(similarity, partner)


@_in_float32
def clld_loss(h: Tensor, labels: Tensor, ldm: Tensor) -> Tensor:
    """CLLD's label-distance contrastive term L_s (docs/METHODS.md "clld-static / clld-adaptive", steps 3-6).

    SimM = (cos + 1) / 2 with the norm product floored at 1e-8 (Eq. 4); t_ij = [i != j][y_i = y_j] (Eq. 6);
    LDMM = ldm[y][:, y] (Eq. 7); SimLDM = SimM * LDMM (Eq. 8), and only then the diagonal is set to -1e6
    (Eq. 5); q = row-softmax(SimLDM) (Eq. 12); z = t / rowsum(t) (Eq. 13);
    L_s = (1/R) sum_i KL(z_i || q_i) with 0 log 0 = 0 (Eq. 11). Rows without a positive contribute 0 but
    still count in R. `h` is (R, d), both dropout views already stacked (R = 2M); `ldm` is (N, N) and
    receives a gradient when it requires one. The `cl` ablation is this call with a uniform `ldm`.
    """
    _check_rows(h, labels)
    if ldm.dim() != 2 or ldm.shape[0] != ldm.shape[1]:
        raise ValueError(f"ldm must be square (N, N), got shape {tuple(ldm.shape)}")
    h = h.float()
    ldm = ldm.float().to(h.device)
    labels = labels.long().to(h.device)
    rows = h.shape[0]

    norms = torch.linalg.vector_norm(h, dim=1)
    cos = (h @ h.T) / (norms.unsqueeze(1) * norms.unsqueeze(0)).clamp_min(_NORM_FLOOR)
    sim = 0.5 * (cos + 1.0)
    ldmm = ldm[labels][:, labels]
    positive, eye = _positive_mask(labels)
    logits = (sim * ldmm).masked_fill(eye, _CLLD_DIAGONAL)  # mask AFTER the product (Eq. 5)
    log_q = F.log_softmax(logits, dim=1)

    t = positive.float()
    z = t / t.sum(dim=1, keepdim=True).clamp_min(1.0)
    log_z = torch.log(torch.where(positive, z, torch.ones_like(z)))  # 0 where z = 0, never -inf
    terms = torch.where(positive, z * (log_z - log_q), torch.zeros_like(log_q))
    return terms.sum() / rows


@_in_float32
def supcon_loss(h: Tensor, labels: Tensor, tau: float = 0.3, mean_over: str = "positive") -> Tensor:
    """Supervised contrastive loss SCL of Gunel et al. / Khosla et al. (docs/METHODS.md "supcon").

    With h L2-normalised and s = h h^T / tau: SCL_i = -(1/|P(i)|) sum_{p in P(i)} (s_ip - logsumexp_{k != i}
    s_ik), P(i) = the other rows carrying y_i. `mean_over`:
    - "positive": the mean of SCL_i over the anchors A with |P(i)| > 0 (anchors without a positive are left
      out, not counted as 0), or 0 when no anchor has a positive;
    - "all": the mean over all R anchors, an anchor without a positive contributing 0 (SupContrast's
      SupConLoss since commit 72fd989, "fix: nan loss values"): |A| / R times the "positive" value.
    """
    if mean_over not in ("positive", "all"):
        raise ValueError(f"mean_over is positive or all, got {mean_over!r}")
    _check_rows(h, labels)
    h = F.normalize(h.float(), dim=1)
    labels = labels.long().to(h.device)
    s = (h @ h.T) / tau
    positive, eye = _positive_mask(labels)
    log_denominator = torch.logsumexp(s.masked_fill(eye, _MASKED), dim=1, keepdim=True)
    log_p = s - log_denominator
    count = positive.sum(dim=1)
    mean_log_p = torch.where(positive, log_p, torch.zeros_like(log_p)).sum(dim=1) / count.clamp_min(1)
    if mean_over == "all":  # mean_log_p is exactly 0 for an anchor without a positive
        return -mean_log_p.sum() / mean_log_p.shape[0]
    return _mean_over_anchors(-mean_log_p, count > 0)


@_in_float32
def lcl_loss(h: Tensor, labels: Tensor, weights: Tensor, tau: float = 0.3) -> Tensor:
    """Label-aware contrastive loss of Suresh & Ong (docs/METHODS.md "lcl").

    With h L2-normalised, s = h h^T / tau and W_ik = weights[i, y_k] (weights: (R, N), the weighting
    network's softmax, not detached):
    L_i = -(1/|P(i)|) sum_{p in P(i)} w_i[y_i] (s_ip - log sum_{k != i} W_ik exp(s_ik)),
    the positive's weight outside the log (the authors' README correction of the paper's Eq. 3).
    Mean over anchors with a positive; 0 when none has one. Gradient reaches `h` and `weights`.
    """
    _check_rows(h, labels)
    if weights.dim() != 2 or weights.shape[0] != h.shape[0]:
        raise ValueError(f"weights must be ({h.shape[0]}, N), got shape {tuple(weights.shape)}")
    h = F.normalize(h.float(), dim=1)
    weights = weights.float().to(h.device)
    labels = labels.long().to(h.device)
    s = (h @ h.T) / tau
    positive, eye = _positive_mask(labels)

    w_ik = weights[:, labels]  # (R, R): W_ik = weights[i, labels[k]], one gather
    log_w = torch.log(w_ik.clamp_min(torch.finfo(torch.float32).tiny))
    log_denominator = torch.logsumexp((s + log_w).masked_fill(eye, _MASKED), dim=1)
    w_own = weights.gather(1, labels.unsqueeze(1)).squeeze(1)  # w_i[y_i]

    count = positive.sum(dim=1)
    mean_s_pos = torch.where(positive, s, torch.zeros_like(s)).sum(dim=1) / count.clamp_min(1)
    per_anchor = -w_own * (mean_s_pos - log_denominator)
    return _mean_over_anchors(per_anchor, count > 0)


@_in_float32
def cline_contrastive_loss(h_ori: Tensor, h_syn: Tensor, h_ant: Tensor) -> Tensor:
    """CLINE's sentence-level contrastive loss L_cts (docs/METHODS.md "cline", Eq. 5-6).

    mean_i -log(f(ori, syn) / (f(ori, syn) + f(ori, ant))) with f(a, b) = exp(a . b) on the raw, unnormalised
    vectors; computed as softplus(ori . ant - ori . syn), which never overflows.
    """
    h_ori, h_syn, h_ant = h_ori.float(), h_syn.float(), h_ant.float()
    if not (h_ori.shape == h_syn.shape == h_ant.shape) or h_ori.dim() != 2:
        raise ValueError("h_ori, h_syn and h_ant must share one (B, d) shape")
    positive = (h_ori * h_syn).sum(dim=1)
    negative = (h_ori * h_ant).sum(dim=1)
    return F.softplus(negative - positive).mean()


@_in_float32
def cline_bce_loss(h_ori: Tensor, h_x: Tensor, target: Tensor | float) -> Tensor:
    """CLINE's released-code sentence loss (docs/METHODS.md "cline", option `sentence_loss: bce`).

    BCE(sigmoid(mean over features of h_ori * h_x), target), target 1 for a synonym view and 0 for an antonym
    view (a (B,) tensor or a scalar broadcast over the batch); computed with logits for stability.
    """
    h_ori, h_x = h_ori.float(), h_x.float()
    if h_ori.shape != h_x.shape or h_ori.dim() != 2:
        raise ValueError("h_ori and h_x must share one (B, d) shape")
    logits = (h_ori * h_x).mean(dim=1)
    target = torch.as_tensor(target, dtype=torch.float32, device=logits.device).expand_as(logits)
    return F.binary_cross_entropy_with_logits(logits, target)


@_in_float32
def replaced_token_loss(token_logits: Tensor, replaced: Tensor, mask: Tensor) -> Tensor:
    """CLINE's replaced-token detection loss L_rtd (docs/METHODS.md "cline", Eq. 2-4).

    Binary cross-entropy with logits of token_logits (B, T) against replaced (B, T) in {0, 1}, averaged over
    the positions where mask (B, T) is 1; 0 for an empty mask. `cline` passes the attention mask: every real
    token counts, special tokens as never replaced (Eq. 4 sums over all positions, as ELECTRA's does).
    """
    if not (token_logits.shape == replaced.shape == mask.shape):
        raise ValueError("token_logits, replaced and mask must share one (B, T) shape")
    logits = token_logits.float()
    per_token = F.binary_cross_entropy_with_logits(logits, replaced.float(), reduction="none")
    keep = mask.to(device=logits.device) > 0
    kept = torch.where(keep, per_token, torch.zeros_like(per_token))
    return kept.sum() / keep.sum().clamp_min(1).to(kept.dtype)


@_in_float32
def cline_token_loss(token_logits: Tensor, labels: Tensor) -> Tensor:
    """CLINE's released-code token objective (docs/METHODS.md "cline", `variant: released`).

    Cross-entropy of token_logits (B, T, C) against labels (B, T), averaged over the labelled tokens; label -100
    marks a token that is not scored (not a candidate word, special, padding); 0 when no token is labelled.
    """
    if token_logits.dim() != 3 or token_logits.shape[:2] != labels.shape:
        raise ValueError("token_logits must be (B, T, C) and labels (B, T)")
    logits = token_logits.float().reshape(-1, token_logits.shape[-1])
    flat = labels.reshape(-1).to(logits.device)
    total = F.cross_entropy(logits, flat, ignore_index=IGNORE_TOKEN, reduction="sum")  # no host sync
    return total / (flat != IGNORE_TOKEN).sum().clamp_min(1).to(total.dtype)


@_in_float32
def alignment_loss(p: Tensor, z: Tensor) -> Tensor:
    """DCL / BYOL alignment term (docs/METHODS.md "dcl"): mean_i (2 - 2 cos(p_i, z_i)) with z detached.

    `p` is the online predictor's output, `z` the target projection (stop-gradient). One direction only:
    the caller adds the symmetric term with the views swapped.
    """
    if p.shape != z.shape or p.dim() != 2:
        raise ValueError("p and z must share one (B, d) shape")
    p = F.normalize(p.float(), dim=1)
    z = F.normalize(z.detach().float(), dim=1)
    return (2.0 - 2.0 * (p * z).sum(dim=1)).mean()


class _ReleasedPowerFunction(torch.autograd.Function):
    """z = x / sqrt(scale + eps), with the approximate backward of zxlzr/DCL `PowerFunction.backward` (commit
    8fc953e, Shen et al.'s PowerNorm): with g = dL/dz, g' = g - (1 - alpha_bkw) ema_gz z, then
    ema_gz += mean_rows(g' z) (in place, no decay factor of its own) and dL/dx = g' / sqrt(psi2_b + eps), psi2_b
    the batch statistic of this pass even where the forward divided by the running one. `scale`, `psi2_b` and
    `ema_gz` get no gradient. `ema_gz` is read when the backward runs, not when the forward ran. The backward runs
    when `x` requires a gradient (in dcl always: it is a Linear layer's output)."""

    @staticmethod
    def forward(ctx, x: Tensor, scale: Tensor, batch_psi2: Tensor, ema_gz: Tensor, alpha_backward: float,
                eps: float) -> Tensor:
        z = x / torch.sqrt(scale + eps)
        ctx.save_for_backward(z, batch_psi2)
        ctx.ema_gz = ema_gz  # a buffer mutated by the backward: held by reference, not saved (version checks)
        ctx.alpha_backward = alpha_backward
        ctx.eps = eps
        return z

    @staticmethod
    def backward(ctx, grad_z: Tensor):
        z, batch_psi2 = ctx.saved_tensors
        ema_gz = ctx.ema_gz
        approx = grad_z - (1.0 - ctx.alpha_backward) * ema_gz.to(grad_z.dtype) * z
        ema_gz.add_((approx * z).mean(dim=0).to(ema_gz.dtype))
        return approx / torch.sqrt(batch_psi2 + ctx.eps), None, None, None, None, None


class PowerNorm(nn.Module):
    """Power normalisation of Shen et al. 2020 for (B, F) inputs, in two variants (docs/METHODS.md "dcl").

    Both: no centring; x_hat = x / sqrt(psi2 + eps) per feature, then gamma * x_hat + beta, where in training the
    batch quadratic mean psi2_b = mean_batch(x^2) is used for the first `warmup_steps` forwards and the running
    statistic (as it stood before this step's update) afterwards; eval always uses the running statistic and
    updates nothing. Computed in float32.

    - `released` (zxlzr/DCL `MaskPowerNorm` with one group, commit 8fc953e): each row is first divided by its root
      mean square over the features (GroupScaling1D, eps 1e-5); during warm-up (steps 1..warmup_steps - 1) the
      running statistic first becomes the cumulative mean of the batch statistics, then every step takes the
      moving average running <- alpha running + (1 - alpha) psi2_b. The backward is the released approximation
      (`_ReleasedPowerFunction`, alpha_backward 0.9) with its accumulated statistic in the buffer `ema_gz`.
    - `paper`: no row scaling; only the moving average; plain autograd (through psi2_b during the warm-up).
    """

    def __init__(self, num_features: int, alpha: float = 0.9, warmup_steps: int = 1000, eps: float = 1e-5,
                 variant: str = "released", alpha_backward: float = 0.9):
        super().__init__()
        if variant not in ("released", "paper"):
            raise ValueError(f"PowerNorm variant is released or paper, got {variant!r}")
        self.num_features = num_features
        self.alpha = alpha
        self.alpha_backward = alpha_backward  # MaskPowerNorm's alpha_bkw (0.9; the released MLPHead keeps it)
        self.warmup_steps = warmup_steps
        self.eps = eps
        self.variant = variant
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_psi2", torch.ones(num_features))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        if variant == "released":  # the backward's accumulated statistic (MaskPowerNorm's ema_gz), from 0
            self.register_buffer("ema_gz", torch.zeros(num_features))

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 2 or x.shape[1] != self.num_features:
            raise ValueError(f"PowerNorm expects (B, {self.num_features}), got shape {tuple(x.shape)}")
        dtype = x.dtype
        x32 = x.float()
        if self.variant == "released":  # GroupScaling1D, one group: each row by its RMS over the features
            x32 = x32 / torch.sqrt(x32.pow(2).mean(dim=1, keepdim=True) + 1e-5)
        running = self.running_psi2.float()
        if self.training:
            psi2 = x32.pow(2).mean(dim=0)
            step = self.steps + 1  # this forward's number, 1-based (tensors: no host sync on an accelerator)
            scale = torch.where(step <= self.warmup_steps, psi2, running.clone())
            if self.variant == "released":  # the released approximate backward; no gradient through psi2
                x_hat = _ReleasedPowerFunction.apply(x32, scale.detach(), psi2.detach(), self.ema_gz,
                                                     self.alpha_backward, self.eps)
            else:
                x_hat = x32 / torch.sqrt(scale + self.eps)
            with torch.no_grad():
                statistic = running
                if self.variant == "released":
                    cumulative = running * (step - 1) / step + psi2.detach() / step
                    statistic = torch.where(step < self.warmup_steps, cumulative, running)
                self.running_psi2.copy_(self.alpha * statistic + (1.0 - self.alpha) * psi2.detach())
                self.steps.add_(1)
        else:
            x_hat = x32 / torch.sqrt(running + self.eps)
        out = self.weight.float() * x_hat + self.bias.float()
        return out.to(dtype)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, alpha={self.alpha}, warmup_steps={self.warmup_steps}, eps={self.eps}, "
                f"variant={self.variant}"
                + (f", alpha_backward={self.alpha_backward}" if self.variant == "released" else ""))


@torch.no_grad()
def ema_update(target: nn.Module, online: nn.Module, momentum: float) -> None:
    """DCL's momentum (EMA) target update (docs/METHODS.md "dcl"), in place and without autograd.

    Every parameter xi <- m xi + (1 - m) theta; every buffer (running statistics, step counters) is copied
    from the online network. The two modules must have the same structure (checked by name and shape).
    """
    target_params = dict(target.named_parameters())
    online_params = dict(online.named_parameters())
    target_buffers = dict(target.named_buffers())
    online_buffers = dict(online.named_buffers())
    if target_params.keys() != online_params.keys() or target_buffers.keys() != online_buffers.keys():
        raise ValueError("ema_update: target and online modules differ in structure")
    for name, xi in target_params.items():
        theta = online_params[name]
        if xi.shape != theta.shape:
            raise ValueError(f"ema_update: parameter {name} has shape {tuple(xi.shape)} vs {tuple(theta.shape)}")
    xis = list(target_params.values())
    thetas = [online_params[name].detach().to(xi.dtype) for name, xi in target_params.items()]
    torch._foreach_mul_(xis, momentum)  # multi-tensor kernels: one launch for all parameters
    torch._foreach_add_(xis, thetas, alpha=1.0 - momentum)
    for name, buffer in target_buffers.items():
        buffer.copy_(online_buffers[name])
