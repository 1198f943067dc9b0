"""Convert an OpenNMT-py 3.x transformer checkpoint (the `.pt` file `onmt_train` saves) into a vanilla-transformer
model, without OpenNMT-py installed.

eole is OpenNMT-py's successor with the same transformer, vocabulary and transforms, so one mapping serves both:
this module reads the checkpoint and its options, refuses what cannot convert, and renames the tensors and the
options to eole's (`eole_tensors`, `eole_options`); eole's importer (`eole.config_from_eole`, `eole.our_state`,
`eole.eole_tokenizer`, `eole.write_folder`) builds the config, places the weights, builds the tokenizer and
writes the folder.

The checkpoint is a pickle (``torch.save`` of {"model": the state dict without the generator, "generator": its
state dict, "vocab": {"src": [...], "tgt": [...], "decoder_start_token": "<s>"}, "opt": the training options, an
``argparse.Namespace``, "optim": ...}): it is read only with `trust_pickle` (``convert --trust_pickle``), through
`common.load_pickled_checkpoint`.

What maps, exactly:
  * OpenNMT-py 3.x's transformer is pre-LN with a final LayerNorm on each stack (it has no post-LN transformer)
    -> `normalize_before=True`, `layer_norm_eps` = `norm_eps` (1e-6 when absent);
  * sinusoidal positions (`position_encoding`, `max_relative_positions=0`), the layout read from the stored table
    `*.make_embedding.pe.pe`: "SinusoidalInterleaved" (the paper's table) -> `sinusoidal_layout="interleaved"`,
    "SinusoidalConcat" (sines then cosines) -> `"tensor2tensor"`; the embeddings are scaled by sqrt(d_model);
  * `heads`, the activation (`pos_ffn_activation_fn`: relu, gelu, fast_gelu, silu), `share_embeddings` ->
    `share_encoder_decoder_embeddings`, `share_decoder_embeddings` -> `tie_word_embeddings`, the biases of the
    attention and feed-forward projections (`add_qkvbias`, `add_ffnbias`; absent = zero) and the generator's
    Linear with its bias (`final_logits_bias`); sizes come from the weights;
  * the vocabulary (OpenNMT-py's specials: `<blank>` pad, `<unk>`, `<s>` decoder start, `</s>`) and the tokenizer:
    whitespace-separated words, or the SentencePiece model of the `sentencepiece` transform, found at the path the
    options name or by its file name next to the checkpoint (`eole.eole_tokenizer`: the source gets no
    `</s>`, as in OpenNMT-py);
  * decoding: beam 5, at most 250 tokens, every token may be generated (OpenNMT-py's defaults, which are eole's).

Refused by name (`ValueError` naming the option and its value): relative, rotary and ALiBi positions
(`max_relative_positions` != 0), RMSNorm (`layer_norm="rms"`), grouped-query attention (`num_kv`), `self_attn_type`
other than scaled-dot, gated activations, parallel residuals, copy attention, MoE, source features, language models
(`decoder_type="transformer_lm"`), and the torchtext vocabularies of OpenNMT-py 1.x / 2.x.
"""

from __future__ import annotations

import re
from argparse import Namespace
from pathlib import Path
from typing import Any

import torch

from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration
from vanilla_transformer.modeling.positions_vanilla_transformer import sinusoidal_table

from . import eole
from .common import (
    SizeClaim,
    bounded_repr,
    build_checked,
    check_claimed_sizes,
    load_converted_weights,
    load_pickled_checkpoint,
)

# OpenNMT-py 3.x's defaults for the options an older checkpoint's opt may lack
DEFAULTS: dict[str, Any] = {
    "model_task": "seq2seq",
    "encoder_type": "rnn",
    "decoder_type": "rnn",
    "self_attn_type": "scaled-dot",
    "position_encoding": False,
    "max_relative_positions": 0,
    "layer_norm": "standard",
    "norm_eps": 1e-6,
    "num_kv": 0,
    "multiquery": False,
    "parallel_residual": False,
    "copy_attn": False,
    "generator_function": "softmax",
    "num_experts": 0,
    "pos_ffn_activation_fn": "relu",
    "share_embeddings": False,
    "share_decoder_embeddings": False,
    "heads": 8,
}
# the values each refusable option may have, and why another value is refused
ACCEPTED: dict[str, tuple[tuple[Any, ...], str]] = {
    "model_task": (("seq2seq",), "only encoder-decoder models convert"),
    "encoder_type": (("transformer",), "only the transformer converts"),
    "decoder_type": (("transformer",), "only the encoder-decoder transformer converts"),
    "self_attn_type": (("scaled-dot",), "only scaled dot-product attention is expressible"),
    "position_encoding": ((True,), "only sinusoidal positions are expressible"),
    "max_relative_positions": ((0,), "relative, rotary (-1) and ALiBi (-2) positions have no field here"),
    "layer_norm": (("standard",), "only LayerNorm is expressible (no RMSNorm)"),
    "num_kv": ((0, None), "grouped-query attention has no field here"),
    "multiquery": ((False,), "multi-query attention has no field here"),
    "parallel_residual": ((False,), "parallel residuals have no field here"),
    "copy_attn": ((False,), "the copy generator has no field here"),
    "generator_function": (("softmax",), "only a softmax output is expressible"),
    "num_experts": ((0,), "mixtures of experts have no field here"),
}
# OpenNMT-py activation -> eole's name for the same function (`eole.ACTIVATIONS` maps it to ours)
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "fast_gelu": "gelu-tanh", "silu": "silu"}
EMBEDDINGS = {"encoder": "encoder.embeddings.make_embedding", "decoder": "decoder.embeddings.make_embedding"}
LAYER_PREFIX = {"encoder": "encoder.transformer", "decoder": "decoder.transformer_layers"}
# OpenNMT-py parameter name (after "encoder.transformer.N." / "decoder.transformer_layers.N.") -> eole's (after
# "encoder.transformer_layers.N." / "decoder.transformer_layers.N."): the attention projections have the same names
LAYER_NAMES = {
    "layer_norm": "input_layernorm",
    "layer_norm_1": "input_layernorm",
    **{name: name for name in eole.LAYER_NAMES if name.startswith(("self_attn.", "context_attn."))},
    "layer_norm_2": "precontext_layernorm",
    "feed_forward.layer_norm": "post_attention_layernorm",
    "feed_forward.w_1": "mlp.gate_up_proj",
    "feed_forward.w_2": "mlp.down_proj",
}
# the tensors outside the layers that OpenNMT-py and eole name differently (the side's embeddings)
OTHER_NAMES = {
    f"{EMBEDDINGS['encoder']}.emb_luts.0.weight": "src_emb.embeddings.weight",
    f"{EMBEDDINGS['decoder']}.emb_luts.0.weight": "tgt_emb.embeddings.weight",
    f"{EMBEDDINGS['encoder']}.pe.pe": "src_emb.pe.pe",
    f"{EMBEDDINGS['decoder']}.pe.pe": "tgt_emb.pe.pe",
}
# named alike in both: the final LayerNorm of each stack and the generator
SAME_NAMES = (
    "encoder.layer_norm.weight",
    "encoder.layer_norm.bias",
    "decoder.layer_norm.weight",
    "decoder.layer_norm.bias",
    "generator.weight",
    "generator.bias",
)
MISSING_CODE = (
    "the checkpoint holds objects beyond OpenNMT-py 3.x's (tensors, lists, an argparse.Namespace): convert it "
    "with OpenNMT-py 3.x (onmt_release_model) first"
)


def checkpoint_file(src: Path) -> Path:
    """The `.pt` checkpoint `src` names: the file itself, or the one `.pt` file of the folder `src`."""
    if src.is_dir():
        files = sorted(src.glob("*.pt"))
        if len(files) != 1:
            raise FileNotFoundError(
                f"{src} has {len(files)} .pt files; pass the OpenNMT-py checkpoint file itself (e.g. model_step_N.pt)"
            )
        return files[0]
    if not src.is_file():
        raise FileNotFoundError(
            f"{src} does not exist; pass the OpenNMT-py checkpoint file (model_step_N.pt)"
        )
    return src


def read_checkpoint(path: Path, trust_pickle: bool) -> tuple[dict[str, torch.Tensor], dict, Namespace]:
    """(every tensor, generator's included as "generator.*"; the vocabulary; the options) of the OpenNMT-py
    checkpoint `path`; `ValueError` without `trust_pickle`, for a truncated file or one that is not OpenNMT-py's."""
    checkpoint = load_pickled_checkpoint(path, trust_pickle, MISSING_CODE)
    parts = ("model", "generator", "vocab", "opt")
    if not isinstance(checkpoint, dict) or any(part not in checkpoint for part in parts):
        raise ValueError(
            f"{path} is not an OpenNMT-py checkpoint (a dict with {', '.join(parts)}); pass the .pt file onmt_train saved"
        )
    opt = checkpoint["opt"]
    if isinstance(opt, dict):
        opt = Namespace(**opt)
    vocab = checkpoint["vocab"]
    if not isinstance(vocab, dict) or not all(isinstance(vocab.get(side), list) for side in ("src", "tgt")):
        raise ValueError(
            f"{path} has a vocabulary of OpenNMT-py 1.x / 2.x (torchtext fields), not 3.x's token lists; convert "
            "the checkpoint to 3.x with OpenNMT-py's tools/convertv2_v3.py first"
        )
    if vocab.get("src_feats"):
        raise ValueError(f"{path} has source features (src_feats): they have no field here")
    state = {name: tensor.float() for name, tensor in checkpoint["model"].items()}
    generator = checkpoint["generator"]
    for name, tensor in generator.items():
        # an older generator was nn.Sequential(Linear, ...): "0.weight"
        state["generator." + name.removeprefix("0.")] = tensor.float()
    return state, vocab, opt


def option(opt: Namespace, name: str) -> Any:
    """The value of OpenNMT-py option `name`, else OpenNMT-py 3.x's default."""
    return getattr(opt, name, DEFAULTS.get(name))


def refused_options(opt: Namespace) -> list[str]:
    """`name=value (why)` for every option of `opt` that our config cannot express."""
    refused = []
    for name, (accepted, why) in ACCEPTED.items():
        value = option(opt, name)
        if value not in accepted:
            refused.append(f"{name}={bounded_repr(value)} ({why})")
    activation = option(opt, "pos_ffn_activation_fn")
    if activation not in ACTIVATIONS:
        refused.append(
            f"pos_ffn_activation_fn={bounded_repr(activation)} (expressible: {', '.join(ACTIVATIONS)})"
        )
    return refused


def size_claims(opt: Namespace) -> list[SizeClaim]:
    """The sizes the options claim, with the tensors that show them."""
    claims = []
    for field, side in (("enc_layers", "encoder"), ("dec_layers", "decoder")):
        if hasattr(opt, field):
            claims.append(SizeClaim(field, getattr(opt, field), ((f"{LAYER_PREFIX[side]}.", None),)))
    for field in ("hidden_size", "rnn_size"):
        if hasattr(opt, field):
            claims.append(
                SizeClaim(field, getattr(opt, field), ((f"{EMBEDDINGS['encoder']}.emb_luts.0.weight", 1),))
            )
            break
    if hasattr(opt, "transformer_ff"):
        claims.append(
            SizeClaim(
                "transformer_ff",
                opt.transformer_ff,
                ((f"{LAYER_PREFIX['encoder']}.0.feed_forward.w_1.weight", 0),),
            )
        )
    return claims


def check_vocabularies(path: Path, vocab: dict, shapes: dict[str, tuple[int, ...]]) -> None:
    """`ValueError` when the vocabulary's token lists do not have the rows of the embeddings and the generator."""
    rows = {
        "src": shapes.get(f"{EMBEDDINGS['encoder']}.emb_luts.0.weight"),
        "tgt": shapes.get(f"{EMBEDDINGS['decoder']}.emb_luts.0.weight"),
    }
    wrong = []
    for side, shape in rows.items():
        if shape is None:
            wrong.append(f"the weights have no {side} embeddings")
        elif len(vocab[side]) != shape[0]:
            wrong.append(f"{len(vocab[side])} {side} tokens but the {side} embeddings have {shape[0]} rows")
    generator = shapes.get("generator.weight")
    if generator is None:
        wrong.append("the checkpoint has no generator.weight")
    elif generator[0] != len(vocab["tgt"]):
        wrong.append(f"{len(vocab['tgt'])} tgt tokens but the generator has {generator[0]} rows")
    if wrong:
        raise ValueError(
            f"the vocabulary of {path} does not match its weights: {'; '.join(wrong)}; pass the checkpoint as "
            "onmt_train saved it"
        )


def position_encoding_type(path: Path, state: dict[str, torch.Tensor]) -> str:
    """The `position_encoding_type` (OpenNMT-py's and eole's name) of the sinusoidal tables the checkpoint stores,
    told from the tables themselves; `ValueError` when they are neither layout."""
    tables = [state.get(f"{EMBEDDINGS[side]}.pe.pe") for side in EMBEDDINGS]
    if any(table is None for table in tables):
        raise ValueError(f"{path} has no stored sinusoidal table (*.make_embedding.pe.pe) on both sides")
    encoder, decoder = (table.reshape(-1, table.shape[-1]) for table in tables if table is not None)
    for kind, layout in eole.SINUSOIDAL_LAYOUTS.items():
        # float32 rounding of the angles differs between formulas by up to ~2e-4 at position 5000
        ours = sinusoidal_table(encoder.shape[0], encoder.shape[1], layout)
        if encoder.shape == decoder.shape and all(
            torch.allclose(table, ours, atol=1e-3) for table in (encoder, decoder)
        ):
            return kind
    raise ValueError(
        f"{path} stores a position table that is neither OpenNMT-py's SinusoidalInterleaved nor SinusoidalConcat"
    )


def eole_options(opt: Namespace, position_encoding_type: str) -> dict[str, Any]:
    """The model options of `opt` as an eole config's `model` section (what `eole.config_from_eole` reads)."""
    return {
        "heads": int(option(opt, "heads")),
        "mlp_activation_fn": ACTIVATIONS[option(opt, "pos_ffn_activation_fn")],
        "norm_eps": option(opt, "norm_eps"),
        "position_encoding_type": position_encoding_type,
        "share_embeddings": bool(option(opt, "share_embeddings")),
        "share_decoder_embeddings": bool(option(opt, "share_decoder_embeddings")),
    }


def eole_tensors(onmt: dict[str, torch.Tensor], options: dict[str, Any]) -> dict[str, torch.Tensor]:
    """OpenNMT-py's tensors under eole's names (`options`: `eole_options`); `ValueError` naming the tensors that
    have no place. With shared embeddings the decoder's copy is left out; a generator tied to the decoder
    embeddings must equal them, and is left out as eole leaves it out."""
    tensors: dict[str, torch.Tensor] = {}
    unplaced = []
    for name, tensor in onmt.items():
        layer = re.match(
            r"^(encoder\.transformer|decoder\.transformer_layers)\.(\d+)\.(.+)\.(weight|bias)$", name
        )
        if layer:
            stack, index, module, kind = layer.groups()
            side = stack.split(".")[0]
            renamed = LAYER_NAMES.get(module)
            # "layer_norm" is the encoder's pre-attention norm; the decoder's are layer_norm_1 / layer_norm_2
            if renamed is None or (module == "layer_norm" and side == "decoder"):
                unplaced.append(name)
                continue
            tensors[f"{side}.transformer_layers.{index}.{renamed}.{kind}"] = tensor
        elif name in OTHER_NAMES:
            if name.endswith(".pe.pe"):
                # stored as (positions, 1, d_model)
                tensors[OTHER_NAMES[name]] = tensor.reshape(-1, tensor.shape[-1])
            elif not (options["share_embeddings"] and name.startswith("decoder.")):
                # shared embeddings: eole has the encoder's table alone
                tensors[OTHER_NAMES[name]] = tensor
        elif name == "generator.weight" and options["share_decoder_embeddings"]:
            if not torch.equal(tensor, onmt[f"{EMBEDDINGS['decoder']}.emb_luts.0.weight"]):
                unplaced.append(
                    f"{name} (share_decoder_embeddings=True but it differs from the decoder embeddings)"
                )
        elif name in SAME_NAMES:
            tensors[name] = tensor
        else:
            unplaced.append(name)
    if unplaced:
        raise ValueError(
            f"the OpenNMT-py checkpoint has tensors this converter cannot place: {', '.join(unplaced[:8])}"
        )
    return tensors


def tokenizer_options(opt: Namespace) -> dict:
    """OpenNMT-py's transforms and SentencePiece options in the shape `eole.eole_tokenizer` reads."""
    names = ("src_subword_model", "tgt_subword_model", "src_subword_vocab", "tgt_subword_vocab")
    return {
        "transforms": list(getattr(opt, "transforms", None) or []),
        "transforms_configs": {"sentencepiece": {name: getattr(opt, name, None) for name in names}},
    }


def convert_opennmt_checkpoint(src: str | Path, out_dir: str | Path, trust_pickle: bool = False) -> Path:
    """Convert the OpenNMT-py 3.x checkpoint `src` (the `.pt` file, or a folder holding one with its SentencePiece
    model) into a vanilla-transformer folder with remote code (see the module docstring for what maps). Read only
    with `trust_pickle`; the options, the sizes they claim and the vocabulary are checked against the weights
    before any model is built."""
    path, out_dir = checkpoint_file(Path(src)), Path(out_dir)
    state, vocab, opt = read_checkpoint(path, trust_pickle)
    refused = refused_options(opt)
    if refused:
        raise ValueError(f"the OpenNMT-py model in {path} cannot be converted: {'; '.join(refused)}")
    shapes = {name: tuple(tensor.shape) for name, tensor in state.items()}
    check_claimed_sizes(path, size_claims(opt), shapes, config_name=f"{path} (opt)")
    check_vocabularies(path, vocab, shapes)
    options = eole_options(opt, position_encoding_type(path, state))
    tensors = eole_tensors(state, options)
    config = eole.config_from_eole(options, vocab, {name: tuple(t.shape) for name, t in tensors.items()})
    tokenizer = eole.eole_tokenizer(path.parent, tokenizer_options(opt), vocab)
    ours = build_checked(VanillaTransformerForConditionalGeneration, config, shapes, f"{path} (opt)")
    ours = load_converted_weights(ours, eole.our_state(options, config, tensors), "OpenNMT-py")
    return eole.write_folder(ours, tokenizer, out_dir)
