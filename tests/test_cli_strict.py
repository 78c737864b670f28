"""No option of the command line is taken by a prefix (`--method` is not `--methods`), in any subcommand, nested
ones included, nor in the benchmarks' command line; an unknown option is one line naming the real one, exit 2.
The program is named as it was invoked (`clbench` or `bench`), and both scripts are installed."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bench.cli.common import StrictParser, UsageError
from bench.cli.main import build_parser, main, program_name
from conftest import ROOT


def subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser) for `parser` and every subcommand parser below it, found through its subparsers."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from subcommands(child, (*path, name))


def filler(parser: argparse.ArgumentParser) -> list[str]:
    """The fewest arguments `parser` accepts: its required positionals, the first subcommand and its own."""
    args: list[str] = []
    for action in parser._actions:
        if action.option_strings:
            continue
        if isinstance(action, argparse._SubParsersAction):
            name = next(iter(action.choices))
            return [*args, name, *filler(action.choices[name])]
        if action.choices:
            args.append(str(next(iter(action.choices))))
        elif action.nargs in ("*", "?", argparse.REMAINDER):
            continue
        else:
            args += ["x"] * (action.nargs if isinstance(action.nargs, int) else 1)
    return args


def abbreviation(option: str, options: set[str]) -> str | None:
    """A prefix of `option` that is no option itself (None for a short option)."""
    if not option.startswith("--"):
        return None
    for cut in (1, 2, 3):
        prefix = option[:-cut]
        if len(prefix) > 3 and prefix not in options:
            return prefix
    return None


PARSERS = list(subcommands(build_parser()))
CASES = [(path, option, prefix) for path, parser in PARSERS
         for option in sorted({o for a in parser._actions for o in a.option_strings})  # sorted: pytest-xdist's workers must collect the same list
         if (prefix := abbreviation(option, {o for a in parser._actions for o in a.option_strings}))]


def test_every_parser_of_the_command_line_is_strict():
    names = {" ".join(path) for path, _ in PARSERS}
    assert {"", "run", "evaluate", "results", "report", "status", "list", "doctor", "plot", "plot ldm",
            "plot confusion", "plot confusion-diff", "plot curves", "plot embeddings", "plot summary"} <= names
    for path, parser in PARSERS:
        assert isinstance(parser, StrictParser) and parser.allow_abbrev is False, path
    assert len(CASES) > 100  # every long option of every subcommand below


@pytest.mark.parametrize("path,option,prefix", CASES, ids=[f"{' '.join(p)} {o}" for p, o, _ in CASES])
def test_no_option_is_taken_by_a_prefix(path, option, prefix):
    parser = dict(PARSERS)[path]
    argv = [*path, prefix, *filler(parser)]
    with pytest.raises(UsageError) as error:
        build_parser().parse_args(argv)
    message = str(error.value)
    assert f"unknown option {prefix}: did you mean" in message and option in message, argv
    assert "\n" not in message


@pytest.fixture
def no_commands(monkeypatch):
    """Every command fails the test at once: a command reached means a mistake was parsed (and runs nothing)."""
    from bench.cli import main as main_module

    for name in main_module.COMMANDS:
        monkeypatch.setitem(main_module.COMMANDS, name, lambda args: pytest.fail(f"parsed: {args}"))


def test_a_mistaken_option_is_one_line_with_exit_code_2(cli, no_commands):
    code, out, err = cli("run", "--method", "ce")
    assert code == 2 and out == ""
    assert err == "error: unknown option --method: did you mean --methods? (options are spelled in full; see " \
                  "`clbench run --help`)\n"
    code, _, err = cli("run", "--method=ce")
    assert code == 2 and "unknown option --method: did you mean --methods?" in err
    code, _, err = cli("plot", "ldm", "some_run", "--evol")
    assert code == 2 and "did you mean --evolution?" in err and "`clbench plot ldm --help`" in err
    code, _, err = cli("results", "--resluts-dir", "x")  # close, not a prefix
    assert code == 2 and "unknown option --resluts-dir: did you mean --results-dir?" in err
    code, _, err = cli("status", "--zzz")  # nothing close: no guess
    assert code == 2 and err == "error: unknown option --zzz (options are spelled in full; see " \
                                "`clbench status --help`)\n"
    code, _, err = cli("run", "--seeds", "x")  # a bad value: argparse's message, on one line
    assert code == 2 and err.count("\n") == 1 and "argument --seeds: seeds must look like 1,2,3" in err
    code, _, err = cli("list", "methods", "extra")
    assert code == 2 and err == "error: unexpected argument(s) extra (see `clbench list --help`)\n"


def test_full_options_still_parse():
    args = build_parser().parse_args(["run", "--methods", "ce", "--encoders", "minilm", "--seeds", "1-2"])
    assert args.methods == ["ce"] and args.encoders == ["minilm"] and args.seeds == [1, 2]
    args = build_parser().parse_args(["--debug", "plot", "ldm", "r1", "--evolution"])
    assert args.debug and args.evolution and args.runs == ["r1"]


def test_the_benchmarks_refuse_abbreviations_too(capsys):
    from benchmarks.cli import build_parser as perf_parser, main as perf_main

    parser = perf_parser()
    assert isinstance(parser, StrictParser) and parser.allow_abbrev is False
    # --steps 0 stops a parsed command before it measures anything
    assert perf_main(["overhead", "--method", "ce", "--steps", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "python -m benchmarks: error: unknown option --method: did you mean --methods? (options are " \
                  "spelled in full; see `python -m benchmarks --help`)\n"
    assert perf_main(["overhead", "--data", "x", "--steps", "0"]) == 2
    assert "did you mean --dataset or --datasets or --data-dir?" in capsys.readouterr().err


def test_the_gpu_campaign_refuses_abbreviations_too(capsys, tmp_path):
    from benchmarks.campaign.cli import build_parser as campaign_parser, main as campaign_main

    for path, parser in subcommands(campaign_parser()):
        assert isinstance(parser, StrictParser) and parser.allow_abbrev is False, path
    assert campaign_main(["run", "perf", "--dry", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bash scripts/gpu-campaign.sh: error: unknown option --dry: did you mean --dry-run?")
    assert len(err.splitlines()) == 1 and not any(tmp_path.iterdir())


@pytest.mark.parametrize("argv0,prog", [("/usr/local/bin/clbench", "clbench"), ("/usr/bin/bench", "bench"),
                                        ("/x/bench/__main__.py", "clbench"), ("/x/pytest", "clbench"),
                                        ("bench.exe", "bench"), ("", "clbench")])
def test_the_program_is_named_as_invoked(argv0, prog):
    assert program_name(argv0) == prog


def test_usage_and_errors_follow_argv0(monkeypatch, capsys, no_commands):
    monkeypatch.setattr(sys, "argv", ["/usr/bin/bench", "run"])
    assert build_parser().prog == "bench"
    assert main(["run", "--method", "ce"]) == 2 and "`bench run --help`" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["/venv/bin/clbench"])
    with pytest.raises(SystemExit):
        main(["results", "--help"])
    assert capsys.readouterr().out.startswith("usage: clbench results ")


def test_python_m_bench_is_clbench():
    done = subprocess.run([sys.executable, "-m", "bench", "--help"], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage: clbench ")


def test_both_scripts_are_declared_and_installed():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"bench": "bench.cli.main:main", "clbench": "bench.cli.main:main"}
    installed = shutil.which("clbench", path=str(Path(sys.executable).parent))  # this interpreter's scripts
    if installed is None:
        pytest.skip("clbench is not installed here (pip install -e .)")
    done = subprocess.run([installed, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage: clbench ")
