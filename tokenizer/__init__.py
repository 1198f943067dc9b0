"""Joint source-target BPE tokenizer for the encoder-decoder Transformer.

Special tokens and their fixed ids: ``<pad>``=0, ``<unk>``=1, ``<s>``=2 (bos, decoder start), ``</s>``=3
(eos, appended to every sequence). See docs/tokenizer.md.

Loading a saved tokenizer (`tokenizer.loading`) and the BPE itself need transformers and tokenizers only; the
corpus readers and `load_or_train_tokenizer` read corpora through `datasets` (the ``train`` extra) and load on first
use.
"""

import importlib
from typing import TYPE_CHECKING, Any

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
from .dropout import BPEDropout

if TYPE_CHECKING:
    from .corpus import iter_corpus_texts, load_parallel_texts
    from .prepare import load_or_train_tokenizer

# name -> the submodule that defines it, imported on first access
_ON_FIRST_USE = {
    "iter_corpus_texts": ".corpus",
    "load_parallel_texts": ".corpus",
    "load_or_train_tokenizer": ".prepare",
}

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


def __getattr__(name: str) -> Any:
    if name in _ON_FIRST_USE:
        return getattr(importlib.import_module(_ON_FIRST_USE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
