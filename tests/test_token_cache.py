"""Tokenised splits are cached on disk once per tokenizer and settings, and a broken cache file is rebuilt."""

from __future__ import annotations

from bench.encoders.models import build_encoder
from bench.spec import TrainConfig
from bench.training.token_cache import cache_key, tokenize_cached

TEXTS = ["the team won", "fresh bread and soup", "a"]


def counting_bundle():
    bundle = build_encoder("tiny-bert", TEXTS, TrainConfig(max_length=8))
    calls = []
    original = bundle.tokenize

    def tokenize(texts):
        calls.append(len(texts))
        return original(texts)

    bundle.tokenize = tokenize
    return bundle, calls, original


def test_second_use_reads_the_cache_and_gives_the_same_ids(tmp_path):
    bundle, calls, original = counting_bundle()
    identity = {"encoder": "tiny-bert", "max_length": 8}
    first = tokenize_cached(bundle, TEXTS, tmp_path, identity)
    second = tokenize_cached(bundle, TEXTS, tmp_path, identity)
    assert first == second == original(TEXTS)
    assert calls == [3]  # tokenised once
    assert len(list((tmp_path / "tokens").glob("*.npz"))) == 1


def test_other_settings_or_texts_get_another_entry_and_broken_files_are_rebuilt(tmp_path):
    bundle, calls, _ = counting_bundle()
    a = cache_key(TEXTS, {"max_length": 8})
    assert a != cache_key(TEXTS, {"max_length": 16}) and a != cache_key(TEXTS[:2], {"max_length": 8})
    assert a != cache_key(["the teamwon", "fresh bread and soup", "a"], {"max_length": 8})  # text boundaries count
    tokenize_cached(bundle, TEXTS, tmp_path, {"max_length": 8})
    (path,) = (tmp_path / "tokens").glob("*.npz")
    path.write_bytes(b"not a zip file")
    assert tokenize_cached(bundle, TEXTS, tmp_path, {"max_length": 8}) == bundle.tokenize(TEXTS)
    assert calls[:2] == [3, 3]
    assert tokenize_cached(bundle, TEXTS, None, {}) == bundle.tokenize(TEXTS)  # no cache folder: no caching
