"""The position and embedding fields that imported models need: `sinusoidal_layout="tensor2tensor"`,
`position_offset` and `layernorm_embedding` change what the model computes as their docstrings say (fairseq's own
tables are compared in tests/importers/test_fairseq.py)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import random_batch, tiny_model

from vanilla_transformer.modeling import VanillaTransformerConfig
from vanilla_transformer.modeling.positions_vanilla_transformer import (
    LearnedPositionalEmbedding,
    sinusoidal_table,
)


def test_tensor2tensor_layout_is_sines_then_cosines_of_its_frequencies():
    table = sinusoidal_table(7, 8, "tensor2tensor", offset=3)
    half = 4
    for row, position in enumerate(range(3, 10)):
        for i in range(half):
            angle = position * math.exp(-i * math.log(10000.0) / (half - 1))
            assert table[row, i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[row, half + i].item() == pytest.approx(math.cos(angle), abs=1e-6)


def encoder_states(model, ids, mask, position_ids=None):
    with torch.no_grad():
        return model.get_encoder()(
            input_ids=ids, attention_mask=mask, position_ids=position_ids
        ).last_hidden_state


@pytest.mark.parametrize("encoding", ["sinusoidal", "learned"])
def test_position_offset_shifts_the_row_each_position_reads(encoding):
    offset = 2
    shifted = tiny_model(
        seed=1, position_encoding=encoding, position_offset=offset, max_position_embeddings=16
    )
    plain = tiny_model(seed=1, position_encoding=encoding, max_position_embeddings=16 + offset)
    if encoding == "learned":
        table = shifted.model.encoder.embed_positions
        assert isinstance(table, LearnedPositionalEmbedding) and table.weight.shape[0] == 16 + offset
        plain.load_state_dict(shifted.state_dict())
    ids, mask = random_batch(97, 3, 9, seed=4)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    torch.testing.assert_close(
        encoder_states(shifted, ids, mask), encoder_states(plain, ids, mask, positions + offset)
    )
    assert not torch.allclose(encoder_states(shifted, ids, mask), encoder_states(plain, ids, mask))


def test_layernorm_embedding_normalises_the_embeddings_of_both_stacks():
    model = tiny_model(seed=2, layernorm_embedding=True)
    ids, mask = random_batch(97, 2, 6, seed=3)
    target = torch.randint(4, 97, (2, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        before = model(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
        for stack in (model.model.encoder, model.model.decoder):
            assert isinstance(stack.layernorm_embedding, torch.nn.LayerNorm)
            stack.layernorm_embedding.bias.add_(0.5)
            after = model(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
            assert not torch.allclose(before, after)
            before = after
    assert tiny_model(seed=2).model.encoder.layernorm_embedding is None


def test_new_fields_are_validated_and_saved(tmp_path):
    with pytest.raises(ValueError, match="position_offset must be an integer >= 0"):
        VanillaTransformerConfig(position_offset=-1)
    with pytest.raises(ValueError, match="sinusoidal_layout must be one of"):
        VanillaTransformerConfig(sinusoidal_layout="t2t")
    config = VanillaTransformerConfig(
        sinusoidal_layout="tensor2tensor", position_offset=2, layernorm_embedding=True
    )
    config.save_pretrained(tmp_path)
    loaded = VanillaTransformerConfig.from_pretrained(tmp_path)
    assert loaded.sinusoidal_layout == "tensor2tensor"
    assert loaded.position_offset == 2 and loaded.layernorm_embedding
