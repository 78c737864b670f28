"""Allow `python -m bench ...` as an alias of the `bench` command."""

from bench.cli.main import main

raise SystemExit(main())
