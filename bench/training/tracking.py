"""Experiment trackers (`clbench run --report-to tensorboard,mlflow,wandb`): one tracker run per shard, named by
its run key, holding the shard's settings, the training losses at the trainer's log interval, each epoch's
validation metrics and the final result rows. Each tracker needs its package (the extra `tensorboard`, `mlflow`,
`wandb`, or `tracking` for all three: `pip install -e ".[tracking]"` in the checkout), checked before anything
trains. Trackers only watch: which ones are on is not part of the run key, and a tracker that fails mid-run is
dropped with one warning while the shard goes on and keeps its results. Imports no torch (TensorBoard's writer imports it when a run opens)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import math
import os
import re
import time
from pathlib import Path
from typing import Any, Iterator

from bench.errors import BenchError, install_extra

log = logging.getLogger(__name__)
TRACKERS = {"tensorboard": "tensorboard", "mlflow": "mlflow", "wandb": "wandb"}  # name -> the package it imports
EXPERIMENT = "clbench"  # MLflow experiment and W&B project unless MLFLOW_EXPERIMENT_NAME / WANDB_PROJECT say
MLFLOW_PARAM_CHARS = 500  # the longest parameter value every MLflow version accepts


def parse_report_to(value: Any) -> tuple[str, ...]:
    """The trackers named by `--report-to` or a config file's `report_to` (a comma list or a YAML list; `none`,
    empty or None: no tracker), each once, checked against TRACKERS."""
    if value is None or value is False:
        return ()
    parts = value if isinstance(value, (list, tuple)) else str(value).split(",")
    names = [str(p).strip().lower() for p in parts if str(p).strip()]
    if names == ["none"]:
        return ()
    for name in names:
        if name not in TRACKERS:
            raise BenchError(f"--report-to {name!r}: not a tracker; use a comma list of "
                             f"{', '.join(TRACKERS)} (or none)")
    return tuple(dict.fromkeys(names))


def require_packages(names: tuple[str, ...]) -> None:
    """Fail before training, with the extra to install, when a chosen tracker's package is missing."""
    for name in names:
        if importlib.util.find_spec(TRACKERS[name]) is None:
            raise BenchError(f"--report-to {name}: the {TRACKERS[name]} package is not installed; "
                             f"{install_extra(name)} (or drop {name} from --report-to)")


def flat_settings(spec_json: dict[str, Any]) -> dict[str, Any]:
    """A shard's settings as flat name -> value: method, dataset, encoder, seed, data fingerprint, the training
    settings by their --set names, the knobs as `method.knob`, the method version, the config hash and the key."""
    settings = {k: v for k, v in spec_json.items()
                if k not in ("train", "method_config", "key_names", "canonical")}
    settings.update(spec_json.get("train", {}))
    settings.update({f"{spec_json['method']}.{k}": v for k, v in spec_json.get("method_config", {}).items()})
    return settings


def metric_name(*parts: Any) -> str:
    """`test`, `f1`, `sci&tech` -> `test/f1/sci_tech`: a name every tracker accepts (letters, digits, _ - . / and
    spaces)."""
    return "/".join(re.sub(r"[^\w\-./ ]", "_", str(p)) for p in parts if str(p) != "")


def row_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Result rows as metrics named `split/metric` or `split/metric/label` (per-class rows)."""
    return {metric_name(r.get("split", ""), r["metric"], r.get("label", "")): float(r["value"])
            for r in rows if isinstance(r.get("value"), (int, float)) and not isinstance(r.get("value"), bool)}


class TensorBoardRun:
    """A TensorBoard event folder `<results>/tensorboard/<run key>`: settings as text, metrics as scalars."""

    def __init__(self, key: str, settings: dict[str, Any], results_dir: Path):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(results_dir / "tensorboard" / key))
        self.writer.add_text("settings", "```\n" + json.dumps(settings, indent=2, default=str) + "\n```")

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Scalars at a training step."""
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, step)
        self.writer.flush()

    def final(self, metrics: dict[str, float], step: int) -> None:
        """The result rows, as scalars at the last step."""
        self.log(metrics, step)

    def close(self, failed: bool) -> None:
        """Flush and close the event file."""
        self.writer.close()


class MLflowRun:
    """An MLflow run named by the run key in experiment `clbench` ($MLFLOW_EXPERIMENT_NAME), at
    $MLFLOW_TRACKING_URI, else in the local file store `<results>/mlruns`."""

    def __init__(self, key: str, settings: dict[str, Any], results_dir: Path):
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:  # MLflow >= 3.7 refuses a file store unless told: this one is ours, under the results folder
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = (results_dir / "mlruns").resolve().as_uri()
        self.client = MlflowClient(uri)
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or EXPERIMENT
        experiment = self.client.get_experiment_by_name(name)
        if experiment is None:
            try:
                experiment_id = self.client.create_experiment(name)
            except Exception:  # created meanwhile by another worker process
                experiment_id = self.client.get_experiment_by_name(name).experiment_id
        else:
            experiment_id = experiment.experiment_id
        self.run_id = self.client.create_run(experiment_id, run_name=key, tags={"clbench.run_key": key}).info.run_id
        params = [Param(k, str(v)[:MLFLOW_PARAM_CHARS]) for k, v in settings.items()]
        for start in range(0, len(params), 100):  # log_batch takes at most 100 parameters
            self.client.log_batch(self.run_id, params=params[start:start + 100])

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Metrics at a training step."""
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        batch = [Metric(k, v, stamp, step) for k, v in metrics.items()]
        for start in range(0, len(batch), 1000):  # log_batch takes at most 1000 metrics
            self.client.log_batch(self.run_id, metrics=batch[start:start + 1000])

    def final(self, metrics: dict[str, float], step: int) -> None:
        """The result rows, as metrics at the last step."""
        self.log(metrics, step)

    def close(self, failed: bool) -> None:
        """Mark the run finished (or failed)."""
        self.client.set_terminated(self.run_id, status="FAILED" if failed else "FINISHED")


class WandbRun:
    """A Weights & Biases run named by the run key in project `clbench` ($WANDB_PROJECT), files under
    `<results>/wandb`; offline unless $WANDB_MODE says otherwise (`wandb sync` uploads it later)."""

    def __init__(self, key: str, settings: dict[str, Any], results_dir: Path):
        import wandb

        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT") or EXPERIMENT, name=key, config=settings,
                              dir=str(results_dir), mode=os.environ.get("WANDB_MODE") or "offline")

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Metrics at a training step."""
        self.run.log(metrics, step=step)

    def final(self, metrics: dict[str, float], step: int) -> None:
        """The result rows, as the run's summary."""
        self.run.summary.update(metrics)

    def close(self, failed: bool) -> None:
        """Finish the run (exit code 1 when the shard failed)."""
        self.run.finish(exit_code=1 if failed else 0)


BACKENDS = {"tensorboard": TensorBoardRun, "mlflow": MLflowRun, "wandb": WandbRun}


class Tracker:
    """The trackers of one shard. Every call goes to each tracker still working; one that raises is dropped
    with one warning, so training and the shard's results never depend on a tracker. Falsy with none."""

    def __init__(self, key: str = "", backends: dict[str, Any] | None = None):
        self.key = key
        self.backends = dict(backends or {})
        self.step = 0  # the last training step logged: where the final rows go

    def __bool__(self) -> bool:
        return bool(self.backends)

    def _each(self, call: str, *args: Any) -> None:
        for name, backend in list(self.backends.items()):
            try:
                getattr(backend, call)(*args)
            except Exception as exc:  # noqa: BLE001  (a tracker's failure must not fail the shard)
                self.drop(name, exc)
                if call != "close":  # end its run as failed if it still can (W&B would otherwise keep it open)
                    with contextlib.suppress(Exception):
                        backend.close(True)

    def drop(self, name: str, exc: Exception) -> None:
        """Stop using tracker `name` after an error, with one warning."""
        self.backends.pop(name, None)
        log.warning("--report-to %s: stopped for %s after an error (training goes on, its results are kept): "
                    "%s: %s", name, self.key, exc.__class__.__name__, str(exc).splitlines()[0] if str(exc) else "")

    def log(self, metrics: dict[str, Any], step: int) -> None:
        """Numeric, finite metrics at training step `step`."""
        clean = {metric_name(k): float(v) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        self.step = max(self.step, step)
        if clean:
            self._each("log", clean, step)

    def log_final(self, rows: list[dict[str, Any]]) -> None:
        """The shard's result rows (`split/metric[/label]` -> value), at the last step."""
        self._each("final", row_metrics(rows), self.step)

    def close(self, failed: bool = False) -> None:
        """End every tracker's run (marked failed when the shard failed)."""
        self._each("close", failed)
        self.backends.clear()


@contextlib.contextmanager
def tracked(names: tuple[str, ...], key: str, spec_json: dict[str, Any], results_dir: Path) -> Iterator[Tracker]:
    """A Tracker with a run of each named tracker for the shard `key` (its settings from `spec_json`), closed at
    the end, as failed when the body raises. A tracker that cannot open is left out with one warning."""
    tracker = Tracker(key)
    settings = flat_settings(spec_json)
    for name in names:
        try:
            tracker.backends[name] = BACKENDS[name](key, settings, Path(results_dir))
        except Exception as exc:  # noqa: BLE001  (e.g. a tracking server that cannot be reached)
            tracker.drop(name, exc)
    try:
        yield tracker
    except BaseException:
        tracker.close(failed=True)
        raise
    tracker.close()
