"""The `clbench` command line (also installed as `bench`): the parser of every subcommand (each in its own module
of bench.cli), logging, and the dispatch that turns a BenchError into one line and exit code 2."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
import warnings
from pathlib import Path

from bench.cli import doctor, evaluate, export, listing, plot, report, run, status, verify
from bench.cli.common import StrictParser, quiet_transformers
from bench.errors import BenchError

log = logging.getLogger("bench")

PROGRAMS = ("clbench", "bench")  # the installed scripts; `bench` alone clashes with frappe-bench
PLANNED: dict[str, str] = {}  # subcommands announced but not implemented yet: name -> what it will do
COMMANDS = {"list": listing.cmd_list, "run": run.cmd_run, "evaluate": evaluate.cmd_evaluate,
            "results": report.cmd_results, "report": report.cmd_report, "plot": plot.cmd_plot,
            "status": status.cmd_status, "verify": verify.cmd_verify, "doctor": doctor.cmd_doctor,
            "export": export.cmd_export}


def program_name(argv0: str | None = None) -> str:
    """The name the command was invoked by (argv[0]'s file name): `bench` or `clbench`, and `clbench` for
    anything else (`python -m bench`, a test runner)."""
    if argv0 is None:
        argv0 = sys.argv[0] if sys.argv else ""
    name = Path(argv0).name.removesuffix(".exe")
    return name if name in PROGRAMS else "clbench"


def build_parser(prog: str | None = None) -> StrictParser:
    """The argument parser with every subcommand (a StrictParser: no option may be abbreviated), named `prog`
    (default: how the command was invoked)."""
    common = StrictParser(add_help=False)  # subcommands: absent unless given, so `bench --debug run`
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks")
    parser = StrictParser(prog=prog or program_name(),
                          description="Benchmark contrastive fine-tuning methods for text classifiers.")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    listing.add_parser(sub, common)
    run.add_parser(sub, common)
    evaluate.add_parser(sub, common)
    export.add_parser(sub, common)
    status.add_parser(sub, common)
    verify.add_parser(sub, common)
    report.add_results_parser(sub, common)
    report.add_report_parser(sub, common)
    plot.add_plot_parser(sub, common)
    doctor.add_parser(sub, common)
    for name, what in PLANNED.items():
        stub = sub.add_parser(name, parents=[common], help=f"(not implemented yet) {what}")
        stub.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def cmd_planned(args: argparse.Namespace) -> int:
    """Say clearly that a command is not implemented yet."""
    raise BenchError(f"'clbench {args.command}' is not implemented yet: {PLANNED[args.command]}")


def configure_logging(transformers: bool = True) -> None:
    """Readable logs on stderr; quiet third-party libraries (transformers too unless `transformers` is False:
    importing it takes a second, so `clbench run` quiets it once its options are checked)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    logging.getLogger("bench").setLevel(logging.INFO)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore", module="transformers")
    if transformers:
        quiet_transformers()


def os_error_text(exc: OSError) -> str:
    """One line for an OSError on a file: the file, the system's reason and what to check."""
    name = errno.errorcode.get(exc.errno or 0, "error")
    return (f"{exc.filename}: {name}: {exc.strerror or exc} (check that its folder exists, is writable and has "
            "space, or choose another folder; --debug shows the traceback)")


def is_demo(argv: list[str]) -> bool:
    """Whether the arguments are `clbench run` alone (`make demo`; --debug and --no-progress allowed): the demo,
    which also writes its reports (bench.cli.run_options.DEMO_REPORTS)."""
    return "run" in argv and not set(argv) - {"run", "--debug", "--no-progress"}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `clbench` (and `bench`) command; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser()  # imports the dataset cards: a broken user card ($BENCH_CARDS_DIR) fails here
        args = parser.parse_args(argv)
    except BenchError as exc:  # a UsageError: an unknown option, a bad value
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.demo = is_demo(argv)
    if args.command is None:
        parser.print_help()
        return 0
    configure_logging(transformers=args.command not in ("run", "doctor"))
    try:
        return COMMANDS.get(args.command, cmd_planned)(args)
    except BenchError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`clbench status | head`): stop quietly, as a killed pipe would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes it
        return 141
    except Exception as exc:  # unexpected: one line unless --debug
        if args.debug:
            raise
        if isinstance(exc, OSError) and exc.filename:  # after the checks: a disk filled, a folder went read-only
            print(f"error: {os_error_text(exc)}", file=sys.stderr)
            return 1
        print(f"error: unexpected {exc.__class__.__name__}: {exc} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
