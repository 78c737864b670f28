"""Exceptions shared across the parts: the one that carries a user-facing message, and the one that says an
evaluator cannot run here (raised deep inside evaluators and the attack package, caught by bench.running.evaluation);
and the one wording of the install hint for an optional extra, which such messages give."""


class BenchError(Exception):
    """A problem the user can fix: the CLI prints its message on one line and exits non-zero."""


class SkipEvaluator(Exception):
    """Raised inside an evaluator when a missing optional resource (WordNet, vectors, a package) means it cannot
    run; the evaluation is recorded as skipped with the message."""


def install_extra(extra: str) -> str:
    """The command that adds the optional dependencies `extra` (pyproject.toml) to clbench installed from its
    checkout: clbench is not on the package index, so `pip install clbench[EXTRA]` would find nothing."""
    return f'pip install -e ".[{extra}]" (in the clbench checkout)'
