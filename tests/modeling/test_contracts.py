"""Contracts that code written for transformers' own models relies on, in all three families: forward arguments left
as None take the config's value; a config with attributes set after construction reloads; a checkpoint without the
token embedding reports it missing and initialises it; a causal LM honours `shift_labels`; a stack saved on its own
loads on its own."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch
from conftest import random_batch, tiny_config, tiny_family_config
from safetensors.torch import load_file, save_file
from torch.nn import functional as F
from transformers import PretrainedConfig, PreTrainedModel

from vanilla_transformer.modeling import (
    VanillaDecoderOnlyConfig,
    VanillaDecoderOnlyForCausalLM,
    VanillaDecoderOnlyModel,
    VanillaEncoderOnlyConfig,
    VanillaEncoderOnlyForMaskedLM,
    VanillaEncoderOnlyForSequenceClassification,
    VanillaEncoderOnlyModel,
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerModel,
)
from vanilla_transformer.modeling.modeling_vanilla_transformer import (
    VanillaTransformerDecoder,
    VanillaTransformerEncoder,
)

VOCAB = 61
IDS, MASK = random_batch(VOCAB, 2, 6, seed=3)


def family_config(family: str, attn: str = "sdpa", **overrides) -> Any:
    """A tiny config of `family` ("encoder-decoder", "decoder-only", "encoder-only") with `attn` attention (of the
    family's own config class)."""
    if family == "encoder-decoder":
        config = tiny_config(vocab_size=VOCAB, **overrides)
        config._attn_implementation = attn
        return config
    config_class = VanillaDecoderOnlyConfig if family == "decoder-only" else VanillaEncoderOnlyConfig
    side = "decoder" if family == "decoder-only" else "encoder"
    return tiny_family_config(config_class, side, 32, attn, vocab_size=VOCAB, **overrides)


def inputs_of(model: PreTrainedModel) -> dict[str, torch.Tensor]:
    batch = {"input_ids": IDS, "attention_mask": MASK}
    if model.config.is_encoder_decoder:
        batch["decoder_input_ids"] = IDS[:, :4] % model.config.decoder_vocab_size
    return batch


# (model class, family)
MODELS = [
    (VanillaTransformerModel, "encoder-decoder"),
    (VanillaTransformerForConditionalGeneration, "encoder-decoder"),
    (VanillaDecoderOnlyModel, "decoder-only"),
    (VanillaDecoderOnlyForCausalLM, "decoder-only"),
    (VanillaEncoderOnlyModel, "encoder-only"),
    (VanillaEncoderOnlyForMaskedLM, "encoder-only"),
    (VanillaEncoderOnlyForSequenceClassification, "encoder-only"),
]


def attention_fields(output) -> list[str]:
    return [
        name
        for name in ("attentions", "decoder_attentions", "cross_attentions", "encoder_attentions")
        if name in output
    ]


# ------------------------------------------------------------------------------ output flags fall back to the config


@pytest.mark.parametrize("model_class, family", MODELS, ids=lambda v: getattr(v, "__name__", v))
def test_output_flags_left_as_none_take_the_config_values(model_class, family):
    config = family_config(family, attn="eager")
    model = model_class(config).eval()
    plain = model(**inputs_of(model))
    assert plain.get("hidden_states") is None and plain.get("attentions") is None

    config.output_attentions = True
    config.output_hidden_states = True
    output = model(**inputs_of(model))
    layers = config.encoder_layers if family == "encoder-only" else config.decoder_layers
    for name in attention_fields(output):
        assert output[name] is not None and len(output[name]) == (
            config.encoder_layers if name == "encoder_attentions" else layers
        ), name
    states = [
        name for name in ("hidden_states", "decoder_hidden_states", "encoder_hidden_states") if name in output
    ]
    assert states and all(output[name] is not None for name in states)

    # an argument given explicitly wins over the config
    explicit = model(**inputs_of(model), output_attentions=False, output_hidden_states=False)
    assert all(explicit.get(name) is None for name in attention_fields(explicit) + states)

    config.return_dict = False
    as_tuple = model(**inputs_of(model))
    assert isinstance(as_tuple, tuple)
    torch.testing.assert_close(as_tuple[0], plain[0])
    assert not isinstance(model(**inputs_of(model), return_dict=True), tuple)


@pytest.mark.parametrize(
    "model_class, family",
    [m for m in MODELS if m[1] != "encoder-only"],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_use_cache_left_as_none_takes_the_config_value(model_class, family):
    config = family_config(family)
    model = model_class(config).eval()
    assert model(**inputs_of(model)).past_key_values is not None
    config.use_cache = False
    assert model(**inputs_of(model)).past_key_values is None
    assert model(**inputs_of(model), use_cache=True).past_key_values is not None


# ------------------------------------------------------------------------------ configs with attributes set later


@pytest.mark.parametrize("family", ["encoder-decoder", "decoder-only", "encoder-only"])
def test_a_config_with_attributes_set_after_construction_reloads(tmp_path, family):
    config = family_config(family)
    config.extra_eps = 1e-7
    config.tool_metadata = {"made_by": "a library"}
    config.save_pretrained(tmp_path)
    loaded = type(config).from_pretrained(tmp_path)
    assert loaded.extra_eps == 1e-7 and loaded.tool_metadata == {"made_by": "a library"}
    assert loaded.d_model == config.d_model
    loaded.save_pretrained(tmp_path / "again")  # and again
    assert type(config).from_pretrained(tmp_path / "again").extra_eps == 1e-7

    # a misspelled constructor argument is still refused
    with pytest.raises(ValueError, match="did you mean 'd_model'"):
        family_config(family, d_modle=64)


def test_a_config_without_attributes_set_later_writes_no_list_of_them(tmp_path):
    VanillaTransformerConfig().save_pretrained(tmp_path)
    assert "extra_attributes" not in (tmp_path / "config.json").read_text()


# ------------------------------------------------------------------------------ a checkpoint without the embedding


@pytest.mark.parametrize(
    "model_class, family, overrides",
    [
        (VanillaTransformerForConditionalGeneration, "encoder-decoder", {}),
        (VanillaTransformerModel, "encoder-decoder", {}),
        (
            VanillaTransformerForConditionalGeneration,
            "encoder-decoder",
            {"share_encoder_decoder_embeddings": False, "decoder_vocab_size": 50},
        ),
        (VanillaTransformerForConditionalGeneration, "encoder-decoder", {"tie_word_embeddings": False}),
        (VanillaDecoderOnlyForCausalLM, "decoder-only", {}),
        (VanillaEncoderOnlyForMaskedLM, "encoder-only", {}),
    ],
    ids=[
        "seq2seq-shared",
        "seq2seq-base",
        "seq2seq-separate",
        "seq2seq-untied-output",
        "decoder-only",
        "encoder-only",
    ],
)
def test_a_checkpoint_without_the_embedding_reports_it_missing_and_initialises_it(
    tmp_path, model_class, family, overrides
):
    model_class(family_config(family, **overrides)).save_pretrained(tmp_path)
    path = tmp_path / "model.safetensors"
    state = load_file(path)
    embedding_keys = [key for key in state if "shared" in key or "embed_tokens" in key]
    assert embedding_keys
    save_file({k: v for k, v in state.items() if k not in embedding_keys}, path, metadata={"format": "pt"})

    model, info = model_class.from_pretrained(tmp_path, output_loading_info=True)
    assert set(embedding_keys) <= set(info["missing_keys"])
    meta = [name for name, tensor in model.state_dict().items() if tensor.device.type == "meta"]
    assert meta == []
    weight = model.get_input_embeddings().weight
    assert torch.isfinite(weight).all() and weight.std() > 0
    assert torch.isfinite(model(**inputs_of(model))[0]).all()


@pytest.mark.parametrize("tie_word_embeddings", [True, False])
def test_shared_embeddings_stay_one_parameter(tmp_path, tie_word_embeddings):
    config = family_config("encoder-decoder", tie_word_embeddings=tie_word_embeddings)
    VanillaTransformerForConditionalGeneration(config).save_pretrained(tmp_path)
    for model in (
        VanillaTransformerForConditionalGeneration(config),
        VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path),
    ):
        shared = model.model.shared.weight
        assert model.model.encoder.embed_tokens.weight is shared
        assert model.model.decoder.embed_tokens.weight is shared
        assert (model.lm_head.weight is shared) == tie_word_embeddings


# ------------------------------------------------------------------------------ shift_labels


def test_causal_lm_scores_shift_labels_as_given():
    torch.manual_seed(0)
    model = VanillaDecoderOnlyForCausalLM(family_config("decoder-only")).eval()
    labels = IDS.masked_fill(MASK == 0, -100)
    shifted = F.pad(labels, (0, 1), value=-100)[:, 1:]  # what context-parallel training passes
    by_labels = model(IDS, attention_mask=MASK, labels=labels)
    by_shift = model(IDS, attention_mask=MASK, shift_labels=shifted)
    torch.testing.assert_close(by_shift.loss, by_labels.loss)
    # with both, shift_labels are the targets (not labels shifted once more)
    both = model(IDS, attention_mask=MASK, labels=labels, shift_labels=shifted)
    torch.testing.assert_close(both.loss, by_labels.loss)
    logits = by_labels.logits
    reference = F.cross_entropy(logits.reshape(-1, VOCAB), shifted.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(by_shift.loss, reference)
    # other targets give another loss: they are read, not ignored
    other = model(IDS, attention_mask=MASK, shift_labels=labels)
    assert not torch.allclose(other.loss, by_labels.loss)
    with pytest.raises(ValueError, match="shift_labels"):
        model(IDS, attention_mask=MASK, shift_labels=shifted[:, :-1])


# ------------------------------------------------------------------------------ a stack saved on its own


@pytest.mark.parametrize(
    "family, stack_class, which",
    [
        ("encoder-decoder", VanillaTransformerEncoder, "encoder"),
        ("encoder-decoder", VanillaTransformerDecoder, "decoder"),
        ("encoder-only", VanillaEncoderOnlyModel, "encoder"),  # the stack of the masked-LM model
    ],
)
def test_a_stack_saved_on_its_own_loads_on_its_own(tmp_path, family, stack_class, which):
    torch.manual_seed(0)
    if family == "encoder-decoder":
        model = VanillaTransformerModel(family_config(family)).eval()
        stack = model.get_encoder() if which == "encoder" else model.get_decoder()
    else:
        stack = VanillaEncoderOnlyForMaskedLM(family_config(family)).eval().model
    stack.save_pretrained(tmp_path)
    loaded, info = stack_class.from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == set() and info["unexpected_keys"] == set()
    if which == "encoder":
        arguments = {"input_ids": IDS, "attention_mask": MASK}
    else:
        encoded = model.get_encoder()(IDS, MASK).last_hidden_state
        arguments = {
            "input_ids": IDS[:, :4],
            "encoder_hidden_states": encoded,
            "encoder_attention_mask": MASK,
        }
    torch.testing.assert_close(
        loaded.eval()(**arguments).last_hidden_state, stack(**arguments).last_hidden_state
    )


# ------------------------------------------------------------------------------ every field in the signature


@pytest.mark.parametrize(
    "config_class", [VanillaTransformerConfig, VanillaDecoderOnlyConfig, VanillaEncoderOnlyConfig]
)
def test_the_config_signature_lists_every_field_with_its_default(config_class):
    # transformers' testers and IDEs read the signature: each field a config saves is a named argument whose
    # default is the value a default config holds
    default = config_class()
    generic = set(PretrainedConfig().to_dict()) | {"model_type", "transformers_version"}
    fields = {name: value for name, value in default.to_dict().items() if name not in generic}
    parameters = inspect.signature(config_class.__init__).parameters
    assert fields and set(fields) <= set(parameters)
    for name, value in fields.items():
        assert parameters[name].default == value or parameters[name].default is None, name
    for name in ("vocab_size", "d_model", "dropout", "pad_token_id", "eos_token_id"):
        assert parameters[name].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, name

    # a config built from the signature's names alone is the one asked for (what transformers' testers do)
    asked = {"vocab_size": 99, "d_model": 16, "max_position_embeddings": 40, "pad_token_id": 1}
    asked.update({name: 2 for name in parameters if name.endswith(("_layers", "_attention_heads"))})
    config = config_class(**{name: value for name, value in asked.items() if name in parameters})
    assert {name: getattr(config, name) for name in asked} == asked
