"""Dataset cards: unknown keys are errors (a typo is not lost), and the user's own cards come from the folders
$BENCH_CARDS_DIR names, without editing the package; a user card cannot take a shipped card's name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.data.cards import CARD_KEYS, CARDS_DIR, HUB_KEYS, parse_card, register_user_cards
from bench.errors import BenchError
from bench.registry import DATASETS
from conftest import ROOT, write_jsonl

CARD = "name: {name}\ntitle: My set\nlabels: [neg, pos]\nsizes: {{train: 12, test: 2}}\n"


@pytest.fixture
def registry(monkeypatch):
    """The dataset registry as shipped, restored after the test (user cards registered here are dropped)."""
    monkeypatch.setattr(DATASETS, "_entries", dict(DATASETS._entries))
    return DATASETS


def write_card(folder: Path, name: str, extra: str = "", file: str | None = None) -> Path:
    """A valid card NAME (two labels) in folder, plus `extra` YAML lines."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (file or f"{name}.yaml")
    path.write_text(CARD.format(name=name) + extra, encoding="utf-8")
    return path


def test_every_shipped_card_loads_and_is_registered():
    shipped = sorted(CARDS_DIR.glob("*.yaml"))
    assert len(shipped) >= 10
    for path in shipped:
        card = parse_card(path)
        assert card.name == path.stem and DATASETS.get(card.name).path == str(path)


def test_card_keys_are_the_card_fields():
    assert {"name", "title", "labels", "sizes", "hub", "defaults", "eval_defaults", "notes"} <= set(CARD_KEYS)
    assert "path" not in CARD_KEYS  # set by the loader, not a card key


@pytest.mark.parametrize("extra,key,close", [
    ("lables: [neg, pos]\n", "lables", "labels"),
    ("default: {epochs: 3}\n", "default", "defaults"),
    ("colour: blue\n", "colour", None),
])
def test_an_unknown_card_key_is_an_error_naming_file_key_and_closest(tmp_path, extra, key, close):
    path = write_card(tmp_path, "mine", extra)
    with pytest.raises(BenchError) as err:
        parse_card(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"dataset card {path}: unknown key {key}")
    assert (f"(did you mean {close}?)" in message) if close else "did you mean" not in message
    assert message.endswith(f"valid card keys: {', '.join(CARD_KEYS)}")


def test_a_misspelt_required_key_is_reported_as_a_typo_not_as_missing(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ntitle: t\nlables: [a, b]\nsizes: {}\n", encoding="utf-8")
    with pytest.raises(BenchError, match="unknown key lables \\(did you mean labels\\?\\)"):
        parse_card(path)


def test_an_unknown_hub_key_is_an_error(tmp_path):
    path = write_card(tmp_path, "mine", "hub: {id: org/mine, text_column: text, label_colum: label}\n")
    with pytest.raises(BenchError) as err:
        parse_card(path)
    assert str(err.value) == (f"dataset card {path}: unknown key hub.label_colum (did you mean hub.label_column?); "
                              f"valid hub keys: {', '.join(HUB_KEYS)}")


def test_a_hub_entry_that_is_no_mapping_is_an_error(tmp_path):
    with pytest.raises(BenchError, match="hub must be a mapping"):
        parse_card(write_card(tmp_path, "mine", "hub: org/mine\n"))


def test_a_yaml_error_is_one_line(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ntitle: [unclosed\n", encoding="utf-8")
    with pytest.raises(BenchError) as err:
        parse_card(path)
    assert "\n" not in str(err.value) and str(err.value).startswith(f"cannot read dataset card {path}")


# ----------------------------------------------------------------------------------------------- user cards

def test_a_user_card_is_registered_and_its_local_copy_loads(tmp_path, registry):
    from bench.data.loading import load_dataset

    write_card(tmp_path / "cards", "myset", "defaults: {epochs: 2}\n")
    write_card(tmp_path / "cards", "other", file="other.yml")
    found = register_user_cards([tmp_path / "cards"])
    assert [card.name for card in found] == ["myset", "other"] and "myset" in registry and "other" in registry
    rows = [{"text": f"good {i}", "label": "pos"} for i in range(6)] + [{"text": f"bad {i}", "label": "neg"}
                                                                         for i in range(6)]
    write_jsonl(tmp_path / "data" / "myset" / "train.jsonl", rows)
    write_jsonl(tmp_path / "data" / "myset" / "test.jsonl", rows[:1] + rows[-1:])
    data = load_dataset("myset", data_dir=str(tmp_path / "data"))
    assert data.label_names == ["neg", "pos"] and data.source.startswith("local:")  # the card's labels
    assert registry.get("myset").defaults == {"epochs": 2}
    register_user_cards([tmp_path / "cards"])  # again (a module imported twice): no error, no duplicate


def test_a_user_card_cannot_take_a_shipped_name(tmp_path, registry):
    path = write_card(tmp_path, "sst2")
    with pytest.raises(BenchError) as err:
        register_user_cards([tmp_path])
    message = str(err.value)
    assert f"dataset card {path} takes the name 'sst2' of {CARDS_DIR / 'sst2.yaml'}" in message
    assert "sst2_mine" in message and registry.get("sst2").path == str(CARDS_DIR / "sst2.yaml")


def test_two_user_cards_cannot_share_a_name(tmp_path, registry):
    write_card(tmp_path / "a", "myset")
    write_card(tmp_path / "b", "myset")
    with pytest.raises(BenchError, match=f"dataset card {tmp_path / 'b' / 'myset.yaml'} takes the name 'myset' of "
                                         f"{tmp_path / 'a' / 'myset.yaml'}"):
        register_user_cards([tmp_path / "a", tmp_path / "b"])


def test_a_cards_folder_that_does_not_exist_is_an_error(tmp_path, registry):
    with pytest.raises(BenchError, match="BENCH_CARDS_DIR names .*nowhere, which is not a folder"):
        register_user_cards([tmp_path / "nowhere"])


def clbench(*args: str, cards: str) -> subprocess.CompletedProcess:
    """`clbench ARGS` in a fresh process (the cards are registered at import) with BENCH_CARDS_DIR=cards."""
    env = {**os.environ, "BENCH_CARDS_DIR": cards, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "bench", *args], env=env, capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_bench_cards_dir_adds_cards_to_the_command_line(tmp_path):
    write_card(tmp_path / "one", "myset")
    write_card(tmp_path / "two", "yourset")
    done = clbench("list", "datasets", cards=f"{tmp_path / 'one'}{os.pathsep}{tmp_path / 'two'}")
    assert done.returncode == 0, done.stderr
    assert "myset" in done.stdout and "yourset" in done.stdout and "sst2" in done.stdout


def test_a_broken_user_card_stops_the_command_line_in_one_line(tmp_path):
    path = write_card(tmp_path, "myset", "lable_field: y\n")
    done = clbench("list", "datasets", cards=str(tmp_path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == f"error: dataset card {path}: unknown key lable_field (did you mean label_field?); " \
                          f"valid card keys: {', '.join(CARD_KEYS)}\n"
