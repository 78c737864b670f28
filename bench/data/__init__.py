"""Data: dataset cards, loading local/user/Hub data, the synthetic demo set, WordNet and word-substitution views."""
