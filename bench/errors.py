"""The one exception type that carries a user-facing message."""


class BenchError(Exception):
    """A problem the user can fix: the CLI prints its message on one line and exits non-zero."""
