"""Method wiring: every method's training loss, term by term, and its gradient with respect to every trainable
parameter, on a fake encoder with known outputs, against a composition written here in float64 from
docs/METHODS.md.

`tests/test_losses.py` checks each loss function on its own; this file checks how each method assembles them:
which rows (views) go into which term, which network computes what, the weights of the terms, and the
clld-adaptive schedule. The per-anchor contrastive losses of the references are the brute-force loops of
`tests/test_losses.py`; everything around them (the encoder, heads, projections, views, CE, CLINE's terms,
PowerNorm, DCL's alignment, the label-distance matrices) is recomputed below example by example, from the token
tables of this file, sharing no code with `methods/`.

The fake encoder: a token-embedding table (`emb`), each row's "dropout" a fixed feature mask chosen by the row's
position in the encoder call (`KEEP[r]`: row r of every call, training mode only), a masked mean over the real
tokens and `tanh(Linear)`. So a batch stacked on itself (dropout twins) gives two known, different views of each
example: rows i and M + i of one call differ exactly by KEEP[i] vs KEEP[M + i].
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bench.methods  # noqa: F401  (registers every method)
import bench.methods.cline as cline_module
import bench.methods.views as views_module
from bench.data.batching import Encoded, collate
from bench.encoders.models import EncoderOutput, TextEncoder
from bench.methods.base import PrepareContext, Progress
from bench.methods.views import TokenViews
from bench.registry import METHODS
from test_losses import clld_ref, lcl_ref, supcon_ref
from test_released_forms import supcon_released_ref

D64 = torch.float64
VOCAB, TOKEN_DIM, HIDDEN, N, PAD = 16, 5, 6, 3, 0
LABEL_NAMES = ["a", "b", "c"]

# Six training examples (token ids, [CLS] = 1 ... [SEP] = 2), their WordNet-like views and replaced flags.
TRAIN_IDS = [[1, 4, 7, 2], [1, 5, 9, 11, 2], [1, 3, 2], [1, 6, 8, 10, 12, 2], [1, 13, 7, 2], [1, 14, 15, 9, 2]]
TRAIN_LABELS = [0, 1, 0, 2, 1, 0]
SYN_IDS = [[1, 4, 3, 2], [1, 5, 9, 6, 7, 2], [1, 8, 2], [1, 6, 8, 14, 12, 2], [1, 13, 5, 2], [1, 14, 15, 10, 2]]
SYN_REPLACED = [[0, 0, 1, 0], [0, 0, 0, 1, 1, 0], [0, 1, 0], [0, 0, 0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1, 0]]
ANT_IDS = [[1, 11, 7, 2], [1, 12, 9, 11, 2], [1, 3, 15, 2], [1, 6, 8, 10, 4, 2], [1, 13, 7, 3, 2], [1, 7, 15, 9, 2]]
ANT_REPLACED = [[0, 1, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0, 1, 0], [0, 0, 0, 1, 0], [0, 1, 0, 0, 0]]
# Candidate (content-word) tokens of each view: every replaced token and some kept ones; never [CLS] / [SEP].
SYN_CANDIDATE = [[0, 1, 1, 0], [0, 0, 1, 1, 1, 0], [0, 1, 0], [0, 1, 0, 1, 0, 0], [0, 0, 1, 0], [0, 1, 0, 1, 0]]
ANT_CANDIDATE = [[0, 1, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0, 1, 0], [0, 0, 0, 1, 0], [0, 1, 0, 0, 0]]
# The batch: these training examples, in this order (not 0..M-1, so views must be looked up by index).
INDEX = [3, 0, 5, 1, 4, 2]
M = len(INDEX)
LABELS = [TRAIN_LABELS[i] for i in INDEX]  # [2, 0, 0, 1, 1, 0]: class 2 occurs once (no in-batch positive)

# Simulated dropout: row r of every training-mode encoder call is multiplied feature-wise by KEEP[r]
# (inverted dropout at p = 0.25: entries 0 or 4/3).
KEEP = (torch.rand(64, TOKEN_DIM, generator=torch.Generator().manual_seed(7)) > 0.25).to(D64) / 0.75

TOL = dict(rtol=2e-5, atol=2e-6)
GRAD_TOL = dict(rtol=1e-4, atol=1e-6)


class FakeEncoder(TextEncoder):
    """token states t[r, k] = emb[ids[r, k]] * KEEP[r] (KEEP only in training mode); pooled[r] =
    tanh(proj(mean of t[r, k] over the real tokens k)). Records the number of rows of every call."""

    def __init__(self):
        super().__init__()
        self.hidden_size, self.token_size = HIDDEN, TOKEN_DIM
        self.emb = nn.Embedding(VOCAB, TOKEN_DIM)
        self.proj = nn.Linear(TOKEN_DIM, HIDDEN)
        self.register_buffer("keep", KEEP.clone())
        self.calls: list[int] = []

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> EncoderOutput:
        assert input_ids.shape == attention_mask.shape and input_ids.shape[0] <= self.keep.shape[0]
        self.calls.append(input_ids.shape[0])
        tokens = self.emb(input_ids)
        if self.training:
            tokens = tokens * self.keep[: input_ids.shape[0], None, :]
        weights = attention_mask.unsqueeze(-1).to(tokens.dtype)
        mean = (tokens * weights).sum(1) / weights.sum(1)
        pooler = torch.tanh(self.proj(tokens[:, 0]))  # a pooler layer: dense + tanh of the first token
        return EncoderOutput(torch.tanh(self.proj(mean)), tokens, attention_mask, pooler)


def token_views(ids, replaced, candidate=None) -> TokenViews:
    return TokenViews(Encoded(ids, np.zeros(len(ids), dtype=np.int64)), replaced, PAD, 1, candidate=candidate)


class FakeWordViews:
    """Stands in for views.word_views / cline.word_views: the tables above by kind; records (kind, rate), and
    the quota rule, antonym share and "no redraw" (a random word equal to the original skips it) where they are
    not the defaults."""

    def __init__(self):
        self.calls = []

    def __call__(self, context, kind, rate, quota="content", antonym_share=None, redraw_same=True):
        self.calls.append((kind, rate) + (() if quota == "content" else (quota,))
                          + (() if antonym_share is None else (antonym_share,))
                          + (() if redraw_same else ("no redraw",)))
        if kind in ("syn", "syn-inflect"):
            return token_views(SYN_IDS, SYN_REPLACED, SYN_CANDIDATE)
        assert kind == "ant", kind
        return token_views(ANT_IDS, ANT_REPLACED, ANT_CANDIDATE)


def make_batch(method=None) -> dict[str, torch.Tensor]:
    """The batch of INDEX: plain (prediction), or a training batch as `method` collates it (its word views added)."""
    data, index = Encoded(TRAIN_IDS, np.array(TRAIN_LABELS)), np.array(INDEX)
    return collate(data, index, PAD) if method is None else method.collate(data, index, PAD, 1, 0, None)


def fill_parameters(module: nn.Module, seed: int) -> nn.Module:
    """The module in float64 with every parameter drawn from N(0, 0.6^2) by a generator seeded with `seed`
    (independent of torch's global random state)."""
    module.double()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(0.6 * torch.randn(p.shape, generator=gen, dtype=D64))
    return module


def build(name, tmp_path=None, monkeypatch=None, seed=0, **knobs):
    """The method on fake encoders, in float64 and training mode, every parameter drawn from `seed` (so helper
    and target copies differ from the main networks), head dropout off; prepared where it needs it."""
    cls = METHODS.get(name)
    method = fill_parameters(cls(FakeEncoder(), N, cls.Config(**knobs), head_dropout=0.0), seed).train()
    if monkeypatch is not None:
        fake = FakeWordViews()
        monkeypatch.setattr(views_module, "word_views", fake)
        monkeypatch.setattr(cline_module, "word_views", fake)
        method.prepare(PrepareContext([f"text {i}" for i in range(len(TRAIN_IDS))], LABEL_NAMES, None, 1,
                                      tmp_path / "cache", tmp_path))
        method.word_view_calls = fake.calls
    return method


# ---------------------------------------------------------------------------------------------------------------
# The reference composition (float64, example by example)
# ---------------------------------------------------------------------------------------------------------------

def snapshot(method):
    """float64 leaves for every parameter (requiring a gradient where the method's does) and buffer copies."""
    params = {n: p.detach().clone().to(D64).requires_grad_(p.requires_grad) for n, p in method.named_parameters()}
    buffers = {n: b.detach().clone() for n, b in method.named_buffers()}
    return params, buffers


def linear(P, name, x):
    return x @ P[f"{name}.weight"].T + P[f"{name}.bias"]


def encode_ref(P, prefix, token_lists, keep_rows, train=True, pooler=False):
    """Pooled vectors (R, d) and token states (a list of (L, e)) of the examples given as token lists, example j
    taking the dropout mask KEEP[keep_rows[j]] (in training mode); with `pooler`, the pooler output (dense +
    tanh of the first token) instead of the pooled vectors."""
    pooled, states = [], []
    for ids, r in zip(token_lists, keep_rows):
        t = P[f"{prefix}emb.weight"][torch.tensor(ids)]
        if train:
            t = t * KEEP[r]
        states.append(t)
        first = t[0] if pooler else t.mean(0)
        pooled.append(torch.tanh(P[f"{prefix}proj.weight"] @ first + P[f"{prefix}proj.bias"]))
    return torch.stack(pooled), states


def originals():
    return [TRAIN_IDS[i] for i in INDEX]


def synonyms():
    return [SYN_IDS[i] for i in INDEX]


def antonyms():
    return [ANT_IDS[i] for i in INDEX]


def rows(v):
    """Rows of view v (0 = the originals) in a stacked encoder call: v*M .. v*M + M - 1."""
    return list(range(v * M, (v + 1) * M))


def ce_ref(logits, labels):
    labels = torch.tensor(labels)
    return (torch.logsumexp(logits, dim=1) - logits[torch.arange(len(labels)), labels]).mean()


def head_ref(P, e, name="head.1"):
    return linear(P, name, e)


def projection_ref(P, kind, x, name="projection"):
    if kind == "mlp":
        return linear(P, f"{name}.2", torch.relu(linear(P, f"{name}.0", x)))
    if kind == "linear":
        return linear(P, name, x)
    return x


def bce_ref(logit, target):
    return F.softplus(logit) - target * logit


def powernorm_ref(P, B, name, x, warmup, variant="released", zero_terms=None):
    """docs/METHODS.md "dcl": no centring; batch quadratic mean during warm-up, else the running statistic; the
    released variant first divides each row by its root mean square over the features, and its gradient is the
    released approximation (zxlzr/DCL PowerFunction.backward, 8fc953e): dL/dx_s = (g - 0.1 ema_gz z) /
    sqrt(psi2_b + eps), written as a value/slope split of z plus a zero-valued term appended to `zero_terms`."""
    if variant == "paper":
        scale = x.pow(2).mean(0) if B[f"{name}.steps"] < warmup else B[f"{name}.running_psi2"].to(D64)
        return P[f"{name}.weight"] * x / torch.sqrt(scale + 1e-5) + P[f"{name}.bias"]
    x = x / torch.sqrt(x.pow(2).mean(1, keepdim=True) + 1e-5)
    var = x.detach().pow(2).mean(0)
    scale = var if B[f"{name}.steps"] < warmup else B[f"{name}.running_psi2"].to(D64)
    z_value = x.detach() / torch.sqrt(scale + 1e-5)
    z = z_value + (x - x.detach()) / torch.sqrt(var + 1e-5)
    k = -0.1 * B[f"{name}.ema_gz"].to(D64) * z_value / torch.sqrt(var + 1e-5)
    if zero_terms is not None:
        zero_terms.append((x * k).sum() - (x * k).sum().detach())
    return P[f"{name}.weight"] * z + P[f"{name}.bias"]


def dcl_mlp_ref(P, B, name, x, warmup, variant="released", zero_terms=None):
    hidden = powernorm_ref(P, B, f"{name}.1", linear(P, f"{name}.0", x), warmup, variant, zero_terms)
    return linear(P, f"{name}.3", torch.relu(hidden))


def align_ref(p, z):
    """(1/M) sum_i (2 - 2 cos(p_i, z_i)), z a constant."""
    z = z.detach()
    cos = (p * z).sum(1) / (p.norm(dim=1) * z.norm(dim=1))
    return (2 - 2 * cos).mean()


# ---------------------------------------------------------------------------------------------------------------
# The check: every term's value and the gradient of their sum
# ---------------------------------------------------------------------------------------------------------------

def check(method, reference, batch=None, must_train=("encoder.emb.weight", "head.1.weight")):
    """Run the method's loss on the batch; compare each named term with `reference(P, B)` (a dict of float64
    terms built from the parameter leaves P and buffers B as they were before the call) and the gradient of the
    summed terms (what the Trainer optimises) w.r.t. every trainable parameter. Returns (losses, expected)."""
    batch = make_batch(method) if batch is None else batch
    P, B = snapshot(method)
    method.zero_grad(set_to_none=True)
    losses = method.loss(batch)
    expected = reference(P, B)
    assert set(losses) == set(expected)
    for name, value in expected.items():
        assert torch.allclose(losses[name].detach().to(D64), value.detach(), **TOL), \
            f"term {name}: method {losses[name].item():.8f} vs reference {value.item():.8f}"
    sum(losses.values()).backward()
    trainable = [n for n, p in method.named_parameters() if p.requires_grad]
    grads = torch.autograd.grad(sum(expected.values()), [P[n] for n in trainable], allow_unused=True)
    for name, ref in zip(trainable, grads):
        mine = method.get_parameter(name).grad
        mine = torch.zeros_like(P[name]) if mine is None else mine.to(D64)
        ref = torch.zeros_like(P[name]) if ref is None else ref
        assert torch.allclose(mine, ref, **GRAD_TOL), (f"gradient of {name}: max |diff| "
                                                       f"{(mine - ref).abs().max().item():.3g}, max |ref| "
                                                       f"{ref.abs().max().item():.3g}")
    for name in must_train:  # the comparison above is not vacuous
        assert method.get_parameter(name).grad.abs().sum() > 0, name
    for name, p in method.named_parameters():
        if not p.requires_grad:
            assert p.grad is None, name
    return losses, expected


# ---------------------------------------------------------------------------------------------------------------
# The fake encoder itself
# ---------------------------------------------------------------------------------------------------------------

def test_fake_encoder_gives_known_and_different_dropout_views():
    encoder = fill_parameters(FakeEncoder(), 0)
    batch = make_batch()
    P = {f"encoder.{n}": p.detach() for n, p in encoder.named_parameters()}
    twin = {k: torch.cat([v, v]) for k, v in batch.items()}
    pooled = encoder(twin["input_ids"], twin["attention_mask"]).pooled.detach()
    expected, _ = encode_ref(P, "encoder.", originals() * 2, range(2 * M))
    assert torch.allclose(pooled, expected)
    assert (pooled[:M] - pooled[M:]).norm(dim=1).min() > 1e-2  # every example's twins differ
    assert all(KEEP[r].sum() > 0 for r in range(3 * M))
    encoder.eval()
    plain, _ = encode_ref(P, "encoder.", originals(), range(M), train=False)
    assert torch.allclose(encoder(batch["input_ids"], batch["attention_mask"]).pooled.detach(), plain)


# ---------------------------------------------------------------------------------------------------------------
# ce
# ---------------------------------------------------------------------------------------------------------------

def test_ce_wiring():
    method = build("ce")

    def reference(P, B):
        e, _ = encode_ref(P, "encoder.", originals(), rows(0))
        return {"ce": ce_ref(head_ref(P, e), LABELS)}

    check(method, reference)
    assert method.encoder.calls == [M]
    method.eval()  # prediction: the main encoder and head, dropout off
    P, _ = snapshot(method)
    e, _ = encode_ref(P, "encoder.", originals(), rows(0), train=False)
    assert torch.allclose(method.logits(make_batch()).detach(), head_ref(P, e).detach())


# ---------------------------------------------------------------------------------------------------------------
# supcon: L = (1 - lambda) CE + lambda SCL
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("views,projection,variant", [(1, "none", "paper"), (1, "linear", "paper"),
                                                      (2, "none", "paper"), (2, "mlp", "paper"),
                                                      (2, "none", "released"), (1, "none", "released"),
                                                      (1, "linear", "released")])
def test_supcon_wiring(views, projection, variant):
    """paper: Gunel et al.'s SCL, the mean over anchors with a positive; released: SupContrast's at 66a8fe5, the
    mean over all anchors (0 for an anchor without a positive: class 2 of LABELS with one view), scaled by
    tau / 0.07."""
    lam, tau = 0.7, 0.5
    method = build("supcon", tau=tau, lambda_=lam, views=views, projection=projection, variant=variant)
    assert method.config.variant == variant and build("supcon").config.variant == "paper"

    def reference(P, B):
        e, _ = encode_ref(P, "encoder.", originals() * views, range(views * M))
        u, labels = projection_ref(P, projection, e), torch.tensor(LABELS * views)
        scl = supcon_released_ref(u, labels, tau) if variant == "released" else supcon_ref(u, labels, tau)
        return {"ce": (1 - lam) * ce_ref(head_ref(P, e[:M]), LABELS), "supcon": lam * scl}

    check(method, reference)
    assert method.encoder.calls == [views * M]


# ---------------------------------------------------------------------------------------------------------------
# cl / clld-static / clld-adaptive: L = w CE + (1 - w) L_s(g(e), D)
# ---------------------------------------------------------------------------------------------------------------

def clld_reference(ldm, w, projection):
    def reference(P, B):
        e, _ = encode_ref(P, "encoder.", originals() * 2, range(2 * M))  # dropout twins
        u = projection_ref(P, projection, e)
        return {"ce": w * ce_ref(head_ref(P, e[:M]), LABELS),
                "contrastive": (1 - w) * clld_ref(u, torch.tensor(LABELS * 2), ldm)}
    return reference


@pytest.mark.parametrize("projection", ["mlp", "linear"])
def test_cl_wiring(projection):
    tau, w = 4.0, 0.3
    method = build("cl", tau=tau, ce_weight=w, projection=projection)
    check(method, clld_reference(torch.full((N, N), tau, dtype=D64), w, projection))
    assert method.encoder.calls == [2 * M]


def test_clld_static_wiring(tmp_path, monkeypatch):
    tau, w, boost = 4.0, 0.4, 3.0
    method = build("clld-static", tmp_path, monkeypatch, tau=tau, ce_weight=w, pairs=(("b", "c"),), boost=boost)
    ldm = torch.full((N, N), tau, dtype=D64)
    ldm[1, 2] = ldm[2, 1] = tau * boost
    assert torch.equal(method.ldm.to(D64), ldm)
    check(method, clld_reference(ldm, w, "mlp"))


def target_ldm_ref(confusion, tau):
    """docs/METHODS.md 4.3: rho_ab = (C_ab + C_ba) / (n_a + n_b) off the diagonal; D' = tau (1 + rho / max rho)."""
    n = len(confusion)
    totals = [sum(row) for row in confusion]
    rho = [[(confusion[a][b] + confusion[b][a]) / (totals[a] + totals[b]) if a != b else 0.0 for b in range(n)]
           for a in range(n)]
    peak = max(max(row) for row in rho)
    return torch.tensor([[tau * (1 + rho[a][b] / peak) if a != b else tau for b in range(n)] for a in range(n)],
                        dtype=D64)


CONFUSIONS = [[[8, 2, 0], [2, 6, 2], [0, 0, 10]], [[9, 0, 1], [3, 7, 0], [2, 0, 8]], [[7, 1, 2], [0, 10, 0], [1, 4, 5]]]


def test_clld_adaptive_wiring():
    tau, w = 5.0, 0.6
    method = build("clld-adaptive", tau=tau, ce_weight=w, update_every=1, evals_per_epoch=1)
    method.on_eval(np.array(CONFUSIONS[0]), Progress(epoch=3, max_epochs=10, step=30, total_steps=100))
    ldm = tau + 0.7 * (target_ldm_ref(CONFUSIONS[0], tau) - tau)
    assert torch.allclose(method.ldm.to(D64), ldm)
    check(method, clld_reference(ldm, w, "mlp"))


def validations(epoch, batches, per_epoch):
    """Steps (counted from the run's start) after which the Trainer validates in `epoch`: after batches
    round(j B / K), j = 1..K-1, and at the end of the epoch (docs/METHODS.md 4.3)."""
    positions = sorted({round(j * batches / per_epoch) for j in range(1, per_epoch)} | {batches})
    return [(epoch - 1) * batches + p for p in positions]


@pytest.mark.parametrize("n", [10, 15, 20, 50])
@pytest.mark.parametrize("offset", [-1, 0, 1])
def test_adaptive_first_update_epoch_boundary(n, offset):
    """With warmup_fraction 0.2 the LDM is updated in epoch e (counted from 1) iff e > n/5: never in epoch n/5
    (nor before), already in epoch n/5 + 1."""
    epoch = n // 5 + offset
    method = build("clld-adaptive", update_every=1, evals_per_epoch=1)
    total = 10 * n
    method.on_eval(np.array(CONFUSIONS[0]), Progress(epoch=epoch, max_epochs=n, step=10 * epoch, total_steps=total))
    updated = not torch.equal(method.ldm, torch.full((N, N), 5.0, dtype=method.ldm.dtype))
    assert updated == (offset == 1), f"n={n}: epoch {epoch} {'updated' if updated else 'did not update'} the LDM"
    assert len(method.history) == (offset == 1) and method.evaluations == 1


@pytest.mark.parametrize("n", [4, 5, 9, 10, 12, 16])
def test_adaptive_updates_every_epoch_after_the_first_fifth(n):
    """One validation per epoch, update_every 1: updates exactly at the ends of epochs e with 5 e > n (first:
    n//5 + 1), but not at the last (eps = 0 would change nothing)."""
    method = build("clld-adaptive", update_every=1, evals_per_epoch=1)
    updated_in = []
    for epoch in range(1, n + 1):
        before = len(method.history)
        method.on_eval(np.array(CONFUSIONS[epoch % 3]), Progress(epoch, n, 10 * epoch, 10 * n))
        if len(method.history) > before:
            updated_in.append(epoch)
    assert updated_in == [e for e in range(1, n) if 5 * e > n]
    assert updated_in[0] == n // 5 + 1


@pytest.mark.parametrize("n,batches", [(10, 12), (12, 12), (7, 25)])
def test_adaptive_schedule_over_a_run(n, batches):
    """Defaults (K = U = 10) in runs long enough for them: every validation counts from the first epoch on; the
    LDM moves towards that validation's target at every 10th validation in epochs e > n/5, i.e. at the ends of
    those epochs but the last (eps = 0 there), with eps = 1 - t/T (t: steps so far, T: planned steps)."""
    tau = 5.0
    method = build("clld-adaptive", tau=tau)
    total = n * batches
    ldm = torch.full((N, N), tau, dtype=D64)
    steps_updated, count = [], 0
    for epoch in range(1, n + 1):
        for step in validations(epoch, batches, 10):
            count += 1
            confusion = CONFUSIONS[count % 3]
            method.on_eval(np.array(confusion), Progress(epoch, n, step, total))
            if count % 10 == 0 and 5 * epoch > n and step < total:
                ldm = ldm + (1 - step / total) * (target_ldm_ref(confusion, tau) - ldm)
                steps_updated.append(step)
            assert torch.allclose(method.ldm.to(D64), ldm), (epoch, step)
    assert steps_updated == [e * batches for e in range(n // 5 + 1, n)]  # the ends of epochs n//5+1 .. n-1
    assert [u["step"] for u in method.history] == steps_updated
    assert method.evaluations == 10 * n


def test_adaptive_loss_uses_the_updated_matrix():
    tau, w = 5.0, 0.5
    method = build("clld-adaptive", tau=tau, ce_weight=w, update_every=2, evals_per_epoch=2)
    method.on_eval(np.array(CONFUSIONS[1]), Progress(1, 4, 5, 40))  # epoch 1 <= 4/5: warm-up
    method.on_eval(np.array(CONFUSIONS[1]), Progress(2, 4, 10, 40))  # 2nd validation, epoch 2 > 0.8: update
    ldm = tau + 0.75 * (target_ldm_ref(CONFUSIONS[1], tau) - tau)
    check(method, clld_reference(ldm, w, "mlp"))


# ---------------------------------------------------------------------------------------------------------------
# lcl: L = w CE(main) + (1 - w) LCL(e, softmax(helper)) + w CE(helper)
# ---------------------------------------------------------------------------------------------------------------

def lcl_head_ref(P, e, head):
    """lcl's main classifier (dropout off): the authors' Linear(d, d), ReLU, Linear(d, N) (`released`) or the
    shared head's Linear (`linear`)."""
    if head == "released":
        return linear(P, "head.out", torch.relu(linear(P, "head.dense", e)))
    return head_ref(P, e)


@pytest.mark.parametrize("weighting,views,variant,head", [("separate", "dropout", "released", "released"),
                                                          ("shared-head", "dropout", "released", "released"),
                                                          ("separate", "synonym", "released", "released"),
                                                          ("separate", "synonym", "paper", "linear"),
                                                          ("separate", "dropout", "released", "linear")])
def test_lcl_wiring(weighting, views, variant, head, tmp_path, monkeypatch):
    """released: both cross-entropy terms over all 2M rows (the authors' train.py); paper: over the M originals.
    head: the main CE through the authors' two-layer classifier (released, the released variant's) or the shared
    head (linear, the paper variant's)."""
    tau, w = 0.4, 0.3
    method = build("lcl", tmp_path, monkeypatch, tau=tau, ce_weight=w, weighting=weighting, views=views,
                   syn_rate=0.5, variant=variant, head=head)
    second = synonyms() if views == "synonym" else originals()
    rows_ce = 2 * M if variant == "released" else M

    def reference(P, B):
        e, _ = encode_ref(P, "encoder.", originals() + second, range(2 * M))
        helper = encode_ref(P, "helper_encoder.", originals() + second, range(2 * M))[0] \
            if weighting == "separate" else e
        helper_logits = head_ref(P, helper, "helper_head.1")
        weights = torch.softmax(helper_logits, dim=1)  # not detached
        labels = LABELS * 2
        return {"ce": w * ce_ref(lcl_head_ref(P, e[:rows_ce], head), labels[:rows_ce]),
                "lcl": (1 - w) * lcl_ref(e, torch.tensor(labels), weights, tau),
                "ce_helper": w * ce_ref(helper_logits[:rows_ce], labels[:rows_ce])}

    heads = ("head.dense.weight", "head.out.weight") if head == "released" else ("head.1.weight",)
    check(method, reference, must_train=("encoder.emb.weight", *heads))
    assert method.encoder.calls == [2 * M]
    assert method.word_view_calls == ([("syn", 0.5)] if views == "synonym" else [])
    if weighting == "separate":
        assert method.helper_encoder.calls == [2 * M]
    method.eval()  # prediction: the main encoder and the same head, dropout off
    P, _ = snapshot(method)
    e, _ = encode_ref(P, "encoder.", originals(), rows(0), train=False)
    assert torch.allclose(method.logits(make_batch()).detach(), lcl_head_ref(P, e, head).detach())


def test_lcl_weights_train_the_weighting_network(tmp_path, monkeypatch):
    """Only the LCL term (ce_weight 0): the helper encoder and head still get the reference's gradient."""
    tau = 0.4
    method = build("lcl", tmp_path, monkeypatch, tau=tau, ce_weight=0.0)

    def reference(P, B):
        e, _ = encode_ref(P, "encoder.", originals() * 2, range(2 * M))
        helper, _ = encode_ref(P, "helper_encoder.", originals() * 2, range(2 * M))
        helper_logits = head_ref(P, helper, "helper_head.1")
        weights = torch.softmax(helper_logits, dim=1)
        zero = 0 * helper_logits.sum()
        return {"ce": zero, "lcl": lcl_ref(e, torch.tensor(LABELS * 2), weights, tau), "ce_helper": zero}

    check(method, reference, must_train=("encoder.emb.weight", "helper_head.1.weight", "helper_encoder.emb.weight"))


# ---------------------------------------------------------------------------------------------------------------
# cline: CE + cts(original, synonym, antonym) + rtd(view tokens)
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sentence_loss,weights", [("eq6", "fixed"), ("bce", "fixed"), ("eq6", "learned")])
def test_cline_wiring(sentence_loss, weights, tmp_path, monkeypatch):
    lambda_cts, lambda_rtd = 0.7, 1.3
    method = build("cline", tmp_path, monkeypatch, variant="paper", syn_rate=0.4, ant_rate=0.2,
                   sentence_loss=sentence_loss, weights=weights, lambda_cts=lambda_cts, lambda_rtd=lambda_rtd,
                   redraw_same_word=True)
    assert method.word_view_calls == [("syn-inflect", 0.4), ("ant", 0.2)]

    def reference(P, B):
        e, _ = encode_ref(P, "encoder.", originals(), rows(0))
        e_syn, t_syn = encode_ref(P, "encoder.", synonyms(), rows(1))
        e_ant, t_ant = encode_ref(P, "encoder.", antonyms(), rows(2))
        ce = ce_ref(head_ref(P, e), LABELS)
        if sentence_loss == "eq6":  # -log(f(ori, syn) / (f(ori, syn) + f(ori, ant))), f = exp of a raw dot product
            pos, neg = torch.exp((e * e_syn).sum(1)), torch.exp((e * e_ant).sum(1))
            cts = (-torch.log(pos / (pos + neg))).mean()
        else:
            cts = 0.5 * (bce_ref((e * e_syn).mean(1), 1.0).mean() + bce_ref((e * e_ant).mean(1), 0.0).mean())
        token_terms = []
        for states, flags in ((t_syn, [SYN_REPLACED[i] for i in INDEX]), (t_ant, [ANT_REPLACED[i] for i in INDEX])):
            for t, f in zip(states, flags):
                logits = linear(P, "rtd_head", t).squeeze(-1)
                token_terms.append(bce_ref(logits, torch.tensor(f, dtype=D64)))
        rtd = torch.cat(token_terms).mean()  # every real token of the 2M view rows
        if weights == "fixed":
            return {"ce": ce, "cts": lambda_cts * cts, "rtd": lambda_rtd * rtd}
        s = P["log_vars"]
        return {name: torch.exp(-s[k]) * value + s[k] for k, (name, value) in enumerate(
            (("ce", ce), ("cts", cts), ("rtd", rtd)))}

    check(method, reference)
    assert method.encoder.calls == [3 * M]
    assert method.get_parameter("rtd_head.weight").grad.abs().sum() > 0


def released_token_logits(P, states):
    """The released token head: dense, exact GELU, LayerNorm (eps 1e-5), then 3 classes."""
    x = linear(P, "rtd_head.0", states)
    x = 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    x = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
    x = x * P["rtd_head.2.weight"] + P["rtd_head.2.bias"]
    return linear(P, "rtd_head.3", x)


@pytest.mark.parametrize("sentence_loss,weights", [("eq6", "fixed"), ("bce", "learned")])
def test_cline_released_wiring(sentence_loss, weights, tmp_path, monkeypatch):
    """The default variant: half of the words replaced per view, the pooler output as sentence vector, a 3-way
    token loss over candidate tokens only, task weights regularised by max(s, 0)."""
    method = build("cline", tmp_path, monkeypatch, sentence_loss=sentence_loss, weights=weights)
    assert method.config.variant == "released"
    assert method.word_view_calls == [("syn-inflect", 0.5, "tokens"), ("ant", 0.5, "tokens", 0.5, "no redraw")]
    if weights == "learned":  # negative log-variances: the clamp, not s itself, is the regulariser
        with torch.no_grad():
            method.log_vars.copy_(torch.tensor([-0.4, 0.3, -1.1], dtype=D64))

    def reference(P, B):
        e, _ = encode_ref(P, "encoder.", originals(), rows(0))
        p, _ = encode_ref(P, "encoder.", originals(), rows(0), pooler=True)
        p_syn, t_syn = encode_ref(P, "encoder.", synonyms(), rows(1), pooler=True)
        p_ant, t_ant = encode_ref(P, "encoder.", antonyms(), rows(2), pooler=True)
        ce = ce_ref(head_ref(P, e), LABELS)
        if sentence_loss == "eq6":
            pos, neg = torch.exp((p * p_syn).sum(1)), torch.exp((p * p_ant).sum(1))
            cts = (-torch.log(pos / (pos + neg))).mean()
        else:
            cts = 0.5 * (bce_ref((p * p_syn).mean(1), 1.0).mean() + bce_ref((p * p_ant).mean(1), 0.0).mean())
        terms = []
        for states, flags, cands, cls in ((t_syn, SYN_REPLACED, SYN_CANDIDATE, 1),
                                          (t_ant, ANT_REPLACED, ANT_CANDIDATE, 2)):
            for t, i in zip(states, INDEX):
                logits = released_token_logits(P, t)
                for k in range(len(t)):
                    if cands[i][k]:  # only candidate words are scored: kept 0, replaced 1 (syn) or 2 (ant)
                        target = cls if flags[i][k] else 0
                        terms.append(torch.logsumexp(logits[k], 0) - logits[k, target])
        rtd = torch.stack(terms).mean()
        if weights == "fixed":
            return {"ce": ce, "cts": cts, "rtd": rtd}
        s = P["log_vars"]
        return {name: torch.exp(-s[k]) * value + torch.clamp(s[k], min=0) for k, (name, value) in enumerate(
            (("ce", ce), ("cts", cts), ("rtd", rtd)))}

    check(method, reference)
    assert method.encoder.calls == [3 * M]


# ---------------------------------------------------------------------------------------------------------------
# dcl: CE + lambda (l(pi_1, z_2) + l(pi_2, z_1)), z from the EMA target network (no gradient)
# ---------------------------------------------------------------------------------------------------------------

def dcl_reference(views, lam, warmup, variant="released"):
    second = synonyms() if views == "synonym" else originals()

    def reference(P, B):
        e, _ = encode_ref(P, "encoder.", originals() + second, range(2 * M))
        zero_terms = []  # the released PowerNorm backward's ema_gz term (value 0)
        projected = dcl_mlp_ref(P, B, "projector", e, warmup, variant, zero_terms)
        prediction = dcl_mlp_ref(P, B, "predictor", projected, warmup, variant, zero_terms)
        with torch.no_grad():
            e_target, _ = encode_ref(P, "target_encoder.", originals() + second, range(2 * M))
            target = dcl_mlp_ref(P, B, "target_projector", e_target, warmup, variant)
        align = align_ref(prediction[:M], target[M:]) + align_ref(prediction[M:], target[:M])
        return {"ce": ce_ref(head_ref(P, e[:M]), LABELS), "align": lam * align + sum(zero_terms)}
    return reference


@pytest.mark.parametrize("views,warmup,variant", [("dropout", 1000, "released"), ("synonym", 1000, "released"),
                                                  ("dropout", 0, "released"), ("synonym", 1000, "paper"),
                                                  ("dropout", 0, "paper")])
def test_dcl_wiring(views, warmup, variant, tmp_path, monkeypatch):
    lam = 0.6
    method = build("dcl", tmp_path, monkeypatch, lambda_=lam, views=views, syn_rate=0.3, hidden=7, out=4,
                   powernorm_warmup=warmup, variant=variant)
    gen = torch.Generator().manual_seed(11)
    for name, buffer in method.named_buffers():
        if warmup == 0 and name.endswith("running_psi2"):  # past the warm-up: divided by the running statistic
            buffer.copy_(0.5 + torch.rand(buffer.shape, generator=gen, dtype=D64))
        if name.endswith("ema_gz"):  # the released backward's accumulated statistic, as after some steps
            buffer.copy_(torch.randn(buffer.shape, generator=gen, dtype=D64))
    check(method, dcl_reference(views, lam, warmup, variant))
    assert method.encoder.calls == [2 * M] and method.target_encoder.calls == [2 * M]
    assert method.word_view_calls == ([("syn", 0.3)] if views == "synonym" else [])


@pytest.mark.parametrize("views", ["dropout", "synonym"])
def test_dcl_pairs_each_prediction_with_the_other_views_target(views, tmp_path, monkeypatch):
    """Pinned directly on the tensors the method computes: align = lambda (l(pi[:M], z[M:]) + l(pi[M:], z[:M])),
    where the same-view pairing and a one-way doubled term differ clearly on this batch."""
    lam = 0.6
    method = build("dcl", tmp_path, monkeypatch, lambda_=lam, views=views, hidden=7, out=4)
    seen = {}
    method.predictor.register_forward_hook(lambda mod, inp, out: seen.__setitem__("prediction", out))
    method.target_projector.register_forward_hook(lambda mod, inp, out: seen.__setitem__("target", out))
    align = method.loss(make_batch(method))["align"].item()
    p, z = seen["prediction"].detach().to(D64), seen["target"].detach().to(D64)
    assert p.shape == z.shape == (2 * M, 4)
    crossed = lam * (align_ref(p[:M], z[M:]) + align_ref(p[M:], z[:M])).item()
    assert align == pytest.approx(crossed, rel=1e-5)
    for wrong in (align_ref(p[:M], z[:M]) + align_ref(p[M:], z[M:]),  # each view with its own target
                  2 * align_ref(p[:M], z[M:]), 2 * align_ref(p[M:], z[:M])):  # one direction only
        assert abs(lam * wrong.item() - crossed) > 1e-3
