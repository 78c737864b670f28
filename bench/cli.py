"""The `bench` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.spec import TrainConfig

log = logging.getLogger("bench")

DEFAULT_RESULTS = "results"
DEFAULT_METHODS = "ce,supcon,clld"
PLANNED = {
    "evaluate": "robustness evaluators on a finished run (issue #4)",
    "report": "paper-style tables from stored results (issue #5)",
    "plot": "heatmaps and curves from stored results (issue #5)",
    "results": "the tidy results table with filters and export (issue #5)",
    "status": "shard status across executors (issue #6)",
}
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
                seeds.extend(range(int(first), int(last) + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must look like 1,2,3 or 1-3, not {text!r}") from None
    return seeds


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show full tracebacks")
    parser = argparse.ArgumentParser(prog="bench", parents=[common],
                                     description="Benchmark contrastive fine-tuning methods for text classifiers.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    lister = sub.add_parser("list", parents=[common], help="list registered methods, datasets or encoders")
    lister.add_argument("what", choices=["methods", "datasets", "encoders"])
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

    for name, what in PLANNED.items():
        stub = sub.add_parser(name, parents=[common], help=f"(not implemented yet) {what}")
        stub.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


# ----------------------------------------------------------------------------------------------- commands

def cmd_list(args: argparse.Namespace) -> int:
    """Print the registered methods, datasets or encoders."""
    import methods  # noqa: F401
    from bench import cards, encoders  # noqa: F401
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
    else:
        for name, factory in ENCODERS.items():
            print(f"{name}: {first_line(factory.__doc__)}")
        print("(any other name is loaded as a Hugging Face model id or a local model folder)")
    return 0


def first_line(doc: str | None) -> str:
    """The first line of a docstring."""
    return (doc or "").strip().splitlines()[0] if doc else ""


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """What `bench run` should do: built-in defaults < config file < command-line flags < --set."""
    from bench.settings import as_list, load_config_file, parse_assignment, split_settings

    file_run, settings = load_config_file(args.config) if args.config else ({}, {})
    settings.update({n: getattr(args, n) for n in TrainConfig.field_names() if getattr(args, n) is not None})
    settings.update(dict(parse_assignment(a) for a in args.assignments))
    overrides, knobs = split_settings(settings)
    try:
        seeds = args.seeds or seed_list(",".join(str(s) for s in as_list(file_run.get("seeds", 1))))
    except argparse.ArgumentTypeError as exc:
        raise BenchError(f"config file {args.config}: {exc}") from exc
    jobs = args.jobs if args.jobs is not None else int(file_run.get("jobs", 1))
    if jobs < 1:
        raise BenchError("--jobs must be >= 1")
    return {
        "methods": args.methods or as_list(file_run.get("methods", DEFAULT_METHODS)),
        "datasets": args.datasets or as_list(file_run.get("datasets", "demo")),
        "encoders": args.encoders or as_list(file_run.get("encoders", "minilm")),
        "seeds": seeds,
        "overrides": overrides,
        "knobs": knobs,
        "data_dir": args.data_dir or file_run.get("data_dir"),
        "results_dir": Path(args.results_dir or file_run.get("results_dir") or os.environ.get("BENCH_RESULTS_DIR")
                            or DEFAULT_RESULTS),
        "jobs": jobs,
        "device": args.device if args.device != "auto" else file_run.get("device", "auto"),
        "overwrite": args.overwrite or bool(file_run.get("overwrite", False)),
    }


def cmd_run(args: argparse.Namespace) -> int:
    """Plan and run shards, then print a summary table of this invocation's results."""
    from bench.runner import execute, plan
    from bench.summary import summary_table

    opts = run_options(args)
    results_dir = opts["results_dir"]
    shards = plan(opts["methods"], opts["datasets"], opts["encoders"], opts["seeds"], opts["overrides"],
                  opts["data_dir"], opts["knobs"], results_dir)
    print(f"bench: {len(shards)} shard(s) -> {results_dir}", file=sys.stderr)

    def report(i: int, n: int, outcome: Any) -> None:
        accuracy = next((r["value"] for r in outcome.rows if r["metric"] == "accuracy" and r["split"] == "test"),
                        None)
        detail = f"test accuracy {accuracy:.4f}" if accuracy is not None else outcome.message
        print(f"[{i}/{n}] {outcome.status:7s} {outcome.key}  {detail}"
              + (f"  ({outcome.seconds:.0f}s)" if outcome.status == "done" else ""), file=sys.stderr)

    outcomes = execute(shards, results_dir, opts["jobs"], opts["device"], opts["overwrite"], not args.no_progress,
                       report)
    rows = [row for o in outcomes for row in o.rows]
    if rows:
        print(summary_table(rows).to_string(index=False))
    failed = [o for o in outcomes if o.status == "failed"]
    if failed:
        print(f"bench: {len(failed)} of {len(outcomes)} shard(s) failed:", file=sys.stderr)
        for o in failed:
            print(f"  {o.key}: {o.message}", file=sys.stderr)
        return 1
    return 0


def cmd_planned(args: argparse.Namespace) -> int:
    """Say clearly that a command is not implemented yet."""
    raise BenchError(f"'bench {args.command}' is not implemented yet: {PLANNED[args.command]}")


def configure_logging() -> None:
    """Readable logs on stderr; quiet third-party libraries."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    logging.getLogger("bench").setLevel(logging.INFO)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore", module="transformers")
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
    configure_logging()
    commands = {"list": cmd_list, "run": cmd_run}
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
