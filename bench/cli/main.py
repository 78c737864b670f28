"""The `bench` command line."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.spec import TrainConfig

log = logging.getLogger("bench")

from bench.results.store import DEFAULT_RESULTS, results_dir as resolve_results_dir
DEFAULT_METHODS = "ce,supcon,clld"
PLANNED: dict[str, str] = {}  # subcommands announced but not implemented yet: name -> what it will do
HELP = {
    "epochs": "maximum epochs", "batch_size": "training batch size", "lr": "peak learning rate (AdamW)",
    "weight_decay": "decoupled weight decay", "warmup_ratio": "fraction of steps for linear warm-up",
    "max_grad_norm": "gradient clipping norm (0 = off)", "patience": "early stopping: epochs without gain",
    "max_length": "max tokens per text", "head_dropout": "dropout before the classifier layer",
    "pooling": "cls | pooler | mean", "precision": "auto (bf16 on GPU) | fp32 | bf16",
    "val_fraction": "validation share carved from train when a dataset has none",
    "data_seed": "seed of the validation carve (keep equal across a comparison)",
}


def comma_list(text: str) -> list[str]:
    """`a,b , c` -> ['a', 'b', 'c']."""
    return [part.strip() for part in text.split(",") if part.strip()]


def seed_list(text: str) -> list[int]:
    """`1,2,5` or `1-3` -> list of ints."""
    seeds: list[int] = []
    try:
        for part in comma_list(text):
            if "-" in part[1:]:
                first, last = part.split("-", 1)
                if int(last) < int(first):
                    raise argparse.ArgumentTypeError(f"seed range {part!r} is empty; write it low-high, "
                                                     f"e.g. {last}-{first}")
                seeds.extend(range(int(first), int(last) + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must look like 1,2,3 or 1-3, not {text!r}") from None
    return seeds


LIST_FLAGS = {  # list options of `bench run`: dest -> (flag, what it names, what to give instead)
    "methods": ("--methods", "method", "nothing to run; give at least one, e.g. --methods ce,supcon (see "
                                       "`bench list methods`)"),
    "datasets": ("--datasets", "dataset", "nothing to run; give at least one card name or folder, e.g. "
                                          "--datasets mr (see `bench list datasets`)"),
    "encoders": ("--encoder", "encoder", "nothing to run; give at least one, e.g. --encoder minilm (see "
                                         "`bench list encoders`)"),
    "seeds": ("--seeds", "seed", "nothing to run; give at least one, e.g. --seeds 1,2,3 or --seeds 1-3"),
    "evaluators": ("--evaluators", "evaluator", "give at least one (see `bench list evaluators`), or "
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
    data_dir = args.data_dir or file_run.get("data_dir")
    if data_dir and not Path(data_dir).expanduser().is_dir():
        state = "is not a folder" if Path(data_dir).expanduser().exists() else "does not exist"
        source = "--data-dir" if args.data_dir else f"data_dir in {config}"
        raise BenchError(f"data folder {data_dir} ({source}) {state}; give the folder that holds "
                         "<name>/train.jsonl and test.jsonl (or .jsonl.gz/.csv/.tsv)")


EVAL_HELP = {
    "attack_n": "textfooler: examples attacked (a fixed sample of the test split)",
    "attack_mode": "textfooler: adaptive (attack each model) | transfer (score a fixed adversarial set)",
    "attack_source": "textfooler transfer: run key whose adversarial examples are used",
    "attack_backend": "textfooler: builtin | textattack (cross-check; pip install textattack)",
    "attack_data": "textfooler: file or folder of texts to attack instead of the test split",
    "word_vectors": "textfooler: counter-fitted vectors file (word v1 .. vd); default GloVe-6B-50d",
    "contrast_set": "contrast: folder or name of a contrast set (default: the dataset card's)",
    "contrast_split": "contrast: split of the contrast set",
    "checklist_suite": "checklist: JSON Lines suite file (default: built-in generators)",
    "checklist_n": "checklist: test texts perturbed by the built-in generators",
    "tsne": "repr: also store 2-D t-SNE coordinates of a test sample",
    "tsne_n": "repr: examples in the t-SNE sample",
    "data_dir": "",
}


def add_evaluator_options(parser: argparse.ArgumentParser) -> None:
    """`--evaluators` and every evaluator option (defaults from EvalOptions)."""
    from bench.evaluators.base import EvalOptions

    parser.add_argument("--evaluators", type=comma_list, default=None,
                        help="comma-separated evaluators (default: all that fit the dataset; 'none' for none)")
    defaults = EvalOptions()
    for name in EvalOptions.field_names():
        if name == "data_dir":
            continue
        default = getattr(defaults, name)
        flag = f"--{name.replace('_', '-')}"
        if isinstance(default, bool):
            parser.add_argument(flag, dest=name, action="store_true", default=None, help=EVAL_HELP[name])
        else:
            parser.add_argument(flag, dest=name, type=type(default), default=None,
                                help=f"{EVAL_HELP[name]} (default: {default!r})")


def add_slurm_options(parser: argparse.ArgumentParser) -> None:
    """The options of `--executor slurm` (a profile file, then flags that override it)."""
    group = parser.add_argument_group("SLURM (with --executor slurm; pip install clbench[slurm])")
    group.add_argument("--slurm-profile", default=None, metavar="YAML",
                       help="YAML file with the options below (partition, time_min, ...); flags win")
    group.add_argument("--partition", default=None, help="SLURM partition")
    group.add_argument("--time-min", type=int, default=None, help="time limit per array task in minutes (default: "
                                                                   "240; timed-out tasks are requeued and resume)")
    group.add_argument("--gpus-per-job", type=int, default=None,
                       help="GPUs per array task (default: 1 where the partition has GPUs as `sinfo` reports them, "
                            "else 0)")
    group.add_argument("--mem-gb", type=float, default=None, help="memory per array task in GB")
    group.add_argument("--cpus-per-task", type=int, default=None, help="CPUs per array task")
    group.add_argument("--array-parallelism", type=int, default=None, help="array tasks running at once at most")
    group.add_argument("--max-timeouts", type=int, default=None,
                       help="times a task that hits --time-min is requeued to resume (default: 3; a shard longer "
                            "than the time limit needs one per extra time slot)")
    group.add_argument("--sbatch", action="append", default=None, metavar="KEY=VALUE",
                       help="any other sbatch option, e.g. --sbatch account=proj --sbatch qos=high; repeatable")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    common = argparse.ArgumentParser(add_help=False)  # subcommands: absent unless given, so `bench --debug run`
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks")
    parser = argparse.ArgumentParser(prog="bench",
                                     description="Benchmark contrastive fine-tuning methods for text classifiers.")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    lister = sub.add_parser("list", parents=[common], help="list registered methods, datasets or encoders")
    lister.add_argument("what", choices=["methods", "datasets", "encoders", "evaluators"])
    lister.add_argument("--verbose", "-v", action="store_true", help="show settings and details")

    run = sub.add_parser("run", parents=[common], help="train and evaluate shards (no arguments: offline demo)",
                         description="Run every method x dataset x encoder x seed shard; finished shards are "
                                     f"skipped. With no arguments: {DEFAULT_METHODS} on the demo set with MiniLM.")
    run.add_argument("--methods", type=comma_list, default=None,
                     help=f"comma-separated (default: {DEFAULT_METHODS})")
    run.add_argument("--datasets", type=comma_list, default=None,
                     help="card names or folders with train/test files (default: demo)")
    run.add_argument("--encoder", "--encoders", dest="encoders", type=comma_list, default=None,
                     help="short names, Hugging Face ids or local model folders (default: minilm)")
    run.add_argument("--seeds", type=seed_list, default=None, help="e.g. 1,2,3 or 1-3 (default: 1)")
    run.add_argument("--config", default=None, help="YAML file with run options, settings and method knobs "
                                                    "(command-line flags win)")
    run.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE",
                     help="a training setting (lr=1e-4) or method knob (clld.tau=5); repeatable")
    defaults = TrainConfig()
    for name in TrainConfig.field_names():
        default = getattr(defaults, name)
        run.add_argument(f"--{name.replace('_', '-')}", dest=name, type=type(default), default=None,
                         help=f"{HELP[name]} (default: {default})")
    run.add_argument("--data-dir", default=None, help="folder with <name>/{train,validation,test}.jsonl[.gz] "
                                                      "(default: $BENCH_DATA_DIR)")
    run.add_argument("--results-dir", default=None,
                     help=f"where runs are stored (default: $BENCH_RESULTS_DIR or ./{DEFAULT_RESULTS})")
    run.add_argument("--overwrite", action="store_true", help="recompute finished shards")
    run.add_argument("--jobs", type=int, default=None, help="worker processes, one GPU each when several (default: 1)")
    run.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--compile", action="store_true", default=None,
                     help="torch.compile the encoder's repeated layer once for all layers, with dynamic shapes "
                          "(faster on GPU after warm-up; not in the run key)")
    run.add_argument("--length-bucket", type=int, default=None, metavar="N",
                     help="pad each batch to a multiple of N tokens (0: to its longest example; default: 16 with "
                          "--compile, 8 on a GPU, 0 on a CPU; not in the run key)")
    run.add_argument("--no-save-model", dest="save_model", action="store_false", default=None,
                     help="do not keep the trained weights (model.pt); `bench evaluate` then cannot score the run")
    run.add_argument("--executor", choices=["local", "slurm"], default=None,
                     help="local: run here (default); slurm: submit the unfinished shards as a job array and return")
    run.add_argument("--resume", action="store_true", default=None,
                     help="run or submit only unfinished shards (failed ones included), skipping shards SLURM "
                          "reports as pending or running")
    run.add_argument("--wait", action="store_true", default=None,
                     help="with --executor slurm: follow the array with a progress bar until every shard has "
                          "ended, print the results, exit 1 if any shard did not finish")
    run.add_argument("--shards-per-gpu", type=int, default=None, metavar="K",
                     help="K shards share each GPU (local: K worker processes per GPU; slurm: each array task "
                          "runs K shards per GPU at once) (default: 1)")
    add_slurm_options(run)
    add_evaluator_options(run)

    evaluate = sub.add_parser("evaluate", parents=[common], help="run evaluators on finished runs (no retraining)",
                              description="Score finished runs with evaluators from their saved models; stored "
                                          "evaluations with the same settings are skipped unless --overwrite.")
    evaluate.add_argument("runs", nargs="+", metavar="RUN",
                          help="run keys, glob patterns such as 'ce_mr_*', or run folders")
    evaluate.add_argument("--results-dir", default=None,
                          help=f"where runs are stored (default: $BENCH_RESULTS_DIR or ./{DEFAULT_RESULTS})")
    evaluate.add_argument("--data-dir", default=None, help="where the runs' datasets are (default: as recorded)")
    evaluate.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    evaluate.add_argument("--overwrite", action="store_true", help="recompute stored evaluations")
    add_evaluator_options(evaluate)

    status = sub.add_parser("status", parents=[common], help="state of every shard: done, running, pending, "
                                                              "failed, cancelled, interrupted",
                            description="List the shards under a results folder with their state and reason; "
                                        "shards submitted to SLURM are looked up with sacct.")
    status.add_argument("runs", nargs="*", metavar="RUN", help="run keys or glob patterns such as 'ce_mr_*' "
                                                               "(default: all)")
    status.add_argument("--results-dir", default=None,
                        help=f"where runs are stored (default: $BENCH_RESULTS_DIR or ./{DEFAULT_RESULTS})")
    status.add_argument("--wait", action="store_true",
                        help="follow the shards until every one has ended (exit 1 if any did not finish)")
    status.add_argument("--no-progress", action="store_true", help="with --wait: one line per change, no bar")

    from bench.cli.plot import add_plot_parser
    from bench.cli.report import add_report_parser, add_results_parser

    add_results_parser(sub, common)
    add_report_parser(sub, common)
    add_plot_parser(sub, common)
    for name, what in PLANNED.items():
        stub = sub.add_parser(name, parents=[common], help=f"(not implemented yet) {what}")
        stub.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


# ----------------------------------------------------------------------------------------------- commands

def cmd_list(args: argparse.Namespace) -> int:
    """Print the registered methods, datasets or encoders."""
    import bench.methods  # noqa: F401
    from bench.data import cards  # noqa: F401
    from bench.encoders import models as encoders
    from bench.registry import DATASETS, ENCODERS, METHODS

    if args.what == "methods":
        for name, cls in METHODS.items():
            aliases = METHODS.aliases_of(name)
            print(f"{name}{' (' + ', '.join(aliases) + ')' if aliases else ''}: {first_line(cls.__doc__)}")
            if args.verbose:
                for knob, value in cls.config_fields().items():
                    print(f"    {knob} = {value!r}")
    elif args.what == "datasets":
        for name, card in DATASETS.items():
            sizes = "/".join(str(card.sizes.get(s) or "-") for s in ("train", "validation", "test"))
            print(f"{name:10s} {len(card.labels):3d} classes  {sizes:>18s}  {card.title}")
            if args.verbose:
                hub = (card.hub or {}).get("id") or "-"
                print(f"    hub: {hub}; local files: {', '.join(card.local_splits) or '-'}; paper: "
                      f"{card.paper or '-'}")
    elif args.what == "evaluators":
        import bench.evaluators  # noqa: F401
        from bench.registry import EVALUATORS

        for name, cls in EVALUATORS.items():
            print(f"{name}: {first_line(cls.__doc__)}")
            if args.verbose and cls.option_names:
                print(f"    options: {', '.join('--' + o.replace('_', '-') for o in cls.option_names)}")
    else:
        for name, factory in ENCODERS.items():
            print(f"{name}: {first_line(factory.__doc__)}")
        print("(any other name is loaded as a Hugging Face model id or a local model folder)")
    return 0


def first_line(doc: str | None) -> str:
    """The first line of a docstring."""
    return (doc or "").strip().splitlines()[0] if doc else ""


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """What `bench run` should do: built-in defaults < config file < command-line flags < --set.

    Everything that can be checked without torch is checked first (`checked_run_options`), so that a mistake
    fails in a second; only then is the shard request built, which imports torch and transformers."""
    opts, request = checked_run_options(args)
    from bench.running.shard import ShardRequest  # torch, transformers and sklearn from here on

    opts["request"] = ShardRequest(**request)
    return opts


def checked_run_options(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """`run_options` without the shard request, whose fields come second: every option checked, and every
    name, knob and setting as far as that needs no torch (see `check_plan`); imports no torch."""
    from bench.catalog import registry
    from bench.cli.settings import as_list, load_config_file, parse_assignment, split_settings

    file_run, settings = load_config_file(args.config) if args.config else ({}, {})
    require_names(args, file_run)
    check_folders(args, file_run)
    settings.update({n: getattr(args, n) for n in TrainConfig.field_names() if getattr(args, n) is not None})
    settings.update(dict(parse_assignment(a) for a in args.assignments))
    overrides, knobs = split_settings(settings, registry("method"))
    try:
        seeds = args.seeds or seed_list(",".join(str(s) for s in as_list(file_run.get("seeds", 1))))
    except argparse.ArgumentTypeError as exc:
        raise BenchError(f"config file {args.config}: {exc}") from exc
    data_dir = args.data_dir or file_run.get("data_dir")
    request = request_fields(args, file_run, data_dir, registry("evaluator"))
    jobs = args.jobs if args.jobs is not None else int(file_run.get("jobs", 1))
    if jobs < 1:
        raise BenchError("--jobs must be >= 1")
    executor, slurm = executor_options(args, file_run)
    shards_per_gpu = args.shards_per_gpu if args.shards_per_gpu is not None else file_run.get("shards_per_gpu", 1)
    if isinstance(shards_per_gpu, bool) or not isinstance(shards_per_gpu, int) or shards_per_gpu < 1:
        raise BenchError(f"--shards-per-gpu must be a whole number >= 1, got {shards_per_gpu!r}")
    overwrite = args.overwrite or bool(file_run.get("overwrite", False))
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
    opts = {
        "methods": args.methods or as_list(file_run.get("methods", DEFAULT_METHODS)),
        "datasets": args.datasets or as_list(file_run.get("datasets", "demo")),
        "encoders": args.encoders or as_list(file_run.get("encoders", "minilm")),
        "seeds": seeds,
        "overrides": overrides,
        "knobs": knobs,
        "data_dir": data_dir,
        "results_dir": resolve_results_dir(args.results_dir or file_run.get("results_dir")),
        "jobs": jobs,
        "device": args.device if args.device != "auto" else file_run.get("device", "auto"),
        "overwrite": overwrite,
        "resume": resume,
        "executor": executor,
        "shards_per_gpu": shards_per_gpu,
        "slurm": slurm,
        "wait": wait,
    }
    check_plan(opts)
    return opts, request


def check_plan(opts: dict[str, Any]) -> None:
    """The checks of `bench.running.runner.plan` that need no torch, in its order, with its messages: method names,
    encoders, training settings, dataset names. plan() makes them all again, and those that need the real
    classes (knob values, checked by each method's Config; evaluator options against each dataset; the data
    itself)."""
    from bench.catalog import CatalogError, registry
    from bench.hub import check_encoder_source
    from bench.spec import method_config

    methods = registry("method")
    for method in opts["methods"]:
        name = methods.canonical(method)
        try:  # knob values, by the method's own Config checks, built from its source without torch
            method_config(name, opts["knobs"].get(name, {}), methods)
        except (CatalogError, NameError):
            pass  # the Config needs its module: plan() checks it with the real class

    encoders = registry("encoder")
    for encoder in opts["encoders"]:
        check_encoder_source(encoder, encoders)  # a Hub id is asked about later, by plan()
    TrainConfig(**opts["overrides"])  # e.g. --epochs 0 (plan adds each dataset card's defaults)
    for dataset in opts["datasets"]:
        check_dataset_name(dataset, opts["data_dir"])


def check_dataset_name(name: str, data_dir: str | None) -> None:
    """A BenchError, as `bench.data.loading.load_raw` would raise it, for a dataset that cannot be found: a name that is
    neither a card, a path nor a folder under the data folders, and a card with no local copy, no generator
    and no reachable Hub source. Whatever exists is loaded (and checked) later."""
    from bench.data.loading import data_dirs, load_hub, unknown_dataset_message
    from bench.hub import hub_reachable
    from bench.registry import DATASETS

    dirs = data_dirs(data_dir)
    if name in DATASETS:
        card = DATASETS.get(name)
        if not card.generator and not any((d / card.name).is_dir() for d in dirs) \
                and (not (card.hub or {}).get("id") or not hub_reachable()):
            load_hub(card, dirs)  # raises its own message, before it imports anything
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


def eval_options(args: argparse.Namespace, file_run: dict[str, Any], data_dir: str | None) -> Any:
    """Evaluator options: EvalOptions defaults < config file < command-line flags."""
    from bench.attack.examples import require_source
    from bench.evaluators.base import EvalOptions
    from bench.evaluators.textfooler import check_options as check_attack_options
    from bench.cli.settings import coerce

    values: dict[str, Any] = {}
    defaults = EvalOptions()
    for name in EvalOptions.field_names():
        flag = getattr(args, name, None) if name != "data_dir" else None
        value = flag if flag is not None else file_run.get(name)
        if value is not None:
            values[name] = coerce(name, value, getattr(defaults, name))
    values["data_dir"] = str(data_dir or os.environ.get("BENCH_DATA_DIR") or "")
    options = EvalOptions(**values)
    check_attack_options(options)  # even when textfooler is not among the evaluators: a typo is an error
    if options.attack_mode == "transfer":
        require_source(options.attack_source)
    for name in ("attack_n", "checklist_n", "tsne_n"):
        if getattr(options, name) < 1:
            raise BenchError(f"--{name.replace('_', '-')} must be >= 1")
    return options


def request_fields(args: argparse.Namespace, file_run: dict[str, Any], data_dir: str | None,
                   evaluators: Any = None) -> dict[str, Any]:
    """The fields of the ShardRequest (see `shard_request`), checked; evaluator names against `evaluators` (by
    default the real registry; bench.catalog.registry("evaluator") needs no torch). Imports no torch."""
    from bench.catalog import evaluator_names
    from bench.cli.settings import as_list

    names = args.evaluators if args.evaluators is not None else (
        as_list(file_run["evaluators"]) if "evaluators" in file_run else None)
    save = args.save_model if getattr(args, "save_model", None) is not None else bool(file_run.get("save_model", True))
    compiled = bool(getattr(args, "compile", None) or file_run.get("compile", False))
    bucket = getattr(args, "length_bucket", None)
    bucket = file_run.get("length_bucket") if bucket is None else bucket
    if bucket is not None and (isinstance(bucket, bool) or not isinstance(bucket, int) or bucket < 0):
        raise BenchError(f"--length-bucket must be a whole number >= 0 (0: no bucketing), got {bucket!r}")
    return {"evaluators": tuple(evaluator_names(names, evaluators)), "options": eval_options(args, file_run, data_dir),
            "save_model": save, "explicit": names is not None, "compile": compiled, "length_bucket": bucket}


def shard_request(args: argparse.Namespace, file_run: dict[str, Any], data_dir: str | None) -> Any:
    """Which evaluators to run with which options, and whether to keep models."""
    fields = request_fields(args, file_run, data_dir)
    from bench.running.shard import ShardRequest

    return ShardRequest(**fields)


def print_evaluations(outcomes: list[Any]) -> list[Any]:
    """One line per evaluator that did not just succeed (one line in all when none could run for want of a
    saved model); returns the failed ones."""
    if len(outcomes) > 1 and all(e.status == "no-model" for e in outcomes):
        print(f"    {', '.join(e.evaluator for e in outcomes)}: no-model: {outcomes[0].message}", file=sys.stderr)
        return []
    for e in outcomes:
        if e.status in ("skipped", "failed", "no-model"):
            print(f"    {e.evaluator}: {e.status}: {e.message}", file=sys.stderr)
        elif e.status == "done":
            print(f"    {e.evaluator}: done ({e.seconds:.0f}s)", file=sys.stderr)
    return [e for e in outcomes if e.status == "failed"]


def cmd_run(args: argparse.Namespace) -> int:
    """Plan and run shards, then print a summary table of this invocation's results."""
    opts = run_options(args)  # checks what it can before it imports torch: a mistake costs a second
    quiet_transformers()
    from bench.running.runner import execute, plan
    from bench.reporting.summary import evaluation_table, summary_table

    results_dir = opts["results_dir"]
    shards = plan(opts["methods"], opts["datasets"], opts["encoders"], opts["seeds"], opts["overrides"],
                  opts["data_dir"], opts["knobs"], results_dir, opts["request"])
    print(f"bench: {len(shards)} shard(s) -> {results_dir}", file=sys.stderr)
    planned_keys = [s.spec.key for s in shards]
    if opts["resume"] or (opts["executor"] == "slurm" and not opts["overwrite"]):
        shards = skip_active(shards, results_dir)  # never queue a shard twice
    if opts["executor"] == "slurm":
        code = submit_shards(shards, opts)
        return wait_for(planned_keys, results_dir, not args.no_progress) if opts["wait"] else code

    def report(i: int, n: int, outcome: Any) -> None:
        accuracy = next((r["value"] for r in outcome.rows if r["metric"] == "accuracy" and r["split"] == "test"),
                        None)
        detail = f"test accuracy {accuracy:.4f}" if accuracy is not None else outcome.message
        print(f"[{i}/{n}] {outcome.status:7s} {outcome.key}  {detail}"
              + (f"  ({outcome.seconds:.0f}s)" if outcome.status == "done" else ""), file=sys.stderr)
        if outcome.status == "done" and outcome.message:  # a finished run whose result is suspect (collapsed)
            print(f"warning: {outcome.key} {outcome.message}", file=sys.stderr)
        failed_evaluations.extend(print_evaluations(outcome.evaluations))

    failed_evaluations: list[Any] = []
    outcomes = execute(shards, results_dir, opts["jobs"], opts["device"], opts["overwrite"], not args.no_progress,
                       report, opts["request"], shards_per_gpu=opts["shards_per_gpu"])
    rows = [row for o in outcomes for row in o.rows]
    if rows:
        print(summary_table(rows).to_string(index=False))
    evaluation_rows = [row for o in outcomes for e in o.evaluations for row in e.rows]
    if evaluation_rows and not evaluation_table(evaluation_rows).empty:
        print(evaluation_table(evaluation_rows).to_string(index=False))
    failed = [o for o in outcomes if o.status == "failed"]
    if failed:
        print(f"bench: {len(failed)} of {len(outcomes)} shard(s) failed:", file=sys.stderr)
        for o in failed:
            print(f"  {o.key}: {o.message}", file=sys.stderr)
    held = [o for o in outcomes if o.status == "held"]
    if held:  # not a failure: another runner trains them (see bench.results.lease)
        print(f"bench: {len(held)} of {len(outcomes)} shard(s) held by another runner, not run here (see `bench "
              "status`; a shard it leaves unfinished is taken over by the next `bench run`):", file=sys.stderr)
        for o in held:
            print(f"  {o.key}: {o.message}", file=sys.stderr)
    report_failed_evaluations(failed_evaluations, " (the runs' training results are kept)")
    return 1 if failed or failed_evaluations else 0


def skip_active(shards: list[Any], results_dir: Path) -> list[Any]:
    """Drop the shards SLURM reports as pending or running (warn when it cannot be asked): with --resume, and
    always before a SLURM submission."""
    from bench.running.status import active_keys

    active = active_keys(results_dir, [s.spec.key for s in shards])
    if active is None:
        print("bench: cannot query SLURM (scheduler unreachable); shards submitted earlier may run twice",
              file=sys.stderr)
        return shards
    if active:
        print(f"bench: skipping {len(active)} shard(s) pending or running on SLURM (see `bench status`)",
              file=sys.stderr)
    return [s for s in shards if s.spec.key not in active]


def submit_shards(shards: list[Any], opts: dict[str, Any]) -> int:
    """--executor slurm: submit the unfinished shards as one job array, print the jobs and return at once."""
    from bench.results import store
    from bench.running.executors import submit

    results_dir = opts["results_dir"]
    todo = shards if opts["overwrite"] else [s for s in shards if not store.is_finished(results_dir / s.spec.key)]
    if not todo:
        print("bench: nothing to submit: every shard is finished (or pending/running with --resume)",
              file=sys.stderr)
        return 0
    submission = submit(todo, results_dir, opts["slurm"], opts["request"], opts["device"], opts["overwrite"],
                        opts["shards_per_gpu"])
    record = submission.record
    arrays = sorted({str(job["job_id"]).split("_")[0] for job in record["jobs"]})
    print(f"bench: submitted {len(todo)} shard(s) as {len(record['jobs'])} array task(s) of SLURM job "
          f"{', '.join(arrays)} ({len(shards) - len(todo)} already finished)", file=sys.stderr)
    for job in record["jobs"]:
        print(f"  {job['job_id']}  {', '.join(job['shards'])}")
    print(f"bench: logs: {submission.folder}/<job id>_0_log.out|.err; record: {submission.record_path}",
          file=sys.stderr)
    print(f"bench: follow with `bench status --results-dir {results_dir}`; after preemption or a time-out the "
          "tasks requeue themselves and resume", file=sys.stderr)
    return 0


def wait_for(keys: list[str], results_dir: Path, progress: bool) -> int:
    """Follow the shards `keys` until each has ended, then print the results table of the finished ones and
    what became of the others; 0 when every one finished, else 1."""
    from bench.results import store
    from bench.running.follow import follow
    from bench.running.status import format_table
    from bench.reporting.summary import summary_table

    print("bench: waiting for the shards to end (Ctrl-C stops waiting; the jobs go on)", file=sys.stderr)
    statuses = follow(results_dir, keys, progress=progress and sys.stderr.isatty())
    rows = [row for s in statuses if s.state == "done" for row in store.run_rows(results_dir / s.key)]
    if rows:
        print(summary_table(rows).to_string(index=False))
    collapsed = sorted({r["run_key"] for r in rows if r.get("collapsed") and r.get("evaluator") == "clean"})
    if collapsed:
        print(f"warning: {len(collapsed)} shard(s) collapsed (one class predicted for every test example; not a "
              f"result -- try another --lr or more --epochs): {', '.join(collapsed)}", file=sys.stderr)
    unfinished = [s for s in statuses if s.state != "done"]
    if unfinished:
        print(f"bench: {len(unfinished)} of {len(statuses)} shard(s) did not finish:", file=sys.stderr)
        print(format_table(unfinished), file=sys.stderr)
        return 1
    print(f"bench: all {len(statuses)} shard(s) done", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Print every shard's state (done, running, pending, failed, cancelled, interrupted, unknown) and the
    counts; with --wait, first follow them until each has ended."""
    from bench.running.status import format_table, shard_states, summary_line

    results_dir = resolve_results_dir(args.results_dir)
    statuses = shard_states(results_dir, args.runs)
    if not statuses:
        print(f"bench: no shards under {results_dir} yet (start some with `bench run`)", file=sys.stderr)
        return 0
    if args.wait:
        from bench.running.follow import follow

        statuses = follow(results_dir, [s.key for s in statuses],
                          progress=not args.no_progress and sys.stderr.isatty())
    print(format_table(statuses))
    print(summary_line(statuses))
    return 1 if args.wait and any(s.state != "done" for s in statuses) else 0


def report_failed_evaluations(failed: list[Any], remark: str = "") -> None:
    """List failed evaluations on stderr (nothing when none failed)."""
    if failed:
        print(f"bench: {len(failed)} evaluation(s) failed{remark}:", file=sys.stderr)
        for e in failed:
            print(f"  {e.run_key} {e.evaluator}: {e.message}", file=sys.stderr)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Run evaluators on finished runs from their saved models and refresh the results table."""
    from bench.results import store
    from bench.data.loading import source_data_dir
    from bench.running.evaluation import build_evaluators, data_for_run, evaluate_run, load_run_classifier
    from bench.results.store import find_runs
    from bench.evaluators.model import MODEL_FILE
    from bench.spec import RunSpec
    from bench.reporting.summary import evaluation_table
    from bench.training.trainer import resolve_device

    results_dir = resolve_results_dir(args.results_dir)
    request = shard_request(args, {}, args.data_dir)
    evaluators = build_evaluators(list(request.evaluators))
    if not evaluators:
        raise BenchError("no evaluators chosen; see `bench list evaluators`")
    runs = find_runs(results_dir, args.runs)
    unfinished = [r.name for r in runs if not store.is_finished(r)]
    if unfinished:
        raise BenchError(f"run(s) not finished: {', '.join(unfinished[:5])}; finish them with `bench run` first")
    modelless = [r.name for r in runs if not (r / MODEL_FILE).is_file()]
    if modelless:  # before any evaluation: a batch is not left half scored
        more = f" and {len(modelless) - 5} more" if len(modelless) > 5 else ""
        raise BenchError(f"run(s) without a saved model ({MODEL_FILE}): {', '.join(modelless[:5])}{more}; re-run "
                         "them with `bench run ... --overwrite`, or leave them out")
    device = resolve_device(args.device)
    print(f"bench: {len(evaluators)} evaluator(s) x {len(runs)} run(s)", file=sys.stderr)
    outcomes: list[Any] = []
    for i, run_dir in enumerate(runs, start=1):
        spec = RunSpec.from_json(store.read_json(run_dir / store.SPEC))
        data = data_for_run(run_dir, spec, args.data_dir)
        options = request.options  # named sets (imdb_contrast, textfooler_mr) default to the run's data folder
        if not options.data_dir:
            options = dataclasses.replace(options, data_dir=source_data_dir(data.source))
        for evaluator in evaluators:
            evaluator.check(options, data, run_dir.parent)
        classifier = load_run_classifier(run_dir, spec, data, device)
        done = evaluate_run(spec, data, classifier, run_dir, evaluators, options, device, args.overwrite,
                            explicit=request.explicit)
        print(f"[{i}/{len(runs)}] {spec.key}", file=sys.stderr)
        print_evaluations(done)
        outcomes.extend(done)
        store.gather(run_dir.parent)
    rows = [row for o in outcomes for row in o.rows if row.get("metric") != "skipped"]
    if rows:
        print(evaluation_table(rows).to_string(index=False))
    failed = [o for o in outcomes if o.status == "failed"]
    report_failed_evaluations(failed)
    return 1 if failed else 0


def cmd_planned(args: argparse.Namespace) -> int:
    """Say clearly that a command is not implemented yet."""
    raise BenchError(f"'bench {args.command}' is not implemented yet: {PLANNED[args.command]}")


def configure_logging(transformers: bool = True) -> None:
    """Readable logs on stderr; quiet third-party libraries (transformers too unless `transformers` is False:
    importing it takes a second, so `bench run` quiets it once its options are checked)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    logging.getLogger("bench").setLevel(logging.INFO)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore", module="transformers")
    if transformers:
        quiet_transformers()


def quiet_transformers() -> None:
    """Errors only from transformers, and no progress bars (imports transformers)."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `bench` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    configure_logging(transformers=args.command != "run")
    from bench.cli.plot import cmd_plot
    from bench.cli.report import cmd_report, cmd_results

    commands = {"list": cmd_list, "run": cmd_run, "evaluate": cmd_evaluate, "results": cmd_results,
                "report": cmd_report, "plot": cmd_plot, "status": cmd_status}
    try:
        return commands.get(args.command, cmd_planned)(args)
    except BenchError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # unexpected: one line unless --debug
        if args.debug:
            raise
        print(f"error: unexpected {exc.__class__.__name__}: {exc} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
