"""Parity against an implementation nobody here wrote: transformers' MarianMTModel with the same weights."""

from __future__ import annotations

import pytest
import torch
from conftest import perturb_bias_and_layer_norms
from transformers import AutoModelForSeq2SeqLM, MarianConfig, MarianMTModel

from vanilla_transformer.convert.marian import convert_marian_checkpoint, convert_marian_model


def marian_values(
    d_model: int, vocab: int | tuple[int, int], encoder: tuple, decoder: tuple, activation: str, **options
) -> dict:
    """MarianConfig values: `vocab` one joint vocabulary or (source, target) sizes; `encoder` and `decoder` are
    (layers, attention heads, feed-forward width); `options` are further MarianConfig fields."""
    shared = isinstance(vocab, int)
    values = dict(d_model=d_model, vocab_size=vocab if shared else vocab[0], activation_function=activation)
    if not shared:
        values["decoder_vocab_size"] = vocab[1]
    for side, (layers, heads, ffn_dim) in (("encoder", encoder), ("decoder", decoder)):
        values.update(
            {f"{side}_layers": layers, f"{side}_attention_heads": heads, f"{side}_ffn_dim": ffn_dim}
        )
    return {**values, "share_encoder_decoder_embeddings": shared, **options}


# d_model, vocabularies, encoder and decoder (layers, heads, feed-forward width), activation, options
MARIAN_CONFIGS = [
    marian_values(32, 101, (2, 4, 64), (2, 4, 64), "swish", scale_embedding=True),
    marian_values(48, (83, 67), (1, 3, 40), (3, 6, 72), "relu", scale_embedding=False),
    marian_values(24, 59, (3, 2, 32), (1, 2, 32), "gelu", scale_embedding=True, tie_word_embeddings=False),
    marian_values(
        16, (71, 53), (2, 4, 24), (2, 4, 24), "swish", scale_embedding=True, tie_word_embeddings=False
    ),
]


def make_marian(index: int) -> MarianMTModel:
    values = dict(MARIAN_CONFIGS[index])
    target_vocab = values.get("decoder_vocab_size", values["vocab_size"])
    pad = min(values["vocab_size"], target_vocab) - 1
    config = MarianConfig(
        **values,
        max_position_embeddings=64,
        pad_token_id=pad,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(100 + index)
    marian = MarianMTModel(config).eval()
    perturb_bias_and_layer_norms(marian, logits_bias_std=0.3)
    return marian


def padded_batch(marian: MarianMTModel, seed: int):
    g = torch.Generator().manual_seed(seed)
    config = marian.config
    pad = config.pad_token_id
    assert pad is not None
    src = torch.randint(1, pad, (3, 9), generator=g)
    src[:, -1] = 0
    mask = torch.ones_like(src)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    src[mask == 0] = pad
    src[1, 5] = src[2, 2] = 0  # eos before padding
    target_vocab = config.decoder_vocab_size
    assert target_vocab is not None
    labels = torch.randint(1, min(pad, target_vocab), (3, 7), generator=g)
    return src, mask, labels


@pytest.mark.parametrize("index", range(len(MARIAN_CONFIGS)))
def test_logits_match_marian(index):
    marian = make_marian(index)
    ours = convert_marian_model(marian)
    for attn in ("sdpa", "eager"):
        ours.set_attn_implementation(attn)
        src, mask, labels = padded_batch(marian, seed=index)
        with torch.no_grad():
            expected = marian(input_ids=src, attention_mask=mask, labels=labels)
            got = ours(input_ids=src, attention_mask=mask, labels=labels)
        torch.testing.assert_close(got.logits, expected.logits, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(got.loss, expected.loss, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(
            got.encoder_last_hidden_state[mask.bool()],
            expected.encoder_last_hidden_state[mask.bool()],
            atol=1e-4,
            rtol=1e-4,
        )


@pytest.mark.parametrize("index", range(len(MARIAN_CONFIGS)))
def test_generate_matches_marian(index):
    marian = make_marian(index)
    ours = convert_marian_model(marian)
    src, mask, _ = padded_batch(marian, seed=10 + index)
    settings = [
        dict(num_beams=1, do_sample=False),
        dict(num_beams=4, do_sample=False, length_penalty=0.6, no_repeat_ngram_size=2),
        dict(num_beams=4, do_sample=False, length_penalty=1.2, num_return_sequences=2, early_stopping=True),
    ]
    for kwargs in settings:
        with torch.no_grad():
            # transformers types generate's self as a protocol that its own MarianMTModel does not satisfy
            expected = marian.generate(  # pyright: ignore[reportAttributeAccessIssue]
                input_ids=src, attention_mask=mask, max_new_tokens=12, **kwargs
            )
            got = ours.generate(input_ids=src, attention_mask=mask, max_new_tokens=12, **kwargs)
        assert torch.equal(got, expected), kwargs


def test_converted_folder_loads_with_auto_class(tmp_path):
    marian = make_marian(1)
    marian.save_pretrained(tmp_path / "marian")
    (tmp_path / "marian" / "vocab.json").write_text("{}")  # stands for Marian's tokenizer files
    (tmp_path / "marian" / "model.onnx").write_text("")  # a weight file: replaced, never copied
    out = convert_marian_checkpoint(tmp_path / "marian", tmp_path / "ours")
    assert (out / "vocab.json").read_text() == "{}"
    assert not (out / "model.onnx").exists()
    with pytest.raises(ValueError, match="already exists and is not an empty folder"):
        convert_marian_checkpoint(tmp_path / "marian", out)  # never mixes its files with another model's
    assert (out / "modeling_vanilla_transformer.py").is_file()
    loaded = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    assert loaded.config.sinusoidal_layout == "concatenated"
    src, mask, labels = padded_batch(marian, seed=3)
    with torch.no_grad():
        expected = marian(input_ids=src, attention_mask=mask, labels=labels).logits
        got = loaded(input_ids=src, attention_mask=mask, labels=labels).logits
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_converter_rejects_a_folder_without_config(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        convert_marian_checkpoint(tmp_path, tmp_path / "out")
