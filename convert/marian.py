"""Convert transformers' `MarianMTModel` (e.g. any OPUS-MT checkpoint) into a vanilla-transformer model.

Marian implements the same architecture with a few differences that the conversion maps exactly:
  * its sinusoidal table stores all sines before all cosines -> `sinusoidal_layout="concatenated"`;
  * it adds a (frozen) `final_logits_bias` -> our trained output bias;
  * OPUS-MT checkpoints use swish (= SiLU) -> `activation_function` is copied;
  * source and target embeddings may be shared or not -> `share_encoder_decoder_embeddings`,
    `decoder_vocab_size`;
  * decoding starts from the pad id -> `decoder_start_token_id` is copied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import GenerationConfig, MarianConfig, MarianMTModel

from vanilla_transformer.modeling import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration

from .common import (
    SizeClaim,
    build_checked,
    common_tables,
    load_converted_weights,
    load_source_model,
    read_source_config,
    shapes_of,
    tying_init_and_ids,
    write_converted_folder,
)

# the MarianConfig fields that our config has under the same name and meaning, copied as they are
SAME_NAME_FIELDS = ("vocab_size", "decoder_vocab_size", "d_model", "activation_function") + tuple(
    f"{side}_{field}" for side in ("encoder", "decoder") for field in ("layers", "attention_heads", "ffn_dim")
)


def config_from_marian(marian: MarianConfig) -> VanillaTransformerConfig:
    """The vanilla-transformer config that computes exactly what `marian` computes."""
    if getattr(marian, "normalize_before", False) or getattr(marian, "add_final_layer_norm", False):
        raise ValueError("pre-LN Marian variants are not supported by the converter (expected post-LN)")
    return VanillaTransformerConfig(
        **{name: getattr(marian, name) for name in SAME_NAME_FIELDS},
        **{
            name: float(getattr(marian, name))
            for name in ("dropout", "attention_dropout", "activation_dropout")
        },
        normalize_before=False,
        layer_norm_eps=1e-5,
        position_encoding="sinusoidal",
        sinusoidal_layout="concatenated",
        max_position_embeddings=marian.max_position_embeddings,
        scale_embedding=bool(marian.scale_embedding),
        share_encoder_decoder_embeddings=bool(marian.share_encoder_decoder_embeddings),
        output_bias=True,
        **tying_init_and_ids(marian, marian.init_std, marian.pad_token_id),
        decoder_start_token_id=marian.decoder_start_token_id,
    )


def _our_name(name: str) -> str | None:
    """Marian parameter name -> ours (None: not a parameter here, e.g. the fixed position tables)."""
    if "embed_positions" in name:
        return None
    for sub in ("fc1", "fc2"):
        name = name.replace(f".{sub}.", f".ffn.{sub}.")
    return name


def convert_marian_model(marian: MarianMTModel) -> VanillaTransformerForConditionalGeneration:
    """Build our model with `marian`'s weights; both compute the same logits (fp32, within rounding)."""
    config = config_from_marian(marian.config)
    # Decide sharing and tying from the weights themselves: with tie_word_embeddings=False, transformers'
    # Marian keeps separate encoder and decoder embedding matrices even when its config says "shared".
    inner = marian.model
    encoder_embed, decoder_embed = inner.encoder.embed_tokens.weight, inner.decoder.embed_tokens.weight
    config.share_encoder_decoder_embeddings = encoder_embed.shape == decoder_embed.shape and torch.equal(
        encoder_embed, decoder_embed
    )
    config.tie_word_embeddings = marian.lm_head.weight.shape == decoder_embed.shape and torch.equal(
        marian.lm_head.weight, decoder_embed
    )
    model = build_checked(
        VanillaTransformerForConditionalGeneration,
        config,
        shapes_of(marian.state_dict()),
        "the converted config",
    )
    state = {}
    for name, tensor in marian.state_dict().items():
        ours = _our_name(name)
        if ours is None or (ours == "model.shared.weight" and not config.share_encoder_decoder_embeddings):
            continue
        state[ours] = tensor.reshape(-1) if ours == "final_logits_bias" else tensor
    model = load_converted_weights(model, state, "Marian")
    try:
        model.generation_config = GenerationConfig.from_dict(marian.generation_config.to_dict())
    except (AttributeError, ValueError):
        pass
    return model


def size_claims(source: dict) -> tuple[list[SizeClaim], tuple[tuple[str, Any, int], ...]]:
    """The sizes a Marian config.json (`source`) claims, with the tensors that show them, and the tables built
    from it alone (the sinusoidal positions, not stored): `common.check_claimed_sizes`' input."""
    defaults = MarianConfig()
    size = {name: source.get(name, getattr(defaults, name)) for name in SAME_NAME_FIELDS}
    size["max_position_embeddings"] = source.get("max_position_embeddings", defaults.max_position_embeddings)
    embeddings = ("shared.weight", "encoder.embed_tokens.weight")
    claims = [
        SizeClaim("vocab_size", size["vocab_size"], tuple((name, 0) for name in embeddings)),
        SizeClaim("d_model", size["d_model"], tuple((name, 1) for name in embeddings)),
        SizeClaim(
            "decoder_vocab_size",
            size["decoder_vocab_size"] or size["vocab_size"],
            (("final_logits_bias", 1), ("decoder.embed_tokens.weight", 0), ("lm_head.weight", 0)),
        ),
    ]
    for side in ("encoder", "decoder"):
        layers = size[f"{side}_layers"]
        claims.append(SizeClaim(f"{side}_layers", layers, ((f"{side}.layers.", None),)))
        if isinstance(layers, int) and layers > 0:
            claims.append(
                SizeClaim(f"{side}_ffn_dim", size[f"{side}_ffn_dim"], ((f"{side}.layers.0.fc1.weight", 0),))
            )
    width = size["d_model"] if isinstance(size["d_model"], int) and size["d_model"] > 0 else 1
    return claims, (
        ("max_position_embeddings", size["max_position_embeddings"], width),
        *common_tables(source),
    )


def convert_marian_checkpoint(src_dir: str | Path, out_dir: str | Path, trust_pickle: bool = False) -> Path:
    """Convert a saved `MarianMTModel` folder into a vanilla-transformer folder with remote code. The
    tokenizer files are copied unchanged, so `AutoTokenizer.from_pretrained(out_dir)` still loads Marian's
    tokenizer. The source is loaded by `common.load_source_model` (sizes checked first; safetensors
    only unless `trust_pickle`)."""
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    source = read_source_config(src_dir, "marian", "Marian", "the folder of a saved MarianMTModel")
    claims, tables = size_claims(source)
    marian = load_source_model(MarianMTModel, src_dir, claims, trust_pickle, tables)
    return write_converted_folder(convert_marian_model(marian), src_dir, out_dir)
