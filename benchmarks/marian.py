"""The Marian peer of the benchmarks: a `MarianConfig` with the sizes of one `training.presets` preset."""

from __future__ import annotations

from transformers import MarianConfig

from vanilla_transformer.convert.marian import SAME_NAME_FIELDS
from vanilla_transformer.tokenizer import BOS_ID, EOS_ID, PAD_ID
from vanilla_transformer.training.presets import build_config


def marian_config(
    preset: str,
    vocab_size: int,
    dropout: float = 0.1,
    *,
    pad_token_id: int = PAD_ID,
    bos_token_id: int | None = BOS_ID,
    decoder_start_token_id: int = BOS_ID,
    eos_token_id: int = EOS_ID,
) -> MarianConfig:
    """A post-LN Marian config with ``preset``'s sizes (``training.presets.PRESETS``: width, layers, heads, FFN,
    position limit), ReLU, scaled and tied embeddings, and ``dropout`` (not the preset's: the peer keeps its own
    recipe; attention and activation dropout 0). The special ids default to our tokenizer's (``<pad>`` 0,
    ``<s>`` 2 as bos and decoder start, ``</s>`` 3); with random weights pass OPUS-MT's (pad = decoder start =
    ``vocab_size - 1``, eos 0, no bos). ``forced_eos_token_id`` is None: every contender stops alike."""
    ours = build_config(preset, vocab_size)  # the preset's sizes, our config's defaults where it sets none
    return MarianConfig(
        # vocabularies, width, layers, heads and FFN: the fields the converter copies (convert.marian)
        **{name: getattr(ours, name) for name in SAME_NAME_FIELDS if name != "activation_function"},
        activation_function="relu",
        dropout=dropout,
        attention_dropout=0.0,
        activation_dropout=0.0,
        max_position_embeddings=ours.max_position_embeddings,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=pad_token_id,
        bos_token_id=bos_token_id,
        decoder_start_token_id=decoder_start_token_id,
        eos_token_id=eos_token_id,
        forced_eos_token_id=None,
    )
