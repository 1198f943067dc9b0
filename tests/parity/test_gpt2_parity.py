"""Parity against an implementation nobody here wrote: transformers' GPT2LMHeadModel with the same weights, converted
to our decoder-only model (tiny random configs built here; nothing is downloaded)."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
import torch
from conftest import perturb_biases_and_norms
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
)

from vanilla_transformer.convert.gpt2 import config_from_gpt2, convert_gpt2
from vanilla_transformer.modeling import VanillaDecoderOnlyForCausalLM


def gpt2_values(vocab: int, positions: int, width: int, layers: int, heads: int, **options) -> dict:
    """GPT2Config values: the sizes, then `options`, further GPT2Config fields."""
    values = dict(vocab_size=vocab, n_positions=positions, n_embd=width, n_layer=layers, n_head=heads)
    return {**values, **options}


# vocabulary, positions, width, layers, heads, options (the first row keeps GPT-2's gelu_new and n_inner=4C)
GPT2_CONFIGS = [
    gpt2_values(97, 48, 32, 2, 4),
    gpt2_values(83, 40, 24, 3, 2, n_inner=40, activation_function="relu", layer_norm_epsilon=1e-6),
    gpt2_values(71, 32, 48, 1, 6, activation_function="gelu", tie_word_embeddings=False),
]


def make_gpt2(index: int, attn: str = "sdpa") -> GPT2LMHeadModel:
    """A GPT-2 with random weights, every bias and LayerNorm perturbed (fresh ones are zeros and ones), query/key/value
    weights large enough for peaked attention (GPT-2's N(0, 0.02) makes it nearly uniform), no dropout.
    Its end-of-text token (bos = eos, also used as padding, as GPT-2 has no pad token) is the last id."""
    values = GPT2_CONFIGS[index]
    eos = values["vocab_size"] - 1
    config = GPT2Config(
        **values, bos_token_id=eos, eos_token_id=eos, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0
    )
    config._attn_implementation = attn
    torch.manual_seed(200 + index)
    gpt2 = GPT2LMHeadModel(config).eval()
    perturb_biases_and_norms(gpt2)
    with torch.no_grad():
        for block in gpt2.transformer.h:
            block.get_parameter("attn.c_attn.weight").normal_(0.0, 0.3)
    return gpt2


def left_padded_batch(vocab_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(3, 9) ids and mask, rows with 0, 3 and 6 left-padding positions filled with the end-of-text id."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size - 1, (3, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    mask[2, :6] = 0
    return ids.masked_fill(mask == 0, vocab_size - 1), mask


def gpt2_position_ids(mask: torch.Tensor) -> torch.Tensor:
    """The positions GPT-2's generate() gives a padded batch (its forward counts padding unless given these)."""
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)


@pytest.mark.parametrize("index", range(len(GPT2_CONFIGS)))
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_logits_and_loss_match_gpt2(index, attn):
    gpt2 = make_gpt2(index, attn)
    ours = convert_gpt2(gpt2)
    ours.set_attn_implementation(attn)
    assert ours.config.tie_word_embeddings == gpt2.config.tie_word_embeddings
    # too small an effect to see in logits
    assert ours.config.layer_norm_eps == gpt2.config.layer_norm_epsilon
    ids, mask = left_padded_batch(gpt2.config.vocab_size, seed=index)
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, 1:][mask[:, :-1] == 0] = -100  # a token predicted from a padding position is not scored either
    with torch.no_grad():
        expected = gpt2(
            input_ids=ids, attention_mask=mask, position_ids=gpt2_position_ids(mask), labels=labels
        )
        got = ours(input_ids=ids, attention_mask=mask, labels=labels)  # positions counted from the mask
        explicit = ours(input_ids=ids, attention_mask=mask, position_ids=gpt2_position_ids(mask))
    real = mask.bool()  # padding rows attend to nothing real: their values are not compared
    torch.testing.assert_close(got.logits[real], expected.logits[real], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(explicit.logits[real], expected.logits[real], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got.loss, expected.loss, atol=1e-5, rtol=1e-5)
    # no padding: GPT-2's own default positions, and every position compared
    with torch.no_grad():
        full = ids[:1]
        torch.testing.assert_close(
            ours(input_ids=full).logits, gpt2(input_ids=full).logits, atol=1e-4, rtol=1e-4
        )


@pytest.mark.parametrize("index", range(len(GPT2_CONFIGS)))
def test_generate_matches_gpt2(index):
    gpt2 = make_gpt2(index)
    ours = convert_gpt2(gpt2)
    ids, mask = left_padded_batch(gpt2.config.vocab_size, seed=10 + index)
    settings = [
        dict(num_beams=1),
        dict(num_beams=4, length_penalty=0.6, no_repeat_ngram_size=2),
        dict(num_beams=3, length_penalty=1.2, num_return_sequences=2, early_stopping=True),
    ]
    for kwargs in settings:
        with torch.no_grad():
            # transformers types generate's self as a protocol that its own GPT2LMHeadModel does not satisfy
            expected = gpt2.generate(  # pyright: ignore[reportAttributeAccessIssue]
                input_ids=ids, attention_mask=mask, max_new_tokens=10, do_sample=False, **kwargs
            )
            got = ours.generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=10, do_sample=False, **kwargs
            )
        assert torch.equal(got, expected), kwargs


def test_config_mapping_and_refused_variants():
    config = config_from_gpt2(
        GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, bos_token_id=99, eos_token_id=99)
    )
    assert (
        config.normalize_before,
        config.position_encoding,
        config.scale_embedding,
        config.output_bias,
    ) == (True, "learned", False, False)
    assert (config.activation_function, config.layer_norm_eps, config.decoder_ffn_dim) == (
        "gelu_new",
        1e-5,
        256,
    )
    assert config.pad_token_id is None and config.eos_token_id == 99
    bad: dict[str, Any]
    for bad, match in (
        (dict(scale_attn_weights=False), "scale_attn_weights"),
        (dict(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx"),
        (dict(add_cross_attention=True), "add_cross_attention"),
        (dict(activation_function="tanh"), "activation_function"),
    ):
        with pytest.raises(ValueError, match=match):
            config_from_gpt2(
                GPT2Config(
                    n_embd=16, n_layer=1, n_head=2, vocab_size=50, bos_token_id=49, eos_token_id=49, **bad
                )
            )


def gpt2_style_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """A word-level stand-in for GPT-2's tokenizer: no pad token, one end-of-text token (the last id)."""
    vocab = {f"w{i}": i for i in range(vocab_size - 1)} | {"<|endoftext|>": vocab_size - 1}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )


def test_converted_folder_loads_with_auto_class_and_keeps_the_tokenizer(tmp_path):
    gpt2 = make_gpt2(1)
    gpt2.save_pretrained(tmp_path / "gpt2")
    gpt2_style_tokenizer(gpt2.config.vocab_size).save_pretrained(tmp_path / "gpt2")
    out = tmp_path / "ours"
    assert convert(tmp_path / "gpt2", out) == 0
    config = json.loads((out / "config.json").read_text())
    assert (
        config["auto_map"]["AutoModelForCausalLM"]
        == "modeling_vanilla_decoder_only.VanillaDecoderOnlyForCausalLM"
    )
    assert (out / "modeling_vanilla_decoder_only.py").is_file() and (out / "model.safetensors").is_file()
    loaded = AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(loaded) is VanillaDecoderOnlyForCausalLM
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.pad_token is None and tokenizer.eos_token == "<|endoftext|>"  # GPT-2's, copied unchanged
    ids = tokenizer("w5 w9 w17 w33", return_tensors="pt").input_ids
    assert ids.tolist() == [[5, 9, 17, 33]]
    assert_same_logits_and_greedy_tokens(loaded, gpt2, ids, max_new_tokens=6)


def assert_same_logits_and_greedy_tokens(ours, gpt2, ids: torch.Tensor, max_new_tokens: int) -> None:
    with torch.no_grad():
        torch.testing.assert_close(
            ours(input_ids=ids).logits, gpt2(input_ids=ids).logits, atol=1e-4, rtol=1e-4
        )
        assert torch.equal(
            ours.generate(input_ids=ids, max_new_tokens=max_new_tokens, do_sample=False),
            gpt2.generate(input_ids=ids, max_new_tokens=max_new_tokens, do_sample=False),
        )


def convert(*argv) -> int:
    """`vanilla-transformer convert --from gpt2 ARGV` in this process; its exit status."""
    return importlib.import_module("vanilla_transformer.commands.convert").main(
        ["--from", "gpt2", *map(str, argv)]
    )


def test_convert_script_reports_a_bad_folder(tmp_path, capsys):
    assert convert(tmp_path, tmp_path / "out") == 2
    assert "config.json" in capsys.readouterr().err
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    assert convert(tmp_path, tmp_path / "out") == 2
    assert "not a GPT-2 model" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_small_gpt2_config_with_default_special_ids_converts(tmp_path):
    """GPT2Config keeps bos = eos = 50256 whatever vocab_size is: such a model runs in transformers, and converts."""
    config = GPT2Config(**gpt2_values(100, 32, 32, 2, 4), resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    assert config.bos_token_id == config.eos_token_id == 50256
    torch.manual_seed(230)
    gpt2 = GPT2LMHeadModel(config).eval()
    perturb_biases_and_norms(gpt2)
    gpt2.save_pretrained(tmp_path / "gpt2")
    assert convert(tmp_path / "gpt2", tmp_path / "ours") == 0
    ours = AutoModelForCausalLM.from_pretrained(tmp_path / "ours").eval()
    ids = torch.randint(0, 100, (2, 7), generator=torch.Generator().manual_seed(231))
    assert_same_logits_and_greedy_tokens(ours, gpt2, ids, max_new_tokens=8)
