"""The tokenizer of a training run: a given one, the one an earlier run saved, or a joint BPE trained now."""

from __future__ import annotations

import logging
from collections.abc import Sized
from pathlib import Path
from typing import Any

import datasets
from huggingface_hub.utils import HFValidationError, validate_repo_id
from transformers import PreTrainedTokenizerBase

from vanilla_transformer.corpus import SOURCE, TARGET

from .bpe import BOS_ID, BOS_TOKEN, EOS_ID, PAD_ID, train_bpe_tokenizer
from .corpus import ColumnTexts
from .loading import load_tokenizer

logger = logging.getLogger(__name__)


def load_or_train_tokenizer(
    tokenizer: str | None,
    folder: Path,
    train_split: datasets.Dataset | datasets.IterableDataset,
    vocab_size: int,
    denoising_tokens: bool = False,
    han_characters: bool = False,
    model_config: Any = None,
) -> PreTrainedTokenizerBase:
    """The tokenizer for a model trained on ``train_split``.

    ``tokenizer`` (a folder or Hub name) when given; else the tokenizer saved in ``folder`` (it has a
    ``tokenizer.json``), so a resumed or repeated run reuses it; else a joint BPE of ``vocab_size`` tokens
    trained on the ``source`` and ``target`` texts of ``train_split`` (read from Arrow in batches: `ColumnTexts`)
    and saved to ``folder``, with ``<mask>`` and the T5 sentinels when ``denoising_tokens`` and one piece per Han
    character when ``han_characters`` (`train_bpe_tokenizer`). A given tokenizer is whatever `AutoTokenizer`
    loads (a ``tokenizer.json``, or Marian's ``source.spm``/``target.spm``/``vocab.json``).

    ``model_config``: the configuration of the existing model the tokenizer feeds (``--init_from``'s); the
    tokenizer must fit it (`tokenizer_fit_problem`). Without it, the model is new and the tokenizer must have the
    special ids a new model expects.

    Raises:
        ValueError: ``tokenizer`` is neither a folder nor a well-formed Hub name, the folder it names has no
            tokenizer, the tokenizer does not fit ``model_config``, or (a new model) its special ids are not
            ``<pad>`` 0, ``<s>`` 2 (decoder start), ``</s>`` 3.
    """
    if tokenizer is not None:
        if (problem := given_tokenizer_problem(tokenizer)) is not None:
            raise ValueError(problem + ".")
        where, loaded = tokenizer, load_tokenizer(tokenizer)
    elif (Path(folder) / "tokenizer.json").exists():
        logger.info("Reusing the tokenizer in %s", folder)
        where, loaded = str(folder), load_tokenizer(folder)
    else:
        pairs = (
            f"{len(train_split)} training pairs" if isinstance(train_split, Sized) else "the training pairs"
        )
        logger.info("Training a %d-token joint BPE tokenizer on %s", vocab_size, pairs)
        texts = ColumnTexts(train_split, (SOURCE, TARGET))  # read from Arrow in batches, never held whole
        where, loaded = (
            str(folder),
            train_bpe_tokenizer(
                texts, vocab_size=vocab_size, denoising_tokens=denoising_tokens, han_characters=han_characters
            ),
        )
        loaded.save_pretrained(str(folder))
    if model_config is not None:
        if (problem := tokenizer_fit_problem(loaded, model_config)) is not None:
            raise ValueError(f"Tokenizer {where!r}: {problem}.")
        return loaded
    ids = {
        "pad": loaded.pad_token_id,
        BOS_TOKEN: loaded.convert_tokens_to_ids(BOS_TOKEN),
        "eos": loaded.eos_token_id,
    }
    if ids != {"pad": PAD_ID, BOS_TOKEN: BOS_ID, "eos": EOS_ID}:
        fix = "pass another --tokenizer or leave it unset" if tokenizer is not None else f"delete {where!r}"
        raise ValueError(
            f"Tokenizer {where!r} has special ids {ids}; the model expects pad {PAD_ID}, {BOS_TOKEN} {BOS_ID}, "
            f"</s> {EOS_ID}. Train one with vanilla-transformer train-tokenizer, or {fix} to train one here."
        )
    return loaded


# a folder holds a tokenizer when it has one of these (what `AutoTokenizer` reads first)
TOKENIZER_MARKERS = ("tokenizer.json", "tokenizer_config.json")


def has_tokenizer(folder: str | Path) -> bool:
    """Whether ``folder`` holds a tokenizer `AutoTokenizer` can load: a ``tokenizer.json``, or a
    ``tokenizer_config.json`` naming its class and files (Marian's ``source.spm``/``target.spm``/``vocab.json``)."""
    return any((Path(folder) / name).is_file() for name in TOKENIZER_MARKERS)


def tokenizer_fit_problem(tokenizer: PreTrainedTokenizerBase, config: Any) -> str | None:
    """Why ``tokenizer`` does not fit the model of ``config``, or None: more tokens than the model's vocabulary,
    or pad/eos ids other than the model's (`check_vocabulary`, the one check every loader makes); a separate
    target vocabulary (Marian's ``target_vocab.json``) larger than the decoder's (``decoder_vocab_size``)."""
    from vanilla_transformer.modeling.pipeline_vanilla_transformer import check_vocabulary

    try:
        check_vocabulary(config, tokenizer)
    except ValueError as error:
        return str(error).rstrip(".")
    target = (
        getattr(tokenizer, "target_encoder", None) if getattr(tokenizer, "separate_vocabs", False) else None
    )
    decoder_size = getattr(config, "decoder_vocab_size", None)
    if target is not None and decoder_size is not None and len(target) > decoder_size:
        return (
            f"the tokenizer's target vocabulary has {len(target)} tokens but the model's decoder_vocab_size is "
            f"{decoder_size}; use the tokenizer saved with this model"
        )
    return None


def given_tokenizer_problem(tokenizer: str) -> str | None:
    """Why ``tokenizer`` (``--tokenizer``) names no tokenizer, or None: it is neither an existing path nor a
    well-formed Hub name (``name`` or ``namespace/name``), or it is a folder without a tokenizer (`has_tokenizer`)."""
    advice = (
        "pass a tokenizer folder (one saved by vanilla-transformer train-tokenizer or by a training run), or leave it "
        "unset to train one"
    )
    path = Path(tokenizer)
    if path.is_dir() and not has_tokenizer(path):
        return f"--tokenizer {tokenizer!r} has no tokenizer ({' or '.join(TOKENIZER_MARKERS)}); {advice}"
    if not path.exists():
        try:
            validate_repo_id(tokenizer)
        except HFValidationError:
            return f"--tokenizer {tokenizer!r} is neither a folder nor a Hub name; {advice}"
    return None
