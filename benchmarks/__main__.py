"""`python -m benchmarks COMMAND ...`: run one benchmark (the command line is benchmarks.cli)."""

from benchmarks.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
