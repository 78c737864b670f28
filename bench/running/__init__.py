"""Running shards: expanding sweeps, one shard end to end, local and SLURM executors, status and following."""
