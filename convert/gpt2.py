"""Convert transformers' `GPT2LMHeadModel` (e.g. the `gpt2` checkpoints) into a vanilla-transformer decoder-only model.

GPT-2 is our decoder-only network with these choices, which the conversion maps exactly:
  * pre-LN with a final LayerNorm (`ln_1`, `ln_2`, `ln_f`) -> `normalize_before=True`;
  * learned positions (`wpe`) and unscaled token embeddings (`wte`) -> `position_encoding="learned"`,
    `scale_embedding=False`;
  * `gelu_new` (or the config's activation), `layer_norm_epsilon`, no output bias, tied output projection;
  * its `Conv1D` layers store weights as (in, out), the transpose of `nn.Linear`'s (out, in), and the attention's
    `c_attn` is the query, key and value projections side by side: it is split into `q_proj`, `k_proj`, `v_proj`;
  * attention scores are scaled by 1 / sqrt(head_dim), as ours.
GPT-2 has one more dropout than we do (`embd_pdrop` on the embeddings besides `resid_pdrop`): ours uses `resid_pdrop`
for both, which changes nothing at inference. `reorder_and_upcast_attn` only changes fp16 rounding. Variants that
compute something else (`scale_attn_weights=False`, `scale_attn_by_inverse_layer_idx=True`, cross-attention) are
refused.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging

from vanilla_transformer.modeling import (
    VanillaDecoderOnlyConfig,
    VanillaDecoderOnlyForCausalLM,
    causal_lm_generation_config,
)

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

logger = logging.get_logger(__name__)


def config_from_gpt2(gpt2: GPT2Config) -> VanillaDecoderOnlyConfig:
    """The decoder-only config that computes exactly what a `GPT2LMHeadModel` with config `gpt2` computes."""
    unsupported = []
    if not gpt2.scale_attn_weights:
        unsupported.append("scale_attn_weights=False (ours always scales scores by 1/sqrt(head_dim))")
    if gpt2.scale_attn_by_inverse_layer_idx:
        unsupported.append("scale_attn_by_inverse_layer_idx=True")
    if gpt2.add_cross_attention:
        unsupported.append("add_cross_attention=True (a decoder-only model has no encoder)")
    if unsupported:
        raise ValueError("this GPT-2 variant cannot be converted: " + "; ".join(unsupported))
    if gpt2.embd_pdrop != gpt2.resid_pdrop:
        logger.warning(
            "GPT-2 embd_pdrop=%s differs from resid_pdrop=%s; the converted model uses dropout=%s for both "
            "(inference is unaffected)",
            gpt2.embd_pdrop,
            gpt2.resid_pdrop,
            gpt2.resid_pdrop,
        )
    return VanillaDecoderOnlyConfig(
        vocab_size=gpt2.vocab_size,
        d_model=gpt2.n_embd,
        decoder_layers=gpt2.n_layer,
        decoder_attention_heads=gpt2.n_head,
        decoder_ffn_dim=gpt2.n_inner if gpt2.n_inner is not None else 4 * gpt2.n_embd,
        activation_function=gpt2.activation_function,
        dropout=float(gpt2.resid_pdrop),
        attention_dropout=float(gpt2.attn_pdrop),
        activation_dropout=0.0,
        normalize_before=True,
        layer_norm_eps=float(gpt2.layer_norm_epsilon),
        position_encoding="learned",
        max_position_embeddings=gpt2.n_positions,
        scale_embedding=False,
        output_bias=False,
        **{
            **tying_init_and_ids(gpt2, gpt2.initializer_range, gpt2.pad_token_id),
            **_ids_outside_vocabulary(gpt2.to_dict(), gpt2.vocab_size),
        },
    )


SPECIAL_IDS = ("pad_token_id", "bos_token_id", "eos_token_id")


def _ids_outside_vocabulary(settings: dict, vocab_size: int) -> dict:
    """{field: None} for the special ids of `settings` that lie outside [0, vocab_size). GPT2Config keeps its
    default bos = eos = 50256 whatever `vocab_size` is; GPT-2 never embeds such an id (it cannot be in the input)
    and never generates it, so leaving it unset computes and generates exactly the same."""
    outside = {}
    for field in SPECIAL_IDS:
        ids = settings.get(field)
        listed = ids if isinstance(ids, list) else [ids]
        if ids is not None and any(not isinstance(i, int) or not 0 <= i < vocab_size for i in listed):
            logger.info("GPT-2 %s=%s lies outside its vocabulary of %d: left unset", field, ids, vocab_size)
            outside[field] = None
    return outside


def _converted_state(gpt2: GPT2LMHeadModel) -> dict[str, torch.Tensor]:
    """GPT-2's parameters under our names, Conv1D weights (in, out) transposed to Linear's (out, in)."""
    source = gpt2.state_dict()
    width = gpt2.config.n_embd
    state = {
        "model.embed_tokens.weight": source["transformer.wte.weight"],
        "model.embed_positions.weight": source["transformer.wpe.weight"],
        "model.layer_norm.weight": source["transformer.ln_f.weight"],
        "model.layer_norm.bias": source["transformer.ln_f.bias"],
        "lm_head.weight": source["lm_head.weight"],
    }
    for i in range(gpt2.config.n_layer):
        block, ours = f"transformer.h.{i}.", f"model.layers.{i}."
        qkv_weight = source[block + "attn.c_attn.weight"]  # (C, 3C): [q | k | v] along the output axis
        qkv_bias = source[block + "attn.c_attn.bias"]  # (3C,)
        for j, name in enumerate(("q_proj", "k_proj", "v_proj")):
            state[f"{ours}self_attn.{name}.weight"] = qkv_weight[:, j * width : (j + 1) * width].t()  # (C, C)
            state[f"{ours}self_attn.{name}.bias"] = qkv_bias[j * width : (j + 1) * width]
        for theirs, mine in (
            ("attn.c_proj", "self_attn.out_proj"),
            ("mlp.c_fc", "ffn.fc1"),
            ("mlp.c_proj", "ffn.fc2"),
        ):
            state[f"{ours}{mine}.weight"] = source[f"{block}{theirs}.weight"].t()  # (in, out) -> (out, in)
            state[f"{ours}{mine}.bias"] = source[f"{block}{theirs}.bias"]
        for theirs, mine in (("ln_1", "self_attn_layer_norm"), ("ln_2", "final_layer_norm")):
            state[f"{ours}{mine}.weight"] = source[f"{block}{theirs}.weight"]
            state[f"{ours}{mine}.bias"] = source[f"{block}{theirs}.bias"]
    return {name: tensor.contiguous() for name, tensor in state.items()}


def convert_gpt2(model_or_folder: GPT2LMHeadModel | str | Path) -> VanillaDecoderOnlyForCausalLM:
    """Our causal LM with the weights of a `GPT2LMHeadModel` (an object, or the folder of a saved one), in fp32 and
    eval mode; both compute the same logits (fp32, within rounding) and generate the same tokens. The generation
    config is our causal-LM default updated with the GPT-2 model's own settings."""
    gpt2 = (
        model_or_folder if isinstance(model_or_folder, GPT2LMHeadModel) else _load_gpt2(Path(model_or_folder))
    )
    config = config_from_gpt2(gpt2.config)
    # decide tying from the weights themselves, as the converter of Marian does
    config.tie_word_embeddings = torch.equal(gpt2.lm_head.weight, gpt2.transformer.wte.weight)
    model = build_checked(
        VanillaDecoderOnlyForCausalLM, config, shapes_of(gpt2.state_dict()), "the converted config"
    )
    state = _converted_state(gpt2)
    if config.tie_word_embeddings:
        del state["lm_head.weight"]
    model = load_converted_weights(model, state, "GPT-2")
    generation_config = causal_lm_generation_config(config)
    source_settings = {  # what the GPT-2 model sets itself, less bookkeeping ("_from_model_config", version)
        key: value
        for key, value in gpt2.generation_config.to_diff_dict().items()
        if not key.startswith("_") and key != "transformers_version"
    }
    generation_config.update(
        **{**source_settings, **_ids_outside_vocabulary(source_settings, config.vocab_size)}
    )
    model.generation_config = generation_config
    return model


def size_claims(source: dict) -> list[SizeClaim]:
    """The sizes a GPT-2 config.json (`source`) claims, with the tensors that show them
    (`common.check_claimed_sizes`' input)."""
    defaults = GPT2Config()
    size = {
        name: source.get(name, getattr(defaults, name))
        for name in ("vocab_size", "n_embd", "n_positions", "n_layer")
    }
    claims = [
        SizeClaim("vocab_size", size["vocab_size"], (("wte.weight", 0),)),
        SizeClaim("n_embd", size["n_embd"], (("wte.weight", 1),)),
        SizeClaim("n_positions", size["n_positions"], (("wpe.weight", 0),)),
        SizeClaim("n_layer", size["n_layer"], (("h.", None),)),
    ]
    inner = source.get("n_inner") or (4 * size["n_embd"] if isinstance(size["n_embd"], int) else None)
    if isinstance(size["n_layer"], int) and size["n_layer"] > 0:
        claims.append(SizeClaim("n_inner", inner, (("h.0.mlp.c_fc.weight", 1),)))
    return claims


def _load_gpt2(folder: Path, trust_pickle: bool = False) -> GPT2LMHeadModel:
    """The `GPT2LMHeadModel` saved in `folder` (`common.load_source_model`: sizes checked first, safetensors
    only unless `trust_pickle`); `FileNotFoundError` / `ValueError` saying what the folder lacks."""
    source = read_source_config(folder, "gpt2", "GPT-2", "the folder of a saved GPT2LMHeadModel")
    return load_source_model(
        GPT2LMHeadModel, folder, size_claims(source), trust_pickle, common_tables(source)
    )


def convert_gpt2_checkpoint(src_dir: str | Path, out_dir: str | Path, trust_pickle: bool = False) -> Path:
    """Convert a saved `GPT2LMHeadModel` folder into a decoder-only folder with remote code (loads with
    `AutoModelForCausalLM.from_pretrained(out_dir, trust_remote_code=True)`). The tokenizer files are copied
    unchanged, so `AutoTokenizer.from_pretrained(out_dir)` still loads GPT-2's tokenizer."""
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    return write_converted_folder(convert_gpt2(_load_gpt2(src_dir, trust_pickle)), src_dir, out_dir)
