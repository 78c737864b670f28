"""`python -m bench.perf.campaign`: the GPU campaign's command line (scripts/gpu-campaign.sh calls it)."""

from bench.perf.campaign.cli import main

raise SystemExit(main())
