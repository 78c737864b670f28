"""Allow `python -m bench ...` as an alias of the `clbench` command (usage and errors then say `clbench`)."""

from bench.cli.main import main

raise SystemExit(main())
