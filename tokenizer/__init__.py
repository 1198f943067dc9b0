"""Joint source-target BPE tokenizer for the encoder-decoder Transformer (issue #3).

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
from .seq2seq import LABEL_PAD_ID, encode_parallel, seq2seq_collator

__all__ = [
    "BOS_ID",
    "BOS_TOKEN",
    "BYTE_TOKENS",
    "DEFAULT_MIN_FREQUENCY",
    "DEFAULT_VOCAB_SIZE",
    "EOS_ID",
    "EOS_TOKEN",
    "LABEL_PAD_ID",
    "PAD_ID",
    "PAD_TOKEN",
    "SPECIAL_TOKENS",
    "UNK_ID",
    "UNK_TOKEN",
    "encode_parallel",
    "iter_corpus_texts",
    "load_parallel_texts",
    "normalize_text",
    "seq2seq_collator",
    "train_bpe_tokenizer",
    "wrap_backend_tokenizer",
]
