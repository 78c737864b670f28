"""`clbench run`'s options, checked: built-in defaults < config file < flags < --set, turned into one frozen
RunOptions for the runner. Everything that needs no torch is checked first, so a mistake fails in a second."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

from bench.cli.common import request_fields, seed_list
from bench.errors import BenchError
from bench.results.store import results_dir as resolve_results_dir
from bench.running.options import RunOptions
from bench.spec import TrainConfig

DEFAULT_METHODS = "ce,supcon,clld"
# `clbench run` with no arguments (`make demo`): the defaults below, and the reports written here. Its evaluator
# settings are those of any run on the demo set: the card's `eval_defaults` (datasets/demo.yaml), which fill
# the options a flag or config file leaves unset (bench.evaluators.base.EvalOptions), whatever the command.
DEMO_REPORTS = Path("reports")
LIST_FLAGS = {  # list options of `clbench run`: dest -> (flag, what it names, what to give instead)
    "methods": ("--methods", "method", "nothing to run; give at least one, e.g. --methods ce,supcon (see "
                                       "`clbench list methods`)"),
    "datasets": ("--datasets", "dataset", "nothing to run; give at least one card name or folder, e.g. "
                                          "--datasets mr (see `clbench list datasets`)"),
    "encoders": ("--encoder", "encoder", "nothing to run; give at least one, e.g. --encoder minilm (see "
                                         "`clbench list encoders`)"),
    "seeds": ("--seeds", "seed", "nothing to run; give at least one, e.g. --seeds 1,2,3 or --seeds 1-3"),
    "evaluators": ("--evaluators", "evaluator", "give at least one (see `clbench list evaluators`), or "
                                                "--evaluators none to run none"),
}


def require_names(args: argparse.Namespace, file_run: dict[str, Any]) -> None:
    """A BenchError for a list option that names nothing (`--methods ,`, `methods: []` in a config file), which
    would otherwise fall back to the defaults in silence."""
    from bench.cli.settings import as_list

    for dest, (flag, noun, fix) in LIST_FLAGS.items():
        if getattr(args, dest, None) == []:
            raise BenchError(f"{flag} names no {noun}: {fix}")
        if dest != "evaluators" and getattr(args, dest, None) is None and dest in file_run \
                and not as_list(file_run[dest] if file_run[dest] is not None else ""):
            raise BenchError(f"config file {args.config}: {dest} is empty: nothing to run; list at least one "
                             f"{noun}, or drop the key for the default")


def check_folders(args: argparse.Namespace, file_run: dict[str, Any]) -> None:
    """Fail at once, before any data is loaded, on a results folder that cannot be written (a file, a folder
    under a file, no permission) and on a data folder that does not exist."""
    from bench.results.store import check_results_dir

    config = f"config file {args.config}"
    given_as = ("--results-dir" if args.results_dir else f"results_dir in {config}" if file_run.get("results_dir")
                else "$BENCH_RESULTS_DIR" if os.environ.get("BENCH_RESULTS_DIR") else "the default")
    check_results_dir(resolve_results_dir(args.results_dir or file_run.get("results_dir")), given_as)
    if getattr(args, "demo", False):  # the demo also writes its reports
        from bench.results.folders import check_folder

        check_folder(DEMO_REPORTS, "reports folder", "the demo's", "run the demo in a folder you can write to")
    data_dir = args.data_dir or file_run.get("data_dir")
    if data_dir and not Path(data_dir).expanduser().is_dir():
        state = "is not a folder" if Path(data_dir).expanduser().exists() else "does not exist"
        source = "--data-dir" if args.data_dir else f"data_dir in {config}"
        raise BenchError(f"data folder {data_dir} ({source}) {state}; give the folder that holds "
                         "<name>/train.jsonl and test.jsonl (or .jsonl.gz/.csv/.tsv)")


def run_options(args: argparse.Namespace, check_encoders: bool = True) -> RunOptions:
    """What `clbench run` should do: built-in defaults < config file < command-line flags < --set.

    Everything that can be checked without torch is checked first (`checked_run_options`), so that a mistake
    fails in a second; only then is the shard request built.
    `check_encoders=False` leaves out the check that each encoder can be loaded (`benchmarks estimate` counts
    with a stand-in of the same shape)."""
    return with_request(*checked_run_options(args, check_encoders))


def with_request(opts: RunOptions, request: dict[str, Any]) -> RunOptions:
    """`opts` holding the shard request built from `request`'s fields (checked_run_options' second value)."""
    from bench.running.outcome import ShardRequest

    return dataclasses.replace(opts, request=ShardRequest(**request))


def checked_run_options(args: argparse.Namespace, check_encoders: bool = True
                        ) -> tuple[RunOptions, dict[str, Any]]:
    """`run_options` without the shard request, whose fields come second: every option checked, and every
    name, knob and setting as far as that needs no torch (see `check_plan`); imports no torch."""
    from bench.catalog import registry
    from bench.cli.settings import (as_list, grid_axes, load_config_file, parse_assignment, regime_lists,
                                    split_settings)
    from bench.running import grid

    file_run, settings = load_config_file(args.config) if args.config else ({}, {})
    demo = bool(getattr(args, "demo", False))
    require_names(args, file_run)
    check_folders(args, file_run)
    settings.update({n: getattr(args, n) for n in TrainConfig.field_names() if getattr(args, n) is not None})
    settings.update(dict(parse_assignment(a) for a in args.assignments))
    regimes = grid.regimes(regime_lists(settings))  # the data regimes leave `settings`: each one is run
    overrides, knobs = split_settings(settings, registry("method"))
    axes = grid_axes(getattr(args, "grid", []) or [], file_run.get("grid"), registry("method"))
    sample = whole_number("--sample", getattr(args, "sample", None), file_run.get("sample", 0))
    grid_seed = whole_number("--grid-seed", getattr(args, "grid_seed", None), file_run.get("grid_seed", 0))
    if sample and not axes:
        raise BenchError("--sample draws knob combinations of a grid: add --grid KEY=V1,V2 (or drop --sample)")
    try:
        seeds = args.seeds or seed_list(",".join(str(s) for s in as_list(file_run.get("seeds", 1))))
    except argparse.ArgumentTypeError as exc:
        raise BenchError(f"config file {args.config}: {exc}") from exc
    data_dir = args.data_dir or file_run.get("data_dir")
    request = request_fields(args, file_run, data_dir, registry("evaluator"))
    if axes and getattr(args, "evaluators", None) is None and "evaluators" not in file_run:
        request["evaluators"] = ()  # a knob grid: clean metrics everywhere, robustness on the chosen combinations
    jobs = args.jobs if args.jobs is not None else int(file_run.get("jobs", 1))
    if jobs < 1:
        raise BenchError("--jobs must be >= 1")
    executor, slurm = executor_options(args, file_run)
    shards_per_gpu = args.shards_per_gpu if args.shards_per_gpu is not None else file_run.get("shards_per_gpu", 1)
    if isinstance(shards_per_gpu, bool) or not isinstance(shards_per_gpu, int) or shards_per_gpu < 1:
        raise BenchError(f"--shards-per-gpu must be a whole number >= 1, got {shards_per_gpu!r}")
    overwrite = args.overwrite or bool(file_run.get("overwrite", False))
    strict_data = getattr(args, "strict_data", None)
    strict_data = file_run.get("strict_data", False) if strict_data is None else strict_data
    if not isinstance(strict_data, bool):
        raise BenchError(f"config file {args.config}: strict_data is true or false, got {strict_data!r}")
    adapt_threads = getattr(args, "adapt_threads", None)
    adapt_threads = file_run.get("adapt_threads", False) if adapt_threads is None else adapt_threads
    if not isinstance(adapt_threads, bool):
        raise BenchError(f"config file {args.config}: adapt_threads is true or false, got {adapt_threads!r}")
    resume = bool(args.resume) or bool(file_run.get("resume", False))
    if resume and overwrite:
        raise BenchError("--resume and --overwrite contradict each other: --resume keeps finished shards, "
                         "--overwrite recomputes them; give one")
    wait = bool(args.wait) or bool(file_run.get("wait", False))
    if wait and executor != "slurm":
        raise BenchError("--wait applies to --executor slurm (a local run always waits); add --executor slurm or "
                         "drop --wait")
    if executor == "slurm" and args.jobs is not None:
        raise BenchError("--jobs is for local runs; with --executor slurm use --array-parallelism and "
                         "--shards-per-gpu")
    opts = RunOptions(
        methods=args.methods or as_list(file_run.get("methods", DEFAULT_METHODS)),
        datasets=args.datasets or as_list(file_run.get("datasets", "demo")),
        encoders=args.encoders or as_list(file_run.get("encoders", "minilm")),
        seeds=seeds,
        overrides=overrides,
        knobs=knobs,
        grid=axes,
        sample=sample,
        grid_seed=grid_seed,
        regimes=regimes,
        data_dir=data_dir,
        strict_data=strict_data,
        results_dir=resolve_results_dir(args.results_dir or file_run.get("results_dir")),
        jobs=jobs,
        adapt_threads=adapt_threads,
        device=args.device if args.device != "auto" else file_run.get("device", "auto"),
        overwrite=overwrite,
        resume=resume,
        executor=executor,
        shards_per_gpu=shards_per_gpu,
        slurm=slurm,
        wait=wait,
        progress=not getattr(args, "no_progress", False),
        reports_dir=DEMO_REPORTS if demo else None,
    )
    check_set_targets(args.assignments, opts.methods, registry("method"))
    check_cuda_graphs(request["cuda_graphs"], opts.device, request["compile"])
    if executor == "local":  # a SLURM job's node has its own GPUs, which the submitting machine may lack
        check_cuda_here(opts.device, request["cuda_graphs"])
    check_sweep(opts, bool(getattr(args, "yes", None) or file_run.get("yes", False)))
    check_plan(opts, check_encoders)
    from bench.cli.export import save_formats  # --save-format: how weights are kept, not what is trained

    given = getattr(args, "save_format", None)
    given = file_run.get("save_format") if given is None else given
    given = ",".join(map(str, given)) if isinstance(given, list) else given  # a config file's list
    request["save_format"] = save_formats(None if given is None else str(given), request["save_model"], opts)
    return opts, request


def check_cuda_graphs(mode: str, device: str, compiled: bool) -> None:
    """`--cuda-graphs on` with a device or a setting that rules graphs out fails before anything runs (a CUDA
    device that turns out to be missing fails each shard with the reason)."""
    if mode != "on":
        return
    if device not in ("auto", "cuda") and not device.startswith("cuda:"):
        raise BenchError(f"--cuda-graphs on needs a CUDA device, got --device {device}; use --cuda-graphs auto")
    if compiled:
        raise BenchError("--cuda-graphs on and --compile exclude each other (a compiled encoder is not captured "
                         "whole); drop one, or use --cuda-graphs auto")


def check_cuda_here(device: str, cuda_graphs: str) -> None:
    """A local run that asks for CUDA (`--device cuda[:N]`, or `--cuda-graphs on` with `--device auto`) on a
    machine without it, or for a GPU it does not have, fails before anything is planned (it used to fail every
    shard after loading the data). Imports torch only in that case."""
    wants = device == "cuda" or device.startswith("cuda:") or (device == "auto" and cuda_graphs == "on")
    if not wants:
        return
    from importlib.metadata import version

    flag = f"--device {device}" if device != "auto" else "--cuda-graphs on"
    fix = "use --device cpu or auto" if device != "auto" else "use --cuda-graphs auto (or off) on this machine"
    installed = version("torch")
    if installed.endswith("+cpu"):  # known without importing torch (1.7 s)
        raise BenchError(f"{flag}: CUDA is not available here (torch {installed}, a CPU build); {fix}")
    import torch

    if not torch.cuda.is_available():
        build = "a CPU build" if torch.version.cuda is None else "no CUDA device visible"
        raise BenchError(f"{flag}: CUDA is not available here (torch {torch.__version__}, {build}); {fix}")
    index = int(device.split(":", 1)[1]) if device.startswith("cuda:") and device[5:].isdigit() else 0
    if index >= torch.cuda.device_count():
        raise BenchError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s) "
                         f"(cuda:0 to cuda:{torch.cuda.device_count() - 1}); pick one of them")


def whole_number(flag: str, given: Any, from_file: Any) -> int:
    """A flag's value, else the config file's, checked to be a whole number >= 0."""
    value = given if given is not None else from_file
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BenchError(f"{flag} must be a whole number >= 0, got {value!r}")
    return value


def check_sweep(opts: RunOptions, confirmed: bool) -> None:
    """The grid's checks (bench.running.grid.check_axes) and the size limit on the planned shards (--yes)."""
    from bench.catalog import registry
    from bench.running import grid

    methods = [registry("method").canonical(m) for m in opts.methods if m in registry("method")]
    fixed = {**opts.overrides, **{f"{m}.{k}": v for m, knobs in opts.knobs.items() for k, v in knobs.items()}}
    grid.check_axes(opts.grid, methods, fixed)
    count = grid.shard_count(opts.grid, methods, opts.sample, len(opts.regimes), len(opts.datasets),
                             len(opts.encoders), len(opts.seeds))
    grid.check_size(count, confirmed)


def check_set_targets(assignments: list[str], methods: list[str], registry: Any) -> None:
    """Warn (one line on stderr each) about a `--set METHOD.KNOB=VALUE` on the command line whose method is not
    among this run's methods: it has no effect (a typo in --methods, or a script that passes every knob to every
    run). Unknown methods are left to `split_settings`, which has already refused them."""
    running = {registry.canonical(m) for m in methods if m in registry}
    for text in assignments:
        key = text.split("=", 1)[0].strip()
        method = key.split(".", 1)[0]
        if "." in key and method in registry and registry.canonical(method) not in running:
            print(f"clbench: note: --set {text} has no effect: {method} is not among the methods of this run "
                  f"({', '.join(methods)})", file=sys.stderr)


def check_plan(opts: RunOptions, check_encoders: bool = True) -> None:
    """The checks of `bench.running.runner.plan` that need no torch, in its order, with its messages: method names,
    encoders, training settings, dataset names. plan() makes them all again, and those that need the real
    classes (knob values, checked by each method's Config; evaluator options against each dataset; the data
    itself)."""
    from bench.catalog import CatalogError, registry
    from bench.hub import check_encoder_source
    from bench.spec import method_config

    methods = registry("method")
    for method in opts.methods:
        name = methods.canonical(method)
        try:  # knob values, by the method's own Config checks, built from its source without torch
            method_config(name, opts.knobs.get(name, {}), methods)
        except (CatalogError, NameError):
            pass  # the Config needs its module: plan() checks it with the real class

    encoders = registry("encoder")
    for encoder in opts.encoders if check_encoders else ():
        check_encoder_source(encoder, encoders)  # a Hub id is asked about later, by plan()
    TrainConfig(**opts.overrides)  # e.g. --epochs 0 (plan adds each dataset card's defaults)
    for dataset in opts.datasets:
        check_dataset_name(dataset, opts.data_dir)


def check_dataset_name(name: str, data_dir: str | None) -> None:
    """A BenchError, as `bench.data.loading.load_raw` would raise it, for a dataset that cannot be found: a name that is
    neither a card, a path nor a folder under the data folders, and a card with no local copy, no generator
    and no reachable or cached Hub source; and for a card whose `eval_defaults` are no evaluator options.
    Whatever exists is loaded (and checked) later."""
    from bench.data.loading import check_hub_source, data_dirs, unknown_dataset_message
    from bench.evaloptions import card_defaults
    from bench.registry import DATASETS

    dirs = data_dirs(data_dir)
    if name in DATASETS:
        card = DATASETS.get(name)
        card_defaults(card)
        if not card.generator and not any((d / card.name).is_dir() for d in dirs):
            check_hub_source(card, dirs)  # load_hub's message (no Hub id; offline and not cached), no import
        return
    if not Path(name).expanduser().exists() and not any((d / name).exists() for d in dirs):
        raise BenchError(unknown_dataset_message(name, data_dir))


def executor_options(args: argparse.Namespace, file_run: dict[str, Any]) -> tuple[str, Any]:
    """The executor and, for slurm, its SlurmOptions: profile file < config-file keys < flags."""
    from bench.running.executors import EXECUTORS, require_submitit
    from bench.running.slurm_options import load_profile, parse_sbatch, slurm_options
    from bench.cli.settings import SLURM_KEYS

    executor = args.executor or str(file_run.get("executor", "local"))
    if executor not in EXECUTORS:
        raise BenchError(f"executor {executor!r}: use local or slurm")
    flags = {key: getattr(args, key) for key in SLURM_KEYS if key != "sbatch"}
    flags["sbatch"] = parse_sbatch(args.sbatch) if args.sbatch else None
    given = [f"--{k.replace('_', '-')}" for k, v in flags.items() if v is not None]
    given += ["--slurm-profile"] if args.slurm_profile else []
    if executor != "slurm":
        if given:
            raise BenchError(f"{given[0]} applies to --executor slurm only; add --executor slurm (or drop it)")
        return executor, None
    require_submitit()
    profile_path = args.slurm_profile or file_run.get("slurm_profile")
    if profile_path and not args.slurm_profile and args.config and not Path(profile_path).expanduser().exists():
        beside = Path(args.config).parent / profile_path  # a profile named in a config file, next to it
        profile_path = str(beside) if beside.exists() else profile_path
    profile = load_profile(profile_path) if profile_path else {}
    from_file = {key: file_run[key] for key in SLURM_KEYS if key in file_run}
    return executor, slurm_options(profile, from_file, flags)
