"""Sources as the model reads them: THE source encoding of translation (`inference.translate`) and forced decoding
(`inference.forced_decoding`): the tokenizer's special tokens added, a source longer than the model accepts
truncated, with one warning."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .loading import ModelStandIn

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)


def encode_sources(
    model: PreTrainedModel | ModelStandIn, tokenizer: PreTrainedTokenizerBase, texts: Sequence[str]
) -> list[list[int]]:
    """The token ids of `texts` as the model reads them: the tokenizer's special tokens added, and sources longer
    than the model accepts (`modeling.max_source_length`) truncated by the tokenizer, with one warning that gives
    the count."""
    from vanilla_transformer.modeling import max_source_length

    limit = max_source_length(model.config, tokenizer)
    encoded = [list(ids) for ids in tokenizer(list(texts), add_special_tokens=True)["input_ids"]]
    too_long = [k for k, ids in enumerate(encoded) if limit is not None and len(ids) > limit]
    if too_long:
        shortened = tokenizer(
            [texts[k] for k in too_long], add_special_tokens=True, truncation=True, max_length=limit
        )["input_ids"]
        for k, ids in zip(too_long, shortened):
            encoded[k] = list(ids)
        logger.warning(
            "%d of %d input lines were longer than %d tokens (the model maximum) and were truncated",
            len(too_long),
            len(encoded),
            limit,
        )
    return encoded
