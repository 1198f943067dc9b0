"""Helpers to turn parallel text into model inputs with the loss ignoring label padding (-100)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import BatchEncoding, DataCollatorForSeq2Seq, PreTrainedTokenizerBase

LABEL_PAD_ID = -100  # ignored by torch.nn.CrossEntropyLoss (its default ignore_index)


def seq2seq_collator(
    tokenizer: PreTrainedTokenizerBase,
    model: Any = None,
    pad_to_multiple_of: int | None = None,
    return_tensors: str = "pt",
) -> DataCollatorForSeq2Seq:
    """A `DataCollatorForSeq2Seq` that pads ``labels`` with -100 (ignored by the loss).

    Pass ``model`` (with ``prepare_decoder_input_ids_from_labels``) to also build ``decoder_input_ids``.
    Features are dicts with ``input_ids`` and ``labels`` as produced by
    ``tokenizer(src, text_target=tgt, truncation=True)`` (unpadded).
    """
    return DataCollatorForSeq2Seq(
        tokenizer,
        model=model,
        padding=True,
        label_pad_token_id=LABEL_PAD_ID,
        pad_to_multiple_of=pad_to_multiple_of,
        return_tensors=return_tensors,
    )


def encode_parallel(
    tokenizer: PreTrainedTokenizerBase,
    sources: Sequence[str],
    targets: Sequence[str],
    max_length: int | None = None,
    return_tensors: str | None = "pt",
) -> BatchEncoding:
    """Tokenize aligned source/target texts into ``input_ids``, ``attention_mask`` and ``labels``.

    Batches are padded to the longest sequence (truncated to ``max_length`` if given); padding positions
    of ``labels`` are -100 so that the loss ignores them. Every sequence ends with ``</s>``.
    """
    if len(sources) != len(targets):
        raise ValueError(
            f"sources and targets must be aligned, got {len(sources)} sources and {len(targets)} targets."
        )
    batch = tokenizer(
        list(sources),
        text_target=list(targets),
        padding=True,
        truncation=max_length is not None,
        max_length=max_length,
    )
    pad_id = tokenizer.pad_token_id
    batch["labels"] = [[LABEL_PAD_ID if t == pad_id else t for t in seq] for seq in batch["labels"]]
    return BatchEncoding(dict(batch), tensor_type=return_tensors)
