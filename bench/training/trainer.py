"""The one training loop: AdamW, linear warm-up/decay, clipping, early stopping on validation accuracy,
end-of-epoch checkpoints for resume (at most one per `checkpoint_every_s` of training), mixed precision, seeding
and the choice of deterministic kernels."""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.metrics import confusion_matrix
from tqdm.auto import tqdm

from bench.data.batching import Encoded, collate, in_input_order, length_grouped_batches, sorted_batches, to_device
from bench.errors import BenchError
from bench.spec import TrainConfig
from bench.results import manifest, runfiles, stopping
from bench.training.clipping import clip_gradients_
from bench.training.setup import (autocast_dtype, cpu_copy, linear_schedule, out_of_memory_as_error, rng_state,
                                  set_rng_state)
from bench.training.graphs import StepGraphs, float_learning_rates, tensor_learning_rates
from bench.training.tracking import Tracker
from bench.methods.base import Method, Progress, validation_steps

log = logging.getLogger(__name__)
LOG_EVERY = 50  # steps between reads of the loss on the host (the only host synchronisation in training)


@dataclass
class FitResult:
    """What training produced besides the weights."""

    history: list[dict[str, Any]]
    best_epoch: int
    best_val_accuracy: float
    resumed_from_epoch: int = 0
    stopped_early: bool = False
    method_state: dict[str, Any] = field(default_factory=dict)
    method_fields: dict[str, Any] = field(default_factory=dict)  # Method.row_fields: columns of every row
    method_warning: str = ""  # Method.training_warning


class Trainer:
    """Trains a Method on tokenised data; every method shares this loop."""

    def __init__(self, method: Method, cfg: TrainConfig, device: torch.device, pad_id: int, seed: int,
                 min_length: int = 1, checkpoint: Path | None = None, progress: bool = True, desc: str = "",
                 bucket: int = 0, log_every: int = LOG_EVERY, tracker: Tracker | None = None,
                 checkpoint_every_s: float = 0.0, graph_step: bool = False):
        self.method = method.to(device)
        # The graph-ready step (bench.training.graphs): static buffers, gradients zeroed in place, the learning rate
        # in a tensor, the fused AdamW; captured as CUDA graphs on CUDA, run eagerly on those buffers elsewhere.
        self.graph_step = graph_step
        self.step_graphs: StepGraphs | None = None
        self.predict_graphs: StepGraphs | None = None
        # the memory pool all of this trainer's graphs share (None where nothing is captured)
        self.graph_pool = torch.cuda.graph_pool_handle() if graph_step and device.type == "cuda" else None
        self.checkpoint_every_s = checkpoint_every_s  # training seconds between checkpoints (0: every epoch)
        self.checkpoint_seconds = 0.0  # spent writing checkpoints in this process
        self.checkpoint_note = ""  # a damaged checkpoint moved aside (then training started afresh)
        self.tracker = tracker  # --report-to: losses every `log_every` steps and each epoch's record go to it
        self.bucket = bucket  # batch widths rounded up to a multiple of this (0: each batch's longest example)
        self.log_every = log_every
        self.cfg = cfg
        self.device = device
        self.pad_id = pad_id
        self.min_length = min_length
        self.seed = seed
        self.checkpoint = checkpoint
        self.progress = progress
        self.desc = desc
        self.amp_dtype = autocast_dtype(cfg.precision, device)

    # ------------------------------------------------------------------------------------------ helpers
    def autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast when configured, else a no-op context."""
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        # A captured graph must recast the weights at every replay: no cast cache (torch's CUDA-graph notes)
        return torch.autocast(self.device.type, dtype=self.amp_dtype, cache_enabled=not self.graph_step)

    def host_batch(self, data: Encoded, index: np.ndarray, training: bool | None = None) -> dict[str, torch.Tensor]:
        """A padded batch on the host (page-locked when training on CUDA): a training batch as the method collates
        it (`Method.collate`: its word views included), else the plain one of prediction. `training` None: as the
        method's mode (`predict` puts it in eval mode, `train_epoch` in train mode)."""
        training = self.method.training if training is None else training
        make = self.method.collate if training else collate
        out = make(data, index, self.pad_id, self.min_length, bucket=self.bucket, max_width=self.cfg.max_length)
        if self.device.type == "cuda":
            out = {k: v.pin_memory() for k, v in out.items()}  # page-locked: a copy to the GPU does not wait
        return out

    def batch(self, data: Encoded, index: np.ndarray, training: bool | None = None) -> dict[str, torch.Tensor]:
        """`host_batch` on the training device (copied without waiting; `index` stays on the host)."""
        return to_device(self.host_batch(data, index, training), self.device)

    def optimizer(self, fused: bool | None = None) -> torch.optim.Optimizer:
        """AdamW with decoupled weight decay, none on biases and normalisation weights; `fused` (default: on a
        GPU, and for the graph-ready step) is one kernel for all parameters that keeps its step counts on the
        device; the graph-ready step's is also `capturable`."""
        decay, no_decay = [], []
        for name, param in self.method.named_parameters():
            if param.requires_grad:
                (no_decay if param.ndim < 2 or "norm" in name.lower() else decay).append(param)
        groups = [{"params": decay, "weight_decay": self.cfg.weight_decay},
                  {"params": no_decay, "weight_decay": 0.0}]
        if fused is None:
            fused = self.device.type == "cuda" or self.graph_step
        return torch.optim.AdamW(groups, lr=self.cfg.lr, betas=(0.9, 0.999), eps=1e-8, fused=fused,
                                 capturable=self.graph_step)

    @torch.no_grad()
    def predict(self, data: Encoded, batch_size: int | None = None) -> np.ndarray:
        """Logits (n, N) as float32, in the order of `data`."""
        self.method.eval()
        rows = batch_size or self.cfg.batch_size * 2
        batches = sorted_batches(data.lengths, rows)
        if not batches:
            return np.zeros((0, self.method.num_labels), dtype=np.float32)
        if self.graph_step:
            return in_input_order(batches, self.predict_graphed(data, batches, rows))
        parts = []
        for index in batches:
            with self.autocast():
                parts.append(self.method.logits(self.batch(data, index, training=False)).float())
        return in_input_order(batches, parts)

    def predict_graphed(self, data: Encoded, batches: list[np.ndarray], rows: int) -> list[torch.Tensor]:
        """Each batch's logits through the prediction graphs (one per batch width, captured after one eager run;
        partial batches eagerly), copied out of the graph's output before the next batch."""
        graphs = self.predict_graphs
        if graphs is None or graphs.rows != rows:
            failed = self.graphs_failed()  # a capture that failed once: eager for the rest of the shard
            graphs = self.predict_graphs = StepGraphs(lambda batch: self.method.logits(batch).float(), self.device,
                                                      capture=self.device.type == "cuda" and not failed, rows=rows,
                                                      warmup=1, pool=self.graph_pool, failed=failed)
        parts = []
        for index in batches:
            with self.autocast():
                parts.append(graphs(self.host_batch(data, index, training=False)).clone())
        return parts

    def evaluate(self, data: Encoded, what: str = "validation") -> tuple[float, np.ndarray]:
        """Accuracy and confusion matrix on `data` (non-finite outputs fail the shard)."""
        predicted = self.require_finite_outputs(self.predict(data), what).argmax(1)
        confusion = confusion_matrix(data.labels, predicted, labels=range(self.method.num_labels))
        return float((predicted == data.labels).mean()), confusion

    # ------------------------------------------------------------------------------------------ training
    def fit(self, train: Encoded, val: Encoded) -> FitResult:
        """Train with early stopping on validation accuracy; the best epoch's weights are loaded at the end."""
        cfg = self.cfg
        steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
        total_steps = steps_per_epoch * cfg.epochs
        optimizer = self.optimizer()
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, linear_schedule(int(cfg.warmup_ratio * total_steps), total_steps))
        state = {"epoch": 0, "step": 0, "best_accuracy": -1.0, "best_epoch": 0, "bad_epochs": 0,
                 "history": [], "best_state": None}
        resumed_from = self.restore(optimizer, scheduler, state)
        if self.graph_step:
            tensor_learning_rates(optimizer, self.device)  # the scheduler fills it in place
        else:
            float_learning_rates(optimizer)  # a checkpoint of a graphed run, resumed eagerly
        last_saved = time.perf_counter()

        for epoch in range(state["epoch"], cfg.epochs):
            if state["bad_epochs"] >= cfg.patience:
                break
            record = self.train_epoch(train, epoch, optimizer, scheduler, state, total_steps, val)
            self.require_finite_weights(epoch)
            clock = time.perf_counter()
            accuracy, confusion = self.evaluate(val)
            record["val_seconds"] = time.perf_counter() - clock
            progress = Progress(epoch + 1, cfg.epochs, state["step"], total_steps)
            self.method.on_eval(confusion, progress)
            record["val_accuracy"] = accuracy
            record["val_confusion"] = confusion.tolist()
            state["history"].append(record)
            if self.tracker:
                self.tracker.log({f"epoch/{k}": v for k, v in record.items()}, state["step"])
            if accuracy > state["best_accuracy"]:
                state.update(best_accuracy=accuracy, best_epoch=epoch + 1, bad_epochs=0,
                             best_state=cpu_copy(self.method.state_dict()))
            else:
                state["bad_epochs"] += 1
            state["epoch"] = epoch + 1
            log.info("%s epoch %d: %s", self.desc, epoch + 1,
                     ", ".join(f"{k}={v:.4g}" for k, v in record.items() if isinstance(v, float)))
            final = state["epoch"] == cfg.epochs or state["bad_epochs"] >= cfg.patience  # results follow at once
            every = self.checkpoint_every_s  # 0: after every epoch, the last included
            if every <= 0 or (not final and time.perf_counter() - last_saved >= every):
                self.save(optimizer, scheduler, state)
                last_saved = time.perf_counter()
            else:
                stopping.check()  # the safe point a checkpoint would have given

        method_state = self.method.state_for_report()  # as trained to the end, before the best weights return
        method_fields, method_warning = self.method.row_fields(), self.method.training_warning()
        if state["best_state"] is not None:
            self.method.load_state_dict(state["best_state"])
        return FitResult(state["history"], state["best_epoch"], state["best_accuracy"], resumed_from,
                         stopped_early=state["epoch"] < cfg.epochs, method_state=method_state,
                         method_fields=method_fields, method_warning=method_warning)

    def train_epoch(self, train: Encoded, epoch: int, optimizer: torch.optim.Optimizer,
                    scheduler: Any, state: dict[str, Any], total_steps: int,
                    val: Encoded | None = None) -> dict[str, Any]:
        """One pass over `train` in length-grouped batches; returns the epoch's log record.

        Nothing in a step waits for the device: loss sums stay on it and are read every `log_every` steps.
        A method with `evaluations_per_epoch > 1` gets that many validation passes (`on_eval`) per epoch;
        the last is the end-of-epoch one that `fit` runs.
        """
        self.method.train()
        self.method.on_epoch_start(epoch)
        rng = np.random.default_rng([self.seed, epoch])
        batches = length_grouped_batches(train.lengths, self.cfg.batch_size, rng)
        evals = max(1, int(getattr(self.method, "evaluations_per_epoch", 1))) if val is not None else 1
        eval_steps = set(validation_steps(len(batches), evals)[:-1])  # the epoch's end: `fit` validates then
        sums: dict[str, torch.Tensor] = {}
        seen, started = 0, time.perf_counter()
        bar = tqdm(batches, desc=f"{self.desc} epoch {epoch + 1}/{self.cfg.epochs}", disable=not self.progress,
                   leave=False, mininterval=1.0, dynamic_ncols=True)
        run_step = self.graphed_steps(optimizer) if self.graph_step else None
        for number, index in enumerate(bar, start=1):
            with out_of_memory_as_error(len(index), self.cfg.max_length):
                if run_step is None:
                    losses, total = self.step(self.batch(train, index), optimizer)
                else:
                    losses, total = run_step(self.host_batch(train, index))
            scheduler.step()
            state["step"] += 1
            stopping.check()  # a safe point (a stop signal during a write waited for it)
            self.method.on_step_end(Progress(epoch + 1, self.cfg.epochs, state["step"], total_steps))
            for name, value in {"loss": total, **losses}.items():
                sums[name] = sums.get(name, 0.0) + value.detach().float()
            seen += len(index)
            if number in eval_steps:
                _, confusion = self.evaluate(val)
                self.method.on_eval(confusion, Progress(epoch + 1, self.cfg.epochs, state["step"], total_steps))
                self.method.train()
            if number % self.log_every == 0 or number == len(batches):
                mean_loss = self.check_finite(sums["loss"] / number, epoch, number)
                bar.set_postfix(loss=f"{mean_loss:.4f}", seq_s=f"{seen / (time.perf_counter() - started):.0f}")
                if self.tracker:
                    self.track_step(sums, number, state["step"], self.learning_rate(scheduler))
        seconds = time.perf_counter() - started
        record: dict[str, Any] = {"epoch": epoch + 1, "steps": len(batches), "seconds": seconds,
                                  "train_seq_per_s": seen / seconds, "lr": self.learning_rate(scheduler)}
        means = (torch.stack(list(sums.values())) / len(batches)).tolist()  # one read for every loss part
        record.update({f"train_{k}": float(v) for k, v in zip(sums, means)})
        return record

    @staticmethod
    def learning_rate(scheduler: Any) -> float:
        """The learning rate of the last step as a float, computed on the host (a tensor learning rate is never
        read back from the device)."""
        return float(scheduler.base_lrs[0]) * scheduler.lr_lambdas[0](scheduler.last_epoch)

    def graphed_steps(self, optimizer: torch.optim.Optimizer) -> StepGraphs:
        """The graph-ready step for `optimizer` (built once per optimizer): full batches through static buffers,
        captured per batch shape on CUDA; partial batches eagerly."""
        graphs = self.step_graphs
        if graphs is None or graphs.fn.keywords["optimizer"] is not optimizer:
            failed = self.graphs_failed()
            graphs = self.step_graphs = StepGraphs(functools.partial(self.step, optimizer=optimizer), self.device,
                                                   capture=self.device.type == "cuda" and not failed,
                                                   rows=self.cfg.batch_size, pool=self.graph_pool, failed=failed)
        return graphs

    def graphs_failed(self) -> str:
        """Why CUDA graphs were turned off mid-shard ('' when they never failed): the first failed capture."""
        return next((graphs.failed for graphs in (self.step_graphs, self.predict_graphs)
                     if graphs is not None and graphs.failed), "")

    def capture_seconds(self) -> list[float]:
        """Seconds each captured graph (training steps, then predictions) took to capture, in this process."""
        return [round(s, 3) for graphs in (self.step_graphs, self.predict_graphs) if graphs is not None
                for s in graphs.capture_seconds.values()]

    def track_step(self, sums: dict[str, torch.Tensor], number: int, step: int, lr: float) -> None:
        """Report each loss part's mean over the epoch so far and the learning rate (one device read, made only
        with a tracker)."""
        means = (torch.stack(list(sums.values())) / number).tolist()
        self.tracker.log({"train/lr": lr, **{f"train/{k}": v for k, v in zip(sums, means)}}, step)

    def step(self, batch: dict[str, torch.Tensor], optimizer: torch.optim.Optimizer
             ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Forward, backward, clipping and one optimiser step; returns the named losses and their sum. The
        graph-ready step zeroes the gradients in place (a graph reads and writes the same gradient tensors at every
        replay); the plain one frees them before the forward."""
        optimizer.zero_grad(set_to_none=not self.graph_step)
        with self.autocast():
            losses = self.method.loss(batch)
        total = sum(losses.values())
        total.backward()
        if self.cfg.max_grad_norm > 0:
            clip_gradients_(self.method.parameters(), self.cfg.max_grad_norm)  # = clip_grad_norm_, 3 calls
        optimizer.step()
        return losses, total

    def require_finite_outputs(self, logits: np.ndarray, what: str) -> np.ndarray:
        """`logits` unchanged; inf or NaN in them fails the shard (a diverged model has no result)."""
        bad = int((~np.isfinite(logits).all(axis=1)).sum())
        if bad:
            raise BenchError(f"the model's {what} outputs are not finite (inf/NaN for {bad} of {len(logits)} "
                             "examples): training diverged; lower --lr or use --precision fp32")
        return logits

    def require_finite_weights(self, epoch: int) -> None:
        """Fail the shard when any weight became inf or NaN (one device read per epoch)."""
        params = [p.detach() for p in self.method.parameters()]
        finite = torch.stack([torch.isfinite(p).all() for p in params]).all() if params else torch.tensor(True)
        if not bool(finite):
            names = [n for n, p in self.method.named_parameters() if not torch.isfinite(p).all()]
            raise BenchError(f"model weights became inf/NaN in epoch {epoch + 1} ({len(names)} tensors, first "
                             f"{names[0]}): training diverged; lower --lr or use --precision fp32")

    def check_finite(self, mean_loss: torch.Tensor, epoch: int, step: int) -> float:
        """The mean loss as a float; a NaN or infinite loss fails the shard with that reason."""
        value = float(mean_loss)
        if not math.isfinite(value):
            raise BenchError(f"loss became {value} in epoch {epoch + 1} by step {step}; lower --lr, "
                             "use --precision fp32, or check the method's settings")
        return value

    # ------------------------------------------------------------------------------------------ checkpoints
    def save(self, optimizer: torch.optim.Optimizer, scheduler: Any, state: dict[str, Any]) -> None:
        """Write everything needed to resume after this epoch (atomically)."""
        if self.checkpoint is None:
            return
        clock = time.perf_counter()
        with stopping.deferred():  # a stop signal waits: the checkpoint and what a stop says agree
            runfiles.save_torch(self.checkpoint.parent, self.checkpoint.name, {
                "model": self.method.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "rng": rng_state(), **state})
            stopping.note(f"after epoch {state['epoch']}")
        self.checkpoint_seconds += time.perf_counter() - clock
        stopping.check()  # a safe point: right after the checkpoint

    def restore(self, optimizer: torch.optim.Optimizer, scheduler: Any, state: dict[str, Any]) -> int:
        """Load the last checkpoint if there is one; returns the number of epochs it had completed. A checkpoint
        that fails verification is moved aside into the run's damaged/ folder and training starts afresh."""
        if self.checkpoint is None or not self.checkpoint.exists():
            return 0
        try:
            saved = runfiles.load_torch(self.checkpoint.parent, self.checkpoint.name, weights_only=False)
        except manifest.Damaged as damage:
            folder = manifest.move_aside(self.checkpoint.parent, [self.checkpoint.name], damage.what)
            self.checkpoint_note = f"{damage}: moved to {folder}/, trained from the start"
            log.debug("%s: %s", self.desc, self.checkpoint_note)  # said once, in the shard's outcome
            return 0
        self.method.load_state_dict(saved.pop("model"))
        optimizer.load_state_dict(saved.pop("optimizer"))
        scheduler.load_state_dict(saved.pop("scheduler"))
        set_rng_state(saved.pop("rng"))
        state.update(saved)
        stopping.note(f"after epoch {state['epoch']}")
        log.info("%s: resuming after epoch %d from %s", self.desc, state["epoch"], self.checkpoint)
        return int(state["epoch"])
