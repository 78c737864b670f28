"""`python -m benchmarks.campaign`: the GPU campaign's command line (scripts/gpu-campaign.sh calls it)."""

from benchmarks.campaign.cli import main

raise SystemExit(main())
