"""Hub encoders and Hub datasets load from the Hugging Face caches when the Hub is offline (HF_HUB_OFFLINE=1, as on
SLURM compute nodes) or unreachable, with the network forbidden; what neither the cache nor the Hub holds fails in
one line naming the cache folder and the fix. The caches are built here, in the layouts huggingface_hub and
datasets write (models--org--name/{blobs,snapshots,refs}; org___name/<config>/<version>/<hash>)."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import time
from pathlib import Path

import pytest

from bench import catalog
from bench.errors import BenchError
from bench.registry import DATASETS
from conftest import FIXTURE, read_fixture

MODEL = "org/tiny-cached-bert"
DATASET = "org/tiny_cached_ds"
REVISION = "0123456789abcdef0123456789abcdef01234567"
LOCAL_HOSTS = (None, "localhost", "127.0.0.1", "::1", "")


@pytest.fixture
def network(monkeypatch) -> list:
    """Forbid Internet connections (TCP to any host, DNS lookups of remote names); returns the attempts made.
    bench.hub forgets the Hub's earlier answers."""
    import bench.hub

    monkeypatch.setattr(bench.hub, "_answers", {})
    attempts: list = []
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(address)
            raise OSError(f"network forbidden in this test: {address}")
        return real_connect(sock, address)

    def getaddrinfo(host, *args, **kwargs):
        if host not in LOCAL_HOSTS:
            attempts.append(host)
            raise socket.gaierror(f"network forbidden in this test: {host}")
        return real_getaddrinfo(host, *args, **kwargs)

    def create_connection(address, *args, **kwargs):
        attempts.append(address)
        raise OSError(f"network forbidden in this test: {address}")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    return attempts


@pytest.fixture
def caches(tmp_path, monkeypatch, network) -> Path:
    """An empty HF_HOME with its hub and datasets caches, offline (HF_HUB_OFFLINE=1), no network."""
    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)  # $HF_HOME/datasets
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (home / "hub").mkdir(parents=True)
    return home


def cache_model(hub_cache: Path, repo_id: str, texts: list[str]) -> Path:
    """A tiny BERT and its word tokenizer (built here) in the Hub cache as `hf download` leaves it: files in
    blobs/ named by hash, linked from snapshots/<revision>/, refs/main naming the revision."""
    from transformers import BertConfig, BertModel

    from bench.encoders.vocab import build_vocab, word_tokenizer

    staging = hub_cache.parent / "staging"
    vocab = build_vocab(texts)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=128)).save_pretrained(staging)
    word_tokenizer(vocab).save_pretrained(staging)
    repo = hub_cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / REVISION
    for folder in (repo / "blobs", snapshot, repo / "refs"):
        folder.mkdir(parents=True, exist_ok=True)
    for file in staging.iterdir():
        blob = repo / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.move(file, blob)
        (snapshot / file.name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
    (repo / "refs" / "main").write_text(REVISION)
    return snapshot


def cache_dataset(datasets_cache: Path, repo_id: str, splits: dict[str, list[dict]]) -> Path:
    """A dataset prepared into the datasets cache by the library's own builder, in the folder an online
    `load_dataset(repo_id)` fills: <namespace>___<name>/default/0.0.0/<commit>/<name>-<split>.arrow."""
    from datasets.packaged_modules.json.json import Json

    namespace, name = repo_id.split("/")
    source = datasets_cache.parent / "raw"
    source.mkdir(parents=True)
    for split, rows in splits.items():
        (source / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    builder = Json(cache_dir=str(datasets_cache), dataset_name=name, config_id="default", hash=REVISION,
                   data_files={split: str(source / f"{split}.jsonl") for split in splits})
    builder.download_and_prepare()
    (datasets_cache / name).rename(datasets_cache / f"{namespace}___{name}")  # repo_id's namespace, as online
    return datasets_cache / f"{namespace}___{name}"


def texts() -> list[str]:
    """The tiny fixture's training texts (the cached tokenizer's vocabulary)."""
    return [row["text"] for row in read_fixture("train")]


# ----------------------------------------------------------------------------------------------- encoders

def test_a_cached_hub_encoder_loads_offline_through_build_encoder(caches, network):
    import torch

    from bench.encoders.models import build_encoder
    from bench.spec import TrainConfig

    snapshot = cache_model(caches / "hub", MODEL, texts())
    bundle = build_encoder(MODEL, texts(), TrainConfig())
    ids = bundle.tokenize(["a short text"])
    with torch.no_grad():
        out = bundle.model(torch.tensor(ids), torch.ones(1, len(ids[0]), dtype=torch.long))
    assert out.pooled.shape == (1, 16) and bundle.info["hub_cache"] == str(snapshot)
    assert bundle.info["source"] == MODEL and network == []


def test_a_cached_encoder_passes_the_light_check_without_model_code(caches, network):
    from bench.hub import check_encoder_source, encoder_source

    snapshot = cache_model(caches / "hub", MODEL, texts())
    assert check_encoder_source(MODEL, catalog.registry("encoder")) is False  # nothing left to ask the Hub
    assert encoder_source(MODEL, catalog.registry("encoder")) == ("cache", str(snapshot))
    assert network == []


def test_an_unreachable_hub_without_the_offline_switch_also_reads_the_cache(caches, network, monkeypatch):
    from bench.encoders.models import build_encoder
    from bench.spec import TrainConfig

    monkeypatch.delenv("HF_HUB_OFFLINE")
    cache_model(caches / "hub", MODEL, texts())
    start = time.monotonic()
    bundle = build_encoder(MODEL, texts(), TrainConfig())
    assert "hub_cache" in bundle.info and time.monotonic() - start < 10
    assert network  # it asked the Hub once (refused at once here), then read the cache


def test_an_encoder_in_neither_the_cache_nor_the_hub_fails_in_one_line(caches, network):
    from bench.encoders.models import build_encoder
    from bench.spec import TrainConfig

    cache_model(caches / "hub", MODEL, texts())
    start = time.monotonic()
    with pytest.raises(BenchError) as err:
        build_encoder("org/absent-model", texts(), TrainConfig())
    message = str(err.value)
    assert "\n" not in message and time.monotonic() - start < 2 and network == []
    assert f"not in the Hugging Face cache {caches / 'hub'}" in message and "HF_HUB_OFFLINE set" in message
    assert "hf download org/absent-model" in message and "folder holding config.json" in message


def test_the_hubs_answer_is_asked_once_a_minute(network, monkeypatch):
    import bench.hub

    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert not bench.hub.hub_reachable() and not bench.hub.hub_reachable() and len(network) == 1
    monkeypatch.setattr(bench.hub, "ANSWER_SECONDS", 0.0)
    assert not bench.hub.hub_reachable() and len(network) == 2
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert not bench.hub.hub_reachable() and len(network) == 2  # the switch: no probe at all


def test_the_cache_folder_follows_hf_hub_cache_then_hf_home(monkeypatch, tmp_path):
    from bench.hub import datasets_cache_dir, hub_cache_dir

    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "HF_DATASETS_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub_cache_dir() == tmp_path / "home" / "hub" and datasets_cache_dir() == tmp_path / "home" / "datasets"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "ds"))
    assert hub_cache_dir() == tmp_path / "hub" and datasets_cache_dir() == tmp_path / "ds"


def test_a_run_by_hub_id_trains_from_the_cache(cli, caches, network, tmp_path):
    cache_model(caches / "hub", MODEL, texts())
    code, out, err = cli("run", "--methods", "ce", "--datasets", FIXTURE, "--encoder", MODEL, "--epochs", "1",
                         "--batch-size", "16", "--max-length", "32", "--no-progress", "--evaluators", "none",
                         "--results-dir", tmp_path / "results")
    assert code == 0, err
    spec = json.loads(next((tmp_path / "results").rglob("spec.json")).read_text())
    assert MODEL in json.dumps(spec) and network == []


# ----------------------------------------------------------------------------------------------- datasets

ROWS = {"train": [{"text": f"good film {i}", "label": "pos"} for i in range(6)]
        + [{"text": f"bad film {i}", "label": "neg"} for i in range(6)],
        "test": [{"text": "good", "label": "pos"}, {"text": "bad", "label": "neg"}]}


@pytest.fixture
def hub_card(tmp_path, monkeypatch):
    """A user card (registered for this test only) whose data come from the Hub dataset DATASET."""
    from bench.data.cards import register_user_cards

    monkeypatch.setattr(DATASETS, "_entries", dict(DATASETS._entries))
    folder = tmp_path / "cards"
    folder.mkdir()
    (folder / "tinyhub.yaml").write_text(
        "name: tinyhub\ntitle: A tiny Hub dataset\nlabels: [neg, pos]\nsizes: {train: 12, test: 2}\n"
        f"hub: {{id: {DATASET}, config: null, splits: {{train: train, test: test}}, text_column: text, "
        "label_column: label}\n", encoding="utf-8")
    register_user_cards([folder])
    return DATASETS.get("tinyhub")


def test_a_cached_hub_dataset_loads_offline(caches, network, hub_card):
    from bench.data.loading import load_dataset

    cache_dataset(caches / "datasets", DATASET, ROWS)
    data = load_dataset("tinyhub")
    assert data.source == f"hub:{DATASET}" and len(data.test) == 2 and network == []
    assert [data.label_names[i] for i in data.test.labels] == ["pos", "neg"] and len(data.train) + len(
        data.validation) == 12


def test_an_unreachable_hub_without_the_offline_switch_reads_the_datasets_cache_at_once(caches, network, hub_card,
                                                                                          monkeypatch):
    import datasets.config
    import huggingface_hub.constants

    from bench.data.loading import load_dataset

    monkeypatch.delenv("HF_HUB_OFFLINE")  # and the libraries as imported without it: they would ask the Hub
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    cache_dataset(caches / "datasets", DATASET, ROWS)
    assert len(load_dataset("tinyhub").test) == 2
    assert len(network) == 1  # bench.hub.hub_reachable's probe, then no network attempt by datasets
    assert datasets.config.HF_HUB_OFFLINE is False  # offline mode was for the read only


def test_the_run_check_passes_a_cached_dataset_and_refuses_a_missing_one_alike(caches, hub_card, monkeypatch):
    from bench.cli.run_options import check_dataset_name
    from bench.data.loading import load_dataset

    with pytest.raises(BenchError) as light:
        check_dataset_name("tinyhub", None)
    with pytest.raises(BenchError) as real:
        load_dataset("tinyhub")
    assert str(light.value) == str(real.value)
    cache_dataset(caches / "datasets", DATASET, ROWS)
    check_dataset_name("tinyhub", None)  # no error: the cache holds it


def test_a_dataset_in_neither_the_cache_nor_the_hub_fails_in_one_line(caches, network, hub_card):
    from bench.data.loading import load_dataset

    cache_dataset(caches / "datasets", "org/another_ds", ROWS)  # a cache that holds something else
    start = time.monotonic()
    with pytest.raises(BenchError) as err:
        load_dataset("tinyhub")
    message = str(err.value)
    assert "\n" not in message and time.monotonic() - start < 2 and network == []
    assert f"not in the datasets cache {caches / 'datasets'}" in message and "HF_HUB_OFFLINE set" in message
    assert f"datasets.load_dataset('{DATASET}')" in message and "--data-dir DIR" in message


def test_a_broken_cached_copy_fails_in_one_line_naming_the_cache(caches, network, hub_card):
    from bench.data.loading import load_dataset

    folder = cache_dataset(caches / "datasets", DATASET, ROWS)
    for arrow in folder.rglob("*-train.arrow"):
        arrow.unlink()
    with pytest.raises(BenchError) as err:
        load_dataset("tinyhub")
    message = str(err.value)
    assert "\n" not in message and f"read from the datasets cache {caches / 'datasets'}" in message


@pytest.mark.parametrize("name", ["sst2", "20_newsgroups", "AgNews", "TRECCoarse", "imdb-plain"])
def test_the_cache_folder_name_is_the_one_datasets_uses(name):
    from datasets.naming import camelcase_to_snakecase

    from bench.hub import snake_case

    assert snake_case(name) == camelcase_to_snakecase(name)
