"""A generation config whose max_length exceeds the decoder's positions (a converted Marian model's may) is capped
by the translation loop instead of failing mid-generation."""

from __future__ import annotations

import torch
from conftest import tiny_model, tiny_tokenizer

from vanilla_transformer.inference import translate


def test_max_length_beyond_the_positions_is_capped():
    tokenizer = tiny_tokenizer()
    model = tiny_model(vocab_size=len(tokenizer), max_position_embeddings=12)
    with torch.no_grad():
        # never </s>: every output runs to the length limit
        model.final_logits_bias[model.config.eos_token_id] = -1e4
    model.generation_config.max_new_tokens = None
    model.generation_config.max_length = 40
    [output] = translate(model, tokenizer, ["起初神创造天地。"], num_beams=1)
    # the output of as many new tokens as the positions hold
    assert (
        output
        and output == translate(model, tokenizer, ["起初神创造天地。"], num_beams=1, max_new_tokens=12)[0]
    )


def test_the_source_length_cap_stays_within_the_positions():
    """max_len_a * source length + max_len_b beyond the positions: as many new tokens as the positions hold."""
    tokenizer = tiny_tokenizer()
    model = tiny_model(vocab_size=len(tokenizer), max_position_embeddings=12)
    with torch.no_grad():
        model.final_logits_bias[model.config.eos_token_id] = -1e4
    model.generation_config.max_new_tokens = None
    model.generation_config.max_length = 12
    source = ["起初神创造天地。"]
    [output] = translate(model, tokenizer, source, num_beams=4, max_len_a=2.0, max_len_b=10)
    assert output == translate(model, tokenizer, source, num_beams=4, max_new_tokens=12)[0]
