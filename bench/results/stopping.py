"""SIGTERM and SIGINT during `clbench run`: the shard that runs stops at a safe point instead of dying.

A safe point is anywhere outside a *deferred* section: a file write (bench.results.store.atomic_path, the epoch
checkpoint included) or a change of a lease (bench.results.lease) is finished first. The work since the last
epoch checkpoint is dropped, so a re-run resumes from that checkpoint exactly as after a kill (bit-identical).

How: while `handled()` (the main process of a local sweep) or after `install()` (a pool worker), a stop signal
is recorded, passed on to the pool's workers (`forward`), and -- only inside `armed()`, the body of a shard --
raised in the main thread as `Stopped`, at once when no deferred section is open, else at the next `check()`
(at the end of each atomic write, after each optimiser step and each epoch checkpoint) or a repeated signal.
Outside `armed()` (between shards, in a pool's main process) it is only recorded: the sweep starts no new shard.
A `Stopped` is a BaseException, so that the `except Exception` of failure handling lets it through; the `with`
of a shard's lease releases the lease on the way out.

Under SLURM submitit owns the signals (SIGUSR2: checkpoint and requeue; SIGTERM: ignored): nothing here is
installed there (bench.running.executors).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(BaseException):
    """A SIGTERM or SIGINT asked this process to stop; `where` says how far its shard had got (`note`)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal_name(signum)}")
        self.signum = signum
        self.where = ""


class _State:
    """What this process knows about stop signals (touched from the main thread only)."""

    active = False  # the handlers are installed (`handled()`, `install()`)
    received = 0  # the first stop signal's number (0: none yet)
    armed = 0  # depth of armed sections (a shard running in this process)
    deferred = 0  # depth of sections that finish first (a file write, a lease change)
    raised = False  # a Stopped was raised already (once per process)
    where = ""  # how far the armed shard got, as a stop says it (`note`)
    forward: Callable[[int], None] | None = None  # passes the signal on (a pool's main process: to its workers)


_state = _State()


def signal_name(signum: int) -> str:
    """`SIGTERM`, `SIGINT`, ..."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def received() -> int:
    """The number of the stop signal this process received (0: none); kept after `handled()` ends."""
    return _state.received


def exit_code() -> int:
    """The conventional exit code of a process stopped by the signal received: 128 + its number (143 for
    SIGTERM, 130 for SIGINT); 0 when none was received."""
    return 128 + _state.received if _state.received else 0


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def pending() -> bool:
    """Whether this process was asked to stop and still handles the signals: start no new shard."""
    return bool(_state.active and _state.received)


def _raise_if_due() -> None:
    due = _state.active and _state.received and _state.armed and not _state.deferred and not _state.raised
    if due and _on_main_thread():
        _state.raised = True
        stop = Stopped(_state.received)
        stop.where = _state.where
        raise stop


def _handle(signum: int, frame: Any) -> None:
    """The handler of SIGTERM and SIGINT."""
    if not _state.received:
        _state.received = signum
        if _state.forward is not None:
            _state.forward(signum)
    _raise_if_due()


def reset() -> None:
    """Forget a received signal (a new sweep in this process starts clean)."""
    _state.received, _state.raised, _state.armed, _state.deferred, _state.forward = 0, False, 0, 0, None
    _state.active = False


def install(forward: Callable[[int], None] | None = None) -> None:
    """Handle SIGTERM and SIGINT in this process from now on (a pool worker); `forward` passes a received signal
    on. Main thread only: elsewhere nothing is installed."""
    if _on_main_thread():
        reset()
        _state.forward, _state.active = forward, True
        for signum in STOP_SIGNALS:
            signal.signal(signum, _handle)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Within: SIGTERM and SIGINT stop the shard that runs at a safe point (see the module); the previous
    handlers come back at the end. Off the main thread it changes nothing."""
    if not _on_main_thread():
        yield
        return
    reset()
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum in STOP_SIGNALS:
        signal.signal(signum, _handle)
    _state.active = True
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _state.forward, _state.active = None, False


def forward_to(forward: Callable[[int], None] | None) -> None:
    """Pass a stop signal received from now on to `forward` (None: to nobody)."""
    _state.forward = forward


@contextlib.contextmanager
def armed() -> Iterator[None]:
    """Within (a shard's body): a stop signal raises Stopped here at the next safe point; one received before
    raises at once."""
    if not _on_main_thread():
        yield
        return
    _state.armed += 1
    _state.where = ""
    try:
        _raise_if_due()
        yield
    finally:
        _state.armed -= 1


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within: a stop signal waits (a write or a lease change finishes); it is raised at the next `check()`.
    Nothing is raised on the way out: what the section returns reaches its caller."""
    if not _on_main_thread():
        yield
        return
    _state.deferred += 1
    try:
        yield
    finally:
        _state.deferred -= 1


def note(where: str) -> None:
    """Say how far the armed shard got, as a stop would report it (`after epoch 3`)."""
    _state.where = where


def check() -> None:
    """A safe point: raise Stopped if a stop signal is pending here (armed, outside any deferred section)."""
    _raise_if_due()
