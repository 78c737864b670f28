"""The GPU campaign: every GPU figure the suite owes, from one command per part on a lent GPU machine.

    bash scripts/gpu-campaign.sh pack .campaign            # here: the folders to carry, and each part's command
    bash scripts/gpu-campaign.sh run PART --pack .campaign --out $OUT    # there: one part in under 9 minutes
    bash scripts/gpu-campaign.sh run PART --dry-run --out OUT            # anywhere: the same steps at toy scale
    bash scripts/gpu-campaign.sh report OUT...              # the README's GPU tables from the returned JSON

The parts and their steps are in `parts`, the pack's layout in `layout`, what `pack` writes in `pack`, what `run`
prepares in `unpack` and runs in `runner`, the tables in `report`. docs/GPU-CAMPAIGN.md is the guide.
"""
