"""Joint source-target BPE tokenizer for the encoder-decoder Transformer.

Special tokens and their fixed ids: ``<pad>``=0, ``<unk>``=1, ``<s>``=2 (bos, decoder start), ``</s>``=3
(eos, appended to every sequence). See docs/tokenizer.md.
"""

from .bpe import (
    BOS_ID,
    BOS_TOKEN,
    BYTE_TOKENS,
    DEFAULT_MIN_FREQUENCY,
    DEFAULT_VOCAB_SIZE,
    EOS_ID,
    EOS_TOKEN,
    PAD_ID,
    PAD_TOKEN,
    SPECIAL_TOKENS,
    UNK_ID,
    UNK_TOKEN,
    normalize_text,
    train_bpe_tokenizer,
    wrap_backend_tokenizer,
)
from .corpus import iter_corpus_texts, load_parallel_texts
from .dropout import BPEDropout
from .prepare import load_or_train_tokenizer

__all__ = [
    "BOS_ID",
    "BOS_TOKEN",
    "BPEDropout",
    "BYTE_TOKENS",
    "DEFAULT_MIN_FREQUENCY",
    "DEFAULT_VOCAB_SIZE",
    "EOS_ID",
    "EOS_TOKEN",
    "PAD_ID",
    "PAD_TOKEN",
    "SPECIAL_TOKENS",
    "UNK_ID",
    "UNK_TOKEN",
    "iter_corpus_texts",
    "load_or_train_tokenizer",
    "load_parallel_texts",
    "normalize_text",
    "train_bpe_tokenizer",
    "wrap_backend_tokenizer",
]
