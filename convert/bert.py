"""Convert transformers' `BertForMaskedLM` or `BertForSequenceClassification` into a vanilla encoder-only model.

BERT is the paper's encoder with a few additions, each a field of `VanillaEncoderOnlyConfig` (its `BERT` values):
  * learned positions, no sqrt(d_model) embedding scale, token-type embeddings, a LayerNorm on the summed
    embeddings -> `position_encoding="learned"`, `scale_embedding=False`, `type_vocab_size`,
    `embedding_layer_norm=True`;
  * exact GELU -> `activation_function="gelu"` (copied from `hidden_act`); LayerNorm epsilon 1e-12 (copied);
  * the masked-LM head's transform LN(gelu(dense(x))) before the tied output projection and its bias ->
    `mlm_head_transform=True`, `output_bias=True`;
  * the classifier reads the pooler, tanh(dense(state of the first token)) -> `classifier_pooling="first"`.
BERT's positions are 0..L-1 whatever the padding; ours count real tokens, which is the same for right-padded
batches (BERT's tokenizer pads on the right); pass `position_ids` to reproduce BERT on left-padded ones.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification

from vanilla_transformer.modeling import (
    VanillaEncoderOnlyConfig,
    VanillaEncoderOnlyForMaskedLM,
    VanillaEncoderOnlyForSequenceClassification,
)
from vanilla_transformer.modeling.configuration_vanilla_base import ACTIVATIONS
from vanilla_transformer.modeling.configuration_vanilla_encoder_only import BERT

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

# BERT classes by the `architectures` entry of a saved config -> the class that loads the folder for conversion
# (BertForPreTraining also holds the masked-LM head; its next-sentence head is dropped).
_LOADERS = {
    "BertForMaskedLM": BertForMaskedLM,
    "BertForPreTraining": BertForMaskedLM,
    "BertForSequenceClassification": BertForSequenceClassification,
}
# BERT parameter names -> ours: (BERT prefix, our prefix), the first that matches is used
_RENAMES = (
    ("bert.embeddings.word_embeddings.", "model.embed_tokens."),
    ("bert.embeddings.position_embeddings.", "model.embed_positions."),
    ("bert.embeddings.token_type_embeddings.", "model.token_type_embeddings."),
    ("bert.embeddings.LayerNorm.", "model.layernorm_embedding."),
    ("bert.pooler.dense.", "pooler.dense."),
    ("cls.predictions.transform.dense.", "lm_transform.dense."),
    ("cls.predictions.transform.LayerNorm.", "lm_transform.layer_norm."),
    ("cls.predictions.decoder.weight", "lm_head.weight"),
    # the bias the output layer adds; `cls.predictions.bias` is the same tensor, unless the embeddings are untied
    # (then transformers' BERT leaves it unused)
    ("cls.predictions.decoder.bias", "lm_head.bias"),
    ("classifier.", "classifier."),
)
_LAYER_RENAMES = (  # inside bert.encoder.layer.{i}. -> model.layers.{i}.
    ("attention.self.query.", "self_attn.q_proj."),
    ("attention.self.key.", "self_attn.k_proj."),
    ("attention.self.value.", "self_attn.v_proj."),
    ("attention.output.dense.", "self_attn.out_proj."),
    ("attention.output.LayerNorm.", "self_attn_layer_norm."),
    ("intermediate.dense.", "ffn.fc1."),
    ("output.dense.", "ffn.fc2."),
    ("output.LayerNorm.", "final_layer_norm."),
)


def config_from_bert(bert: BertConfig) -> VanillaEncoderOnlyConfig:
    """The encoder-only config that computes exactly what a `BertForMaskedLM` / `BertForSequenceClassification`
    with config `bert` computes (the classification fields `num_labels`, `id2label`, `label2id`, `problem_type`
    are copied)."""
    if bert.is_decoder or bert.add_cross_attention:
        raise ValueError(
            "the BERT converter takes bidirectional encoders (is_decoder=False, no cross-attention)"
        )
    position_type = getattr(bert, "position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(
            f"position_embedding_type={position_type!r} is not supported; the converter maps BERT's absolute "
            f"learned positions"
        )
    if not isinstance(bert.hidden_act, str) or bert.hidden_act not in ACTIVATIONS:
        raise ValueError(f"hidden_act={bert.hidden_act!r} is not supported; expected one of {ACTIVATIONS}")
    return VanillaEncoderOnlyConfig(
        **{
            **BERT,
            "activation_function": bert.hidden_act,
            "layer_norm_eps": float(bert.layer_norm_eps),
            "type_vocab_size": bert.type_vocab_size,
        },
        vocab_size=bert.vocab_size,
        d_model=bert.hidden_size,
        encoder_layers=bert.num_hidden_layers,
        encoder_attention_heads=bert.num_attention_heads,
        encoder_ffn_dim=bert.intermediate_size,
        dropout=float(bert.hidden_dropout_prob),
        attention_dropout=float(bert.attention_probs_dropout_prob),
        activation_dropout=0.0,
        max_position_embeddings=bert.max_position_embeddings,
        classifier_dropout=None if bert.classifier_dropout is None else float(bert.classifier_dropout),
        **tying_init_and_ids(
            bert, bert.initializer_range, bert.pad_token_id if bert.pad_token_id is not None else 0
        ),
        num_labels=bert.num_labels,
        id2label=bert.id2label,
        label2id=bert.label2id,
        problem_type=bert.problem_type,
    )


def _our_name(name: str) -> str | None:
    """BERT parameter name -> ours (None: not a parameter here, e.g. the next-sentence head)."""
    if name.startswith("bert.encoder.layer."):
        index, rest = name[len("bert.encoder.layer.") :].split(".", 1)
        for theirs, ours in _LAYER_RENAMES:
            if rest.startswith(theirs):
                return f"model.layers.{index}.{ours}{rest[len(theirs) :]}"
        return None
    for theirs, ours in _RENAMES:
        if name.startswith(theirs):
            return ours + name[len(theirs) :]
    return None


def convert_bert_model(
    bert: BertForMaskedLM | BertForSequenceClassification,
) -> VanillaEncoderOnlyForMaskedLM | VanillaEncoderOnlyForSequenceClassification:
    """Build our model with `bert`'s weights: `BertForMaskedLM` -> `VanillaEncoderOnlyForMaskedLM`,
    `BertForSequenceClassification` -> `VanillaEncoderOnlyForSequenceClassification`; both compute the same logits
    (fp32, within rounding)."""
    if isinstance(bert, BertForMaskedLM):
        model_class = VanillaEncoderOnlyForMaskedLM
    elif isinstance(bert, BertForSequenceClassification):
        model_class = VanillaEncoderOnlyForSequenceClassification
    else:
        raise ValueError(
            f"expected a BertForMaskedLM or BertForSequenceClassification, got {type(bert).__name__}; load the "
            f"checkpoint with one of them"
        )
    config = config_from_bert(bert.config)
    # tying from the weights, whatever the config says
    if isinstance(bert, BertForMaskedLM):
        decoder, embedding = bert.cls.predictions.decoder.weight, bert.bert.embeddings.word_embeddings.weight
        config.tie_word_embeddings = decoder.shape == embedding.shape and torch.equal(decoder, embedding)
    model = build_checked(model_class, config, shapes_of(bert.state_dict()), "the converted config")
    state = {}
    for name, tensor in bert.state_dict().items():
        ours = _our_name(name)
        if ours is not None and not (ours == "lm_head.weight" and config.tie_word_embeddings):
            state[ours] = tensor
    return load_converted_weights(model, state, "BERT")


def size_claims(source: dict, classifier: bool) -> list[SizeClaim]:
    """The sizes a BERT config.json (`source`) claims, with the tensors that show them (the number of labels too
    for a `classifier`): `common.check_claimed_sizes`' input."""
    defaults = BertConfig()
    fields = ("vocab_size", "hidden_size", "max_position_embeddings", "type_vocab_size", "num_hidden_layers")
    size = {name: source.get(name, getattr(defaults, name)) for name in fields}
    claims = [
        SizeClaim("vocab_size", size["vocab_size"], (("word_embeddings.weight", 0),)),
        SizeClaim("hidden_size", size["hidden_size"], (("word_embeddings.weight", 1),)),
        SizeClaim(
            "max_position_embeddings", size["max_position_embeddings"], (("position_embeddings.weight", 0),)
        ),
        SizeClaim("type_vocab_size", size["type_vocab_size"], (("token_type_embeddings.weight", 0),)),
        SizeClaim("num_hidden_layers", size["num_hidden_layers"], (("encoder.layer.", None),)),
    ]
    if isinstance(size["num_hidden_layers"], int) and size["num_hidden_layers"] > 0:
        intermediate = source.get("intermediate_size", defaults.intermediate_size)
        claims.append(
            SizeClaim("intermediate_size", intermediate, (("encoder.layer.0.intermediate.dense.weight", 0),))
        )
    if classifier:
        labels = source.get("id2label")
        count = len(labels) if isinstance(labels, dict) else source.get("num_labels", defaults.num_labels)
        claims.append(SizeClaim("num_labels", count, (("classifier.weight", 0),)))
    return claims


def _load_bert(folder: Path, trust_pickle: bool = False) -> BertForMaskedLM | BertForSequenceClassification:
    """The BERT model saved in `folder`, loaded with the class its `architectures` names (see `_LOADERS`) by
    `common.load_source_model` (sizes checked first; safetensors only unless `trust_pickle`)."""
    expected = "the folder of a saved BertForMaskedLM or BertForSequenceClassification"
    source = read_source_config(folder, "bert", "BERT", expected)
    model_class = _bert_class(folder, source.get("architectures") or [])
    claims = size_claims(source, classifier=model_class is BertForSequenceClassification)
    return load_source_model(model_class, folder, claims, trust_pickle, common_tables(source))


def _bert_class(folder: Path, architectures: list) -> type[BertForMaskedLM | BertForSequenceClassification]:
    """The transformers class that loads the BERT checkpoint in `folder`, whose config.json lists
    `architectures`, for conversion (see `_LOADERS`)."""
    for name in architectures:
        if name in _LOADERS:
            return _LOADERS[name]
    raise ValueError(
        f"{folder} holds {architectures or 'no architectures entry'}; the converter takes "
        f'{", ".join(_LOADERS)} (set "architectures" in config.json to the head the weights have)'
    )


def convert_bert(
    model_or_folder: BertForMaskedLM | BertForSequenceClassification | str | Path,
) -> VanillaEncoderOnlyForMaskedLM | VanillaEncoderOnlyForSequenceClassification:
    """Our model from a BERT model object or from the folder of a saved one (its `architectures` picks the head:
    masked LM for BertForMaskedLM / BertForPreTraining, classification for BertForSequenceClassification)."""
    if isinstance(model_or_folder, (str, Path)):
        model_or_folder = _load_bert(Path(model_or_folder))
    return convert_bert_model(model_or_folder)


def convert_bert_checkpoint(src_dir: str | Path, out_dir: str | Path, trust_pickle: bool = False) -> Path:
    """Convert a saved BERT folder into a vanilla encoder-only folder with remote code. The tokenizer files are
    copied unchanged, so `AutoTokenizer.from_pretrained(out_dir)` still loads BERT's tokenizer (with its [MASK]
    token, for `pipeline("fill-mask", model=out_dir, trust_remote_code=True)`)."""
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    return write_converted_folder(convert_bert(_load_bert(src_dir, trust_pickle)), src_dir, out_dir)
