import pytest

from bench.errors import BenchError
from bench.registry import DATASETS, ENCODERS, METHODS, Registry


def test_register_get_and_alias():
    reg = Registry("widget")

    @reg.register("alpha", "a")
    class Alpha:
        pass

    assert reg.get("alpha") is Alpha
    assert reg.get("a") is Alpha
    assert reg.canonical("a") == "alpha"
    assert list(reg) == ["alpha"]
    assert reg.aliases_of("alpha") == ["a"]
    assert "a" in reg and "b" not in reg


def test_duplicate_registration_is_refused():
    reg = Registry("widget")
    reg.add("alpha", object())
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("alpha", object())


def test_unknown_name_lists_known_and_suggests():
    reg = Registry("widget")
    reg.add("supcon", 1)
    reg.add("clld", 2)
    with pytest.raises(BenchError) as err:
        reg.get("supcom")
    message = str(err.value)
    assert "unknown widget 'supcom'" in message
    assert "Did you mean 'supcon'?" in message
    assert "clld, supcon" in message
    assert "\n" not in message


def test_no_suggestion_for_distant_names():
    reg = Registry("widget")
    reg.add("supcon", 1)
    assert "Did you mean" not in reg.unknown_message("zzzz")


def test_project_registries_are_populated():
    import bench.data.loading  # noqa: F401  (registers cards)
    import bench.encoders.models  # noqa: F401
    import bench.methods  # noqa: F401

    assert "ce" in METHODS
    for name in ["20ng", "r8", "r52", "mr", "trec", "sst2", "sst5", "imdb", "ag_news", "demo"]:
        assert name in DATASETS
    for name in ["minilm", "tiny-bert", "textcnn", "textcnn-glove"]:
        assert name in ENCODERS
