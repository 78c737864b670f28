"""The one training loop: AdamW, linear warm-up/decay, clipping, early stopping on validation accuracy,
end-of-epoch checkpoints for resume (at most one per `checkpoint_every_s` of training), mixed precision, seeding
and the choice of deterministic kernels."""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from sklearn.metrics import confusion_matrix
from tqdm.auto import tqdm

from bench.data.batching import Encoded, collate, in_input_order, length_grouped_batches, sorted_batches, to_device
from bench.errors import BenchError
from bench.spec import TrainConfig
from bench.results import stopping
from bench.results.store import atomic_torch_save
from bench.training.clipping import clip_gradients_
from bench.training.tracking import Tracker
from bench.methods.base import Method, Progress, validation_steps

log = logging.getLogger(__name__)
LOG_EVERY = 50  # steps between reads of the loss on the host (the only host synchronisation in training)


@contextlib.contextmanager
def out_of_memory_as_error(batch_size: int, max_length: int):
    """Turn a CUDA or CPU out-of-memory error into a one-line BenchError."""
    try:
        yield
    except (torch.OutOfMemoryError, RuntimeError) as exc:
        if isinstance(exc, torch.OutOfMemoryError) or "can't allocate memory" in str(exc):
            raise BenchError(f"out of memory at batch size {batch_size} (max length {max_length}); "
                             "lower --batch-size or --max-length") from exc
        raise


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def deterministic_kernels(device: torch.device, strict: bool = False) -> bool:
    """Choose this process's kernels for training on `device`; returns whether they are deterministic (recorded
    in every result row). `strict` (`clbench run --deterministic`): deterministic algorithms on any device (an op
    without a deterministic implementation raises instead of running), attention on the plain math kernel
    (flash, memory-efficient and cuDNN attention are not bit-reproducible on a GPU) and a fixed cuBLAS
    workspace; cuDNN's autotuner is off whenever the kernels are deterministic. Otherwise deterministic
    algorithms on a CPU (warnings only), and on a GPU the fastest kernels. Every call sets every switch, so
    shards run one after another in a process do not inherit each other's choice."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS starts; needed by strict mode
    on = strict or device.type == "cpu"
    torch.use_deterministic_algorithms(on, warn_only=not strict)
    if on:
        torch.backends.cudnn.benchmark = False  # the autotuner may pick a different algorithm each run
    for enable in (torch.backends.cuda.enable_flash_sdp, torch.backends.cuda.enable_mem_efficient_sdp,
                   torch.backends.cuda.enable_cudnn_sdp):
        enable(not strict)
    torch.backends.cuda.enable_math_sdp(True)
    return on


def resolve_device(requested: str = "auto") -> torch.device:
    """`auto` picks CUDA when available, else CPU; anything else is passed to torch.device."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BenchError(f"--device {requested}: CUDA is not available here; use --device cpu or auto")
    return device


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """bf16 under `bf16`, and under `auto` on CUDA; None means full fp32."""
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return None


def rng_state() -> dict[str, Any]:
    """Every random-number-generator state that training consumes."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what `rng_state` captured."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def cpu_copy(state: dict[str, Any]) -> dict[str, Any]:
    """A detached CPU copy of a state dict (non-tensor extra state deep-copied)."""
    return {k: v.detach().to("cpu", copy=True) if torch.is_tensor(v) else copy.deepcopy(v) for k, v in state.items()}


def linear_schedule(warmup: int, total: int) -> Callable[[int], float]:
    """Learning-rate factor: linear warm-up over `warmup` steps, then linear decay to 0 at `total`. During the
    warm-up it is one step ahead of transformers' get_linear_schedule_with_warmup (step s gets (s+1)/warmup, so
    the first step trains at lr/warmup instead of 0 and the peak is held for two steps); afterwards the two agree.
    Kept, not adopted, so that stored results keep one schedule under one run key (docs/RUNNING.md)."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


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
                 checkpoint_every_s: float = 0.0):
        self.method = method.to(device)
        self.checkpoint_every_s = checkpoint_every_s  # training seconds between checkpoints (0: every epoch)
        self.checkpoint_seconds = 0.0  # spent writing checkpoints in this process
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
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    def batch(self, data: Encoded, index: np.ndarray) -> dict[str, torch.Tensor]:
        """A padded batch on the training device (copied without waiting; `index` stays on the host)."""
        return to_device(collate(data, index, self.pad_id, self.min_length, bucket=self.bucket,
                                 max_width=self.cfg.max_length, pin=self.device.type == "cuda"), self.device)

    def optimizer(self, fused: bool | None = None) -> torch.optim.Optimizer:
        """AdamW with decoupled weight decay, none on biases and normalisation weights; `fused` (default: on a
        GPU) is one kernel for all parameters that keeps its step counts on the device."""
        decay, no_decay = [], []
        for name, param in self.method.named_parameters():
            if param.requires_grad:
                (no_decay if param.ndim < 2 or "norm" in name.lower() else decay).append(param)
        groups = [{"params": decay, "weight_decay": self.cfg.weight_decay},
                  {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=self.cfg.lr, betas=(0.9, 0.999), eps=1e-8,
                                 fused=self.device.type == "cuda" if fused is None else fused)

    @torch.no_grad()
    def predict(self, data: Encoded, batch_size: int | None = None) -> np.ndarray:
        """Logits (n, N) as float32, in the order of `data`."""
        self.method.eval()
        batches = sorted_batches(data.lengths, batch_size or self.cfg.batch_size * 2)
        if not batches:
            return np.zeros((0, self.method.num_labels), dtype=np.float32)
        parts = []
        for index in batches:
            with self.autocast():
                parts.append(self.method.logits(self.batch(data, index)).float())
        return in_input_order(batches, parts)

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
        rng = np.random.default_rng([self.seed, epoch])
        batches = length_grouped_batches(train.lengths, self.cfg.batch_size, rng)
        evals = max(1, int(getattr(self.method, "evaluations_per_epoch", 1))) if val is not None else 1
        eval_steps = set(validation_steps(len(batches), evals)[:-1])  # the epoch's end: `fit` validates then
        sums: dict[str, torch.Tensor] = {}
        seen, started = 0, time.perf_counter()
        bar = tqdm(batches, desc=f"{self.desc} epoch {epoch + 1}/{self.cfg.epochs}", disable=not self.progress,
                   leave=False, mininterval=1.0, dynamic_ncols=True)
        for number, index in enumerate(bar, start=1):
            with out_of_memory_as_error(len(index), self.cfg.max_length):
                losses, total = self.step(self.batch(train, index), optimizer)
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
                    self.track_step(sums, number, state["step"], scheduler.get_last_lr()[0])
        seconds = time.perf_counter() - started
        record: dict[str, Any] = {"epoch": epoch + 1, "steps": len(batches), "seconds": seconds,
                                  "train_seq_per_s": seen / seconds, "lr": scheduler.get_last_lr()[0]}
        means = (torch.stack(list(sums.values())) / len(batches)).tolist()  # one read for every loss part
        record.update({f"train_{k}": float(v) for k, v in zip(sums, means)})
        return record

    def track_step(self, sums: dict[str, torch.Tensor], number: int, step: int, lr: float) -> None:
        """Report each loss part's mean over the epoch so far and the learning rate (one device read, made only
        with a tracker)."""
        means = (torch.stack(list(sums.values())) / number).tolist()
        self.tracker.log({"train/lr": lr, **{f"train/{k}": v for k, v in zip(sums, means)}}, step)

    def step(self, batch: dict[str, torch.Tensor], optimizer: torch.optim.Optimizer
             ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Forward, backward, clipping and one optimiser step; returns the named losses and their sum."""
        with self.autocast():
            losses = self.method.loss(batch)
        total = sum(losses.values())
        optimizer.zero_grad(set_to_none=True)
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
            atomic_torch_save({"model": self.method.state_dict(), "optimizer": optimizer.state_dict(),
                               "scheduler": scheduler.state_dict(), "rng": rng_state(), **state}, self.checkpoint)
            stopping.note(f"after epoch {state['epoch']}")
        self.checkpoint_seconds += time.perf_counter() - clock
        stopping.check()  # a safe point: right after the checkpoint

    def restore(self, optimizer: torch.optim.Optimizer, scheduler: Any, state: dict[str, Any]) -> int:
        """Load the last checkpoint if there is one; returns the number of epochs it had completed."""
        if self.checkpoint is None or not self.checkpoint.exists():
            return 0
        saved = torch.load(self.checkpoint, map_location="cpu", weights_only=False)
        self.method.load_state_dict(saved.pop("model"))
        optimizer.load_state_dict(saved.pop("optimizer"))
        scheduler.load_state_dict(saved.pop("scheduler"))
        set_rng_state(saved.pop("rng"))
        state.update(saved)
        stopping.note(f"after epoch {state['epoch']}")
        log.info("%s: resuming after epoch %d from %s", self.desc, state["epoch"], self.checkpoint)
        return int(state["epoch"])

    def remove_checkpoint(self) -> None:
        """Delete the resume checkpoint once the run's results are safely written."""
        if self.checkpoint is not None and self.checkpoint.exists():
            os.remove(self.checkpoint)
