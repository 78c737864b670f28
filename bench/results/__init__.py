"""Results on disk: run folders written atomically, the gathered table, and shard leases."""
