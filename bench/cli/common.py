"""What the commands share: the strict argument parser every `bench` parser is made with, list and seed
arguments, the evaluator options and the shard request built from them, and the lines that report evaluations."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from typing import Any, NoReturn, Sequence

from bench.errors import BenchError
from bench.spec import CUDA_GRAPH_MODES, KEEP_POLICIES, PRECISIONS
from bench.results.store import DEFAULT_RESULTS

RESULTS_HELP = f"where runs are stored (default: $BENCH_RESULTS_DIR or ./{DEFAULT_RESULTS})"
EVAL_HELP = {
    "attack_n": "textfooler: examples attacked (a fixed sample of the test split)",
    "attack_mode": "textfooler: adaptive (attack each model) | transfer (score a fixed adversarial set)",
    "attack_source": "textfooler transfer: run key whose adversarial examples are used",
    "attack_backend": ("textfooler: builtin | textattack (cross-check; textattack needs transformers < 5: "
                       "install it in a second environment, see clbench doctor)"),
    "attack_data": "textfooler: file or folder of texts to attack instead of the test split",
    "word_vectors": "textfooler's synonym space: counter-fitted (GloVe 6B-50d counter-fitted with the shipped "
                    "PPDB/WordNet constraints, built once and cached), glove (plain GloVe 6B-50d), or a vectors "
                    "file (word v1 .. vd per line, or .npz)",
    "contrast_set": "contrast: folder or name of a contrast set (default: the dataset card's)",
    "contrast_split": "contrast: split of the contrast set",
    "contrast_kinds": "contrast: extra row kinds as ROLE=KIND,... with ROLE original or contrast, e.g. "
                      "original=seed,contrast=cad (added to the defaults: original/orig/source/factual and "
                      "contrast/counterfactual/cf/edited/revised/perturbed/rev)",
    "checklist_suite": "checklist: JSON Lines suite file (default: built-in generators)",
    "checklist_n": "checklist: test texts perturbed by the built-in generators (a dataset card's eval_defaults may "
                   "set another: the demo's is 100)",
    "checklist_inv_tolerance": "checklist: an INV flip still passes when P(original label) moves by at most this "
                               "(CheckList's suite: 0.1)",
    "checklist_dir_tolerance": "checklist: the most a DIR score may drop (CheckList's suite: 0.1)",
    "checklist_dir_score": "checklist: DIR score: side (P of the expected labels) | margin (expected side minus "
                           "opposite side, CheckList's suite) | monotonic (side; cases that cannot fail not scored)",
    "checklist_neutral_band": "checklist: LOW,HIGH: score a binary sentiment model as 3-class, neutral when "
                              "LOW < P(positive) < HIGH (CheckList's tutorial: 1/3,2/3; empty: no band)",
    "tsne": "repr: also store 2-D t-SNE coordinates of a test sample",
    "tsne_n": "repr: examples in the t-SNE sample",
    "data_dir": "",
}


TRAINER = "the Hugging Face Trainer's name"
EXAMPLES = "the name in the Hugging Face example scripts (run_glue.py)"
HARNESSES = "the name in lm-evaluation-harness and MTEB"
FOREIGN_OPTIONS: dict[str, tuple[tuple[str, ...], str]] = {  # another tool's option -> (ours, first found; whose)
    "--learning_rate": (("--lr",), TRAINER), "--learning-rate": (("--lr",), TRAINER),
    "--num_train_epochs": (("--epochs",), TRAINER), "--per_device_train_batch_size": (("--batch-size",), TRAINER),
    "--output_dir": (("--results-dir",), TRAINER), "--output-dir": (("--results-dir",), TRAINER),
    "--seed": (("--seeds",), "the name in the Hugging Face Trainer, lm-evaluation-harness and MTEB"),
    "--model_name_or_path": (("--encoder", "--model"), EXAMPLES),
    "--model-name-or-path": (("--encoder", "--model"), EXAMPLES),
    "--model": (("--encoder",), HARNESSES), "--tasks": (("--datasets",), HARNESSES),
    "--task": (("--datasets",), f"close to --tasks, {HARNESSES}"),
    "--output_path": (("--results-dir",), "lm-evaluation-harness's name"),
    "--output_folder": (("--results-dir",), "MTEB's name"),
}


class UsageError(BenchError):
    """A command-line mistake found while parsing (an unknown option, a bad value): one line, exit code 2."""


class StrictParser(argparse.ArgumentParser):
    """An ArgumentParser that takes options only as spelled in full (`--method` is never read as `--methods`)
    and reports a mistake as one UsageError line naming the fix. The parsers of its subcommands
    (`add_subparsers().add_parser`) are StrictParsers too, so no subcommand can forget it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """The parsed arguments; a UsageError for anything not understood (with a guess for a misspelt option)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            raise UsageError(unknown_arguments(chosen_parsers(self, parsed), extras))
        return parsed

    def error(self, message: str) -> NoReturn:
        """Raise the mistake as one line with what to give instead (argparse would print its usage text and
        exit); `--help` still prints the usage."""
        raise UsageError(f"{explained(self, message)} (see `{self.prog} --help`)")


def explained(parser: argparse.ArgumentParser, message: str) -> str:
    """argparse's `message` with the fix it leaves out: what a missing value should be (the option's help),
    `'x' is not a whole number` for `invalid int value: 'x'`, the choices of a missing positional argument."""
    option, _, problem = message.partition(": ") if message.startswith("argument ") else ("", "", message)
    action = parser._option_string_actions.get(option.removeprefix("argument ").split("/")[0])
    if problem == "expected one argument" and action is not None and action.help:
        return f"{option}: expected a value: {parser._get_formatter()._expand_help(action)}"
    for kind, noun in (("int", "a whole number"), ("float", "a number")):
        if problem.startswith(f"invalid {kind} value: "):
            return f"{option}: {problem.removeprefix(f'invalid {kind} value: ')} is not {noun}"
    if problem.startswith("the following arguments are required: "):
        missing = problem.removeprefix("the following arguments are required: ").split(", ")
        choices = [(f"{name}: " if len(missing) > 1 else "") + f"one of {', '.join(map(str, a.choices))}"
                   for a in parser._actions for name in missing
                   if not a.option_strings and a.choices and name in (a.metavar, a.dest)]
        return message + (f" ({'; '.join(choices)})" if choices else "")
    return message


def check_output_folder(folder: str | os.PathLike[str], noun: str, given_as: str) -> None:
    """A BenchError, before anything is read or drawn, unless `folder` (where a command writes) can be written or
    created: one line naming it, the system's reason and the fix (bench.results.folders); creates nothing."""
    from bench.results.folders import check_folder

    check_folder(folder, noun, given_as, f"give another {given_as}")


def chosen_parsers(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> list[argparse.ArgumentParser]:
    """`parser` and the subcommand parsers `parsed` went through, outermost first (`clbench plot ldm`: three)."""
    path = [parser]
    while True:
        action = next((a for a in path[-1]._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(parsed, action.dest, None) if action is not None else None
        if action is None or name not in action.choices:
            return path
        path.append(action.choices[name])


def unknown_arguments(parsers: list[argparse.ArgumentParser], extras: list[str]) -> str:
    """The line for arguments no parser took: each unknown option with ours that another tool's name stands for
    (FOREIGN_OPTIONS: `--learning_rate`, `--lr`), else the real ones it is a prefix of or close to (`did you mean
    --methods?`), or the stray arguments."""
    prog = parsers[-1].prog
    options = list(dict.fromkeys(o for p in reversed(parsers) for a in p._actions for o in a.option_strings))
    unknown = [e.split("=", 1)[0] for e in extras if e.startswith("-") and len(e) > 1 and not is_number(e)]
    if not unknown:
        return f"unexpected argument(s) {' '.join(extras)} (see `{prog} --help`)"
    lines = []
    for name in dict.fromkeys(unknown):
        ours, whose = FOREIGN_OPTIONS.get(name, ((), ""))
        foreign = next((o for o in ours if o in options), None)  # only where this command has the option
        if foreign is not None:
            lines.append(f"unknown option {name}: did you mean {foreign}? ({name} is {whose})")
            continue
        guesses = close_options(name, options)
        lines.append(f"unknown option {name}" + (f": did you mean {' or '.join(guesses)}?" if guesses else ""))
    return "; ".join(lines) + f" (options are spelled in full; see `{prog} --help`)"


def close_options(name: str, options: list[str], most: int = 3) -> list[str]:
    """The options `name` is a prefix of, else those close to it (difflib), at most `most`."""
    prefixed = [o for o in options if o.startswith(name) and len(name) > 2]
    return prefixed[:most] or difflib.get_close_matches(name, options, n=most, cutoff=0.6)


def is_number(text: str) -> bool:
    """Whether `text` reads as a number (`-1`, `-0.5`: a value, not an option)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


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


def add_evaluator_options(parser: argparse.ArgumentParser) -> None:
    """`--evaluators` and every evaluator option (defaults from EvalOptions)."""
    from bench.evaloptions import EvalOptions  # not bench.evaluators: it imports every evaluator

    parser.add_argument("--evaluators", type=comma_list, default=None,
                        help="comma-separated evaluators (default: all that fit the dataset, except in a knob grid of "
                             "`clbench run`, where none run: `clbench evaluate --selected` scores the chosen "
                             "combinations; 'all': every one that fits, 'none': none)")
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


def eval_options(args: argparse.Namespace, file_run: dict[str, Any], data_dir: str | None) -> Any:
    """Evaluator options: EvalOptions defaults < config file < command-line flags."""
    from bench.attack.examples import require_source
    from bench.evaluators.base import EvalOptions
    from bench.evaluators.checklist_semantics import semantics as checklist_semantics
    from bench.evaluators.contrast_kinds import check_kinds as check_contrast_kinds
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
    check_contrast_kinds(options.contrast_kinds)  # likewise for contrast
    checklist_semantics(options)  # and for checklist's scoring options
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
    keep = getattr(args, "keep_models", None) or str(file_run.get("keep_models", "all" if save else "none"))
    precision = getattr(args, "model_precision", None) or str(file_run.get("model_precision", "auto"))
    if keep not in KEEP_POLICIES or precision not in PRECISIONS:
        raise BenchError(f"keep_models is {', '.join(KEEP_POLICIES)} and model_precision {', '.join(PRECISIONS)}; "
                         f"got {keep!r} and {precision!r}")
    if not save and keep != "none":
        raise BenchError(f"--no-save-model keeps no model and --keep-models {keep} keeps some; give one")
    compiled = bool(getattr(args, "compile", None) or file_run.get("compile", False))
    graphs = getattr(args, "cuda_graphs", None)
    graphs = str(file_run.get("cuda_graphs", "auto")) if graphs is None else graphs
    if graphs not in CUDA_GRAPH_MODES:
        raise BenchError(f"cuda_graphs is {', '.join(CUDA_GRAPH_MODES)}, got {graphs!r}")
    bucket = getattr(args, "length_bucket", None)
    bucket = file_run.get("length_bucket") if bucket is None else bucket
    if bucket is not None and (isinstance(bucket, bool) or not isinstance(bucket, int) or bucket < 0):
        raise BenchError(f"--length-bucket must be a whole number >= 0 (0: no bucketing), got {bucket!r}")
    deterministic = getattr(args, "deterministic", None)
    deterministic = file_run.get("deterministic", False) if deterministic is None else deterministic
    if not isinstance(deterministic, bool):
        raise BenchError(f"deterministic: expected true or false, got {deterministic!r}")
    from bench.training.checkpoint_policy import checked_every_s, default_checkpoint_every_s
    from bench.training.tracking import parse_report_to, require_packages

    every = getattr(args, "checkpoint_every_s", None)
    every = file_run.get("checkpoint_every_s") if every is None else every
    every = default_checkpoint_every_s() if every is None else checked_every_s(every, "--checkpoint-every-s")

    report_to = getattr(args, "report_to", None)
    report_to = parse_report_to(file_run.get("report_to") if report_to is None else report_to)
    require_packages(report_to)  # a missing package fails now, before anything trains
    return {"evaluators": tuple(evaluator_names(names, evaluators)), "options": eval_options(args, file_run, data_dir),
            "save_model": keep != "none", "keep_models": keep, "model_precision": precision,
            "explicit": names not in (None, ["all"]), "asked": names is not None, "compile": compiled, "cuda_graphs": graphs,
            "length_bucket": bucket, "deterministic": deterministic, "report_to": report_to, "checkpoint_every_s": every}


def shard_request(args: argparse.Namespace, file_run: dict[str, Any], data_dir: str | None) -> Any:
    """Which evaluators to run with which options, and whether to keep models."""
    fields = request_fields(args, file_run, data_dir)
    from bench.running.outcome import ShardRequest

    return ShardRequest(**fields)


def say(line: str) -> None:
    """Print `line` on stderr when there is one ("": nothing to say)."""
    if line:
        print(line, file=sys.stderr)


def print_evaluations(outcomes: list[Any], said: set[tuple[str, str]] | None = None) -> list[Any]:
    """One line per evaluator that did not just succeed (one line in all when none could run for want of a
    saved model); a skip reason already in `said` (the command's: printed for an earlier shard) is not repeated.
    Returns the failed ones."""
    said = set() if said is None else said
    if len(outcomes) > 1 and all(e.status == "no-model" for e in outcomes):
        print(f"    {', '.join(e.evaluator for e in outcomes)}: no-model: {outcomes[0].message}", file=sys.stderr)
        return []
    for e in outcomes:
        if e.status in ("skipped", "no-model") and (e.evaluator, e.message) in said:  # for an earlier shard
            print(f"    {e.evaluator}: {e.status} (as above)", file=sys.stderr)
        elif e.status in ("skipped", "failed", "no-model"):
            said.add((e.evaluator, e.message))
            print(f"    {e.evaluator}: {e.status}: {e.message}", file=sys.stderr)
        elif e.status == "done":
            print(f"    {e.evaluator}: done ({e.seconds:.0f}s)", file=sys.stderr)
    return [e for e in outcomes if e.status == "failed"]


def report_failed_evaluations(failed: list[Any], remark: str = "") -> None:
    """List failed evaluations on stderr (nothing when none failed)."""
    if failed:
        print(f"clbench: {len(failed)} evaluation(s) failed{remark}:", file=sys.stderr)
        for e in failed:
            print(f"  {e.run_key} {e.evaluator}: {e.message}", file=sys.stderr)


def quiet_transformers() -> None:
    """Errors only from transformers, and no progress bars: at once when it is imported, else through the
    variables it reads when it is (a command that loads no model never pays for importing it)."""
    if "transformers" not in sys.modules:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        return
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass
