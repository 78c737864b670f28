"""`python -m bench.perf COMMAND ...`: run one benchmark (the command line is bench.perf.cli)."""

from bench.perf.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
