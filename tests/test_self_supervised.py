"""The self-supervised objectives `simcse` and `mirror-bert` (docs/METHODS.md section 9): their losses
(`info_nce`, `nt_xent`) against brute-force loops over rows, Mirror-BERT's span-masked copies
(`bench/data/spans.py`, the released `erase_and_mask`), the wiring of both methods on tiny-bert (which rows go
into the contrast, that labels never do, the per-epoch copies) and one tiny `clbench run` of each.

The references below share no code with `methods/`: cosines, log-sum-exps and means are written per row with
the `math` module, on float64 inputs."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math

import numpy as np
import pytest
import torch

import bench.methods  # noqa: F401  (registers every method)
import bench.methods.simcse as simcse_module
from bench import catalog
from bench.catalog import CatalogError
from bench.data.batching import Encoded
from bench.data.loading import load_dataset
from bench.data.spans import LITERAL, MIN_CHARS, SPAN, STREAM, masked_views, span_masked
from bench.encoders.models import build_encoder
from bench.methods.base import PrepareContext
from bench.methods.losses import info_nce, nt_xent
from bench.registry import METHODS
from bench.spec import TrainConfig, method_config
from bench.training.trainer import Trainer
from conftest import FIXTURE

D64 = torch.float64
TOL = dict(rel=1e-5, abs=1e-5)  # the losses may compute in float32


# ---------------------------------------------------------------------------------------------------------------
# brute-force references
# ---------------------------------------------------------------------------------------------------------------

def cosine(u: list[float], v: list[float]) -> float:
    dot = sum(a * b for a, b in zip(u, v))
    return dot / (math.sqrt(sum(a * a for a in u)) * math.sqrt(sum(b * b for b in v)))


def log_sum_exp(values) -> float:
    values = list(values)
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def info_nce_ref(anchors, positives, tau: float) -> float:
    """SimCSE: anchor i against the positives j = 1..M (its own the target), mean over the M anchors."""
    a, p = anchors.tolist(), positives.tolist()
    total = 0.0
    for i in range(len(a)):
        logits = [cosine(a[i], p[j]) / tau for j in range(len(p))]
        total += log_sum_exp(logits) - logits[i]
    return total / len(a)


def nt_xent_ref(first, second, tau: float, same_group=None) -> float:
    """NT-Xent over the 2M rows labelled by text position: row r's positive is r +- M, every other row but r a
    negative; mean over the 2M anchors. `same_group(r, s)`: rows also left out of r's negatives (a leaked label:
    only for showing that the real loss differs from such a variant)."""
    rows = first.tolist() + second.tolist()
    m, total = len(first), 0.0
    for r in range(2 * m):
        partner = (r + m) % (2 * m)
        kept = [s for s in range(2 * m) if s != r and (s == partner or same_group is None or not same_group(r, s))]
        logits = {s: cosine(rows[r], rows[s]) / tau for s in kept}
        total += log_sum_exp(logits.values()) - logits[partner]
    return total / (2 * m)


def randn(*shape, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=D64)


SimCSEConfig = METHODS.get("simcse").Config
MirrorConfig = METHODS.get("mirror-bert").Config
SHAPES = [(2, 3), (3, 8), (5, 4), (8, 16), (13, 7)]


# ---------------------------------------------------------------------------------------------------------------
# the losses
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows,dim", SHAPES)
@pytest.mark.parametrize("tau", [0.05, 0.3, 1.0])
def test_info_nce_matches_the_loop_over_anchors(rows, dim, tau):
    """Catches: a wrong target (not the diagonal), anchors among the candidates, dot product instead of
    cosine, tau multiplied instead of divided, a sum instead of a mean."""
    seed = 100 * rows + dim
    a, p = randn(rows, dim, seed=seed), randn(rows, dim, seed=seed + 1)
    p = p + 2.0 * a  # related pairs: the diagonal is not an arbitrary column
    assert info_nce(a, p, tau).item() == pytest.approx(info_nce_ref(a, p, tau), **TOL)


@pytest.mark.parametrize("rows,dim", SHAPES)
@pytest.mark.parametrize("tau", [0.04, 0.3, 1.0])
def test_nt_xent_matches_the_loop_over_all_two_m_anchors(rows, dim, tau):
    """Catches: one direction only, the self-pair left among the negatives, the other view's copy of the same
    row missing from the negatives, a wrong partner (r + M), a mean over M instead of 2M."""
    seed = 200 * rows + dim
    x, y = randn(rows, dim, seed=seed), randn(rows, dim, seed=seed + 1)
    y = y + 2.0 * x
    assert nt_xent(x, y, tau).item() == pytest.approx(nt_xent_ref(x, y, tau), **TOL)


def test_losses_are_invariant_to_vector_scale_and_follow_the_temperature():
    """Catches: unnormalised vectors (dot products), and a temperature not applied as 1/tau."""
    a, p = randn(6, 5, seed=1), randn(6, 5, seed=2)
    assert info_nce(3.0 * a, 0.25 * p, 0.1).item() == pytest.approx(info_nce(a, p, 0.1).item(), **TOL)
    assert nt_xent(3.0 * a, 0.25 * p, 0.1).item() == pytest.approx(nt_xent(a, p, 0.1).item(), **TOL)
    values = [info_nce(a, p, tau).item() for tau in (0.05, 0.5, 5.0)]
    assert values == pytest.approx([info_nce_ref(a, p, tau) for tau in (0.05, 0.5, 5.0)], **TOL)
    assert len(set(values)) == 3
    # a very high temperature flattens every softmax: log M (info_nce), log(2M - 1) (nt_xent)
    assert info_nce(a, p, 1e6).item() == pytest.approx(math.log(6), abs=1e-4)
    assert nt_xent(a, p, 1e6).item() == pytest.approx(math.log(11), abs=1e-4)


def test_the_default_temperatures_are_the_released_ones():
    """Catches: SimCSE's 0.05 and Mirror-BERT's 0.04 swapped or lost."""
    a, p = randn(4, 3, seed=3), randn(4, 3, seed=4)
    assert info_nce(a, p).item() == pytest.approx(info_nce_ref(a, p, 0.05), **TOL)
    assert nt_xent(a, p).item() == pytest.approx(nt_xent_ref(a, p, 0.04), **TOL)
    assert SimCSEConfig().tau == 0.05 and MirrorConfig().tau == 0.04
    assert SimCSEConfig().lambda_ == MirrorConfig().lambda_ == 0.5


def test_a_batch_of_one_gives_zero_and_a_zero_gradient():
    """Catches: a lone pair scored against itself (log 2 instead of 0) or a NaN from an all-masked row."""
    a = randn(1, 4, seed=5).requires_grad_(True)
    p = randn(1, 4, seed=6).requires_grad_(True)
    for loss in (info_nce(a, p), nt_xent(a, p)):
        assert loss.item() == pytest.approx(0.0, abs=1e-7)
        a.grad = p.grad = None
        loss.backward()
        assert torch.isfinite(a.grad).all() and torch.isfinite(p.grad).all()
        assert a.grad.abs().max().item() < 1e-6 and p.grad.abs().max().item() < 1e-6


def test_duplicate_rows_are_negatives_of_each_other():
    """Catches: identical texts (identical vectors) merged into one positive set, as labels by content would
    make them; pytorch-metric-learning labels rows by position, so a duplicate stays a negative."""
    x, y = randn(5, 6, seed=7), randn(5, 6, seed=8)
    x[3], y[3] = x[1], y[1]  # text 3 is text 1 again, both views
    value = nt_xent(x, y, 0.1).item()
    assert value == pytest.approx(nt_xent_ref(x, y, 0.1), **TOL)
    merged = nt_xent_ref(x, y, 0.1, same_group=lambda r, s: {r % 5, s % 5} == {1, 3})
    assert abs(value - merged) > 1e-3
    assert info_nce(x, y, 0.1).item() == pytest.approx(info_nce_ref(x, y, 0.1), **TOL)


@pytest.mark.parametrize("rows", [1, 2, 5])
def test_all_equal_vectors_give_log_of_the_candidate_count(rows):
    """Catches: the self-similarity in nt_xent's denominator (log 2M) or duplicates dropped from it."""
    v = torch.ones(rows, 4, dtype=D64) * torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=D64)
    assert info_nce(v, v.clone(), 0.05).item() == pytest.approx(math.log(rows), abs=1e-5)
    assert nt_xent(v, v.clone(), 0.04).item() == pytest.approx(math.log(2 * rows - 1), abs=1e-5)


def test_info_nce_is_one_directional_and_nt_xent_symmetric():
    """Catches: info_nce symmetrised (both directions averaged), or nt_xent scoring one view only."""
    for seed in range(5):
        a, p = randn(6, 5, seed=10 + seed), randn(6, 5, seed=20 + seed)
        forward, backward = info_nce(a, p, 0.2).item(), info_nce(p, a, 0.2).item()
        assert forward == pytest.approx(info_nce_ref(a, p, 0.2), **TOL)
        assert backward == pytest.approx(info_nce_ref(p, a, 0.2), **TOL)
        assert abs(forward - backward) > 1e-4
        assert nt_xent(a, p, 0.2).item() == pytest.approx(nt_xent(p, a, 0.2).item(), rel=1e-6, abs=1e-6)


def test_mismatched_shapes_are_refused():
    """Catches: broadcasting two differently sized views into a silently wrong loss."""
    a = randn(4, 3, seed=1)
    for loss in (info_nce, nt_xent):
        with pytest.raises(ValueError):
            loss(a, a[:3])
        with pytest.raises(ValueError):
            loss(a[0], a[0])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_inputs_are_computed_in_float32(dtype):
    """Catches: the contrast computed in the activations' half precision (as under --precision bf16 on a GPU:
    autocast gives the projection's output in bf16, and the losses turn autocast off without casting)."""
    torch.manual_seed(0)
    a = torch.randn(8, 16)
    p = a + 0.1 * torch.randn(8, 16)
    for loss in (info_nce, nt_xent):
        reference = loss(a, p)
        low = loss(a.to(dtype), p.to(dtype))
        assert low.dtype == torch.float32
        assert low.item() == pytest.approx(reference.item(), rel=2e-2, abs=1e-7)


def test_nt_xent_matches_pytorch_metric_learning_where_installed():
    """Catches: a departure from the loss the released Mirror-BERT calls (NTXentLoss, labels = position)."""
    pml = pytest.importorskip("pytorch_metric_learning.losses")
    x, y = randn(6, 5, seed=31).float(), randn(6, 5, seed=32).float()
    x[4] = x[2]
    labels = torch.arange(6).repeat(2)
    expected = pml.NTXentLoss(temperature=0.04)(torch.cat([x, y]), labels).item()
    assert nt_xent(x, y, 0.04).item() == pytest.approx(expected, rel=1e-5, abs=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# the span-masked copies
# ---------------------------------------------------------------------------------------------------------------

class FakeRng:
    """Returns the chosen starts in turn from `integers(high)`, recording each `high`."""

    def __init__(self, *starts: int):
        self.starts, self.highs = list(starts), []

    def integers(self, high, *args, **kwargs):
        self.highs.append(high)
        return self.starts.pop(0)


LONG = "the quick brown fox jumps over the lazy dog"  # 43 characters, no 5-character span repeats


def test_a_span_of_five_characters_becomes_the_mask_between_spaces():
    """Catches: a span of the wrong length, no spaces around the mask, a start drawn from the wrong range."""
    assert len({LONG[i:i + SPAN] for i in range(len(LONG) - SPAN + 1)}) == len(LONG) - SPAN + 1
    for seed in range(40):
        start = int(np.random.default_rng(seed).integers(len(LONG) - SPAN))
        out = span_masked(LONG, np.random.default_rng(seed))
        assert out == LONG[:start] + " " + LITERAL + " " + LONG[start + SPAN:]
        assert len(out) == len(LONG) - SPAN + len(LITERAL) + 2
    rng = FakeRng(0, len(LONG) - SPAN - 1)
    assert span_masked(LONG, rng) == " [MASK] " + LONG[5:]  # an empty left part keeps its space, as released
    assert span_masked(LONG, rng) == LONG[:-6] + " [MASK] " + LONG[-1:]  # the last start: the final character stays
    assert rng.highs == [len(LONG) - SPAN] * 2  # [0, len - 5), numpy's randint(len - 5)
    assert span_masked(LONG, FakeRng(3), span=2, token="<mask>") == LONG[:3] + " <mask> " + LONG[5:]


def test_short_texts_are_left_alone_and_draw_nothing():
    """Catches: texts under 30 characters (or of at most `span`) masked, or a random number drawn for them."""
    rng = FakeRng()
    for text in ("", "abc", "abcde", "x" * 29, "a text of twenty-nine chars."[:29]):
        assert span_masked(text, rng) == text
    assert span_masked("abcde", rng, min_chars=0) == "abcde"  # len <= span, whatever min_chars
    assert rng.highs == []
    assert span_masked("y" * 30 + "z", FakeRng(0), span=5) == " [MASK] " + "y" * 25 + "z"  # 31: masked
    thirty = "abcdefghijklmnopqrstuvwxyz0123"
    assert len(thirty) == MIN_CHARS and span_masked(thirty, FakeRng(2)) == "ab [MASK] hijklmnopqrstuvwxyz0123"
    assert span_masked("abcdefg", FakeRng(1), min_chars=0) == "a [MASK] g"


def test_the_split_is_at_the_first_occurrence_of_the_drawn_span():
    """Catches: slicing at the drawn start instead of the released `s.split(span, 1)`, which cuts at the span's
    first occurrence even where that lies before the drawn start."""
    text = "one abcde two three four abcde five six"
    second = text.index("abcde", 10)
    assert span_masked(text, FakeRng(second)) == "one  [MASK]  two three four abcde five six"
    assert span_masked(text, FakeRng(second)) != text[:second] + " [MASK] " + text[second + 5:]
    # an occurrence overlapping the drawn one: "aaaaaa..." cut at 0 whatever the start
    assert span_masked("a" * 40, FakeRng(17)) == " [MASK] " + "a" * 35


def test_views_are_seeded_by_seed_and_epoch():
    """Catches: unseeded copies (runs not reproducible) or the same span every epoch (the released loader masks
    anew each time a text is loaded)."""
    texts = [LONG, "short one", "another rather long text about the weather today", LONG[::-1]]
    assert masked_views(texts, 3, 0) == masked_views(texts, 3, 0)
    assert masked_views(texts, 3, 0)[1] == "short one"
    epochs = [masked_views(texts, 3, e) for e in range(4)]
    assert len({views[0] for views in epochs}) > 1  # the long text's span moves between epochs
    assert masked_views(texts, 3, 0) != masked_views(texts, 4, 0)
    rng = np.random.default_rng([3, 2, STREAM])
    assert masked_views(texts, 3, 2) == [span_masked(t, rng) for t in texts]  # one generator per (seed, epoch)
    shuffle = np.random.default_rng([3, 2])  # the Trainer's batch order of epoch 2: not the spans' stream
    assert masked_views(texts, 3, 2) != [span_masked(t, shuffle) for t in texts]
    assert masked_views(texts, 3, 2, token="<mask>") == [v.replace(LITERAL, "<mask>") for v in epochs[2]]


def test_a_short_text_does_not_shift_the_next_texts_span():
    """Catches: a draw made (and discarded) for an unmasked text, which would change every later text's span."""
    long_texts = [LONG, "another rather long text about the weather today"]
    for seed in range(10):
        assert masked_views(["tiny", long_texts[0], "also short", long_texts[1]], seed, 1)[1::2] == \
            masked_views(long_texts, seed, 1)


# ---------------------------------------------------------------------------------------------------------------
# wiring on tiny-bert
# ---------------------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def fixture():
    """The tiny fixture, a tiny-bert bundle and the tokenised training split (built once)."""
    data = load_dataset(str(FIXTURE))
    torch.manual_seed(0)
    bundle = build_encoder("tiny-bert", data.train.texts, TrainConfig(max_length=32))
    train = Encoded(bundle.tokenize(data.train.texts), data.train.labels)
    return data, bundle, train


def build(name: str, tmp_path, bundle=None, seed: int = 1, **knobs):
    """The method `name` (its variant's knobs implied) on a copy of tiny-bert, prepared as a shard prepares it."""
    data, base, _ = fixture()
    cls = METHODS.get(name)
    torch.manual_seed(0)
    method = cls(copy.deepcopy(base.model), data.num_labels, cls.Config(**dict(method_config(name, knobs))))
    method.prepare(PrepareContext(list(data.train.texts), data.label_names, bundle or base, seed, tmp_path / "cache",
                                  tmp_path, bucket=8, max_width=32))
    return method


def collated(method, index) -> dict[str, torch.Tensor]:
    _, bundle, train = fixture()
    return method.collate(train, np.asarray(index), bundle.pad_id, bundle.min_length, 8, 32)


def seeded_loss(method, batch, seed: int = 0) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)  # the same dropout masks at every call
    return method.loss(batch)


def real_tokens(ids: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
    return [row[m.bool()].tolist() for row, m in zip(ids, mask)]


def long_and_short():
    """Indices of training texts of at least 30 characters and of fewer."""
    texts = fixture()[0].train.texts
    return ([i for i, t in enumerate(texts) if len(t) >= MIN_CHARS],
            [i for i, t in enumerate(texts) if len(t) < MIN_CHARS])


def mask_id() -> int:
    return fixture()[1].tokenize([LITERAL])[0][1]


@pytest.mark.parametrize("name,key", [("simcse", "simcse"), ("mirror-bert", "mirror")])
def test_the_contrastive_term_never_reads_the_labels(name, key, tmp_path):
    """Catches: labels entering the contrast (positives or negatives by class): new labels leave it unchanged
    while the CE does change."""
    method = build(name, tmp_path)
    method.on_epoch_start(0)
    batch = collated(method, np.arange(8))
    relabelled = {**batch, "labels": (batch["labels"] + 1) % fixture()[0].num_labels}
    shuffled = {**batch, "labels": batch["labels"][torch.randperm(8, generator=torch.Generator().manual_seed(1))]}
    method.train()
    losses = seeded_loss(method, batch)
    for other in (relabelled, shuffled):
        again = seeded_loss(method, other)
        assert torch.equal(losses[key], again[key])
    assert not torch.equal(losses["ce"], seeded_loss(method, relabelled)["ce"])  # the labels did change
    assert set(losses) == {"ce", key}


def test_simcse_contrasts_two_dropout_views_of_the_same_text(tmp_path, monkeypatch):
    """Catches: the positive taken from another text (a shifted or shuffled second half), the contrast skipping
    the projection, or a wrong temperature passed on."""
    seen = {}

    def spy(anchors, positives, tau=0.05):
        seen.update(anchors=anchors.detach().clone(), positives=positives.detach().clone(), tau=tau)
        return info_nce(anchors, positives, tau)

    monkeypatch.setattr(simcse_module, "info_nce", spy)
    method = build("simcse", tmp_path, tau=0.07)
    batch = collated(method, [5, 0, 12, 3, 30, 7])
    method.eval()  # dropout off: the two views of a text coincide
    losses = method.loss(batch)
    assert seen["tau"] == 0.07 and seen["anchors"].shape == (6, method.encoder.hidden_size)
    assert torch.allclose(seen["anchors"], seen["positives"], atol=1e-5)
    with torch.no_grad():
        projected = method.projection(method.encode(batch).pooled)
    assert torch.allclose(seen["anchors"], projected, atol=1e-5)  # through Linear + Tanh
    assert seen["anchors"].abs().max() < 1  # tanh's range
    distinct = torch.cdist(seen["anchors"], seen["positives"])
    assert (distinct.diagonal() < 1e-4).all() and (distinct + torch.eye(6) > 1e-3).all()  # six texts, six vectors
    assert losses["simcse"].item() == pytest.approx(0.5 * info_nce(seen["anchors"], seen["positives"], 0.07).item(),
                                                    rel=1e-5)
    method.train()
    method.loss(batch)
    assert not torch.allclose(seen["anchors"], seen["positives"], atol=1e-3)  # dropout: two different views


def test_mirror_bert_second_rows_are_this_epochs_masked_copies(tmp_path, monkeypatch):
    """Catches: the second rows not the copies of the batch's own texts (an index mix-up), copies not redrawn
    per epoch, or drawn with another seed than the run's."""
    data, bundle, train = fixture()
    long, short = long_and_short()
    index = long[:5] + short[:2]
    method = build("mirror-bert", tmp_path, seed=7)
    seen = []
    encode = method.encode
    monkeypatch.setattr(method, "encode", lambda batch: seen.append(batch) or encode(batch))
    with pytest.raises(RuntimeError, match="on_epoch_start"):
        collated(method, index)
    method.train()
    rows = {}
    for epoch in (0, 1):
        method.on_epoch_start(epoch)
        method.loss(collated(method, index))
        ids = real_tokens(seen[-1]["input_ids"], seen[-1]["attention_mask"])
        assert len(ids) == 2 * len(index) and len(seen) == epoch + 1  # one forward pass for both
        assert ids[:len(index)] == [train.token_ids[i] for i in index]
        copies = masked_views(data.train.texts, 7, epoch)
        assert ids[len(index):] == bundle.tokenize([copies[i] for i in index])
        for i, row in zip(index, ids[len(index):]):
            masked = len(data.train.texts[i]) >= MIN_CHARS
            assert (mask_id() in row) == masked and (row == train.token_ids[i]) != masked
        rows[epoch] = ids[len(index):]
    assert rows[0][-2:] == rows[1][-2:]  # short texts: never masked
    assert rows[0][:5] != rows[1][:5]  # long texts: a new span in epoch 1


def test_mirror_bert_variants_choose_the_mask_string(tmp_path):
    """Catches: the paper variant ignoring the tokenizer's mask token, or the released one not using the literal
    [MASK] (which it keeps even where the tokenizer's token differs, as RoBERTa's <mask>)."""
    data, base, _ = fixture()
    asked = []

    def tokenize(texts):
        asked.append(list(texts))
        return base.tokenize(texts)

    roberta_like = dataclasses.replace(base, mask_token="<mask>", tokenize=tokenize)
    assert dict(method_config("mirror-bert", {"variant": "paper"}))["mask"] == "tokenizer"
    assert dict(method_config("mirror-bert", {}))["mask"] == "literal"
    for variant, token in (("paper", "<mask>"), ("released", LITERAL)):
        method = build("mirror-bert", tmp_path, bundle=roberta_like, seed=2, variant=variant)
        method.on_epoch_start(3)
        assert asked[-1] == masked_views(data.train.texts, 2, 3, token=token)
        other = "[MASK]" if token == "<mask>" else "<mask>"
        assert any(token in t for t in asked[-1]) and not any(other in t for t in asked[-1])


def test_the_trainer_draws_new_copies_at_the_start_of_every_epoch(tmp_path, monkeypatch):
    """Catches: the hook not called by the Trainer (copies drawn once), called with the wrong epoch, or called
    after the epoch's first batch was collated."""
    data, bundle, train = fixture()
    method = build("mirror-bert", tmp_path, seed=4)
    cfg = TrainConfig(batch_size=8, max_length=32, lr=1e-3, epochs=2)
    trainer = Trainer(method, cfg, torch.device("cpu"), bundle.pad_id, 4, bundle.min_length, progress=False, bucket=8)
    events, loss = [], method.loss
    on_epoch_start = method.on_epoch_start
    monkeypatch.setattr(method, "on_epoch_start", lambda epoch: events.append(("epoch", epoch)) or
                        on_epoch_start(epoch))

    def checked_loss(batch):
        epoch = [e for kind, e in events if kind == "epoch"][-1]
        copies = bundle.tokenize([masked_views(data.train.texts, 4, epoch)[i] for i in batch["index"].tolist()])
        assert real_tokens(batch["view_input_ids"], batch["view_attention_mask"]) == copies
        events.append(("step", epoch))
        return loss(batch)

    monkeypatch.setattr(method, "loss", checked_loss)
    validation = Encoded(bundle.tokenize(data.validation.texts), data.validation.labels)
    fit = trainer.fit(train, validation)
    steps = math.ceil(len(train) / 8)
    assert events == [("epoch", 0)] + [("step", 0)] * steps + [("epoch", 1)] + [("step", 1)] * steps
    assert all("train_mirror" in record for record in fit.history)


@pytest.mark.parametrize("name", ["simcse", "mirror-bert"])
def test_two_texts_of_one_class_stay_negatives(name, tmp_path, monkeypatch):
    """Catches: labels leaking into the positive definition (same-class texts as extra positives, or removed
    from the negatives): the term equals the label-free loss recomputed by hand from the encoder's rows, and
    differs from the label-aware variant."""
    data, _, _ = fixture()
    labels = data.train.labels
    food = [i for i in range(len(labels)) if labels[i] == 0][:3]
    sport = [i for i in range(len(labels)) if labels[i] == 1][:2]
    index = food + sport + [food[0]]  # three texts of one class, and one text twice
    method = build(name, tmp_path)
    method.on_epoch_start(0)
    batch = collated(method, index)
    pooled = []
    encode = method.encode

    def spy(rows):
        out = encode(rows)
        pooled.append(out.pooled.detach().to(D64))
        return out

    monkeypatch.setattr(method, "encode", spy)
    method.train()
    losses = seeded_loss(method, batch)
    m, h = len(index), pooled[-1]
    assert h.shape[0] == 2 * m
    label_of = [int(labels[i]) for i in index] * 2
    same_class = lambda r, s: label_of[r] == label_of[s]  # noqa: E731
    if name == "simcse":
        linear = method.projection[0]
        z = torch.tanh(h @ linear.weight.detach().to(D64).T + linear.bias.detach().to(D64))
        expected = 0.5 * info_nce_ref(z[:m], z[m:], 0.05)
        value = losses["simcse"].item()
        leaked = 0.5 * info_nce_leaked(z[:m], z[m:], 0.05, label_of[:m])
    else:
        expected = 0.5 * nt_xent_ref(h[:m], h[m:], 0.04)
        value = losses["mirror"].item()
        leaked = 0.5 * nt_xent_ref(h[:m], h[m:], 0.04, same_group=same_class)
    assert value == pytest.approx(expected, rel=1e-4, abs=1e-5)
    assert abs(value - leaked) > 1e-3


def info_nce_leaked(anchors, positives, tau: float, labels: list[int]) -> float:
    """info_nce with same-class positives left out of the denominator (what a leaked label would compute)."""
    a, p = anchors.tolist(), positives.tolist()
    total = 0.0
    for i in range(len(a)):
        logits = {j: cosine(a[i], p[j]) / tau for j in range(len(p)) if j == i or labels[j] != labels[i]}
        total += log_sum_exp(logits.values()) - logits[i]
    return total / len(a)


# ---------------------------------------------------------------------------------------------------------------
# end to end
# ---------------------------------------------------------------------------------------------------------------

def test_clbench_runs_both_methods_end_to_end(cli, tiny, tmp_path):
    """Catches: a method that registers but cannot train through `clbench run` (per-epoch views never drawn,
    loss parts not logged), rows stored under an alias, or an alias resolving to a new shard."""
    results = tmp_path / "e2e"
    args = ["--datasets", tiny, "--encoders", "tiny-bert", "--seeds", "1", "--epochs", "2", "--lr", "5e-3",
            "--max-length", "32", "--batch-size", "8", "--no-progress", "--evaluators", "none",
            "--results-dir", results]
    code, _, err = cli("run", "--methods", "simcse,mirror-bert", *args)
    assert code == 0, err
    folders = {p.name.split("_")[0]: p for p in results.iterdir() if (p / "rows.json").exists()}
    assert set(folders) == {"simcse", "mirror-bert"}
    for name, part in (("simcse", "train_simcse"), ("mirror-bert", "train_mirror")):
        rows = json.loads((folders[name] / "rows.json").read_text())
        assert rows and {row["method"] for row in rows} == {name}
        history = json.loads((folders[name] / "train_log.json").read_text())["history"]
        assert len(history) == 2 and all(part in r and "train_ce" in r and math.isfinite(r[part]) for r in history)
    stamps = {p: (p / "rows.json").stat().st_mtime_ns for p in folders.values()}
    assert METHODS.canonical("SimCSE") == "simcse"
    assert METHODS.canonical("Mirror-BERT") == METHODS.canonical("mirrorbert") == "mirror-bert"
    code, _, err = cli("run", "--methods", "SimCSE,Mirror-BERT", *args)  # the same shards: done, not retrained
    assert code == 0, err
    assert {p for p in results.iterdir() if (p / "rows.json").exists()} == set(stamps)
    assert all((p / "rows.json").stat().st_mtime_ns == t for p, t in stamps.items())


def test_the_methods_benchmark_times_mirror_bert(tiny, capsys):
    """Catches: a benchmark that builds a method as a shard does but skips the per-epoch hook before collating."""
    from benchmarks import main as perf_main

    code = perf_main(["methods", "--dataset", str(tiny), "--encoder", "tiny-bert", "--max-length", "32",
                      "--rounds", "1", "--batch-size", "8", "--steps", "2", "--methods", "mirror-bert", "--quiet",
                      "--device", "cpu"])
    assert code == 0
    assert "mirror-bert" in json.loads(capsys.readouterr().out)["step_seconds"]


def test_the_source_catalog_reads_both_methods():
    """Catches: a Config default the torch-free catalog cannot read (names, not literals), which turns off the
    fast checks of `clbench run` for every method."""
    entries = {e.name: e for e in catalog.parse("method")}
    for name in ("simcse", "mirror-bert"):
        cls = METHODS.get(name)
        assert entries[name].config_fields() == cls.config_fields()
        assert entries[name].variant_knobs() == cls.variant_knobs()
        assert sorted(entries[name].aliases) == sorted(METHODS.aliases_of(name))
