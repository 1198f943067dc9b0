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
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    src_lang: str | None = None,
    tgt_lang: str | None = None,
) -> list[list[int]]:
    """The token ids of `texts` as the model reads them: the tokenizer's special tokens added, the languages of a
    multilingual model marked (`inference.languages.source_side`: ``src_lang`` and ``tgt_lang`` as
    `inference.languages.resolve_languages` returns them), and sources longer than the model accepts
    (`modeling.max_source_length`) truncated by the tokenizer, with one warning that gives the count."""
    from vanilla_transformer.modeling import max_source_length

    from .languages import source_side

    limit = max_source_length(model.config, tokenizer)
    with source_side(tokenizer, texts, src_lang, tgt_lang) as texts:
        encoded = [list(ids) for ids in tokenizer(list(texts), add_special_tokens=True)["input_ids"]]
        too_long = [k for k, ids in enumerate(encoded) if limit is not None and len(ids) > limit]
        if too_long:
            shortened = tokenizer(
                [texts[k] for k in too_long], add_special_tokens=True, truncation=True, max_length=limit
            )["input_ids"]
            for k, ids in zip(too_long, shortened):
                encoded[k] = list(ids)
    if too_long:
        logger.warning(
            "%d of %d input lines were longer than %d tokens (the model maximum) and were truncated",
            len(too_long),
            len(encoded),
            limit,
        )
    return encoded
