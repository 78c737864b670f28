"""A suite classifier head read as the layers of a stock Hugging Face head (bench.encoders.hf_export writes them).

Two head shapes export (dropout is the identity at inference, so where dropout modules sit does not change the
logits):
- one Linear(d, N) with dropout (the shared head of every method): the classifier alone;
- [Dropout]*, Linear(d, d), [Dropout], an activation, [Dropout], Linear(d, N), [Dropout] (lcl's released head:
  Linear, dropout, ReLU, Linear, dropout): `DebertaV2ForSequenceClassification`'s `ContextPooler` computes it,
  dense = the first Linear, `pooler_hidden_act` = the activation, classifier = the second Linear.
A head may apply its activation as a function in `forward` (lcl's calls F.relu), so the activation, and which
Linear comes first, are found by computing: the head in eval mode, in float64, on probe vectors, against
classifier(act(dense(x))) for each name of ACTIVATIONS (names of transformers' ACT2FN)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from bench.errors import BenchError

# transformers' ACT2FN names the export tries, the usual ones first ("linear": no activation)
ACTIVATIONS = ("relu", "gelu", "tanh", "linear", "silu", "sigmoid", "gelu_new", "gelu_pytorch_tanh", "gelu_fast",
               "quick_gelu", "mish", "relu6", "leaky_relu", "relu2", "hardswish")
PROBES = 256  # probe vectors the head is computed on
SPREAD = 8.0  # std of the probes' pre-activations: wide enough to tell relu from relu6 and leaky_relu
PROBE_TOLERANCE = 1e-9  # the largest float64 difference, relative to the largest logit, that counts as equal
SHAPES = "only dropout + Linear(d, N), or Linear(d, d), an activation and Linear(d, N) (with dropout anywhere), export"
KEEP = "train with the shared head (dropout + Linear) to export, or keep the run's saved model (clbench evaluate RUN)"


@dataclass(frozen=True)
class HeadLayers:
    """A classifier head as the export writes it: `classifier` (Linear(d, N)), `dense` (Linear(d, d) before it,
    None for a one-layer head) and the ACT2FN name of the activation between them ("linear": none)."""

    classifier: nn.Linear
    dense: nn.Linear | None = None
    activation: str = "linear"


def linear_weights(linear: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
    """A Linear's weight and bias (zeros where it has none) as fp32 CPU copies."""
    weight = linear.weight.detach().float().cpu().clone()
    bias = linear.bias.detach().float().cpu().clone() if linear.bias is not None else torch.zeros(len(weight))
    return weight, bias


def head_layers(head: nn.Module) -> HeadLayers:
    """The head's classifier, dense layer and activation (see the module notes); a one-line BenchError naming the
    problem and the fix for any other head."""
    leaves = [m for m in head.modules() if next(m.children(), None) is None]  # registration order
    odd = [m for m in leaves if not isinstance(m, (nn.Linear, nn.Dropout)) and next(m.parameters(), None) is not None]
    if odd:
        raise BenchError(f"the classifier head has a {type(odd[0]).__name__} layer with weights; {SHAPES}; {KEEP}")
    linears = [m for m in leaves if isinstance(m, nn.Linear)]
    if len(linears) == 1:
        orders = [(None, linears[0])]
    elif len(linears) == 2:
        orders = [(a, b) for a, b in (linears, linears[::-1]) if a.in_features == a.out_features == b.in_features]
        if not orders:
            sizes = " and ".join(f"Linear({m.in_features}, {m.out_features})" for m in linears)
            raise BenchError(f"the classifier head's linear layers are {sizes}; {SHAPES}; {KEEP}")
    else:
        raise BenchError(f"the classifier head has {len(linears)} linear layers; {SHAPES}; {KEEP}")
    for dense, classifier in orders:
        activation = head_activation(head, dense, classifier)
        if activation is not None:
            return HeadLayers(classifier, dense, activation)
    raise BenchError(f"the classifier head does not compute Linear, activation, Linear with an activation "
                     f"transformers has ({', '.join(ACTIVATIONS)}); {SHAPES}; {KEEP}")


@torch.no_grad()
def head_activation(head: nn.Module, dense: nn.Linear | None, classifier: nn.Linear) -> str | None:
    """The first ACTIVATIONS name with head(x) = classifier(act(dense(x))) (dense None: the identity) on every
    probe vector, with dropout off; None if no activation gives it."""
    from transformers.activations import ACT2FN

    probe_head = copy.deepcopy(head).to(device="cpu", dtype=torch.float64).eval()
    width = classifier.in_features
    if dense is None:
        dense_weight, dense_bias = torch.eye(width, dtype=torch.float64), torch.zeros(width, dtype=torch.float64)
    else:
        dense_weight, dense_bias = (t.double() for t in linear_weights(dense))
    out_weight, out_bias = (t.double() for t in linear_weights(classifier))
    x = torch.randn(PROBES, width, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x = x * (SPREAD / max(float((x @ dense_weight.T).std()), 1e-12))  # pre-activations of std SPREAD
    expected = probe_head(x)
    pre_activation = x @ dense_weight.T + dense_bias
    tolerance = PROBE_TOLERANCE * (1.0 + float(expected.abs().max()))
    for name in ACTIVATIONS:
        got = ACT2FN[name](pre_activation) @ out_weight.T + out_bias
        if got.shape == expected.shape and float((got - expected).abs().max()) <= tolerance:
            return name
    return None


def pooler_head_problem(fix: str = "") -> str:
    """Why `--pooling pooler` with a two-layer head (or an activation before the classifier) has no stock class;
    `fix`: the setting that trains the shared head instead (e.g. `--set lcl.head=linear`), '' for a generic one."""
    shared = fix or "the shared head (dropout + Linear)"
    return (f"--pooling pooler with a two-layer classifier head has no stock Hugging Face class (the encoder's pooler "
            f"and its tanh come before the head's Linear, activation, Linear); to export, train with {shared} or "
            f"with --pooling cls (the default), or keep the run's saved model")
