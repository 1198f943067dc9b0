"""Convert an eole encoder-decoder checkpoint (the folder `eole train` saves: config.json, model.NN.safetensors,
vocab.json and its transforms' files) into a vanilla-transformer model, without eole installed.

What maps, exactly:
  * eole's transformer is pre-LN (`encoder_layer_style="standard"`; its decoder has no other style), with the
    final LayerNorm of each stack -> `normalize_before=True`; LayerNorm "standard" / "standardFP32" and `norm_eps`;
  * positions: "SinusoidalInterleaved" (the paper's table) -> `sinusoidal_layout="interleaved"`;
    "SinusoidalConcat" (sines then cosines, frequencies 10000^(-i/(d/2-1))) -> `"tensor2tensor"`; both scale the
    embeddings by sqrt(d_model); "Learned" -> `position_encoding="learned"` (scaled by sqrt(d_model) only with
    `normalize`: the scale is then folded into the position table, which eole scales too); "Rotary" (full head
    dimension, no scaling) -> `position_encoding="rope"`, with eole's interleaved pairs permuted to our halves in
    the query and key projections (the attention scores are unchanged);
  * biases of the attention and feed-forward projections (`add_qkvbias`, `add_final_linear_bias`,
    `add_ffnbias`; absent = zero), the output bias (`generator_bias`), the activation (relu, gelu, gelu-tanh,
    silu), `share_embeddings` -> `share_encoder_decoder_embeddings`, `share_decoder_embeddings` ->
    `tie_word_embeddings`;
  * the special ids of vocab.json: decoding starts from its `decoder_start_token` (`<s>`), ends at `</s>`,
    pads with `<blank>`;
  * the tokenizer (`eole_tokenizer`): eole's source ids are the vocabulary ids of the source's pieces, with
    no `</s>` (which transformers' MarianTokenizer would append), so the folder gets a `tokenizer.json` that
    reproduces them exactly: with the "sentencepiece" transform, the SentencePiece model's own segmentation
    (a unigram model with its normaliser, scores and whitespace handling) over vocab.json's ids, and no
    transform, the whitespace-separated tokens looked up in vocab.json. Labels (`text_target`) get the same ids
    without `</s>`: append the eos id to train on them. Other transforms (BPE, onmt_tokenize, ...) are refused
    by name.

OpenNMT-py 3.x checkpoints convert through the same mapping (`opennmt.py` renames their tensors and options to
eole's). Every other option is refused by name (`ValueError` naming the option and its value): post-norm encoders (eole's
decoder is always pre-LN, and our residual order is one for both stacks), RMSNorm, gated activations, grouped-query
attention, relative / ALiBi positions, MoE, parallel residuals, sliding windows, ... Sizes come from the weights;
the sizes config.json claims and the vocabularies of vocab.json are checked against them before any model is built.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors import SafetensorError, safe_open

from vanilla_transformer.modeling import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration

from .common import (
    SizeClaim,
    bounded_repr,
    build_checked,
    check_claimed_sizes,
    load_converted_weights,
    read_config_file,
    with_zero_biases,
    write_converted_folder,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

# eole 0.6's defaults for the options it leaves out of a saved config.json (it saves the fields set explicitly)
DEFAULTS: dict[str, Any] = {
    "architecture": "transformer",
    "encoder_type": "transformer",
    "decoder_type": "transformer",
    "encoder_layer_style": "standard",
    "final_encoder_layer_norm": True,
    "heads": 8,
    "heads_kv": None,
    "head_dim": None,
    "attn_scaling": None,
    "layer_norm": "standard",
    "norm_eps": 1e-5,
    "mlp_activation_fn": "relu",
    "add_qkvbias": False,
    "add_ffnbias": False,
    "parallel_residual": False,
    "ffn_layernorm": False,
    "query_norm": False,
    "key_norm": False,
    "value_norm": False,
    "q_gating": False,
    "sliding_window": 0,
    "relative_positions_buckets": 0,
    "num_experts": 0,
    "layer_types": None,
    "num_mtp_heads": 0,
    "LM_type": "causal",
    "share_embeddings": False,
    "share_decoder_embeddings": False,
    "generator_bias": True,
    "generator_function": "softmax",
    "position_encoding_type": "SinusoidalInterleaved",
    "normalize": False,
    "position_shift": 0,
    "embedding_type": "standard",
    "embedding_layer_norm": False,
}
# the option values each refusable option may have (anything else is refused by name)
ACCEPTED: dict[str, tuple[Any, ...]] = {
    "architecture": ("transformer",),
    "encoder_type": ("transformer",),
    "decoder_type": ("transformer",),
    "encoder_layer_style": ("standard",),
    "final_encoder_layer_norm": (True,),
    "heads_kv": (None,),
    "attn_scaling": (None,),
    "layer_norm": ("standard", "standardFP32"),
    "parallel_residual": (False,),
    "ffn_layernorm": (False,),
    "query_norm": (False,),
    "key_norm": (False,),
    "value_norm": (False,),
    "q_gating": (False,),
    "sliding_window": (0,),
    "relative_positions_buckets": (0,),
    "num_experts": (0,),
    "layer_types": (None,),
    "num_mtp_heads": (0,),
    "LM_type": ("causal",),
    "generator_function": ("softmax",),
    "position_encoding_type": ("SinusoidalInterleaved", "SinusoidalConcat", "Learned", "Rotary"),
    "position_shift": (0,),
    "embedding_type": ("standard",),
    "embedding_layer_norm": (False,),
}
WHY_REFUSED = {
    "encoder_layer_style": "eole's decoder is always pre-LN and our residual order is one for both stacks",
    "final_encoder_layer_norm": "a pre-LN stack here ends with a LayerNorm",
    "heads_kv": "grouped-query attention has no field here",
    "layer_norm": "only LayerNorm is expressible (no RMSNorm)",
    "position_encoding_type": "relative and ALiBi positions have no field here",
}
# eole activation -> ours (transformers' ACT2FN names computing the same function)
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu-tanh": "gelu_new", "silu": "silu"}
# sinusoidal position types -> our `sinusoidal_layout`
SINUSOIDAL_LAYOUTS = {"SinusoidalInterleaved": "interleaved", "SinusoidalConcat": "tensor2tensor"}
# eole's sinusoidal table length (PositionalEncoding's max_len)
SINUSOIDAL_POSITIONS = 5000
ROPE_ACCEPTED = {
    "rotary_dim": (0, None),
    "scaling_type": (None,),
    "interleave_local": (0, None),
    "xdrope_section": (None,),
    "partial_rotary_factor": (0.0, 0, None),
    "multidimensional_rope": (False, None),
    "rotary_dim_global": (0, None),
}
SIDES = {"encoder": "src", "decoder": "tgt"}

# eole parameter name (after "encoder.transformer_layers.N." / "decoder.transformer_layers.N.") -> ours
LAYER_NAMES = {
    "input_layernorm": "self_attn_layer_norm",
    "self_attn.linear_query": "self_attn.q_proj",
    "self_attn.linear_keys": "self_attn.k_proj",
    "self_attn.linear_values": "self_attn.v_proj",
    "self_attn.final_linear": "self_attn.out_proj",
    "precontext_layernorm": "encoder_attn_layer_norm",
    "context_attn.linear_query": "encoder_attn.q_proj",
    "context_attn.linear_keys": "encoder_attn.k_proj",
    "context_attn.linear_values": "encoder_attn.v_proj",
    "context_attn.final_linear": "encoder_attn.out_proj",
    "post_attention_layernorm": "final_layer_norm",
    "mlp.gate_up_proj": "ffn.fc1",
    "mlp.down_proj": "ffn.fc2",
}
WEIGHTS_PATTERN = "model.*.safetensors"
# transforms that only filter or clean training examples: the tokenizer does not reproduce them
FILTER_TRANSFORMS = ("filtertoolong",)
# sentencepiece transform options that change the pieces (a restricted vocabulary), with their neutral values
SENTENCEPIECE_NEUTRAL = {"src_subword_vocab": ("", None), "tgt_subword_vocab": ("", None)}


def read_eole_folder(folder: Path) -> tuple[dict, dict]:
    """(config.json, vocab.json) of the eole checkpoint `folder`; `FileNotFoundError` / `ValueError` saying what to
    pass when they are missing or not eole's."""
    files = {}
    for name in ("config.json", "vocab.json"):
        files[name] = read_config_file(
            folder / name,
            "the folder an eole training run saved (config.json, vocab.json and model.00.safetensors)",
        )
    config, vocab = files["config.json"], files["vocab.json"]
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise ValueError(f"{folder / 'config.json'} has no 'model' section: it is not an eole config")
    if not isinstance(vocab, dict) or not all(isinstance(vocab.get(side), list) for side in ("src", "tgt")):
        raise ValueError(
            f"{folder / 'vocab.json'} has no 'src' and 'tgt' token lists: it is not an eole vocabulary"
        )
    return config, vocab


def option(model: dict, name: str, side: str | None = None) -> Any:
    """The value of eole option `name`: the `side` ("encoder" / "decoder") section's, else the embeddings' or the
    model's, else eole's default."""
    for section in (model.get(side) if side else None, model.get("embeddings"), model):
        if isinstance(section, dict) and name in section:
            return section[name]
    return DEFAULTS.get(name)


def refused_options(model: dict) -> list[str]:
    """`name=value (why)` for every option of the eole `model` config that our config cannot express."""
    refused = []
    for name, accepted in ACCEPTED.items():
        for side in ("encoder", "decoder"):
            value = option(model, name, side)
            if value not in accepted:
                why = WHY_REFUSED.get(name, f"only {' or '.join(map(repr, accepted))} is expressible")
                refused.append(f"{name}={bounded_repr(value)} ({why})")
                break
    activation = option(model, "mlp_activation_fn")
    if any(option(model, "mlp_activation_fn", side) != activation for side in ("encoder", "decoder")):
        refused.append("mlp_activation_fn differs between encoder and decoder (one activation here)")
    elif activation not in ACTIVATIONS:
        refused.append(
            f"mlp_activation_fn={bounded_repr(activation)} (expressible: {', '.join(ACTIVATIONS)})"
        )
    eps = {option(model, "norm_eps", side) for side in ("encoder", "decoder")}
    if len(eps) > 1:
        refused.append(f"norm_eps={sorted(eps)} (one LayerNorm epsilon here)")
    for side in ("encoder", "decoder"):
        head_dim = option(model, "head_dim", side)
        hidden, heads = option(model, "hidden_size", side), option(model, "heads", side)
        if (
            head_dim is not None
            and isinstance(hidden, int)
            and isinstance(heads, int)
            and head_dim * heads != hidden
        ):
            refused.append(
                f"head_dim={head_dim} with {heads} heads of hidden_size={hidden} (heads split d_model here)"
            )
            break
    if option(model, "position_encoding_type") == "Rotary":
        rope = option(model, "rope_config", "decoder") or {}
        for name, accepted in ROPE_ACCEPTED.items():
            if rope.get(name) not in accepted:
                refused.append(
                    f"rope_config.{name}={bounded_repr(rope.get(name))} (only full-dimension, unscaled rotary)"
                )
    return refused


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of the eole checkpoint `folder` (model.00.safetensors, and further shards)."""
    files = sorted(folder.glob(WEIGHTS_PATTERN))
    if not files:
        raise FileNotFoundError(
            f"{folder} has no eole weights ({WEIGHTS_PATTERN}); pass the folder an eole training run saved"
        )
    return files


def read_weight_shapes(files: list[Path]) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape, from the safetensors headers; `ValueError` naming a truncated or corrupt file."""
    shapes: dict[str, tuple[int, ...]] = {}
    for path in files:
        try:
            with safe_open(str(path), framework="pt") as file:
                shapes.update({name: tuple(file.get_slice(name).get_shape()) for name in file.keys()})  # noqa: SIM118
        except (SafetensorError, OSError) as error:
            raise ValueError(
                f"{path} is truncated or corrupt ({str(error).splitlines()[0] if str(error) else type(error).__name__}); "
                "copy or save the checkpoint again"
            ) from error
    return shapes


def read_weights(files: list[Path]) -> dict[str, torch.Tensor]:
    """Every tensor of the safetensors `files`, in fp32."""
    state = {}
    for path in files:
        with safe_open(str(path), framework="pt") as file:
            state.update({name: file.get_tensor(name).float() for name in file.keys()})  # noqa: SIM118
    return state


def _layers(shapes: dict[str, tuple[int, ...]], side: str) -> int:
    pattern = re.compile(rf"^{side}\.transformer_layers\.(\d+)\.")
    return len({int(m.group(1)) for name in shapes if (m := pattern.match(name))})


def size_claims(model: dict, shapes: dict[str, tuple[int, ...]]) -> list[SizeClaim]:
    """The sizes eole's config.json claims (where it states them), with the tensors that show them."""
    claims = []
    shared = bool(option(model, "share_embeddings"))
    for side, emb in SIDES.items():
        hidden = option(model, "hidden_size", side)
        if hidden is not None and hidden != -1:
            table = "src" if shared else emb
            claims.append(SizeClaim(f"{side}.hidden_size", hidden, ((f"{table}_emb.embeddings.weight", 1),)))
        layers = option(model, "layers", side)
        if layers is not None and layers != -1:
            claims.append(SizeClaim(f"{side}.layers", layers, ((f"{side}.transformer_layers.", None),)))
        ff = option(model, "transformer_ff", side)
        if ff is not None and ff != -1 and _layers(shapes, side):
            claims.append(
                SizeClaim(
                    f"{side}.transformer_ff",
                    ff,
                    ((f"{side}.transformer_layers.0.mlp.gate_up_proj.weight", 0),),
                )
            )
        n_positions = option(model, "n_positions", side)
        if option(model, "position_encoding_type") == "Learned":
            claims.append(SizeClaim("embeddings.n_positions", n_positions, ((f"{emb}_emb.pe.weight", 0),)))
    return claims


def check_vocabularies(folder: Path, vocab: dict, shapes: dict[str, tuple[int, ...]], shared: bool) -> None:
    """`ValueError` when vocab.json's token lists do not have the rows of the embeddings and the output layer."""
    rows = {
        "src": shapes.get("src_emb.embeddings.weight"),
        "tgt": shapes.get("src_emb.embeddings.weight" if shared else "tgt_emb.embeddings.weight"),
    }
    wrong = []
    for side, shape in rows.items():
        if shape is None:
            wrong.append(f"the weights have no {side}_emb.embeddings.weight")
        elif len(vocab[side]) != shape[0]:
            wrong.append(f"{len(vocab[side])} {side} tokens but the {side} embeddings have {shape[0]} rows")
    generator = shapes.get("generator.weight") or shapes.get("generator.bias")
    if generator is not None and generator[0] != len(vocab["tgt"]):
        wrong.append(f"{len(vocab['tgt'])} tgt tokens but the output layer has {generator[0]} rows")
    if wrong:
        raise ValueError(
            f"{folder / 'vocab.json'} does not match the checkpoint's weights: {'; '.join(wrong)}; pass the "
            "vocab.json the model was trained with"
        )


def special_ids(vocab: dict) -> dict[str, Any]:
    """pad / bos / eos / decoder start ids of eole's vocab.json (its `specials`, else eole's default tokens)."""
    specials = {
        "pad_token": "<blank>",
        "bos_token": "<s>",
        "eos_token": "</s>",
        **(vocab.get("specials") or {}),
    }
    start = vocab.get("decoder_start_token") or "<s>"
    ids: dict[str, Any] = {}
    missing = []
    for field, token, sides in (
        ("pad_token_id", specials["pad_token"], ("src", "tgt")),
        ("bos_token_id", specials["bos_token"], ("tgt",)),
        ("eos_token_id", specials["eos_token"], ("tgt",)),
        ("decoder_start_token_id", start, ("tgt",)),
    ):
        found = {vocab[side].index(token) if token in vocab[side] else None for side in sides}
        if None in found or len(found) > 1:
            missing.append(
                f"{bounded_repr(token)} ({field}) is {'missing from' if None in found else 'at different ids in'} "
                f"the {'/'.join(sides)} vocabulary"
            )
        else:
            ids[field] = found.pop()
    if missing:
        raise ValueError(f"vocab.json cannot give the special ids: {'; '.join(missing)}")
    return ids


def config_from_eole(
    model: dict, vocab: dict, shapes: dict[str, tuple[int, ...]]
) -> VanillaTransformerConfig:
    """The vanilla-transformer config that computes what the eole `model` config computes, sizes from `shapes`."""
    shared = bool(option(model, "share_embeddings"))
    src = shapes["src_emb.embeddings.weight"]
    tgt = src if shared else shapes["tgt_emb.embeddings.weight"]
    position = option(model, "position_encoding_type")
    fields: dict[str, Any] = {"scale_embedding": bool(option(model, "normalize"))}
    if position in SINUSOIDAL_LAYOUTS:
        fields = {
            "position_encoding": "sinusoidal",
            "sinusoidal_layout": SINUSOIDAL_LAYOUTS[position],
            "max_position_embeddings": shapes.get("src_emb.pe.pe", (SINUSOIDAL_POSITIONS,))[0],
            "scale_embedding": True,
        }
    elif position == "Learned":
        fields["position_encoding"] = "learned"
        fields["max_position_embeddings"] = shapes["src_emb.pe.weight"][0]
    else:
        rope = option(model, "rope_config", "decoder") or {}
        fields["position_encoding"] = "rope"
        fields["rope_theta"] = float(rope.get("rotary_theta", 10000))
        fields["max_position_embeddings"] = int(option(model, "max_position_embeddings") or 8192)
    heads = {side: option(model, "heads", side) for side in SIDES}
    return VanillaTransformerConfig(
        vocab_size=src[0],
        decoder_vocab_size=tgt[0],
        d_model=src[1],
        encoder_layers=_layers(shapes, "encoder"),
        decoder_layers=_layers(shapes, "decoder"),
        encoder_attention_heads=heads["encoder"],
        decoder_attention_heads=heads["decoder"],
        encoder_ffn_dim=shapes["encoder.transformer_layers.0.mlp.gate_up_proj.weight"][0],
        decoder_ffn_dim=shapes["decoder.transformer_layers.0.mlp.gate_up_proj.weight"][0],
        activation_function=ACTIVATIONS[option(model, "mlp_activation_fn")],
        dropout=0.0,
        normalize_before=True,
        layer_norm_eps=float(option(model, "norm_eps")),
        share_encoder_decoder_embeddings=shared,
        tie_word_embeddings=bool(option(model, "share_decoder_embeddings")),
        output_bias="generator.bias" in shapes,
        **fields,
        **special_ids(vocab),
    )


def _halves_from_pairs(tensor: torch.Tensor, heads: int) -> torch.Tensor:
    """Rows of a query/key projection reordered per head from eole's interleaved rotary pairs (2i, 2i+1) to
    our halves (i, i + D/2): the same permutation of queries and keys leaves every score unchanged."""
    head_dim = tensor.shape[0] // heads
    order = torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))
    return tensor.reshape(heads, head_dim, *tensor.shape[1:])[:, order].reshape(tensor.shape)


def our_state(
    model: dict, config: VanillaTransformerConfig, eole: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """eole's weights under our names (absent biases as zeros); `ValueError` naming tensors it cannot place."""
    state: dict[str, torch.Tensor] = {}
    unplaced = []
    scale_positions = config.position_encoding == "learned" and config.scale_embedding
    rope_pairs = config.position_encoding == "rope" and (option(model, "rope_config", "decoder") or {}).get(
        "rotary_interleave", True
    )
    embeddings = "model.shared" if config.share_encoder_decoder_embeddings else None
    for name, tensor in eole.items():
        layer = re.match(r"^(encoder|decoder)\.transformer_layers\.(\d+)\.(.+)\.(weight|bias)$", name)
        if layer:
            side, index, module, kind = layer.groups()
            ours = LAYER_NAMES.get(module)
            if ours is None:
                unplaced.append(name)
                continue
            if rope_pairs and module in ("self_attn.linear_query", "self_attn.linear_keys"):
                heads = (
                    config.encoder_attention_heads if side == "encoder" else config.decoder_attention_heads
                )
                tensor = _halves_from_pairs(tensor, heads)
            state[f"model.{side}.layers.{index}.{ours}.{kind}"] = tensor
        elif re.match(r"^decoder\.transformer_layers\.\d+\.layer_scalar$", name):
            if not torch.all(tensor == 1):
                unplaced.append(f"{name} (not 1)")
        elif name in (
            "encoder.layer_norm.weight",
            "encoder.layer_norm.bias",
            "decoder.layer_norm.weight",
            "decoder.layer_norm.bias",
        ):
            state[f"model.{name}"] = tensor
        elif name in ("src_emb.embeddings.weight", "tgt_emb.embeddings.weight"):
            side = "encoder" if name.startswith("src") else "decoder"
            state[f"{embeddings or f'model.{side}.embed_tokens'}.weight"] = tensor
        elif name in ("src_emb.pe.weight", "tgt_emb.pe.weight"):
            side = "encoder" if name.startswith("src") else "decoder"
            # eole's `normalize` scales the sum of token and position embeddings
            state[f"model.{side}.embed_positions.weight"] = (
                tensor * math.sqrt(config.d_model) if scale_positions else tensor
            )
        elif name in ("src_emb.pe.pe", "tgt_emb.pe.pe"):
            # the fixed sinusoidal table, rebuilt from the config
            continue
        elif name == "generator.weight":
            if not config.tie_word_embeddings:
                state["lm_head.weight"] = tensor
        elif name == "generator.bias":
            state["final_logits_bias"] = tensor
        else:
            unplaced.append(name)
    if unplaced:
        raise ValueError(
            f"the eole checkpoint has tensors this converter cannot place: {', '.join(unplaced[:8])}"
        )
    # biases eole leaves out (add_qkvbias, add_final_linear_bias, add_ffnbias false) are zero
    return with_zero_biases(state, config)


def _model_path(value: str, folder: Path) -> Path:
    """A transforms' file path of eole's config.json (`${MODEL_PATH}` = the checkpoint folder)."""
    path = Path(value.replace("${MODEL_PATH}", str(folder)))
    return path if path.is_absolute() or path.exists() else folder / path.name


def _sentencepiece_backend(spm_file: Path, pieces: list[str], unk_id: int):
    """The `tokenizers` backend that segments as the SentencePiece model `spm_file` does and gives each piece its
    position in `pieces`; `ValueError` when `pieces` lacks pieces of the model (eole encodes those as unknown
    after segmenting, which no tokenizer.json reproduces) or the model is not a unigram one."""
    from tokenizers.models import Unigram
    from transformers.convert_slow_tokenizer import SpmConverter, import_protobuf

    # protobuf's generated classes carry no type information
    model_pb2: Any = import_protobuf()
    proto = model_pb2.ModelProto()
    try:
        proto.ParseFromString(spm_file.read_bytes())
    except Exception as error:  # protobuf's DecodeError
        raise ValueError(f"{spm_file} is not a SentencePiece model ({error})") from error
    # trainer_spec.model_type: 1 unigram, 2 BPE, 3 word, 4 char
    if proto.trainer_spec.model_type != 1:
        raise ValueError(
            f"{spm_file} is a SentencePiece model of type {proto.trainer_spec.model_type} (only unigram, type 1, "
            "converts exactly)"
        )
    # type 1: normal pieces, the ones segmentation produces (2 unknown, 3 control, 4 user-defined, 6 byte)
    scores = {piece.piece: piece.score for piece in proto.pieces if piece.type in (1, 4, 6)}
    missing = [piece for piece in scores if piece not in pieces]
    if missing:
        raise ValueError(
            f"vocab.json lacks {len(missing)} pieces of {spm_file.name} (e.g. {', '.join(map(repr, missing[:3]))}): "
            "eole maps them to <unk> after segmenting, which a tokenizer cannot reproduce exactly; build the "
            "vocabulary from the SentencePiece model (eole's spm_to_vocab) and retrain, or extend it"
        )
    backend = SpmConverter.build_tokenizer_from_spm_proto(
        proto, [(piece.piece, piece.score) for piece in proto.pieces]
    )
    if backend is None:
        raise ValueError(f"{spm_file} cannot be read as a SentencePiece model")
    # eole's own tokens (specials, padding of the vocabulary) score as the least likely piece: a lower score would
    # lower the penalty of unknown characters, which the tokenizer derives from the lowest score as SentencePiece
    # does from its pieces'; only text that spells such a token ("</s>") segments differently from eole
    lowest = min(scores.values(), default=0.0)
    backend.model = Unigram(
        [(piece, scores.get(piece, lowest)) for piece in pieces],
        unk_id=unk_id,
        byte_fallback=proto.trainer_spec.byte_fallback,
    )
    return backend


def eole_tokenizer(src_dir: Path, eole_config: dict, vocab: dict) -> PreTrainedTokenizerFast:
    """The fast tokenizer (a tokenizer.json) that gives eole's source ids (see the module docstring); `ValueError` naming what it cannot reproduce (a transform, separate vocabularies, a SentencePiece model
    the vocabulary does not cover)."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    specials = {"unk_token": "<unk>", "pad_token": "<blank>", "bos_token": "<s>", "eos_token": "</s>"}
    specials.update({k: v for k, v in (vocab.get("specials") or {}).items() if k in specials and v})
    transforms = [name for name in eole_config.get("transforms") or [] if name not in FILTER_TRANSFORMS]
    if vocab["src"] != vocab["tgt"]:
        raise ValueError(
            "vocab.json has separate source and target vocabularies: the converted folder has one tokenizer, so "
            "only a shared vocabulary (share_vocab) converts"
        )
    pieces = list(vocab["src"])
    unk_id = pieces.index(specials["unk_token"]) if specials["unk_token"] in pieces else 0
    if not transforms:
        backend = Tokenizer(
            WordLevel({piece: i for i, piece in enumerate(pieces)}, unk_token=specials["unk_token"])
        )
        backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    elif transforms == ["sentencepiece"]:
        options = (eole_config.get("transforms_configs") or {}).get("sentencepiece") or {}
        for name, neutral in SENTENCEPIECE_NEUTRAL.items():
            if options.get(name) not in neutral:
                raise ValueError(
                    f"sentencepiece {name}={bounded_repr(options.get(name))} (a restricted vocabulary) is not supported"
                )
        models = {options.get(side) for side in ("src_subword_model", "tgt_subword_model")}
        if len(models) != 1 or None in models:
            raise ValueError(
                "the sentencepiece transform has separate source and target models "
                f"({bounded_repr(options.get('src_subword_model'))}, {bounded_repr(options.get('tgt_subword_model'))}): one tokenizer here "
                "needs one joint model"
            )
        spm_file = _model_path(str(models.pop()), src_dir)
        if not spm_file.is_file():
            raise FileNotFoundError(
                f"{src_dir} has no {spm_file.name}, the SentencePiece model its config names"
            )
        backend = _sentencepiece_backend(spm_file, pieces, unk_id)
    else:
        raise ValueError(
            f"transforms={bounded_repr(transforms)}: only the sentencepiece transform (or none: whitespace-separated tokens) "
            "converts to an exact tokenizer"
        )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        **specials,
        model_input_names=["input_ids", "attention_mask"],
        clean_up_tokenization_spaces=False,
        # eole segments "</s>" written in the text like any other text
        split_special_tokens=True,
        padding_side="right",
    )
    return tokenizer


def write_folder(
    model: VanillaTransformerForConditionalGeneration, tokenizer: PreTrainedTokenizerFast, out_dir: Path
) -> Path:
    """Write the converted `model`, with eole's decoding defaults (OpenNMT-py's too: beam 5, at most 250 tokens,
    every token may be generated, <blank> and <s> too), and its `tokenizer` to `out_dir` (new or empty)."""
    limit = min(250, model.config.max_position_embeddings - 1)
    model.generation_config.update(num_beams=5, max_new_tokens=limit, suppress_tokens=None)
    write_converted_folder(model, None, out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def convert_eole_checkpoint(src_dir: str | Path, out_dir: str | Path, trust_pickle: bool = False) -> Path:
    """Convert an eole checkpoint folder into a vanilla-transformer folder with remote code (see the module
    docstring for what maps). The options, the sizes config.json claims and vocab.json are checked against the
    weights before any model is built. eole writes safetensors: `trust_pickle` is accepted for the command line's
    sake and never needed."""
    del trust_pickle
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    eole_config, vocab = read_eole_folder(src_dir)
    model = eole_config["model"]
    refused = refused_options(model)
    if refused:
        raise ValueError(f"the eole model in {src_dir} cannot be converted: {'; '.join(refused)}")
    files = weight_files(src_dir)
    shapes = read_weight_shapes(files)
    check_claimed_sizes(src_dir, size_claims(model, shapes), shapes)
    shared = bool(option(model, "share_embeddings"))
    check_vocabularies(src_dir, vocab, shapes, shared)
    config = config_from_eole(model, vocab, shapes)
    tokenizer = eole_tokenizer(src_dir, eole_config, vocab)
    ours = build_checked(
        VanillaTransformerForConditionalGeneration, config, shapes, f"{src_dir / 'config.json'}"
    )
    ours = load_converted_weights(ours, our_state(model, config, read_weights(files)), "eole")
    return write_folder(ours, tokenizer, out_dir)
