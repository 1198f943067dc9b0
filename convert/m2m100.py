"""Convert transformers' `M2M100ForConditionalGeneration` (M2M100 and the dense NLLB-200 checkpoints) into a
vanilla-transformer model.

M2M100 is fairseq's pre-LN Transformer; what maps (M2M100Config -> our field):
  * pre-LN layers with a final LayerNorm closing each stack -> `normalize_before=True`;
  * fixed sinusoidal positions, all sines then all cosines of fairseq's frequencies, numbered from the padding
    id + 1 -> `sinusoidal_layout="tensor2tensor"`, `position_offset=pad_token_id + 1`;
  * one vocabulary for source and target, its embedding matrix shared and tied to the output projection (or not:
    decided from the weights), no output bias -> `share_encoder_decoder_embeddings`, `tie_word_embeddings`,
    `output_bias=False`;
  * `scale_embedding`, the sizes, the activation and the special ids are copied; decoding starts from
    `decoder_start_token_id` (`</s>`) and the target language is the forced first token
    (`forced_bos_token_id`, set per request by `inference.languages`).
The tokenizer files (`NllbTokenizer`'s tokenizer.json, `M2M100Tokenizer`'s vocab.json and SentencePiece model)
are copied unchanged; its language codes are what `inference.languages` reads.

Refused by name (`ValueError`): NLLB-MoE (`nllb_moe`: mixture-of-experts feed-forward layers) and any other model
type; our config's validation refuses activations it does not have and an odd `d_model` (where M2M100 pads its
sinusoidal table with zeros). `encoder_layerdrop` / `decoder_layerdrop` only skip layers in training and are not carried over.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import M2M100Config, M2M100ForConditionalGeneration

from vanilla_transformer.modeling import (
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    default_generation_config,
)

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

# model types that a M2M100 folder may be mistaken for, and why they do not convert
REFUSED_TYPES = {
    "nllb_moe": "NLLB-MoE replaces feed-forward layers by mixtures of experts, which this model family does not "
    "have; convert a dense NLLB-200 checkpoint (facebook/nllb-200-distilled-600M, -1.3B, -3.3B) instead",
}


def config_from_m2m100(source: M2M100Config) -> VanillaTransformerConfig:
    """The vanilla-transformer config that computes exactly what `source` computes; `ValueError` for a config
    without the pad id (its positions count from it) or the decoder start id."""
    missing = [name for name in ("pad_token_id", "decoder_start_token_id") if getattr(source, name) is None]
    if missing:
        raise ValueError(f"the M2M100 config has no {' and no '.join(missing)}: set it in config.json")
    pad, start = int(source.pad_token_id or 0), int(source.decoder_start_token_id or 0)
    return VanillaTransformerConfig(
        **bart_config_fields(source),
        normalize_before=True,
        layer_norm_eps=1e-5,
        position_encoding="sinusoidal",
        sinusoidal_layout="tensor2tensor",
        position_offset=pad + 1,
        share_encoder_decoder_embeddings=True,
        output_bias=False,
        **tying_init_and_ids(source, source.init_std, pad),
        decoder_start_token_id=start,
    )


def convert_m2m100_model(
    source: M2M100ForConditionalGeneration,
) -> VanillaTransformerForConditionalGeneration:
    """Build our model with `source`'s weights; both compute the same logits (fp32, within rounding)."""
    config = config_from_m2m100(source.config)
    state = bart_weights(source, config)
    model = build_checked(
        VanillaTransformerForConditionalGeneration,
        config,
        shapes_of(source.state_dict()),
        "the converted config",
    )
    model = load_converted_weights(model, state, "M2M100")
    # the family's decoding defaults (beam 4, early stopping, no pad or <s>), under what the source's own
    # generation config sets (its ids, max_length): exported engines need every setting decided
    given = {
        name: value for name, value in source.generation_config.to_diff_dict().items() if value is not None
    }
    model.generation_config = default_generation_config(config)
    model.generation_config.update(**{k: v for k, v in given.items() if k != "transformers_version"})
    return model


def size_claims(source: dict) -> tuple[list[SizeClaim], tuple[tuple[str, Any, int], ...]]:
    """The sizes a M2M100 config.json (`source`) claims, with the tensors that show them, and the tables built from
    it alone (the sinusoidal positions): `common.check_claimed_sizes`' input."""
    defaults = M2M100Config()
    size = {name: source.get(name, getattr(defaults, name)) for name in BART_SAME_NAME_FIELDS}
    claims = bart_size_claims(size, ("model.shared.weight", "shared.weight", "encoder.embed_tokens.weight"))
    positions = source.get("max_position_embeddings", defaults.max_position_embeddings)
    return claims, (bart_position_table(size, positions), *common_tables(source))


def convert_m2m100_checkpoint(src_dir: str | Path, out_dir: str | Path, trust_pickle: bool = False) -> Path:
    """Convert a saved `M2M100ForConditionalGeneration` folder (M2M100, NLLB-200) into a vanilla-transformer folder
    with remote code. The tokenizer files are copied unchanged, so `AutoTokenizer.from_pretrained(out_dir)` still
    loads `NllbTokenizer` / `M2M100Tokenizer`. The source is loaded by `common.load_source_model` (sizes checked
    first; safetensors only unless `trust_pickle`)."""
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    expected = "the folder of a saved M2M100ForConditionalGeneration (M2M100 or NLLB-200)"
    try:
        source = read_source_config(src_dir, "m2m_100", "M2M100", expected)
    except ValueError:
        model_type = _model_type(src_dir)
        if model_type in REFUSED_TYPES:
            raise ValueError(f"{src_dir} holds a {model_type!r} model: {REFUSED_TYPES[model_type]}") from None
        raise
    claims, tables = size_claims(source)
    model = load_source_model(M2M100ForConditionalGeneration, src_dir, claims, trust_pickle, tables)
    return write_converted_folder(convert_m2m100_model(model), src_dir, out_dir)


def _model_type(folder: Path) -> Any:
    """The model_type of `folder`'s config.json (None when it cannot be read)."""
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (ValueError, OSError, AttributeError):
        return None
