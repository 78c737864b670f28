"""Another tool's option name (the Hugging Face Trainer's, lm-evaluation-harness's, MTEB's) is refused like any
unknown option (one line, exit code 2), but the guess is our option it stands for, and says whose name it is."""

from __future__ import annotations

import pytest

from bench.cli.common import FOREIGN_OPTIONS
from bench.cli.main import main


@pytest.fixture
def no_commands(monkeypatch):
    """Every command fails the test at once: a command reached means a mistake was parsed."""
    from bench.cli import main as main_module

    for name in main_module.COMMANDS:
        monkeypatch.setitem(main_module.COMMANDS, name, lambda args: pytest.fail(f"parsed: {args}"))


def refused(capsys, *argv: str) -> str:
    """The one line `clbench ARGV` printed on stderr, having exited with code 2 and printed nothing on stdout."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    return err


@pytest.mark.parametrize("given, ours, whose", [
    ("--learning_rate", "--lr", "the Hugging Face Trainer's name"),
    ("--learning-rate", "--lr", "the Hugging Face Trainer's name"),
    ("--model_name_or_path", "--encoder", "the Hugging Face example scripts"),
    ("--model-name-or-path", "--encoder", "the Hugging Face example scripts"),
    ("--model", "--encoder", "lm-evaluation-harness and MTEB"),  # difflib alone: --no-save-model
    ("--output_dir", "--results-dir", "the Hugging Face Trainer's name"),
    ("--output-dir", "--results-dir", "the Hugging Face Trainer's name"),
    ("--tasks", "--datasets", "lm-evaluation-harness and MTEB"),  # difflib alone: --tsne
    ("--task", "--datasets", "lm-evaluation-harness and MTEB"),
    ("--num_train_epochs", "--epochs", "the Hugging Face Trainer's name"),
    ("--per_device_train_batch_size", "--batch-size", "the Hugging Face Trainer's name"),
    ("--seed", "--seeds", "the Hugging Face Trainer, lm-evaluation-harness and MTEB"),
])
def test_another_tools_name_suggests_ours_on_clbench_run(capsys, no_commands, given, ours, whose):
    err = refused(capsys, "run", given, "x")
    assert err.startswith(f"error: unknown option {given}: did you mean {ours}? ({given} is ")
    assert whose in err and err.rstrip().endswith("(options are spelled in full; see `clbench run --help`)")


def test_the_exact_line(capsys, no_commands):
    assert refused(capsys, "run", "--learning_rate=3e-5") == (
        "error: unknown option --learning_rate: did you mean --lr? (--learning_rate is the Hugging Face Trainer's "
        "name) (options are spelled in full; see `clbench run --help`)\n")


def test_two_foreign_names_in_one_line(capsys, no_commands):
    err = refused(capsys, "run", "--num_train_epochs", "3", "--per_device_train_batch_size", "8")
    assert "--num_train_epochs: did you mean --epochs?" in err
    assert "; unknown option --per_device_train_batch_size: did you mean --batch-size?" in err


def test_evaluates_own_model_option_still_works(monkeypatch):
    """`clbench evaluate --model` is ours there: it parses and reaches the command."""
    from bench.cli import main as main_module

    seen = []
    monkeypatch.setitem(main_module.COMMANDS, "evaluate", lambda args: seen.append(args.model) or 0)
    assert main(["evaluate", "--model", "some/classifier", "--datasets", "mr"]) == 0
    assert seen == ["some/classifier"]


def test_a_name_is_mapped_only_where_our_option_exists(capsys, no_commands):
    # evaluate has --model but no --encoder: the example scripts' name means its --model there
    err = refused(capsys, "evaluate", "--model_name_or_path", "x")
    assert "did you mean --model? (--model_name_or_path is the name in the Hugging Face example scripts" in err
    # evaluate has no --seeds: no claim about --seed, the ordinary guess instead
    err = refused(capsys, "evaluate", "--seed", "1")
    assert "unknown option --seed" in err and "did you mean --seeds" not in err and " is the name" not in err
    # list has no --encoder: --model gets no foreign mapping
    err = refused(capsys, "list", "encoders", "--model", "x")
    assert "--encoder" not in err and "lm-evaluation-harness" not in err


def test_every_mapping_points_at_a_real_option():
    """Each foreign name maps to an option some clbench command has, and is not itself one of `clbench run`'s."""
    from bench.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    every = {o for p in sub.choices.values() for a in p._actions for o in a.option_strings}
    run_options = {o for a in sub.choices["run"]._actions for o in a.option_strings}
    for given, (ours, _) in FOREIGN_OPTIONS.items():
        assert set(ours) <= every, given
        assert given not in run_options, given
