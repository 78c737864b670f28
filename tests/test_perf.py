"""The throughput benchmark's FLOP count and peak lookup (benchmarks themselves are run by hand, not timed here)."""

from __future__ import annotations

import numpy as np
import torch

from bench.encoders import build_encoder
from bench.perf import peak_tflops, training_flops
from bench.spec import TrainConfig


def test_training_flops_counts_weights_and_attention():
    bundle = build_encoder("tiny-bert", ["a b c d", "e f g"], TrainConfig(max_length=16))
    encoder = bundle.model
    embedding = sum(p.numel() for n, p in encoder.named_parameters() if "embeddings" in n)
    weights = sum(p.numel() for p in encoder.parameters()) - embedding
    lengths = np.array([3, 5])
    layers, width = 2, 32
    expected = 6 * weights * 8 + 12 * layers * width * (9 + 25)
    assert training_flops(encoder, lengths) == expected
    assert weights > 0 and embedding > 0


def test_peak_is_known_only_for_gpus_in_the_table_or_given():
    assert peak_tflops(torch.device("cpu"), None) is None
    assert peak_tflops(torch.device("cpu"), 123.0) == 123.0
