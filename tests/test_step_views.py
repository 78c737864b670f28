"""Word-substitution views are built when a training batch is collated (`Method.collate`), not inside `loss()`:
the rows the encoder sees, and so every loss, are bit-identical to the old path (each view collated alone at its
own width, then padded to the widest on the device and stacked: rebuilt by hand below), and a whole training
step of every registered method is pure device work on the batch tensors (no host lookup: the batch's `index`
is removed; no host synchronisation), as capturing a step as a CUDA graph needs (issue 43). The tiny WordNet of
tests/conftest.py gives the synonym and antonym views on any machine."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bench.methods  # noqa: F401  (registers every method)
from bench.data.batching import Encoded, collate, length_grouped_batches, take_padded
from bench.methods.cline import ANTONYM, SYNONYM, token_labels, uncertainty_weighted
from bench.methods.losses import cline_bce_loss, cline_contrastive_loss, cline_token_loss, replaced_token_loss
from bench.methods.views import SecondView, TokenViews
from bench.registry import METHODS
from bench.spec import method_config
from benchmarks.syncs import HostSyncCounter
from test_fast_path import fixture_trainer

BASE_KEYS = {"input_ids", "attention_mask", "labels", "index"}
FLAGGED = ("input_ids", "attention_mask", "replaced", "candidate")
KNOBS = {"clld-static": {"pairs": (("food", "sport"),)}}  # the fixture's labels are food and sport


def setup(tiny, name: str, bucket: int = 8, **knobs):
    """fixture_trainer's Trainer (tiny-bert, prepared, length bucket 8) with the knobs a `--set` would give
    (the variant's implied knobs included); `bucket` re-pads both the Trainer's batches and the views."""
    trainer, train = fixture_trainer(tiny, name, 50, **dict(method_config(name, {**KNOBS.get(name, {}), **knobs})))
    trainer.bucket = bucket
    for views in word_views(trainer.method).values():
        views.bucket = bucket
    return trainer, train


def word_views(method) -> dict:
    """prefix -> TokenViews of the method's word-substitution views ({} for none)."""
    if hasattr(method, "syn") and method.syn is not None:
        return {"syn": method.syn, "ant": method.ant}
    return {"syn": method.views} if isinstance(method, SecondView) and method.views is not None else {}


def reshaped(views: TokenViews, shift: int) -> TokenViews:
    """The views with lengths unlike their originals' (as sub-word tokenizers give; tiny-bert's word vocabulary
    keeps every view as long as its text): per example, by (i + shift) % 3, its second token repeated twice,
    kept, or dropped; flags follow their tokens."""
    def edit(row, i):
        how = (i + shift) % 3
        return row[:1] + row[1:2] * 2 + row[1:] if how == 0 else row if how == 1 or len(row) < 4 else row[:1] + row[2:]

    ids = [edit(r, i) for i, r in enumerate(views.encoded.token_ids)]
    flags = [[edit(r, i) for i, r in enumerate(table)] for table in (views.replaced, views.candidate)]
    return TokenViews(Encoded(ids, views.encoded.labels), flags[0], views.pad_id, views.min_length, views.bucket,
                      views.max_width, flags[1])


# ----------------------------------------------------------------------------------------------- the old path

def old_plain_batch(trainer, data, index) -> dict[str, torch.Tensor]:
    """The old Trainer.batch (without the device copy): the plain collation."""
    return collate(data, index, trainer.pad_id, trainer.min_length, bucket=trainer.bucket,
                   max_width=trainer.cfg.max_length)


def old_view_batch(views, index) -> dict[str, torch.Tensor]:
    """The old TokenViews.batch: the views at `index` collated alone, at their own width, with their flags."""
    out = collate(views.encoded, index, views.pad_id, views.min_length, bucket=views.bucket, max_width=views.max_width)
    width, lengths = out["input_ids"].shape[1], views.encoded.lengths[index]
    for key, matrix in (("replaced", views.replaced_matrix), ("candidate", views.candidate_matrix)):
        out[key] = torch.from_numpy(take_padded(matrix, index, width, lengths, 0.0))
    return out


def old_stacked(*batches, pad_id: int) -> dict[str, torch.Tensor]:
    """The old views.stacked: padded batches padded to the widest (pad_id in input_ids, 0 elsewhere) and
    concatenated along rows."""
    width = max(b["input_ids"].shape[1] for b in batches)

    def widen(t, fill):
        return nn.functional.pad(t, (0, width - t.shape[1]), value=fill) if t.ndim == 2 else t

    return {key: torch.cat([widen(b[key], pad_id if key == "input_ids" else 0) for b in batches])
            for key in batches[0]}


def old_cline_loss(method, batch, syn, ant) -> dict[str, torch.Tensor]:
    """The old CLINE.loss body on views collated alone (`old_view_batch`)."""
    m = batch["labels"].shape[0]
    released = method.config.variant == "released"
    rows = old_stacked(batch, syn, ant, pad_id=method.syn.pad_id)
    out = method.encode(rows)
    sentence = out.pooler if released and out.pooler is not None else out.pooled
    h = sentence.float()
    ce = F.cross_entropy(method.head(out.pooled[:m]).float(), batch["labels"])
    if method.config.sentence_loss == "eq6":
        cts = cline_contrastive_loss(h[:m], h[m:2 * m], h[2 * m:])
    else:
        cts = 0.5 * (cline_bce_loss(h[:m], h[m:2 * m], 1.0) + cline_bce_loss(h[:m], h[2 * m:], 0.0))
    width = rows["input_ids"].shape[1]

    def widened(key):
        return [F.pad(v[key], (0, width - v[key].shape[1])) for v in (syn, ant)]

    if released:
        (syn_rep, ant_rep), (syn_cand, ant_cand) = widened("replaced"), widened("candidate")
        labels = torch.cat([token_labels(syn_rep, syn_cand, SYNONYM), token_labels(ant_rep, ant_cand, ANTONYM)])
        rtd = cline_token_loss(method.rtd_head(out.tokens[m:]), labels)
    else:
        token_logits = method.rtd_head(out.tokens[m:]).squeeze(-1)
        rtd = replaced_token_loss(token_logits, torch.cat(widened("replaced")), rows["attention_mask"][m:])
    if method.log_vars is None:
        return {"ce": ce, "cts": method.config.lambda_cts * cts, "rtd": method.config.lambda_rtd * rtd}
    return uncertainty_weighted({"ce": ce, "cts": cts, "rtd": rtd}, method.log_vars, clamped=released)


def old_loss(method, trainer, data, index) -> dict[str, torch.Tensor]:
    """The losses as the old path computed them: plain batch, views looked up and padded inside `loss()`."""
    batch = old_plain_batch(trainer, data, index)
    views = {prefix: old_view_batch(v, index) for prefix, v in word_views(method).items()}
    if set(views) == {"syn", "ant"}:
        return old_cline_loss(method, batch, views["syn"], views["ant"])
    method.paired_rows = lambda b: old_stacked(b, views["syn"], pad_id=method.views.pad_id)  # old with_second_view
    try:
        return method.loss(batch)
    finally:
        del method.paired_rows


# ----------------------------------------------------------------------------------------------- bit identity

VIEW_CASES = [("cline", {"variant": "released"}), ("cline", {"variant": "paper"}), ("dcl", {"views": "synonym"}),
              ("lcl", {"views": "synonym"})]


@pytest.mark.parametrize("bucket,lengths", [(8, "drawn"), (0, "drawn"), (0, "reshaped")])
@pytest.mark.parametrize("name,knobs", VIEW_CASES)
def test_losses_from_the_new_collation_equal_the_old_paths_bit_for_bit(tiny, name, knobs, bucket, lengths):
    trainer, train = setup(tiny, name, bucket, **knobs)
    method = trainer.method
    if lengths == "reshaped":  # views wider and narrower than their originals: the common width is exercised
        if name == "cline":
            method.syn, method.ant = reshaped(method.syn, 0), reshaped(method.ant, 1)
        else:
            method.views = reshaped(method.views, 0)
    views = word_views(method)
    assert views and (name != "cline" or method.config.variant == knobs["variant"])
    state = {k: v.clone() for k, v in method.state_dict().items()}  # dcl's PowerNorm statistics move in training
    widths_differ = False
    for index in length_grouped_batches(train.lengths, 4, np.random.default_rng(0))[:3]:
        new = trainer.batch(train, index, training=True)
        assert set(new) == BASE_KEYS | {f"{p}_{k}" for p in views for k in (FLAGGED if name == "cline" else FLAGGED[:2])}
        old = old_plain_batch(trainer, train, index)
        alone = [old] + [old_view_batch(v, index) for v in views.values()]
        widths = {b["input_ids"].shape[1] for b in alone}
        widths_differ |= len(widths) > 1
        rows = old_stacked(*alone, pad_id=trainer.pad_id)  # what the encoder saw: the same tensors now
        assert new["input_ids"].shape[1] == max(widths)
        for key in ("input_ids", "attention_mask"):
            assert torch.equal(torch.cat([new[key]] + [new[f"{p}_{key}"] for p in views]), rows[key])
        assert torch.equal(new["labels"], old["labels"]) and torch.equal(new["index"], old["index"])
        for mode, seed in (("eval", None), ("train", 123)):
            method.train(mode == "train")
            results = []
            for compute in (lambda: method.loss(new), lambda: old_loss(method, trainer, train, index)):
                method.load_state_dict(state)
                if seed is not None:
                    torch.manual_seed(seed)  # the same dropout masks on both paths
                results.append({k: v.detach() for k, v in compute().items()})
            assert set(results[0]) == set(results[1])
            for key in results[0]:
                assert torch.equal(results[0][key], results[1][key]), (name, knobs, mode, key)
    assert widths_differ == (lengths == "reshaped")  # reshaped: some batch's parts differ in width


def test_cline_rows_follow_the_views_flags(tiny):
    trainer, train = setup(tiny, "cline", 0)
    index = np.arange(6)
    batch = trainer.batch(train, index, training=True)
    width = batch["input_ids"].shape[1]
    for prefix in ("syn", "ant"):
        views = trainer.method.syn if prefix == "syn" else trainer.method.ant
        lengths = torch.from_numpy(views.encoded.lengths[index])
        assert batch[f"{prefix}_input_ids"].shape == batch[f"{prefix}_replaced"].shape == (6, width)
        assert torch.equal(batch[f"{prefix}_attention_mask"].sum(1), lengths)
        padding = batch[f"{prefix}_attention_mask"] == 0
        assert not batch[f"{prefix}_replaced"][padding].any() and not batch[f"{prefix}_candidate"][padding].any()
        assert (batch[f"{prefix}_input_ids"][padding] == trainer.pad_id).all()
        assert batch[f"{prefix}_replaced"].sum() > 0 and batch[f"{prefix}_replaced"].dtype == torch.float32


def test_prediction_batches_stay_plain_and_a_plain_batch_cannot_train_with_views(tiny):
    trainer, train = setup(tiny, "cline")
    index = np.arange(4)
    trainer.method.eval()  # as Trainer.predict leaves it
    assert set(trainer.batch(train, index)) == BASE_KEYS
    assert set(trainer.batch(train, index, training=False)) == BASE_KEYS
    trainer.method.train()
    assert "ant_candidate" in trainer.batch(train, index)
    assert set(trainer.batch(train, index, training=False)) == BASE_KEYS
    with pytest.raises(RuntimeError, match="no 'syn' views"):
        trainer.method.loss(trainer.batch(train, index, training=False))
    assert trainer.predict(train).shape == (len(train), trainer.method.num_labels)


def test_methods_with_views_need_prepare_before_collating(tiny):
    trainer, train = setup(tiny, "dcl", views="synonym")
    trainer.method.views = None
    with pytest.raises(RuntimeError, match="prepare"):
        trainer.batch(train, np.arange(4), training=True)


# ----------------------------------------------------------------------------------------------- one step

def step_cases() -> list:
    """Every registered method with its defaults; methods with a `views` knob (SecondView) with each kind of
    view; cline in both variants."""
    cases = []
    for name in METHODS:
        if issubclass(METHODS.get(name), SecondView):
            cases += [(name, {"views": "dropout"}), (name, {"views": "synonym"})]
        elif name == "cline":
            cases += [(name, {"variant": "released"}), (name, {"variant": "paper"})]
        else:
            cases.append((name, {}))
    return cases


@pytest.mark.parametrize("name,knobs", step_cases())
def test_a_training_step_is_pure_device_work_on_the_batch(tiny, name, knobs):
    trainer, train = setup(tiny, name, **knobs)
    optimizer = trainer.optimizer(fused=True)  # as on a GPU (the CPU's default AdamW reads its step counts)
    trainer.method.train()
    trainer.method.on_epoch_start(0)  # as Trainer.train_epoch does before collating (mirror-bert draws its views)
    index = length_grouped_batches(train.lengths, 4, np.random.default_rng(0))[0]
    batch = trainer.batch(train, index)
    assert set(BASE_KEYS) <= set(batch)
    del batch["index"]  # the step may not look anything up on the host
    before = [p.detach().clone() for p in trainer.method.parameters() if p.requires_grad]
    with HostSyncCounter() as counter:
        losses, total = trainer.step(batch, optimizer)
    assert counter.total == 0, dict(counter.counts)
    assert losses and torch.isfinite(total)
    after = [p.detach() for p in trainer.method.parameters() if p.requires_grad]
    assert any(not torch.equal(a, b) for a, b in zip(before, after))  # the step trained
