"""The Marian peer of the benchmarks: a `MarianConfig` with the sizes of one `training.presets` preset, and the
`MarianMTModel` with the weights of one of our models (`marian_peer`)."""

from __future__ import annotations

import copy
from typing import Any

from transformers import MarianConfig, MarianMTModel

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


def marian_peer(model: Any) -> MarianMTModel:
    """transformers' `MarianMTModel` computing exactly what our encoder-decoder ``model`` computes, with its
    weights: the inverse of `modeling.convert_marian.convert_marian_model`, and our position table (any
    sinusoidal layout, learned positions) written into Marian's. `ValueError` naming the option Marian cannot
    express (pre-LN, a LayerNorm on the embeddings, rotary or no positions, a LayerNorm epsilon other than
    Marian's 1e-5, separate but tied-to-source vocabularies, token types)."""
    import torch

    config = model.config
    problems = [
        f"{name}={getattr(config, name, None)!r}"
        for name, fine in (
            ("normalize_before", not config.normalize_before),
            ("layernorm_embedding", not config.layernorm_embedding),
            ("position_encoding", config.position_encoding in ("sinusoidal", "learned")),
            ("layer_norm_eps", config.layer_norm_eps == 1e-5),
            ("type_vocab_size", not getattr(config, "type_vocab_size", 0)),
        )
        if not fine
    ]
    if problems:
        raise ValueError(
            f"transformers' Marian cannot compute this model ({', '.join(problems)}): it is post-LN with "
            "absolute positions and no embedding LayerNorm"
        )
    ids = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")
    marian_config = MarianConfig(
        **{name: getattr(config, name) for name in SAME_NAME_FIELDS},
        **{name: getattr(config, name) for name in ids},
        max_position_embeddings=config.max_position_embeddings,
        scale_embedding=bool(config.scale_embedding),
        share_encoder_decoder_embeddings=bool(config.share_encoder_decoder_embeddings),
        tie_word_embeddings=bool(config.tie_word_embeddings),
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        forced_eos_token_id=None,
    )
    marian_config._attn_implementation = "sdpa"
    marian = MarianMTModel(marian_config).eval()
    ours = model.state_dict()
    with torch.no_grad():
        for name, tensor in marian.state_dict().items():
            if "embed_positions" in name:
                side = model.get_encoder() if ".encoder." in name else model.get_decoder()
                table = side.embed_positions.encodings()
                tensor.copy_(table[: tensor.shape[0]])
                continue
            source = name
            for sub in ("fc1", "fc2"):
                source = source.replace(f".{sub}.", f".ffn.{sub}.")
            if source == "final_logits_bias":
                bias = ours.get("final_logits_bias")
                tensor.copy_(bias.reshape(tensor.shape) if bias is not None else torch.zeros_like(tensor))
            elif source == "model.shared.weight" and source not in ours:
                tensor.copy_(ours["model.encoder.embed_tokens.weight"])
            else:
                tensor.copy_(ours[source])
    marian.generation_config = copy.deepcopy(model.generation_config)
    return marian


# the position tables of a saved peer: Marian leaves them out of its checkpoint and rebuilds its own layout on load
POSITIONS_FILE = "positions.safetensors"


def save_marian_peer(marian: MarianMTModel, folder: Any) -> None:
    """``marian.save_pretrained(folder)`` plus its position tables (`POSITIONS_FILE`), which Marian does not save
    and would rebuild in its own sinusoidal layout (sines then cosines) when loaded."""
    from pathlib import Path

    from safetensors.torch import save_file

    marian.save_pretrained(folder)
    tables = {
        name: tensor.detach().contiguous()
        for name, tensor in marian.state_dict().items()
        if name.endswith("embed_positions.weight")
    }
    save_file(tables, str(Path(folder) / POSITIONS_FILE))


def load_marian_peer(folder: Any, **kwargs: Any) -> MarianMTModel:
    """A peer saved by `save_marian_peer`, in eval mode, with its own position tables back."""
    from pathlib import Path

    import torch
    from safetensors.torch import load_file

    marian = MarianMTModel.from_pretrained(str(folder), **kwargs).eval()
    parameters = marian.state_dict()
    with torch.no_grad():
        for name, table in load_file(str(Path(folder) / POSITIONS_FILE)).items():
            parameters[name].copy_(table)
    return marian
