"""Training: the one training loop and what feeds it (batching, tokenisation cache, compilation)."""
