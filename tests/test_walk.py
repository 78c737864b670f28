"""benchmarks/walk.py: how one shard's path through the modules is counted (docs/ARCHITECTURE.md, issue 55)."""

from __future__ import annotations

from benchmarks.walk import is_step, layer, measure


def test_steps_are_calls_between_parts_modules_not_into_the_shared_vocabulary_or_a_value_protocol():
    assert is_step("bench.running.shard", "bench.results.runfiles", "check_folder")
    assert not is_step("bench.running.shard", "bench.running.shard", "fail")            # within a module
    assert not is_step("bench.running.shard", "bench.spec", "key")                      # shared vocabulary
    assert not is_step("bench.running.shard", "bench.data.textdata", "__len__")         # a value's protocol
    assert layer("bench.reporting.tables") == layer("bench.running.shard") < layer("bench.results.store")


def test_the_walk_counts_modules_returns_climbs_and_the_shards_calls_down():
    edges = [("bench.running.shard", "a", "bench.results.runfiles", "check_folder"),
             ("bench.results.runfiles", "b", "bench.results.manifest", "load"),
             ("bench.running.shard", "c", "bench.training.session", "train"),
             ("bench.data.bounds", "d", "bench.encoders.models", "tokenize"),           # a climb (a callback)
             ("bench.running.shard", "e", "bench.results.runfiles", "store_run"),       # a return to runfiles
             ("bench.running.shard", "f", "bench.running.evaluation", "evaluate_run")]  # within running
    found = measure(edges)
    assert (found["modules"], found["entries"], found["returns"], found["climbs"]) == (5, 6, 1, 1)
    assert (found["shard_calls_down"], found["shard_modules_down"], found["shard_layers_down"]) == (3, 2, 2)
    assert found["walk"][0] == "bench.running.shard.a -> bench.results.runfiles.check_folder"
