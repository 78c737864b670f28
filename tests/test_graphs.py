"""Whole-step CUDA graphs, checked on a CPU: the graph-ready step (static buffers, gradients zeroed in place, the
learning rate in a tensor, the capturable fused AdamW, partial batches eager) trains bit-identically to the plain
step for every method; each method's step issues the same operations at every step of one batch shape and keeps its
state tensors in place (what a captured graph replays); `--cuda-graphs` decides and records as documented."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import bench.methods  # noqa: F401
from bench.data.batching import Encoded
from bench.data.loading import load_dataset
from bench.encoders.models import build_encoder
from bench.methods.base import PrepareContext, Progress
from bench.registry import METHODS
from bench.spec import TrainConfig
from bench.training.graphs import StepGraphs, graphs_decision, signature, tensor_learning_rates
from bench.training.setup import seed_everything
from bench.training.trainer import Trainer
from conftest import FAST

# every registered method, and those with a `views` knob also with word-substitution views
METHOD_CASES = [(m, {}) for m in ("ce", "cl", "clld-adaptive", "supcon", "lcl", "dcl", "cline", "simcse",
                                   "mirror-bert")] + [
    ("clld-static", {"pairs": (("sport", "food"),)}), ("lcl", {"views": "synonym"}), ("dcl", {"views": "dropout"}),
    ("supcon", {"views": 1})]


@functools.lru_cache(maxsize=None)
def fixture_encoder():
    """The tiny fixture and a tiny-bert bundle built once (each trainer deep-copies its weights)."""
    data = load_dataset(str(Path(__file__).parents[1] / "datasets" / "fixtures" / "tiny"))
    cfg = TrainConfig(batch_size=4, max_length=32)
    seed_everything(0)
    return data, build_encoder("tiny-bert", data.train.texts, cfg)


def make_trainer(tiny, method: str, graph_step: bool, epochs: int = 2, **knobs):
    """A tiny-bert Trainer of `method` on the tiny fixture (batch 4: 45 examples give a partial last batch); the
    plain step uses the fused AdamW, as on a GPU, so that both steps run the same optimiser kernel."""
    data, bundle = fixture_encoder()
    cfg = TrainConfig(batch_size=4, max_length=32, lr=1e-3, epochs=epochs, warmup_ratio=0.2)
    seed_everything(0)
    cls = METHODS.get(method)
    model = cls(copy.deepcopy(bundle.model), data.num_labels, cls.Config(**knobs))
    model.prepare(PrepareContext(data.train.texts, data.label_names, bundle, 0, tiny / "cache", tiny, bucket=8,
                                 max_width=32))
    trainer = Trainer(model, cfg, torch.device("cpu"), bundle.pad_id, 0, bundle.min_length, progress=False,
                      bucket=8, graph_step=graph_step)
    if not graph_step:
        trainer.optimizer = functools.partial(Trainer.optimizer, trainer, fused=True)
    encode = bundle.tokenize
    train = Encoded(encode(data.train.texts), data.train.labels)
    val = Encoded(encode(data.validation.texts), data.validation.labels)
    return trainer, train, val


@pytest.mark.slow
@pytest.mark.parametrize("method,knobs", METHOD_CASES)
def test_the_graph_ready_step_trains_bit_identically_to_the_plain_step(tiny, method, knobs):
    plain, train, val = make_trainer(tiny, method, graph_step=False, **knobs)
    plain_fit = plain.fit(train, val)
    graphed, train, val = make_trainer(tiny, method, graph_step=True, **knobs)
    graphed_fit = graphed.fit(train, val)
    assert len(train) % 4 != 0 and graphed.step_graphs.eager_steps == 2  # one partial batch per epoch, eager
    assert graphed.step_graphs.shapes and all(s.runs > 1 for s in graphed.step_graphs.shapes.values())
    for a, b in zip(plain_fit.history, graphed_fit.history):
        assert {k: v for k, v in a.items() if "second" not in k and "per_s" not in k} == \
               {k: v for k, v in b.items() if "second" not in k and "per_s" not in k}
    plain_state, graphed_state = plain.method.state_dict(), graphed.method.state_dict()
    assert plain_state.keys() == graphed_state.keys()
    different = [k for k in plain_state if torch.is_tensor(plain_state[k])
                 and not torch.equal(plain_state[k], graphed_state[k])]
    assert not different
    assert np.array_equal(plain.predict(val), graphed.predict(val))


class OpRecorder(TorchDispatchMode):
    """The ATen operations a block of code issues, by name and argument shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
        self.ops.append((str(func), shapes))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("method,knobs", METHOD_CASES)
def test_every_step_of_one_shape_issues_the_same_operations_on_the_same_state(tiny, method, knobs):
    """What a captured graph replays is the operations of the captured step on the same memory: a Python branch on
    a changing value, or state replaced instead of updated in place, would make a replay differ from eager."""
    trainer, train, _ = make_trainer(tiny, method, graph_step=True, epochs=1, **knobs)
    assert METHODS.get(method).capturable
    optimizer = trainer.optimizer()
    tensor_learning_rates(optimizer, trainer.device)
    run = trainer.graphed_steps(optimizer)
    trainer.method.train()
    trainer.method.on_epoch_start(0)  # as Trainer.train_epoch does before collating (mirror-bert draws its views)
    index = np.arange(4)
    batch = trainer.host_batch(train, index, training=True)
    sequences, pointers = [], []
    for step in range(4):
        with OpRecorder() as recorder:
            run(batch)
        sequences.append(recorder.ops)
        trainer.method.on_step_end(Progress(1, 1, step + 1, 4))
        state = [t for t in trainer.method.state_dict(keep_vars=True).values() if torch.is_tensor(t)]
        state += [g["lr"] for g in optimizer.param_groups]
        state += [p.grad for p in trainer.method.parameters() if p.grad is not None]
        state += [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
        pointers.append([t.data_ptr() for t in state])
    assert sequences[1] == sequences[2] == sequences[3]  # the first step creates the optimiser's state
    assert pointers[1] == pointers[2] == pointers[3]


def test_step_graphs_keep_one_set_of_static_buffers_per_shape_and_run_partial_batches_eagerly():
    seen = []
    graphs = StepGraphs(lambda batch: seen.append(batch) or batch["x"].sum(), torch.device("cpu"), rows=4)
    full = {"x": torch.ones(4, 8), "index": torch.arange(4)}
    graphs(full)
    graphs({"x": torch.full((4, 8), 2.0), "index": torch.arange(4)})
    graphs({"x": torch.ones(4, 16), "index": torch.arange(4)})
    graphs({"x": torch.ones(3, 8), "index": torch.arange(3)})
    assert "index" not in seen[0] and seen[0]["x"] is seen[1]["x"] and float(seen[1]["x"].sum()) == 64
    assert seen[2]["x"] is not seen[0]["x"] and len(graphs.shapes) == 2 and graphs.eager_steps == 1
    assert signature(full) == (("x", (4, 8), torch.float32),)


class Capturable(torch.nn.Module):
    capturable = True


def test_cuda_graphs_are_decided_and_recorded_with_the_reason():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert graphs_decision("auto", cuda, Capturable()) == (True, "on")
    assert graphs_decision("on", cuda, Capturable()) == (True, "on")
    assert graphs_decision("auto", cpu, Capturable()) == (False, "off: a CPU")
    assert graphs_decision("off", cuda, Capturable()) == (False, "off: --cuda-graphs off")
    assert graphs_decision("auto", cuda, torch.nn.Linear(1, 1)) == (False, "off: method Linear is not capturable")
    assert graphs_decision("auto", cuda, Capturable(), compiled=True) == (False, "off: --compile")
    with pytest.raises(ValueError, match="not possible here .a CPU"):
        graphs_decision("on", cpu, Capturable())
    built_in = [name for name, cls in METHODS.items() if cls.__module__.startswith("bench.methods.")]
    assert len(built_in) == 10 and all(METHODS.get(name).capturable for name in built_in)  # plugins may not be


def test_a_graphed_run_resumes_eagerly_and_an_eager_run_resumes_graphed(tiny, tmp_path):
    for first, second in ((True, False), (False, True)):
        checkpoint = tmp_path / f"{first}.pt"
        trainer, train, val = make_trainer(tiny, "ce", graph_step=first, epochs=1)
        trainer.checkpoint = checkpoint
        trainer.fit(train, val)
        resumed, train, val = make_trainer(tiny, "ce", graph_step=second, epochs=2)
        resumed.checkpoint = checkpoint
        fit = resumed.fit(train, val)
        assert fit.resumed_from_epoch == 1 and len(fit.history) == 2
        assert isinstance(fit.history[-1]["lr"], float)


class FakeCuda:
    """Stand-ins for torch.cuda's graph API on a CPU: a capture runs the body once, marked as capturing (a real
    capture only records it), and a replay runs the recorded function again on the static buffers."""

    def __init__(self) -> None:
        self.capturing = False
        self.events: list[str] = []
        self.replayed = lambda graph: None  # what a replay does (set by the test)
        fake = self

        class Graph:
            def replay(self) -> None:
                fake.events.append("replay")
                fake.replayed(self)

        class Capture:
            def __init__(self, graph, pool=None):
                self.graph, fake.pool_seen = graph, pool

            def __enter__(self):
                fake.capturing = True

            def __exit__(self, *exc):
                fake.capturing = False

        class Stream:
            def __init__(self, device=None):
                fake.events.append("new stream")

            def wait_stream(self, other):
                pass

        self.Graph, self.Capture, self.Stream = Graph, Capture, Stream

    def install(self, monkeypatch) -> None:
        monkeypatch.setattr(torch.cuda, "CUDAGraph", self.Graph)
        monkeypatch.setattr(torch.cuda, "graph", self.Capture)
        monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: "pool")
        monkeypatch.setattr(torch.cuda, "Stream", self.Stream)
        monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: self.Stream())
        monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())


def test_each_shape_warms_up_then_is_captured_once_and_replayed(monkeypatch):
    fake = FakeCuda()
    fake.install(monkeypatch)
    calls = []

    def step(batch):
        calls.append("capture" if fake.capturing else "run")
        return batch["x"].sum()

    graphs = StepGraphs(step, torch.device("cpu"), capture=True, rows=2, warmup=2)
    fake.replayed = lambda graph: calls.append("replayed")  # a real replay runs the recorded kernels
    outputs = [graphs({"x": torch.full((2, 3), float(k))}) for k in range(5)]
    assert calls[:4] == ["run", "run", "capture", "replayed"] and calls[4:] == ["replayed", "replayed"]
    assert graphs.captured == 1 and len(graphs.capture_seconds) == 1 and graphs.eager_steps == 2
    assert outputs[4] is outputs[3] and fake.pool_seen == "pool"  # a graph's outputs are its static tensors
    assert fake.events.count("new stream") <= 3 + 2  # one warm-up stream, reused (current_stream makes the rest)
    graphs({"x": torch.ones(1, 3)})  # a partial batch: eager, no new shape
    assert calls[-1] == "run" and len(graphs.shapes) == 1 and graphs.eager_steps == 3


@pytest.mark.parametrize("where", ["capture", "first replay"])
def test_a_capture_that_raises_falls_back_to_eager_steps_for_the_rest_of_the_shard(monkeypatch, caplog, where):
    """Guards issue 54's seventh case: a capture (or its first replay) that raises no longer ends the shard: that
    batch and every later one run eagerly on the static buffers, `failed` says why, one warning line."""
    fake = FakeCuda()
    fake.install(monkeypatch)
    calls = []

    def step(batch):
        if fake.capturing and where == "capture":
            raise RuntimeError("operation not permitted when stream is capturing")
        calls.append("capture" if fake.capturing else "run")
        return batch["x"].sum()

    def replayed(graph):
        raise RuntimeError("CUDA error: replay failed")

    if where == "first replay":
        fake.replayed = replayed
    graphs = StepGraphs(step, torch.device("cpu"), capture=True, rows=2, warmup=1)
    caplog.set_level("WARNING")
    outputs = [float(graphs({"x": torch.full((2, 3), float(k))})) for k in range(4)]
    assert outputs == [0.0, 6.0, 12.0, 18.0]  # every batch's own step, the failed one included
    assert graphs.captured == 0 and not graphs.capture and graphs.failed.startswith("capture failed: RuntimeError:")
    assert calls[-2:] == ["run", "run"] and "capture" not in calls[-3:]
    assert [r.getMessage() for r in caplog.records].count(next(r.getMessage() for r in caplog.records)) == 1
    assert "eager steps" in caplog.records[0].getMessage()


def test_a_failed_capture_is_kept_by_the_trainer_and_recorded_in_the_rows(cli, tiny, results, monkeypatch):
    trainer, train, _ = make_trainer(tiny, "ce", graph_step=True, epochs=1)
    trainer.step_graphs = StepGraphs(lambda batch: None, torch.device("cpu"), failed="capture failed: X")
    trainer.predict(train)
    assert trainer.graphs_failed() == "capture failed: X" and trainer.predict_graphs.failed == "capture failed: X"
    monkeypatch.setattr(Trainer, "graphs_failed", lambda self: "capture failed: RuntimeError: boom")
    code, _, err = cli("run", "--methods", "ce", "--datasets", tiny, *FAST, "--epochs", "1")
    assert code == 0, err
    rows = json.loads(next(results.glob("ce_*/rows.json")).read_text())
    assert {r["cuda_graphs"] for r in rows} == {"off: capture failed: RuntimeError: boom"}
