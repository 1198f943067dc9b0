"""Convert a JoeyNMT 2.x Transformer (a model folder as JoeyNMT's training writes it) into a vanilla-transformer
model, without JoeyNMT installed.

The folder holds `config.yaml` (JoeyNMT's training config), the checkpoint `best.ckpt` (else `latest.ckpt`; a
pickle, read only with ``trust_pickle=True``: first with ``torch.load(weights_only=True)``, and when the
checkpoint holds other objects than tensors and plain containers, with the full unpickler, which runs any code
the file names), `src_vocab.txt` and `trg_vocab.txt`, and the SentencePiece models its tokenizer config names.

What maps: post-LN and pre-LN layers (`layer_norm`; pre-LN with the final LayerNorm of each stack), the embedding
scale (`embeddings.scale`), `tied_embeddings` (one matrix for source and target), `tied_softmax` (the output
projection is the target embedding), the activation (relu, gelu, swish), JoeyNMT's sinusoidal positions (the
paper's interleaved layout from position 0), LayerNorm eps 1e-6, no output bias, and the special ids of
`data.special_symbols`. What is refused, by name: recurrent encoders or decoders, different widths, layer-norm
positions, activations or embedding scales on the two sides, `alpha` other than 1, the tanh activation, and
JoeyNMT's pre-LN encoder without a final LayerNorm (its default when the encoder config names no `layer_norm`).

The generation config carries JoeyNMT's decoding: start from `<s>`, never produce `<s>` (nor `<pad>` with a beam,
nor `<unk>` with `generate_unk: false`), `min_output_length`, `beam_size` (stopping once the beams are finished), `max_output_length`, and `beam_alpha` as the
length penalty (JoeyNMT divides by ((5 + length) / 6) ** alpha, transformers by length ** alpha: equal for
alpha <= 0, the JoeyNMT default).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
from transformers import GenerationConfig

from vanilla_transformer.modeling import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration

from .common import (
    bounded_repr,
    build_checked,
    load_converted_weights,
    load_pickled_checkpoint,
    read_config_file,
    shapes_of,
    write_converted_folder,
)
from .vocabulary import write_sentencepiece_tokenizer

CONFIG_FILE = "config.yaml"
CHECKPOINTS = ("best.ckpt", "latest.ckpt")
# the sections of config.yaml the converter reads, each a mapping when present (parents before children)
SECTIONS = (
    "model.encoder",
    "model.decoder",
    "data",
    "data.src",
    "data.trg",
    "data.special_symbols",
    "testing",
)
VOCAB_FILES = {"src": "src_vocab.txt", "trg": "trg_vocab.txt"}
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu"}
LAYER_NORM_EPS = 1e-6

# JoeyNMT parameter names (after "encoder.layers.N." / "decoder.layers.N.") -> ours
LAYER_NAMES = {
    "src_src_att.": "self_attn.",
    "trg_trg_att.": "self_attn.",
    "src_trg_att.": "encoder_attn.",
    "layer_norm.": "self_attn_layer_norm.",
    "x_layer_norm.": "self_attn_layer_norm.",
    "dec_layer_norm.": "encoder_attn_layer_norm.",
    "feed_forward.layer_norm.": "final_layer_norm.",
    "feed_forward.pwff_layer.0.": "ffn.fc1.",
    "feed_forward.pwff_layer.3.": "ffn.fc2.",
}
ATTENTION_NAMES = {
    "q_layer.": "q_proj.",
    "k_layer.": "k_proj.",
    "v_layer.": "v_proj.",
    "output_layer.": "out_proj.",
}


def read_joeynmt_config(folder: Path) -> dict:
    """JoeyNMT's `config.yaml` of `folder` as a dict, read by `common.read_config_file` (bounded, no YAML aliases);
    `FileNotFoundError` / `ValueError` saying what to pass."""
    path = folder / CONFIG_FILE
    config = read_config_file(path, "the model folder JoeyNMT's training wrote (model_dir)")
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise ValueError(f"{path} has no `model` section: pass the config.yaml of a JoeyNMT model folder")
    for section in SECTIONS:
        parent, _, name = section.rpartition(".")
        value = (config.get(parent) or {}).get(name) if parent else config.get(name)
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"{path}: `{section}` is {bounded_repr(value)}, not a section of options")
    return config


def load_joeynmt_state(folder: Path, trust_pickle: bool) -> dict[str, torch.Tensor]:
    """The `model_state` of `folder`'s checkpoint (see the module docstring for how the pickle is read);
    `ValueError` when it is refused (no `trust_pickle`), truncated or not a JoeyNMT checkpoint."""
    path = next((folder / name for name in CHECKPOINTS if (folder / name).is_file()), None)
    if path is None:
        raise FileNotFoundError(f"{folder} has no JoeyNMT checkpoint ({' or '.join(CHECKPOINTS)})")
    checkpoint = load_pickled_checkpoint(
        path,
        trust_pickle,
        "load it where JoeyNMT is installed and save {'model_state': model.state_dict()} alone",
    )
    state = checkpoint.get("model_state") if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict) or not all(isinstance(value, torch.Tensor) for value in state.values()):
        raise ValueError(
            f"{path} has no `model_state` of tensors: pass a checkpoint JoeyNMT's training saved"
        )
    return state


def joeynmt_vocabulary(folder: Path, config: dict, side: str) -> list[str]:
    """The `side` ("src" or "trg") vocabulary as JoeyNMT builds it: the special symbols, the language tags, then
    the lines of `{side}_vocab.txt` (else the data section's `voc_file`), each token once, id = position."""
    symbols = special_symbols(config)
    path = folder / VOCAB_FILES[side]
    if not path.is_file():
        voc_file = (config.get("data", {}).get(side) or {}).get("voc_file")
        path = folder / Path(voc_file).name if voc_file and (folder / Path(voc_file).name).is_file() else None
    if path is None:
        raise FileNotFoundError(
            f"{folder} has no {VOCAB_FILES[side]}: copy JoeyNMT's vocabulary files beside the model"
        )
    specials = [symbols[f"{name}_token"] for name in ("unk", "pad", "bos", "eos")]
    if symbols["sep_token"]:
        specials.append(symbols["sep_token"])
    tokens = [line.rstrip("\n") for line in path.read_text(encoding="utf-8").splitlines()]
    return list(dict.fromkeys(specials + list(symbols["lang_tags"]) + tokens))


def special_symbols(config: dict) -> dict[str, Any]:
    """`data.special_symbols` with JoeyNMT's defaults (<unk> 0, <pad> 1, <s> 2, </s> 3, no separator)."""
    given = (config.get("data") or {}).get("special_symbols") or {}
    defaults = {
        "unk": ("<unk>", 0),
        "pad": ("<pad>", 1),
        "bos": ("<s>", 2),
        "eos": ("</s>", 3),
        "sep": (None, None),
    }
    symbols: dict[str, Any] = {"lang_tags": given.get("lang_tags") or []}
    for name, (token, index) in defaults.items():
        symbols[f"{name}_token"] = given.get(f"{name}_token", token)
        symbols[f"{name}_id"] = given.get(f"{name}_id", index)
    return symbols


def _same_on_both_sides(encoder: dict, decoder: dict, option: str, default: Any, label: str) -> Any:
    value = encoder.get(option, default), decoder.get(option, default)
    if value[0] != value[1]:
        raise ValueError(
            f"{label}: encoder {bounded_repr(value[0])}, decoder {bounded_repr(value[1])}; the converter needs one value for both stacks"
        )
    return value[0]


def config_from_joeynmt(
    config: dict, state: dict[str, torch.Tensor], vocab_sizes: tuple[int, int]
) -> VanillaTransformerConfig:
    """The vanilla-transformer config that computes what JoeyNMT's `config` (config.yaml) computes with the
    weights `state`, whose shapes are checked against the config and the vocabularies (`vocab_sizes`: source,
    target); `ValueError` naming each option that cannot be expressed."""
    model = config["model"]
    encoder, decoder = model.get("encoder") or {}, model.get("decoder") or {}
    for side, values, default in (("encoder", encoder, "recurrent"), ("decoder", decoder, "transformer")):
        if values.get("type", default) != "transformer":
            raise ValueError(
                f"model.{side}.type={bounded_repr(values.get('type', default))}: only JoeyNMT's Transformer converts"
            )
        if values.get("alpha", 1.0) != 1.0:
            raise ValueError(
                f"model.{side}.alpha={bounded_repr(values['alpha'])}: only residual weight 1.0 converts"
            )
    # JoeyNMT's encoder layers default to pre-LN, its final LayerNorm to post-LN (none): state both or neither
    if encoder.get("layer_norm", "pre") == "pre" and encoder.get("layer_norm", "post") != "pre":
        raise ValueError(
            "model.encoder.layer_norm is not set: JoeyNMT then runs pre-LN encoder layers without a final LayerNorm, "
            "which the converter cannot express; only models trained with layer_norm: pre or post convert"
        )
    layer_norm = _same_on_both_sides(encoder, decoder, "layer_norm", "post", "model.*.layer_norm")
    activation = _same_on_both_sides(encoder, decoder, "activation", "relu", "model.*.activation")
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"model.*.activation={bounded_repr(activation)}: the converter maps {', '.join(ACTIVATIONS)}"
        )
    width = _same_on_both_sides(encoder, decoder, "hidden_size", 512, "model.*.hidden_size")
    scale = _same_on_both_sides(
        encoder.get("embeddings") or {},
        decoder.get("embeddings") or {},
        "scale",
        False,
        "model.*.embeddings.scale",
    )
    tied_embeddings, tied_softmax = bool(model.get("tied_embeddings")), bool(model.get("tied_softmax"))
    sizes = {
        "src vocabulary": (vocab_sizes[0], "src_embed.lut.weight", 0),
        "trg vocabulary": (vocab_sizes[1], "decoder.output_layer.weight", 0),
        "model.encoder.hidden_size": (width, "src_embed.lut.weight", 1),
        "model.encoder.ff_size": (
            encoder.get("ff_size", 2048),
            "encoder.layers.0.feed_forward.pwff_layer.0.weight",
            0,
        ),
        "model.decoder.ff_size": (
            decoder.get("ff_size", 2048),
            "decoder.layers.0.feed_forward.pwff_layer.0.weight",
            0,
        ),
    }
    if not tied_embeddings:
        sizes["trg vocabulary "] = (vocab_sizes[1], "trg_embed.lut.weight", 0)
    wrong = []
    for side, values, default in (("encoder", encoder, 8), ("decoder", decoder, 4)):
        pattern = re.compile(rf"^{side}\.layers\.(\d+)\.")
        found = len({m.group(1) for name in state if (m := pattern.match(name))})
        if values.get("num_layers", default) != found:
            wrong.append(
                f"model.{side}.num_layers={values.get('num_layers', default)} but the weights have {found}"
            )
    for label, (size, tensor, axis) in sizes.items():
        shape = state.get(tensor)
        if shape is None or shape.dim() <= axis:
            wrong.append(f"{label.strip()} cannot be checked: the weights have no {tensor}")
        elif shape.shape[axis] != size:
            wrong.append(
                f"{label.strip()} is {size} but the weights have {shape.shape[axis]} ({tensor} {list(shape.shape)})"
            )
    if wrong:
        raise ValueError(
            f"the config and vocabularies do not fit the checkpoint's weights: {'; '.join(wrong)}; pass the "
            "config.yaml and vocabulary files the checkpoint was trained with"
        )
    if ("encoder.layer_norm.weight" in state) != (layer_norm == "pre"):
        raise ValueError(
            f"model.encoder.layer_norm={bounded_repr(layer_norm)} does not fit the weights' final LayerNorm"
        )
    symbols = special_symbols(config)
    # JoeyNMT's position table (1, max_len, width) is saved with the weights
    positions = state.get("encoder.pe.pe")
    max_positions = positions.shape[1] if positions is not None and positions.dim() == 3 else 5000
    return VanillaTransformerConfig(
        vocab_size=vocab_sizes[0],
        decoder_vocab_size=vocab_sizes[1],
        d_model=width,
        encoder_layers=encoder.get("num_layers", 8),
        decoder_layers=decoder.get("num_layers", 4),
        encoder_attention_heads=encoder.get("num_heads", 4),
        decoder_attention_heads=decoder.get("num_heads", 8),
        encoder_ffn_dim=encoder.get("ff_size", 2048),
        decoder_ffn_dim=decoder.get("ff_size", 2048),
        activation_function=ACTIVATIONS[activation],
        # JoeyNMT uses one rate for residuals, attention probabilities and the feed-forward activation
        dropout=float(encoder.get("dropout", 0.0)),
        attention_dropout=float(encoder.get("dropout", 0.0)),
        activation_dropout=float(encoder.get("dropout", 0.0)),
        normalize_before=layer_norm == "pre",
        layer_norm_eps=LAYER_NORM_EPS,
        position_encoding="sinusoidal",
        sinusoidal_layout="interleaved",
        max_position_embeddings=max_positions,
        scale_embedding=bool(scale),
        share_encoder_decoder_embeddings=tied_embeddings,
        tie_word_embeddings=tied_softmax,
        output_bias=False,
        pad_token_id=symbols["pad_id"],
        bos_token_id=symbols["bos_id"],
        eos_token_id=symbols["eos_id"],
        decoder_start_token_id=symbols["bos_id"],
    )


def _our_name(name: str, shared: bool) -> str | None:
    """JoeyNMT parameter name -> ours (None: not a parameter here, e.g. the fixed position tables)."""
    if name.endswith(".pe.pe"):
        return None
    if name in ("src_embed.lut.weight", "trg_embed.lut.weight"):
        if shared:
            return "model.shared.weight" if name.startswith("src") else None
        return f"model.{'encoder' if name.startswith('src') else 'decoder'}.embed_tokens.weight"
    if name == "decoder.output_layer.weight":
        return "lm_head.weight"
    match = re.match(r"^(encoder|decoder)\.layers\.(\d+)\.(.*)$", name)
    if match is None:
        # encoder.layer_norm.* / decoder.layer_norm.*: the final LayerNorm of pre-LN
        return f"model.{name}"
    side, index, rest = match.groups()
    for joey, ours in sorted(LAYER_NAMES.items(), key=lambda item: -len(item[0])):
        if rest.startswith(joey):
            rest = ours + rest[len(joey) :]
            break
    for joey, ours in ATTENTION_NAMES.items():
        rest = rest.replace(f"attn.{joey}", f"attn.{ours}")
    return f"model.{side}.layers.{index}.{rest}"


def generation_config_from_joeynmt(config: dict, model_config: VanillaTransformerConfig) -> GenerationConfig:
    """JoeyNMT's decoding (the `testing` section) as a generation config: see the module docstring."""
    testing = config.get("testing") or {}
    symbols = special_symbols(config)
    beams = int(testing.get("beam_size", 1))
    # JoeyNMT's beam search never produces <pad>; its greedy search can
    suppress = [symbols["bos_id"], symbols["pad_id"]] if beams > 1 else [symbols["bos_id"]]
    if symbols["sep_id"] is not None:
        suppress.append(symbols["sep_id"])
    if not testing.get("generate_unk", True):
        suppress.append(symbols["unk_id"])
    alpha = testing.get("beam_alpha", -1)
    values: dict[str, Any] = {
        "decoder_start_token_id": model_config.decoder_start_token_id,
        "bos_token_id": symbols["bos_id"],
        "eos_token_id": symbols["eos_id"],
        "pad_token_id": symbols["pad_id"],
        "suppress_tokens": suppress,
        "num_beams": beams,
        # a beam ends once its hypotheses are finished (what CTranslate2 reproduces too)
        "early_stopping": True,
        "length_penalty": float(alpha) if alpha > 0 else 0.0,
    }
    if testing.get("min_output_length", 1) > 0:
        values["min_new_tokens"] = int(testing.get("min_output_length", 1))
    if testing.get("max_output_length", -1) > 0:
        values["max_new_tokens"] = int(testing["max_output_length"])
    return GenerationConfig(**values)


def convert_joeynmt_model(
    config: dict, state: dict[str, torch.Tensor], vocab_sizes: tuple[int, int]
) -> VanillaTransformerForConditionalGeneration:
    """Our model with JoeyNMT's weights `state` (its `model_state`) for its `config` (config.yaml as a dict)
    and vocabulary sizes (source, target); both compute the same logits (fp32, within rounding)."""
    model_config = config_from_joeynmt(config, state, vocab_sizes)
    model = build_checked(
        VanillaTransformerForConditionalGeneration, model_config, shapes_of(state), "JoeyNMT's config.yaml"
    )
    shared = model_config.share_encoder_decoder_embeddings
    state_ours = {}
    for name, tensor in state.items():
        ours = _our_name(name, shared)
        if ours is not None and not (ours == "lm_head.weight" and model_config.tie_word_embeddings):
            state_ours[ours] = tensor.float()
    model = load_converted_weights(model, state_ours, "JoeyNMT")
    model.generation_config = generation_config_from_joeynmt(config, model_config)
    return model


def joeynmt_sentencepiece_models(folder: Path, config: dict) -> tuple[Path, Path]:
    """The SentencePiece models of the source and target tokenizers of JoeyNMT's `config` (`data.src`,
    `data.trg`), found in `folder` (where JoeyNMT's training copies them) or at the path the config names;
    `ValueError` naming each option the OPUS-MT layout cannot express (another tokenizer, lowercasing, Unicode
    normalisation, Moses pre-tokenisation)."""
    import sentencepiece

    data = config.get("data") or {}
    models = []
    for side in ("src", "trg"):
        values = data.get(side) or {}
        tokenizer = values.get("tokenizer_cfg") or {}
        kind = values.get("tokenizer_type", values.get("bpe_type", "sentencepiece"))
        level = values.get("level")
        if level != "bpe" or kind != "sentencepiece":
            raise ValueError(
                f"data.{side}.level={bounded_repr(level)}, tokenizer_type={bounded_repr(kind)}: the converter brings SentencePiece tokenizers "
                "(level: bpe, tokenizer_type: sentencepiece) only; subword-nmt codes, words or characters have no "
                "exact transformers tokenizer"
            )
        for option, value in (
            ("lowercase", values.get("lowercase", False)),
            ("normalize", values.get("normalize", False)),
            ("tokenizer_cfg.pretokenizer", tokenizer.get("pretokenizer", "none")),
        ):
            if value not in (False, "none"):
                raise ValueError(
                    f"data.{side}.{option}={bounded_repr(value)}: the SentencePiece tokenizer the converter writes does no "
                    "lowercasing, normalisation or pre-tokenisation; only models trained without it convert"
                )
        named = Path(str(tokenizer.get("model_file", "")))
        path = next(
            (p for p in (folder / named.name, named, folder / named) if named.name and p.is_file()), None
        )
        if path is None:
            raise FileNotFoundError(
                f"data.{side}.tokenizer_cfg.model_file={bounded_repr(str(named))} is not in {folder}: copy the SentencePiece model "
                "there"
            )
        try:
            sentencepiece.SentencePieceProcessor(model_file=str(path))
        except (OSError, RuntimeError) as error:
            raise ValueError(f"{path} is not a SentencePiece model ({error})") from error
        models.append(path)
    return models[0], models[1]


def restrict_to_vocabulary(model: bytes, vocabulary: list[str]) -> bytes:
    """The serialized SentencePiece `model` restricted to `vocabulary` as JoeyNMT's tokenizer restricts it
    (sentencepiece's `SetVocabulary`, which JoeyNMT calls on loading): a normal piece that the vocabulary lacks and
    that is longer than one character is marked unused, so that encoding splits it into smaller pieces instead of
    producing the unknown token. Unigram and BPE models only (the others are returned unchanged)."""
    import importlib

    # protobuf's generated module, whose classes static checkers cannot see
    model_pb2 = importlib.import_module("sentencepiece.sentencepiece_model_pb2")
    proto = model_pb2.ModelProto()
    proto.ParseFromString(model)
    if proto.trainer_spec.model_type not in (model_pb2.TrainerSpec.UNIGRAM, model_pb2.TrainerSpec.BPE):
        return model
    piece_type = model_pb2.ModelProto.SentencePiece
    known = set(vocabulary)
    for piece in proto.pieces:
        if piece.type in (piece_type.NORMAL, piece_type.UNUSED):
            kept = piece.piece in known or len(piece.piece) == 1
            piece.type = piece_type.NORMAL if kept else piece_type.UNUSED
    return proto.SerializeToString()


def write_joeynmt_tokenizer(
    out_dir: Path, models: tuple[Path, Path], vocabularies: tuple[list[str], list[str]], config: dict
) -> None:
    """The OPUS-MT layout (`convert.vocabulary`) in `out_dir` for JoeyNMT's SentencePiece `models` and
    `vocabularies` (source, target). The models written are restricted to the vocabularies as JoeyNMT restricts
    them (`restrict_to_vocabulary`)."""
    import tempfile

    symbols = special_symbols(config)
    with tempfile.TemporaryDirectory() as scratch:
        restricted = []
        for side, model, vocabulary in zip(("source", "target"), models, vocabularies):
            path = Path(scratch) / f"{side}.spm"
            path.write_bytes(restrict_to_vocabulary(model.read_bytes(), vocabulary))
            restricted.append(path)
        write_sentencepiece_tokenizer(
            out_dir,
            restricted[0],
            vocabularies[0],
            restricted[1],
            vocabularies[1],
            unk_token=symbols["unk_token"],
            eos_token=symbols["eos_token"],
            pad_token=symbols["pad_token"],
        )


def convert_joeynmt_checkpoint(src_dir: str | Path, out_dir: str | Path, trust_pickle: bool = False) -> Path:
    """Convert a JoeyNMT model folder (see the module docstring) into a vanilla-transformer folder with remote
    code. The checkpoint is read only with `trust_pickle`; the vocabularies are checked against the weights."""
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    config = read_joeynmt_config(src_dir)
    vocabularies = joeynmt_vocabulary(src_dir, config, "src"), joeynmt_vocabulary(src_dir, config, "trg")
    models = joeynmt_sentencepiece_models(src_dir, config)
    state = load_joeynmt_state(src_dir, trust_pickle)
    model = convert_joeynmt_model(config, state, (len(vocabularies[0]), len(vocabularies[1])))
    write_converted_folder(model, None, out_dir)
    write_joeynmt_tokenizer(out_dir, models, vocabularies, config)
    return out_dir
