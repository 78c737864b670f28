"""Benchmarks of the harness itself, each reported as a ratio against a baseline measured in the same run.

    python -m benchmarks overhead --dataset mr --data-dir DATA     # Trainer vs a minimal loop
    python -m benchmarks padding  --dataset mr --data-dir DATA     # length grouping + dynamic padding
    python -m benchmarks methods  --dataset mr --data-dir DATA     # step time of every method vs ce
    python -m benchmarks hf-trainer --dataset mr --data-dir DATA   # our Trainer vs Hugging Face Trainer
    python -m benchmarks throughput --encoder bert-base-random ...           # ce / clld seq/s, TFLOP/s, MFU, GPU use
    python -m benchmarks report --dataset 20ng --data-dir DATA     # the GPU targets at batch 32 and 128
    python -m benchmarks short-texts --data-dir DATA               # trec, mr: the old loop vs the fast path
    python -m benchmarks shards --concurrency 1,2,4 ...                      # K training processes sharing one device
    python -m benchmarks shard-cost --dataset trec --data-dir DATA # the fixed cost of a real shard in a worker
    python -m benchmarks grid-cost --dataset sst2 --data-dir DATA  # a few-shot knob grid: wall vs training
    python -m benchmarks compile --methods ce,clld-adaptive ...              # eager vs torch.compile step time
    python -m benchmarks graphs --dataset 20ng --data-dir DATA --encoder bert-base-random  # eager vs CUDA graphs
    python -m benchmarks profile --dataset 20ng --data-dir DATA --encoder bert-base-random  # one ce step under the PyTorch profiler
    python -m benchmarks estimate --config configs/clld-table2.yaml ...      # expected wall time of a sweep
    python -m benchmarks slurm --slurm-shards 30                             # submission and requeue costs
    python -m benchmarks demo                                                # `clbench run` alone vs its 3 minutes
    python -m benchmarks vectors                                             # counter-fitting GloVe, SimLex-999
    python -m benchmarks data-scale --rows 1000000                           # load 1M short rows; copies per worker
    python -m benchmarks verify-cost --runs 1000                             # verifying stored files vs a no-op re-run
    python -m benchmarks floor --datasets demo,sst2,20ng --data-dir DATA     # the TF-IDF floor vs its first version
    python -m benchmarks answers --runs 2000                                 # commands that train nothing: CPU seconds

Rounds alternate between the variants so that machine noise hits both alike; the medians are compared.
Models are set up as a real shard sets them up: deterministic kernels on a CPU only, the Trainer's length bucket
for the device (`--length-bucket`), the encoder compiled with `--compile`. Only the JSON report goes to stdout;
progress lines (`--quiet`: none) and whatever libraries print go to stderr. Absolute figures name the device
(`device_name`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

import torch

from bench.cli.common import StrictParser, UsageError  # noqa: F401 (UsageError: re-exported by benchmarks)
from bench.errors import BenchError
from benchmarks.answers import answers
from benchmarks.common import PEAK_BF16_TFLOPS, device_name, stdout_to_stderr
from benchmarks.compile import compile_bench
from benchmarks.concurrency import shards
from benchmarks.data_scale import data_scale
from benchmarks.estimate import run_estimate
from benchmarks.fast_path import short_texts
from benchmarks.floor import floor_bench
from benchmarks.demo import demo
from benchmarks.graphs import graphs_bench
from benchmarks.fixed_cost import GRID_AXES, GRID_METHODS, grid_cost, shard_cost
from benchmarks.hf_baseline import hf_trainer
from benchmarks.loops import methods_step, overhead, padding
from benchmarks.mfu import report, throughput
from benchmarks.profile import profile
from benchmarks.slurm import slurm_bench
from benchmarks.vectors import vectors_bench
from benchmarks.verify_cost import verify_cost
from bench.registry import METHODS
from bench.running.walltime import INHERENT_PASSES


PROG = "python -m benchmarks"

COMMANDS: dict[str, Callable[[argparse.Namespace], dict]] = {
    "overhead": overhead, "padding": padding, "methods": methods_step, "hf-trainer": hf_trainer,
    "throughput": throughput, "report": report, "short-texts": short_texts, "shards": shards,
    "shard-cost": shard_cost, "grid-cost": grid_cost, "compile": compile_bench, "estimate": run_estimate,
    "slurm": slurm_bench, "demo": demo, "vectors": vectors_bench, "profile": profile, "data-scale": data_scale,
    "graphs": graphs_bench, "verify-cost": verify_cost, "floor": floor_bench, "answers": answers}


class Parser(StrictParser):
    """The benchmarks' parser, strict as the `bench` command's: options spelled in full only (`--method` is not
    `--methods`), a mistake reported as one UsageError line instead of the usage text."""


def whole_numbers(text: str, option: str, minimum: int = 1) -> list[int]:
    """A comma-separated list of whole numbers >= `minimum`, or a BenchError naming `option`."""
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < minimum:
        raise BenchError(f"{option} takes whole numbers >= {minimum} separated by commas, got {text!r}")
    return values


def resolve(args: argparse.Namespace) -> None:
    """Check the options and fill in each command's defaults (BenchError on a mistake)."""
    command = args.command
    batch_size_given = args.batch_size is not None
    if command not in ("shard-cost", "grid-cost"):  # left to `clbench run` (the dataset card's defaults)
        args.batch_size = 32 if args.batch_size is None else args.batch_size
        args.max_length = 128 if args.max_length is None else args.max_length
    for option in ("batch_size", "max_length", "steps", "rounds", "slurm_shards", "shards", "train_size", "runs"):
        value = getattr(args, option)
        if value is not None and value < 1:
            raise BenchError(f"--{option.replace('_', '-')} must be >= 1, got {value}")
    if args.length_bucket is not None and args.length_bucket < 0:
        raise BenchError(f"--length-bucket must be >= 0 (0: no bucketing), got {args.length_bucket}")
    if args.batch_sizes is not None and command not in ("report", "graphs"):
        raise BenchError("--batch-sizes is for `report` and `graphs`; give --batch-size")
    args.batch_size_list = (whole_numbers(args.batch_sizes, "--batch-sizes") if args.batch_sizes is not None
                            else [args.batch_size] if batch_size_given else [32, 128])
    if args.runs is None:
        args.runs = 2000 if command == "answers" else 1000
    args.dataset_list = [d for d in args.datasets.split(",") if d]
    if not args.dataset_list:
        raise BenchError(f"--datasets names no dataset: {args.datasets!r}")
    args.concurrency_list = whole_numbers(args.concurrency, "--concurrency")
    if 1 not in args.concurrency_list or len(set(args.concurrency_list)) != len(args.concurrency_list):
        raise BenchError(f"--concurrency needs 1 (the baseline) and distinct values, got {args.concurrency!r}")
    default_methods = {"methods": ",".join(INHERENT_PASSES), "compile": "ce,clld-adaptive", "shard-cost": "ce",
                       "profile": "ce", "grid-cost": GRID_METHODS}
    if args.shards is None:
        args.shards = {"grid-cost": 40, "graphs": 0}.get(command, 3)
    if args.evaluators is None and command == "shard-cost":
        args.evaluators = "none"  # as a grid's shards run (grid-cost leaves it to the grid's own default)
    if args.grid and command != "grid-cost":
        raise BenchError("--grid is for grid-cost")
    args.methods = args.methods or default_methods.get(command, "ce")
    args.method_list = [METHODS.canonical(m) for m in args.methods.split(",") if m]
    if command == "shard-cost" and len(args.method_list) != 1:
        raise BenchError(f"shard-cost runs one shard: give one method (--methods ce), got {args.methods!r}")
    if command == "profile" and len(args.method_list) != 1:
        raise BenchError(f"profile profiles one method: give one method (--methods ce), got {args.methods!r}")
    args.epochs = args.epochs if args.epochs is not None or command != "shards" else 2
    if args.epochs is not None and args.epochs < 1:
        raise BenchError(f"--epochs must be >= 1, got {args.epochs}")
    if command == "estimate" and args.compile:
        raise BenchError("--compile does not apply to `estimate`")
    if args.compile and command == "shard-cost" and args.compile_backend != "inductor":
        raise BenchError("shard-cost compiles as `clbench run --compile` does (inductor); drop --compile-backend")
    if args.compile or command == "compile":
        from torch._dynamo import list_backends

        known = list_backends(exclude_tags=())
        if args.compile_backend not in known:
            raise BenchError(f"unknown --compile-backend {args.compile_backend!r}; e.g. inductor, eager, aot_eager")


def build_parser() -> Parser:
    """The options of every benchmark."""
    parser = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=list(COMMANDS))
    parser.add_argument("--methods", default=None,
                        help="methods: which to time (default: all); compile: which to compile (default: "
                             "ce,clld-adaptive); shard-cost: the shard's method, profile: the method profiled "
                             "(default: ce)")
    parser.add_argument("--dataset", default="demo", help="a dataset card name or folder (default: demo)")
    parser.add_argument("--datasets", default="trec,mr",
                        help="short-texts, floor: comma-separated (default: trec,mr)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--encoder", default="minilm")
    parser.add_argument("--batch-size", type=int, default=None, help="default 32 (shard-cost: the dataset's)")
    parser.add_argument("--batch-sizes", default=None,
                        help="report: comma-separated batch sizes (default: 32,128, or --batch-size if given)")
    parser.add_argument("--max-length", type=int, default=None, help="default 128 (shard-cost: the dataset's)")
    parser.add_argument("--steps", type=int, default=20, help="batches per measurement (examples: steps x batch)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per variant (after one warm-up)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="the device's dense peak TFLOP/s (throughput/report: for MFU; estimate: with --mfu)")
    parser.add_argument("--length-bucket", type=int, default=None, metavar="N",
                        help="pad batches to a multiple of N tokens (default: as a shard on this device: 16 with "
                             "--compile, 8 on a GPU, 0 on a CPU)")
    parser.add_argument("--compile", action="store_true",
                        help="compile the encoder (regional, dynamic shapes); short-texts: adds a new+compile variant")
    parser.add_argument("--compile-backend", default="inductor",
                        help="torch.compile backend for --compile and `compile` (default: inductor; eager: trace only)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--rows", type=int, default=1_000_000, help="data-scale: train rows generated (default 1M)")
    parser.add_argument("--runs", type=int, default=None,
                        help="verify-cost: finished runs in the folder (default 1000); answers: runs of the "
                        "synthetic archive (default 2000)")
    parser.add_argument("--hf-sampler", default="both", choices=["both", "random", "group_by_length"],
                        help="hf-trainer, report: the HF Trainer's sampler(s) raced against ours (default both: "
                             "group_by_length, loop vs loop at similar padding, and its default random one, "
                             "batching and loop)")
    sharding = parser.add_argument_group("shards, shard-cost, grid-cost")
    sharding.add_argument("--concurrency", default="1,2,4",
                          help="shards: processes sharing the device at once (each K launched --rounds times, "
                               "interleaved; each process warms up for one epoch first)")
    sharding.add_argument("--epochs", type=int, default=None,
                          help="shards: measured epochs per process (default 2); shard-cost: the shard's epochs "
                               "(default: clbench run's)")
    sharding.add_argument("--evaluators", default=None,
                          help="shard-cost, grid-cost: as clbench run --evaluators (shard-cost default: none, as in a "
                               "grid, where they score the chosen combinations only; 'all' times them per shard; "
                               "grid-cost default: the grid's own, none)")
    sharding.add_argument("--seed", type=int, default=1, help="shard-cost: the first shard's seed (default 1)")
    sharding.add_argument("--shards", type=int, default=None,
                          help="shard-cost: shards run one after another in one process, seeds --seed onwards "
                               "(default 3: the per-shard figure is the median after the first); grid-cost: the "
                               "grid's least number of shards (default 40; whole seeds of every combination); "
                             "graphs: 1 adds one real shard end to end, --cuda-graphs off vs auto (default 0)")
    sharding.add_argument("--train-size", type=int, default=20, help="grid-cost: training examples (default 20)")
    sharding.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                          help=f"grid-cost: the knob axes (default: {' '.join(GRID_AXES)})")
    estimating = parser.add_argument_group("estimate (expected wall time of `clbench run --config CONFIG`)")
    estimating.add_argument("--config", default=None, help="the sweep's YAML config")
    estimating.add_argument("--tflops", type=float, default=None,
                            help="achieved training TFLOP/s (from `throughput`); or give --peak-tflops and --mfu")
    estimating.add_argument("--step-ms", default=None, metavar="METHOD=MS,...",
                            help="measured optimiser-step times per method at the sweep's batch size (from "
                                 "`report`), e.g. ce=89,clld=102: the estimate counts batches instead of FLOPs "
                                 "(an upper bound for texts shorter than the measured length)")
    estimating.add_argument("--gpu", default=None, help=f"take --peak-tflops from the bf16 table: "
                                                        f"{', '.join(PEAK_BF16_TFLOPS)}")
    estimating.add_argument("--mfu", type=float, default=0.4, help="assumed MFU with --peak-tflops / --gpu")
    estimating.add_argument("--devices", default="1,4,8", help="device counts to report the wall time for")
    estimating.add_argument("--shape-encoder", default=None,
                            help="count tokens and FLOPs with this encoder (same shape and tokenizer), "
                                 "e.g. bert-base-random for bert-base-uncased offline")
    estimating.add_argument("--expected-epochs", type=int, default=None,
                            help="epochs each shard is expected to run (default: the configured maximum)")
    estimating.add_argument("--shard-overhead-s", type=float, default=0.0,
                            help="seconds added per shard for loading and evaluation (default 0: FLOPs only; "
                                 "`shard-cost` suggests a value)")
    estimating.add_argument("--results-dir", default=None,
                            help="set measured epoch times of finished runs beside; answers: a folder holding a "
                            "finished demo's results/ (default: the demo is trained first)")
    estimating.add_argument("--no-hundred", action="store_true",
                            help="answers: leave out the re-run of 100 finished tiny shards (trained first, ~3 min)")
    clustering = parser.add_argument_group("slurm (on a real cluster: scripts/start-local-slurm.sh starts one)")
    clustering.add_argument("--slurm-shards", type=int, default=30, help="shards submitted at once (default 30)")
    clustering.add_argument("--requeue-hold", action="store_true",
                            help="also time a requeue with SLURM's own hold before restarting (about 2 min)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark and print its JSON report (the only thing on stdout)."""
    try:
        args = build_parser().parse_args(argv)
        resolve(args)
        with stdout_to_stderr():
            result = COMMANDS[args.command](args)
    except BenchError as exc:  # UsageError included
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if args.command != "estimate":
        result.setdefault("device_name", device_name(args.device))
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0
