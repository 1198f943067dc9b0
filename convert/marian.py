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

from transformers import GenerationConfig, MarianConfig, MarianMTModel

from vanilla_transformer.modeling import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration

from .common import (
    BART_SAME_NAME_FIELDS,
    SizeClaim,
    bart_config_fields,
    bart_position_table,
    bart_size_claims,
    bart_weights,
    build_checked,
    common_tables,
    load_converted_weights,
    load_source_model,
    read_source_config,
    shapes_of,
    tying_init_and_ids,
    write_converted_folder,
)

# the MarianConfig fields that our config has under the same name and meaning, copied as they are: the BART layout's
# and the target vocabulary (separate source and target vocabularies)
SAME_NAME_FIELDS = BART_SAME_NAME_FIELDS + ("decoder_vocab_size",)


def config_from_marian(marian: MarianConfig) -> VanillaTransformerConfig:
    """The vanilla-transformer config that computes exactly what `marian` computes."""
    if getattr(marian, "normalize_before", False) or getattr(marian, "add_final_layer_norm", False):
        raise ValueError("pre-LN Marian variants are not supported by the converter (expected post-LN)")
    return VanillaTransformerConfig(
        **bart_config_fields(marian, SAME_NAME_FIELDS),
        normalize_before=False,
        layer_norm_eps=1e-5,
        position_encoding="sinusoidal",
        sinusoidal_layout="concatenated",
        share_encoder_decoder_embeddings=bool(marian.share_encoder_decoder_embeddings),
        output_bias=True,
        **tying_init_and_ids(marian, marian.init_std, marian.pad_token_id),
        decoder_start_token_id=marian.decoder_start_token_id,
    )


def convert_marian_model(marian: MarianMTModel) -> VanillaTransformerForConditionalGeneration:
    """Build our model with `marian`'s weights; both compute the same logits (fp32, within rounding)."""
    config = config_from_marian(marian.config)
    state = bart_weights(marian, config)
    # Marian's (1, V) bias row is our (V,) output bias
    state["final_logits_bias"] = state["final_logits_bias"].reshape(-1)
    model = build_checked(
        VanillaTransformerForConditionalGeneration,
        config,
        shapes_of(marian.state_dict()),
        "the converted config",
    )
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
    claims = bart_size_claims(size, ("shared.weight", "encoder.embed_tokens.weight"))
    claims.append(
        SizeClaim(
            "decoder_vocab_size",
            size["decoder_vocab_size"] or size["vocab_size"],
            (("final_logits_bias", 1), ("decoder.embed_tokens.weight", 0), ("lm_head.weight", 0)),
        )
    )
    positions = source.get("max_position_embeddings", defaults.max_position_embeddings)
    return claims, (bart_position_table(size, positions), *common_tables(source))


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
