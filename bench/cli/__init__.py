"""The `bench` command line: one module per command, parsing and validation before any heavy import."""
