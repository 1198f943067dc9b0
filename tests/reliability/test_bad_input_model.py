"""Bad input to the config and the model gets a clear ValueError naming the value and the fix."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import random_batch, tiny_config, tiny_model
from transformers import AutoConfig

from vanilla_transformer.modeling import VanillaTransformerConfig


@pytest.mark.parametrize(
    "overrides, match",
    [
        (
            dict(d_model=30, encoder_attention_heads=4),
            "d_model=30 is not divisible by encoder_attention_heads=4",
        ),
        (dict(decoder_attention_heads=3), "decoder_attention_heads=3"),
        (dict(d_model=0), "d_model must be a positive integer, got 0"),
        (dict(encoder_layers=-1), "encoder_layers must be a positive integer, got -1"),
        (dict(vocab_size=2.5), "vocab_size must be a positive integer, got 2.5"),
        (dict(dropout=1.5), "dropout must be a probability"),
        (dict(attention_dropout=-0.1), "attention_dropout must be a probability"),
        (dict(activation_function="tanh"), "activation_function must be one of"),
        (dict(position_encoding="alibi"), "position_encoding must be one of"),
        (dict(sinusoidal_layout="zigzag"), "sinusoidal_layout must be one of"),
        (
            dict(position_encoding="rope", d_model=36, encoder_attention_heads=4, decoder_attention_heads=4),
            "rope needs an even head dimension",
        ),
        (dict(pad_token_id=97), r"pad_token_id=97 is outside the vocabulary \[0, 97\)"),
        (dict(eos_token_id=-1), "eos_token_id=-1 is outside the vocabulary"),
        (dict(decoder_start_token_id=200), "decoder_start_token_id=200"),
        (dict(decoder_vocab_size=50), "share_encoder_decoder_embeddings=True needs one vocabulary"),
        (dict(normalize_before="yes"), "normalize_before must be true or false"),
        (dict(layer_norm_eps=0), "layer_norm_eps must be > 0"),
        (dict(linear_init_std=-0.02), "linear_init_std must be > 0 or None"),
        (dict(init_std=True), "init_std must be > 0 or None"),
        (dict(d_modle=64), "did you mean 'd_model'"),
    ],
)
def test_invalid_config_values_are_named(overrides, match):
    with pytest.raises(ValueError, match=match):
        tiny_config(**overrides)


@pytest.mark.parametrize(
    "family", ["VanillaTransformerConfig", "VanillaDecoderOnlyConfig", "VanillaEncoderOnlyConfig"]
)
@pytest.mark.parametrize(
    "overrides, match",
    [
        (dict(layer_norm_eps=True), "layer_norm_eps must be > 0, got True"),
        (dict(position_encoding="rope", rope_theta=True), "rope_theta must be > 0, got True"),
        (dict(dropout="0.1"), r"dropout must be a probability in \[0, 1\), got '0.1'"),
        (
            dict(d_model=0, max_position_embeddings=-2),
            "d_model must be a positive integer, got 0; "
            "max_position_embeddings must be a positive integer, got -2",
        ),
        (dict(tie_word_embeddings=1), "tie_word_embeddings must be true or false, got 1"),
        (dict(d_model=510), "d_model=510 is not divisible by (encoder|decoder)_attention_heads=8"),
        (dict(d_model=8, max_position_embeddings=10), None),
    ],
)
def test_every_family_checks_the_shared_fields_alike(family, overrides, match):
    import vanilla_transformer.modeling as modeling

    config_class = getattr(modeling, family)
    if match is None:  # a valid small config of every family
        config_class(**overrides)
        return
    with pytest.raises(ValueError, match=f"Invalid {family}: .*{match}"):
        config_class(**overrides)


def test_config_file_with_wrong_typed_or_misspelled_field(tmp_path):
    tiny_config().save_pretrained(tmp_path)
    path = tmp_path / "config.json"
    data = json.loads(path.read_text())
    data["d_model"] = "512"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="d_model must be a positive integer, got '512'"):
        AutoConfig.from_pretrained(tmp_path)
    data["d_model"] = 32
    data["encoder_layer"] = 2
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="did you mean 'encoder_layers'"):
        VanillaTransformerConfig.from_pretrained(tmp_path)


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=50)


def test_token_id_outside_vocabulary(model):
    src, mask = random_batch(97, 2, 5)
    src[1, 2] = 97
    with pytest.raises(ValueError, match="token id 97, outside the model's vocabulary \\[0, 97\\)"):
        model(input_ids=src, attention_mask=mask, decoder_input_ids=src)
    src[1, 2] = -3
    with pytest.raises(ValueError, match="token id -3"):
        model.generate(input_ids=src, attention_mask=mask, max_new_tokens=2)


def test_decoder_ids_and_labels_outside_vocabulary(model):
    src, mask = random_batch(97, 2, 5)
    bad = src.clone()
    bad[0, 0] = 1000
    with pytest.raises(ValueError, match="decoder_input_ids contains token id 1000"):
        model(input_ids=src, attention_mask=mask, decoder_input_ids=bad)
    with pytest.raises(ValueError, match="labels contains token id 1000"):
        model(input_ids=src, attention_mask=mask, labels=bad)


def test_float_ids_are_rejected(model):
    with pytest.raises(ValueError, match="integer token ids, got dtype torch.float32"):
        model(input_ids=torch.ones(1, 3), decoder_input_ids=torch.ones(1, 2, dtype=torch.long))


def test_mask_of_wrong_shape(model):
    src, mask = random_batch(97, 2, 5)
    with pytest.raises(
        ValueError, match=r"attention_mask has shape \(2, 4\) but the tokens have shape \(2, 5\)"
    ):
        model(input_ids=src, attention_mask=mask[:, :4], decoder_input_ids=src)
    with pytest.raises(ValueError, match="attention_mask has shape"):
        model.generate(input_ids=src, attention_mask=mask[:1], max_new_tokens=2)


def test_empty_batch_and_empty_sequence(model):
    with pytest.raises(ValueError, match="empty batch"):
        model(
            input_ids=torch.zeros(0, 4, dtype=torch.long),
            decoder_input_ids=torch.zeros(0, 1, dtype=torch.long),
        )
    with pytest.raises(ValueError, match="length 0"):
        model.generate(input_ids=torch.zeros(2, 0, dtype=torch.long), max_new_tokens=2)


def test_sequence_longer_than_positions(model):
    long_src = torch.randint(4, 97, (1, 65))
    with pytest.raises(
        ValueError, match="65 positions but the model supports at most max_position_embeddings=64; truncate"
    ):
        model(input_ids=long_src, decoder_input_ids=long_src[:, :3])
    with pytest.raises(ValueError, match="max_position_embeddings=64"):
        model.generate(input_ids=long_src[:, :10], max_new_tokens=70, num_beams=1)


def test_one_dimensional_ids(model):
    with pytest.raises(ValueError, match=r"shape \(batch, length\), got shape \(5,\)"):
        model(input_ids=torch.arange(4, 9), decoder_input_ids=torch.arange(4, 6)[None])


def test_missing_decoder_input(model):
    with pytest.raises(ValueError, match="pass decoder_input_ids"):
        model(input_ids=torch.arange(4, 9)[None])
