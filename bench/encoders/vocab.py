"""Word-level tokenizers built from the training texts (for tiny test models and TextCNN)."""

from __future__ import annotations

import re
from collections import Counter

from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def build_vocab(texts: list[str], max_size: int = 30000, min_count: int = 1) -> dict[str, int]:
    """Word -> id for the most frequent lower-cased words of `texts` (ties broken alphabetically)."""
    counts = Counter(w for text in texts for w in WORD.findall(text.lower()))
    words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    vocab = {token: i for i, token in enumerate(SPECIALS)}
    for word in words[: max_size - len(SPECIALS)]:
        vocab[word] = len(vocab)
    return vocab


def word_tokenizer(vocab: dict[str, int], special_tokens: bool = True) -> PreTrainedTokenizerFast:
    """A Hugging Face fast tokenizer over a fixed word vocabulary ([CLS] ... [SEP] when asked)."""
    backend = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    if special_tokens:
        backend.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]",
    )
