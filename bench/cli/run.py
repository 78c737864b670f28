"""`clbench run`: its arguments, and running the planned shards here or submitting them to SLURM (and following
them with --wait)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.cli.common import RESULTS_HELP, add_evaluator_options, comma_list, print_evaluations, say, \
    quiet_transformers, report_failed_evaluations, seed_list
from bench.cli.run_options import DEFAULT_METHODS
from bench.cli.run_summary import shard_lines
from bench.errors import install_extra
from bench.running.grid import MAX_SHARDS, budget_line
from bench.running.options import RunOptions
from bench.spec import CUDA_GRAPH_MODES, KEEP_POLICIES, PRECISIONS, REGIME_FIELDS, TrainConfig

HELP = {
    "epochs": "maximum epochs", "batch_size": "training batch size", "lr": "peak learning rate (AdamW)",
    "weight_decay": "decoupled weight decay", "warmup_ratio": "fraction of steps for linear warm-up",
    "max_grad_norm": "gradient clipping norm (0 = off)", "patience": "early stopping: epochs without gain",
    "max_length": "max tokens per text", "head_dropout": "dropout before the classifier layer",
    "pooling": "cls | pooler | mean", "precision": "auto (bf16 on GPU) | fp32 | bf16",
    "val_fraction": "validation share carved from train when a dataset has none",
    "data_seed": "seed of the validation carve, the few-label sample and the label noise (keep equal across a "
                 "comparison)",
    "train_size": "few labels: a stratified sample of N training examples, every class present (0: all)",
    "shots": "few labels: K training examples per class (0: off)",
    "val_size": "validation examples: 0 = as many as the training sample (all without one), -1 = all, N",
    "label_noise": "noisy labels: the share of training labels flipped (validation and test untouched)",
    "noise_kind": "symmetric (to a random other class) | asymmetric (to the class's most confusable class)",
    "data_draw": "auto | per-seed | fixed: per-seed = each seed draws its own few-label sample, validation sample "
                 "and flipped labels (paired across methods); fixed = one draw from --data-seed for every seed; "
                 "auto = per-seed in a data regime",
}


def typed_list(kind: type) -> Any:
    """An argparse type: `20,100,1000` -> [20, 100, 1000], each value read as `kind`."""
    def parse(text: str) -> list[Any]:
        try:
            return [kind(part) for part in comma_list(text)]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind.__name__} values like 1,2 (got {text!r})") from None

    return parse


def add_slurm_options(parser: argparse.ArgumentParser) -> None:
    """The options of `--executor slurm` (a profile file, then flags that override it)."""
    group = parser.add_argument_group(f"SLURM (with --executor slurm; {install_extra('slurm')})")
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


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The `clbench run` subcommand and its arguments."""
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
        if name in REGIME_FIELDS:  # sweep dimensions: a list runs every value
            run.add_argument(f"--{name.replace('_', '-')}", dest=name, type=typed_list(type(default)), default=None,
                             metavar="V[,V...]", help=f"{HELP[name]} (default: {default}); a list runs each")
        else:
            run.add_argument(f"--{name.replace('_', '-')}", dest=name, type=type(default), default=None,
                             help=f"{HELP[name]} (default: {default})")
    run.add_argument("--grid", dest="grid", action="append", default=[], metavar="KEY=V1,V2,...",
                     help="tune a training setting or METHOD.KNOB over these values: one shard per combination "
                          "(each method: the training settings and its own knobs); repeatable; choose with "
                          "`clbench report --select-by validation`")
    run.add_argument("--sample", type=int, default=None, metavar="N",
                     help="draw N of each method's grid combinations at random (default: all)")
    run.add_argument("--grid-seed", type=int, default=None, help="the seed of --sample's draw (default: 0)")
    run.add_argument("--yes", action="store_true", default=None,
                     help=f"run a sweep of more than {MAX_SHARDS} shards")
    run.add_argument("--data-dir", default=None, help="folder with <name>/{train,validation,test}.jsonl[.gz] "
                                                      "(default: $BENCH_DATA_DIR)")
    run.add_argument("--results-dir", default=None, help=RESULTS_HELP)
    run.add_argument("--overwrite", action="store_true", help="recompute finished shards")
    run.add_argument("--strict-data", dest="strict_data", action="store_true", default=None,
                     help="refuse a dataset whose test or validation texts also occur in train (leakage; by "
                          "default a warning), before anything trains")
    run.add_argument("--jobs", type=int, default=None, help="worker processes, one GPU each when several (default: 1)")
    run.add_argument("--adapt-threads", dest="adapt_threads", action="store_true", default=None,
                     help="on a busy CPU, train with the free cores' torch threads (faster there, but a run's last "
                          "digits may then differ from an idle machine's; default: the same threads under any "
                          "load); recorded in each row as threads_adapted")
    run.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--compile", action="store_true", default=None,
                     help="torch.compile the encoder's repeated layer once for all layers, with dynamic shapes "
                          "(faster on GPU after warm-up; not in the run key)")
    run.add_argument("--cuda-graphs", choices=CUDA_GRAPH_MODES, default=None,
                     help="replay each training step and prediction batch as a CUDA graph captured per batch width "
                          "(auto, the default: on CUDA for every method whose step is capturable, off with --compile "
                          "and on a CPU; on: fail where not possible); recorded in each row, not in the run key")
    run.add_argument("--length-bucket", type=int, default=None, metavar="N",
                     help="pad each batch to a multiple of N tokens (0: to its longest example; default: 16 with "
                          "--compile, 8 on a GPU, 0 on a CPU; not in the run key)")
    run.add_argument("--checkpoint-every-s", type=float, default=None, metavar="S",
                     help="write a shard's resume checkpoint at the end of an epoch only once S seconds of training "
                          "are unsaved, and never after its last epoch, whose results follow at once (default: "
                          "$BENCH_CHECKPOINT_EVERY_S or 30; 0: after every epoch, the last included): a shorter "
                          "shard writes none and a kill re-runs it; not in the run key")
    run.add_argument("--deterministic", action="store_true", default=None,
                     help="bit-reproducible training on any device: deterministic algorithms (an operation without "
                          "one fails the shard), attention on the math kernel; slower on a GPU; a CPU is "
                          "deterministic without it; recorded in each row, not in the run key")
    run.add_argument("--keep-models", choices=KEEP_POLICIES, default=None,
                     help="which trained models the sweep keeps once their evaluators ran: all (default), best (per "
                          "method x dataset x encoder, on validation) or none; `clbench evaluate` needs a kept model")
    run.add_argument("--no-save-model", dest="save_model", action="store_false", default=None,
                     help="the same as --keep-models none")
    run.add_argument("--model-precision", choices=PRECISIONS, default=None,
                     help="auto (default): a kept model is stored in float16 when that predicts as the run did on "
                          ">= 99.5%% of test items, else float32; float32: always")
    run.add_argument("--save-format", dest="save_format", default=None, metavar="FORMAT[,FORMAT]",
                     help="how to keep the trained weights: safetensors (model.safetensors, default), hf (a Hugging "
                          "Face folder <run>/hf/, see `clbench export`), safetensors,hf or both; not in the run key")
    run.add_argument("--report-to", dest="report_to", default=None, metavar="TRACKER[,TRACKER...]",
                     help="also log each shard (settings, losses, validation, results) to tensorboard, mlflow and/or "
                          f"wandb, one tracker run per run key (default: none; {install_extra('tracking')}; "
                          "not in the run key)")
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


def cmd_run(args: argparse.Namespace) -> int:
    """Plan and run shards, then print the results table, one line per evaluator and the next commands (the
    demo also writes its reports). A sweep found finished and unchanged since it was last checked
    (bench.running.sweepmemo) is answered from its runs' rows: nothing planned, loaded or imported for training."""
    from bench.cli.run_options import checked_run_options, with_request
    from bench.running import sweepmemo

    checked, request = checked_run_options(args)  # checks what it can before it imports torch: a mistake costs a second
    opts = with_request(checked, request)
    memo = sweepmemo.digest(opts, request)
    remembered = sweepmemo.finished_outcomes(opts, memo)
    if remembered is not None:
        announce(opts, [method for method, _ in remembered], args.evaluators is None)
        outcomes = [outcome for _, outcome in remembered]
        for i, outcome in enumerate(outcomes, 1):
            for line in shard_lines(i, len(outcomes), outcome):
                print(line, file=sys.stderr)
        return answer(opts, memo, outcomes)
    quiet_transformers()
    from bench.cli.progress import SweepProgress
    from bench.running.keeping import disk_line
    from bench.running.runner import execute_sweep, plan_sweep, stop_report

    results_dir = opts.results_dir
    shards = plan_sweep(opts)
    announce(opts, [s.spec.method for s in shards], args.evaluators is None)
    say(disk_line([s.spec for s in shards], opts.keep_models))  # a sweep whose models need much disk
    planned_keys = [s.spec.key for s in shards]
    if opts.resume or (opts.executor == "slurm" and not opts.overwrite):
        shards = skip_active(shards, results_dir)  # never queue a shard twice
    if opts.executor == "slurm":
        code = submit_shards(shards, opts)
        return wait_for(planned_keys, results_dir, opts.progress) if opts.wait else code

    def report(i: int, n: int, outcome: Any) -> None:
        eta = progress.shard_ended(outcome.key, trained=outcome.status == "done")
        for line in shard_lines(i, n, outcome, eta):
            progress.write(line)
        failed_evaluations.extend(print_evaluations(outcome.evaluations, said))

    failed_evaluations: list[Any] = []
    said: set[tuple[str, str]] = set()  # skip reasons printed: said once per sweep
    progress = SweepProgress(shards, bar=opts.progress)
    try:
        outcomes = execute_sweep(shards, opts, report, handle_signals=True)
    finally:
        progress.close()
    stopped = stop_report(outcomes, len(shards))
    if stopped:  # a SIGTERM or SIGINT stopped it at a safe point: one line, exit 143 / 130
        print(stopped[1], file=sys.stderr)
        return stopped[0]
    code = conclude(opts, outcomes, failed_evaluations)
    if sweepmemo.remember_if_tended(memo, opts, shards, outcomes):
        answer(opts, memo, echo=False)  # what the next run will say, kept now: it need not compute it
    return code


def answer(opts: RunOptions, memo: str, outcomes: list[Any] | None = None, echo: bool = True) -> int:
    """`conclude` a finished sweep answered from its memo (`outcomes`: its shards, read from it when None): said
    again as the last run kept it while its reports are unchanged (bench.results.sweeps.recall_answer), else
    computed and kept for the next one; `echo=False` keeps it without saying it (after the run that remembered
    the sweep, so that its first re-run is answered at once)."""
    from bench.cli.run_summary import capturing
    from bench.results import sweeps
    from bench.running import sweepmemo

    kept = sweeps.recall_answer(opts.results_dir, memo, opts.reports_dir) if echo else None
    if kept is not None:
        sys.stdout.write(kept["stdout"])
        sys.stderr.write(kept["stderr"])
        return kept["code"]
    if outcomes is None:
        remembered = sweepmemo.finished_outcomes(opts, memo)
        if remembered is None:
            return 0
        outcomes = [outcome for _, outcome in remembered]
    with capturing(echo) as said:
        code = conclude(opts, outcomes, [])
    if not said.logged:
        sweeps.remember_answer(opts.results_dir, memo, {"stdout": said.stdout.getvalue(),
                                                        "stderr": said.stderr.getvalue(), "code": code},
                               opts.reports_dir)
    return code


def announce(opts: RunOptions, methods: list[str], default_evaluators: bool) -> None:
    """The sweep's first lines (stderr): its shards and results folder, the tuning budget of a knob grid, and
    what a grid scores when no --evaluators were given (`default_evaluators`)."""
    print(f"clbench: {len(methods)} shard(s) -> {opts.results_dir}", file=sys.stderr)
    budget = budget_line(opts.grid, list(dict.fromkeys(methods)), opts.sample, len(opts.seeds))
    if budget:
        print(budget, file=sys.stderr)
    if opts.grid and default_evaluators and opts.request is not None and not opts.request.evaluators:
        print("clbench: a knob grid runs clean metrics only; `clbench evaluate --selected` then scores each "
              "method's combination chosen on validation (or give --evaluators all to score every one)",
              file=sys.stderr)


def conclude(opts: RunOptions, outcomes: list[Any], failed_evaluations: list[Any]) -> int:
    """After the shards: the results table, its warnings, the demo's reports, the failed and held shards and the
    next steps; 1 when a shard or an evaluation failed."""
    from bench.cli.run_summary import collapsed_warning, near_chance_warning, print_next_steps, print_results, \
        write_demo_reports
    from bench.results.store import is_collapsed_flag, left_out_line, table_left_out
    from bench.running.keeping import apply_keep_policy

    results_dir = opts.results_dir
    rows, evaluation_rows = outcome_rows(outcomes)
    if rows:
        print_results(rows, evaluation_rows, results_dir)
        for warning in (collapsed_warning(rows), near_chance_warning(rows)):  # trained now or before: said every time
            if warning:
                print(warning, file=sys.stderr)
        if opts.reports_dir is not None:
            write_demo_reports(rows + evaluation_rows, results_dir, opts.reports_dir)
    left_out = left_out_line(table_left_out(results_dir), results_dir)  # damaged runs outside this sweep
    if left_out:
        print(f"warning: {left_out}", file=sys.stderr)
    say(apply_keep_policy(results_dir, outcomes, opts.keep_models))
    failed = [o for o in outcomes if o.status == "failed"]
    if failed:
        print(f"clbench: {len(failed)} of {len(outcomes)} shard(s) failed:", file=sys.stderr)
        for o in failed:
            print(f"  {o.key}: {o.message}", file=sys.stderr)
    held = [o for o in outcomes if o.status == "held"]
    if held:  # not a failure: another runner trains them (see bench.results.lease)
        print(f"clbench: {len(held)} of {len(outcomes)} shard(s) held by another runner, not run here (see `clbench "
              "status`; a shard it leaves unfinished is taken over by the next `clbench run`):", file=sys.stderr)
        for o in held:
            print(f"  {o.key}: {o.message}", file=sys.stderr)
    report_failed_evaluations(failed_evaluations, " (the runs' training results are kept)")
    if rows:
        collapsed = {r["run_key"] for r in rows if is_collapsed_flag(r.get("collapsed"))}
        print_next_steps(opts, sorted({r["run_key"] for r in rows}), collapsed)
    return 1 if failed or failed_evaluations else 0


def outcome_rows(outcomes: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of the shards' outcomes: training and clean rows (of shards done now or before), and the rows of
    the requested evaluations (run now or stored before); bench.api.run returns the same rows."""
    rows = [row for o in outcomes for row in o.rows]
    evaluation_rows = [row for o in outcomes for e in o.evaluations for row in e.rows]
    evaluation_rows += [row for o in outcomes for row in o.shown]  # a finished shard's, stored before
    return rows, evaluation_rows


def skip_active(shards: list[Any], results_dir: Path) -> list[Any]:
    """Drop the shards SLURM reports as pending or running (warn when it cannot be asked): with --resume, and
    always before a SLURM submission."""
    from bench.running.status import active_keys

    active = active_keys(results_dir, [s.spec.key for s in shards])
    if active is None:
        print("clbench: cannot query SLURM (scheduler unreachable); shards submitted earlier may run twice",
              file=sys.stderr)
        return shards
    if active:
        print(f"clbench: skipping {len(active)} shard(s) pending or running on SLURM (see `clbench status`)",
              file=sys.stderr)
    return [s for s in shards if s.spec.key not in active]


def submit_shards(shards: list[Any], opts: RunOptions) -> int:
    """--executor slurm: submit the unfinished shards as one job array, print the jobs and return at once."""
    from bench.results import store
    from bench.running.executors import submit

    results_dir = opts.results_dir
    todo = shards if opts.overwrite else [s for s in shards if not store.is_finished(results_dir / s.spec.key)]
    if not todo:
        print("clbench: nothing to submit: every shard is finished (or pending/running with --resume)",
              file=sys.stderr)
        return 0
    submission = submit(todo, results_dir, opts.slurm, opts.request, opts.device, opts.overwrite,
                        opts.shards_per_gpu)
    record = submission.record
    arrays = sorted({str(job["job_id"]).split("_")[0] for job in record["jobs"]})
    print(f"clbench: submitted {len(todo)} shard(s) as {len(record['jobs'])} array task(s) of SLURM job "
          f"{', '.join(arrays)} ({len(shards) - len(todo)} already finished)", file=sys.stderr)
    for job in record["jobs"]:
        print(f"  {job['job_id']}  {', '.join(job['shards'])}")
    print(f"clbench: logs: {submission.folder}/<job id>_0_log.out|.err; record: {submission.record_path}",
          file=sys.stderr)
    print(f"clbench: follow with `clbench status --results-dir {results_dir}`; after preemption or a time-out the "
          "tasks requeue themselves and resume", file=sys.stderr)
    return 0


def wait_for(keys: list[str], results_dir: Path, progress: bool) -> int:
    """Follow the shards `keys` until each has ended, then print the results table of the finished ones and
    what became of the others; 0 when every one finished, else 1."""
    from bench.cli.run_summary import collapsed_warning
    from bench.results import store
    from bench.running.follow import follow
    from bench.running.status import format_table
    from bench.reporting.summary import summary_table, table_text

    print("clbench: waiting for the shards to end (Ctrl-C stops waiting; the jobs go on)", file=sys.stderr)
    statuses = follow(results_dir, keys, progress=progress and sys.stderr.isatty())
    rows = [row for s in statuses if s.state == "done" for row in store.run_rows(results_dir / s.key)]
    if rows:
        print(table_text(summary_table(rows)))
    warning = collapsed_warning(rows)
    if warning:
        print(warning, file=sys.stderr)
    unfinished = [s for s in statuses if s.state != "done"]
    if unfinished:
        print(f"clbench: {len(unfinished)} of {len(statuses)} shard(s) did not finish:", file=sys.stderr)
        print(format_table(unfinished), file=sys.stderr)
        return 1
    print(f"clbench: all {len(statuses)} shard(s) done", file=sys.stderr)
    return 0
