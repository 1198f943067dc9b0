"""Core model properties: cache equivalence, backends, padding and batch invariance, gradients, save/load,
numerical safety, compile-ability, and that every config option is real."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from conftest import random_batch, step_by_step_logits, tiny_config, tiny_model
from transformers import AutoModelForSeq2SeqLM, StaticCache
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration, build_attention_mask
from vanilla_transformer.modeling.kernels_vanilla_transformer import add_dropout, apply_dropout
from vanilla_transformer.modeling.modeling_vanilla_transformer import VanillaTransformerAttention
from vanilla_transformer.modeling.positions_vanilla_transformer import sinusoidal_table


def full_logits(model, src, mask, tgt):
    with torch.no_grad():
        return model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt, use_cache=False).logits


@pytest.mark.parametrize("position_encoding", ["sinusoidal", "learned", "rope"])
@pytest.mark.parametrize("normalize_before", [False, True])
def test_incremental_decoding_equals_full_recomputation(position_encoding, normalize_before):
    model = tiny_model(position_encoding=position_encoding, normalize_before=normalize_before)
    src, mask = random_batch(97, 3, 8, seed=1)
    tgt, _ = random_batch(97, 3, 6, seed=2)
    expected = full_logits(model, src, mask, tgt)
    dynamic, _ = step_by_step_logits(model, src, mask, tgt)
    torch.testing.assert_close(dynamic, expected, atol=1e-5, rtol=1e-5)
    config = model.config
    static = EncoderDecoderCache(
        StaticCache(config=config.get_text_config(decoder=True), max_cache_len=10),
        StaticCache(config=config.get_text_config(decoder=True), max_cache_len=src.shape[1]),
    )
    torch.testing.assert_close(
        step_by_step_logits(model, src, mask, tgt, static)[0], expected, atol=1e-5, rtol=1e-5
    )


def test_cross_attention_keys_are_computed_once():
    model = tiny_model()
    src, mask = random_batch(97, 2, 7, seed=3)
    calls = []
    handles = [
        layer.get_submodule("encoder_attn.k_proj").register_forward_hook(lambda *a: calls.append(1))
        for layer in model.model.decoder.layers
    ]
    model.generate(
        input_ids=src, attention_mask=mask, num_beams=1, do_sample=False, max_new_tokens=6, min_new_tokens=6
    )
    for h in handles:
        h.remove()
    assert len(calls) == model.config.decoder_layers  # once per layer per generate() call, not per step


@pytest.mark.parametrize(
    "kwargs",
    [dict(num_beams=1), dict(num_beams=3, length_penalty=0.6), dict(num_beams=3, num_return_sequences=2)],
)
def test_generate_same_with_and_without_cache(kwargs):
    model = tiny_model(seed=4)
    src, mask = random_batch(97, 3, 9, seed=5)
    common = dict(input_ids=src, attention_mask=mask, do_sample=False, max_new_tokens=10, **kwargs)
    with_cache = model.generate(**common)
    without = model.generate(**common, use_cache=False)
    static = model.generate(**common, cache_implementation="static")
    assert torch.equal(with_cache, without)
    assert torch.equal(with_cache, static)


def test_eager_equals_sdpa():
    model = tiny_model(seed=6)
    src, mask = random_batch(97, 4, 10, seed=7)
    tgt, tgt_mask = random_batch(97, 4, 8, seed=8)
    sdpa = model(
        input_ids=src, attention_mask=mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask
    ).logits
    model.set_attn_implementation("eager")
    eager = model(
        input_ids=src, attention_mask=mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask
    ).logits
    torch.testing.assert_close(eager, sdpa, atol=1e-5, rtol=1e-5)


def test_output_attentions_and_hidden_states():
    model = tiny_model()
    g = torch.Generator().manual_seed(9)
    src = torch.randint(4, 97, (2, 6), generator=g)
    # the second sentence has 3 padded positions
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    src = src.masked_fill(mask == 0, 0)
    out = model(
        input_ids=src,
        attention_mask=mask,
        decoder_input_ids=src[:, :4],
        output_attentions=True,
        output_hidden_states=True,
    )
    c = model.config
    assert len(out.encoder_attentions) == c.encoder_layers and len(out.cross_attentions) == c.decoder_layers
    assert len(out.decoder_attentions) == c.decoder_layers
    assert out.encoder_attentions[0].shape == (2, c.encoder_attention_heads, 6, 6)
    assert out.cross_attentions[0].shape == (2, c.decoder_attention_heads, 4, 6)
    assert out.decoder_attentions[0].shape == (2, c.decoder_attention_heads, 4, 4)
    assert len(out.encoder_hidden_states) == c.encoder_layers + 1
    assert len(out.decoder_hidden_states) == c.decoder_layers + 1
    torch.testing.assert_close(out.encoder_hidden_states[-1], out.encoder_last_hidden_state)
    # padded source positions get no attention; rows are distributions
    for probs in (*out.encoder_attentions, *out.cross_attentions):
        torch.testing.assert_close(probs.sum(-1), torch.ones_like(probs.sum(-1)))
        assert probs[1, ..., 3:].abs().max() == 0 and probs[1, ..., :3].min() > 0
    # causal: no decoder position attends to a later one, and every earlier one gets some attention
    for probs in out.decoder_attentions:
        assert torch.triu(probs, diagonal=1).abs().max() == 0 and torch.tril(probs).gt(0).sum() == 2 * 2 * 10
    # the first encoder layer's weights, recomputed by hand from the states entering it (post-LN: the layer's
    # input goes straight into self-attention): softmax(Q K^T / sqrt(D)) with padded keys at -inf
    attn = model.model.encoder.layers[0].self_attn
    assert isinstance(attn, VanillaTransformerAttention)
    h = out.encoder_hidden_states[0]
    heads, dim = c.encoder_attention_heads, c.d_model // c.encoder_attention_heads
    q = (
        torch.nn.functional.linear(h, attn.q_proj.weight, attn.q_proj.bias)
        .view(2, 6, heads, dim)
        .transpose(1, 2)
    )
    k = (
        torch.nn.functional.linear(h, attn.k_proj.weight, attn.k_proj.bias)
        .view(2, 6, heads, dim)
        .transpose(1, 2)
    )
    scores = (q @ k.transpose(-1, -2)) / dim**0.5
    expected = scores.masked_fill(mask[:, None, None, :] == 0, float("-inf")).softmax(-1)
    torch.testing.assert_close(out.encoder_attentions[0], expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("side", ["right", "left"])
def test_padding_does_not_change_real_positions(side):
    model = tiny_model(seed=10, position_encoding="sinusoidal")
    g = torch.Generator().manual_seed(11)
    src = torch.randint(4, 97, (1, 5), generator=g)
    tgt = torch.randint(4, 97, (1, 4), generator=g)
    alone = model(input_ids=src, decoder_input_ids=tgt).logits
    pad = torch.zeros(1, 3, dtype=torch.long)
    padded = torch.cat([src, pad], 1) if side == "right" else torch.cat([pad, src], 1)
    mask = (padded != 0).long()
    with_pad = model(input_ids=padded, attention_mask=mask, decoder_input_ids=tgt).logits
    torch.testing.assert_close(with_pad, alone, atol=1e-5, rtol=1e-5)
    # target-side right padding does not change earlier positions either
    tgt_padded = torch.cat([tgt, pad], 1)
    out = model(
        input_ids=src, decoder_input_ids=tgt_padded, decoder_attention_mask=(tgt_padded != 0).long()
    ).logits
    torch.testing.assert_close(out[:, :4], alone, atol=1e-5, rtol=1e-5)


def test_batch_invariance():
    model = tiny_model(seed=12)
    src, mask = random_batch(97, 4, 9, seed=13)
    tgt, _ = random_batch(97, 4, 5, seed=14)
    batched = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    for i in range(4):
        n = int(mask[i].sum())
        single = model(input_ids=src[i : i + 1, :n], decoder_input_ids=tgt[i : i + 1]).logits
        torch.testing.assert_close(batched[i : i + 1], single, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        dict(
            share_encoder_decoder_embeddings=False,
            decoder_vocab_size=61,
            tie_word_embeddings=False,
            position_encoding="learned",
            normalize_before=True,
        ),
    ],
)
def test_every_parameter_gets_a_gradient(overrides):
    model = tiny_model(seed=15, **overrides).train()
    src, mask = random_batch(model.config.vocab_size, 3, 7, seed=16)
    labels, lmask = random_batch(model.config.decoder_vocab_size, 3, 6, seed=17)
    labels = labels.masked_fill(lmask == 0, -100)
    model(input_ids=src, attention_mask=mask, labels=labels).loss.backward()
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert param.grad.abs().sum() > 0, name


def test_labels_are_shifted_and_padding_ignored():
    model = tiny_model(seed=18)
    src, mask = random_batch(97, 2, 6, seed=19)
    labels = torch.tensor([[10, 11, 12, 3], [20, 3, -100, -100]])
    out = model(input_ids=src, attention_mask=mask, labels=labels)
    decoder_input = torch.tensor([[2, 10, 11, 12], [2, 20, 3, 0]])
    logits = model(input_ids=src, attention_mask=mask, decoder_input_ids=decoder_input).logits
    torch.testing.assert_close(out.logits, logits)
    keep = labels != -100
    expected = torch.nn.functional.cross_entropy(logits[keep], labels[keep])
    torch.testing.assert_close(out.loss, expected)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        dict(share_encoder_decoder_embeddings=False, decoder_vocab_size=61),
        dict(tie_word_embeddings=False, output_bias=False),
        dict(position_encoding="learned"),
        dict(position_encoding="rope"),
    ],
)
def test_save_load_round_trip_is_exact(tmp_path, overrides):
    model = tiny_model(seed=20, **overrides)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is VanillaTransformerForConditionalGeneration
    src, mask = random_batch(model.config.vocab_size, 2, 6, seed=21)
    tgt, _ = random_batch(model.config.decoder_vocab_size, 2, 4, seed=22)
    a = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    b = loaded(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    assert torch.equal(a, b)
    c = loaded.config
    if c.tie_word_embeddings:
        assert loaded.lm_head.weight is loaded.model.decoder.embed_tokens.weight
    else:
        assert loaded.lm_head.weight.data_ptr() != loaded.model.decoder.embed_tokens.weight.data_ptr()
    if c.share_encoder_decoder_embeddings:
        assert loaded.model.encoder.embed_tokens.weight is loaded.model.decoder.embed_tokens.weight
    if c.position_encoding == "sinusoidal":  # a non-persistent buffer rebuilt after meta-device loading
        table = loaded.model.encoder.embed_positions.table
        torch.testing.assert_close(
            table, sinusoidal_table(c.max_position_embeddings, c.d_model, c.sinusoidal_layout)
        )


def test_sinusoidal_table_matches_the_paper():
    """Section 3.5 written out element by element: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...);
    Marian's layout puts all sines first, then all cosines."""
    positions, dim = 50, 16
    paper = torch.zeros(positions, dim, dtype=torch.float64)
    marian = torch.zeros(positions, dim, dtype=torch.float64)
    for pos in range(positions):
        for i in range(dim // 2):
            angle = pos / 10000 ** (2 * i / dim)
            paper[pos, 2 * i], paper[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
            marian[pos, i], marian[pos, dim // 2 + i] = math.sin(angle), math.cos(angle)
    torch.testing.assert_close(sinusoidal_table(positions, dim, "interleaved"), paper.float())
    torch.testing.assert_close(sinusoidal_table(positions, dim, "concatenated"), marian.float())
    model = tiny_model(sinusoidal_layout="concatenated")
    torch.testing.assert_close(
        model.model.encoder.embed_positions.table, sinusoidal_table(64, 32, "concatenated")
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_fully_padded_row_gives_no_nan(dtype, attn):
    model = tiny_model(seed=23, attn=attn).to(dtype)
    src, mask = random_batch(97, 3, 6, seed=24)
    mask[1] = 0  # a sequence with no real token at all
    tgt = torch.tensor([[2, 5, 6], [2, 7, 8], [2, 0, 0]])
    tgt_mask = torch.tensor([[1, 1, 1], [1, 1, 1], [0, 0, 0]])
    out = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask)
    assert torch.isfinite(out.logits.float()).all()


def test_attention_mask_convention():
    key_mask = torch.tensor([[1, 1, 0], [0, 0, 0]])
    mask = build_attention_mask(key_mask, torch.float16)
    assert mask.shape == (2, 1, 1, 3)
    assert mask[0, 0, 0].tolist() == [0.0, 0.0, torch.finfo(torch.float16).min]
    assert mask[1].abs().max() == 0  # fully padded row is left unmasked (no NaN)
    causal = build_attention_mask(None, torch.float32, torch.arange(3), 3)
    assert (causal[0, 0] == 0).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert build_attention_mask(None, torch.float32) is None


def test_decode_step_compiles_with_fullgraph():
    model = tiny_model(seed=25)
    src, mask = random_batch(97, 2, 6, seed=26)
    config = model.config.get_text_config(decoder=True)
    start = torch.full((2, 1), 2)

    def step(token, cache):
        return model(
            encoder_outputs=encoder_outputs,
            attention_mask=mask,
            decoder_input_ids=token,
            cache=cache,
            use_cache=True,
        ).logits

    with torch.no_grad():
        encoder_outputs = model.get_encoder()(input_ids=src, attention_mask=mask)
        cache = EncoderDecoderCache(
            StaticCache(config=config, max_cache_len=8), StaticCache(config=config, max_cache_len=6)
        )
        first = step(start, cache)
        torch._dynamo.reset()
        compiled = torch.compile(step, fullgraph=True, backend="eager")
        token = first[:, -1:].argmax(-1)
        got = compiled(token, cache)
    ref_cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    with torch.no_grad():
        step(start, ref_cache)
        expected = step(token, ref_cache)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "field, value",
    [
        *[("activation_function", name) for name in ("gelu", "silu")],
        *[("position_encoding", name) for name in ("learned", "rope", "none")],
        *[(flag, False) for flag in ("scale_embedding", "output_bias", "tie_word_embeddings")],
        ("normalize_before", True),
        ("sinusoidal_layout", "concatenated"),
        ("layer_norm_eps", 1e-1),
    ],
)
def test_every_option_changes_the_model(field, value):
    src, mask = random_batch(97, 2, 6, seed=27)
    tgt, _ = random_batch(97, 2, 5, seed=28)
    outs = [
        tiny_model(seed=29, **overrides)(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        for overrides in ({}, {field: value})
    ]
    assert not torch.allclose(outs[0], outs[1])


@pytest.mark.parametrize("position_encoding", ["sinusoidal", "learned"])
def test_max_position_embeddings_is_the_length_limit(position_encoding):
    """max_position_embeddings sizes the position table, bounds the input length (40 tokens pass a 64-position
    model and are refused by a 32-position one) and bounds generate()'s default length (start token + 31)."""
    g = torch.Generator().manual_seed(27)
    long_src = torch.randint(4, 97, (1, 40), generator=g)
    tgt = torch.randint(4, 97, (1, 5), generator=g)
    short = tiny_model(seed=29, position_encoding=position_encoding, max_position_embeddings=32)
    default = tiny_model(seed=29, position_encoding=position_encoding)
    table = short.model.encoder.embed_positions
    assert (table.table if position_encoding == "sinusoidal" else table.weight).shape == (32, 32)
    assert torch.isfinite(default(input_ids=long_src, decoder_input_ids=tgt).logits).all()
    with pytest.raises(
        ValueError,
        match="input_ids has 40 positions but the model supports at most max_position_embeddings=32",
    ):
        short(input_ids=long_src, decoder_input_ids=tgt)
    assert short(input_ids=long_src[:, :32], decoder_input_ids=tgt).logits.shape == (1, 5, 97)
    assert (short.generation_config.max_new_tokens, default.generation_config.max_new_tokens) == (31, 63)


def test_dropout_options_act_in_training_only():
    for field in ("dropout", "attention_dropout", "activation_dropout"):
        dropouts: dict[str, Any] = {"dropout": 0.0, field: 0.5}
        model = tiny_model(seed=30, **dropouts).train()
        src, mask = random_batch(97, 2, 6, seed=31)
        a = model(input_ids=src, attention_mask=mask, decoder_input_ids=src).logits
        b = model(input_ids=src, attention_mask=mask, decoder_input_ids=src).logits
        assert not torch.allclose(a, b), field
        model.eval()
        a = model(input_ids=src, attention_mask=mask, decoder_input_ids=src).logits
        b = model(input_ids=src, attention_mask=mask, decoder_input_ids=src).logits
        assert torch.equal(a, b), field


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_cpu_dropout_is_inverted_dropout_with_the_requested_rate(p):
    """apply_dropout draws its own CPU mask (4 elements per 64-bit draw): zeroed fraction = p (to 2**-16, within
    6 binomial standard deviations), survivors scaled so the mean is kept, masks independent of the element's
    position among the 4, different on every call, reproducible from the seed, and the gradient is the same
    mask and scale."""
    n = 1 << 20
    torch.manual_seed(5)
    x = torch.full((n // 64, 64), 2.0, requires_grad=True)
    y = apply_dropout(x, p, True)
    dropped = y == 0
    sd = (p * (1 - p) / n) ** 0.5
    assert abs(dropped.float().mean().item() - p) < 6 * sd + 2**-16
    per_chunk = dropped.view(-1, 4).float().mean(0)  # the 4 16-bit chunks of a draw
    assert (per_chunk - p).abs().max().item() < 6 * (p * (1 - p) / (n / 4)) ** 0.5 + 2**-16
    kept = y[~dropped]
    scale = kept[0].item() / 2.0
    assert abs(scale - 1 / (1 - p)) < 1e-3 and torch.all(kept == kept[0])
    assert abs(y.mean().item() - 2.0) < 6 * 2.0 * (p / (1 - p) / n) ** 0.5
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.where(dropped, 0.0, scale))
    assert not torch.equal(apply_dropout(x, p, True) == 0, dropped)
    torch.manual_seed(5)
    assert torch.equal(apply_dropout(x.detach(), p, True), y.detach())


def test_fused_residual_dropout_equals_residual_plus_dropout():
    """The sub-layer connection's one-pass residual + dropout draws the same mask from the same generator state
    as apply_dropout and has the same gradients."""
    torch.manual_seed(7)
    residual = torch.randn(33, 20, requires_grad=True)
    x = torch.randn(33, 20, requires_grad=True)
    torch.manual_seed(11)
    fused = add_dropout(residual, x, 0.25, True)
    torch.manual_seed(11)
    plain = residual + apply_dropout(x, 0.25, True)
    torch.testing.assert_close(fused, plain)
    weights = torch.randn(33, 20)
    grads = torch.autograd.grad((fused * weights).sum(), (residual, x))
    expected = torch.autograd.grad((plain * weights).sum(), (residual, x))
    torch.testing.assert_close(grads, expected)
    torch.testing.assert_close(add_dropout(residual, x, 0.25, False), residual + x)


def test_cpu_dropout_edge_cases():
    x = torch.randn(3, 5)
    assert apply_dropout(x, 0.1, False) is x and apply_dropout(x, 0.0, True) is x
    assert torch.equal(apply_dropout(x, 1.0, True), torch.zeros_like(x))
    odd = apply_dropout(torch.ones(7), 0.5, True)  # sizes that are not a multiple of 4
    assert odd.shape == (7,) and set(odd.tolist()) <= {0.0, 2.0}
    empty = apply_dropout(torch.ones(0, 4), 0.5, True)
    assert empty.shape == (0, 4)
    half = apply_dropout(torch.ones(64, 64, dtype=torch.bfloat16), 0.5, True)
    assert half.dtype == torch.bfloat16 and set(half.unique().tolist()) <= {0.0, 2.0}


def test_pre_ln_has_final_norms_and_post_ln_does_not():
    assert tiny_model(normalize_before=True).model.encoder.layer_norm is not None
    assert tiny_model(normalize_before=True).model.decoder.layer_norm is not None
    assert tiny_model().model.encoder.layer_norm is None


def test_depths_are_separate_and_cache_sized_for_decoder():
    config = tiny_config(encoder_layers=1, decoder_layers=4)
    model = VanillaTransformerForConditionalGeneration(config)
    assert len(model.model.encoder.layers) == 1 and len(model.model.decoder.layers) == 4
    assert config.get_text_config(decoder=True).num_hidden_layers == 4


def test_gradient_checkpointing_gives_the_same_gradients():
    model = tiny_model(seed=32).train()
    src, mask = random_batch(97, 2, 6, seed=33)

    def grads():
        model.zero_grad()
        model(input_ids=src, attention_mask=mask, labels=src).loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}

    plain = grads()
    model.activation_checkpointing_enable()
    checkpointed = grads()
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], atol=1e-6, rtol=1e-5)


def test_resize_token_embeddings_keeps_outputs_for_old_tokens():
    model = tiny_model(seed=34)
    src, mask = random_batch(97, 2, 6, seed=35)
    before = model(input_ids=src, attention_mask=mask, decoder_input_ids=src).logits
    model.resize_token_embeddings(120, mean_resizing=False)
    after = model(input_ids=src, attention_mask=mask, decoder_input_ids=src).logits
    assert after.shape[-1] == 120 and model.config.vocab_size == model.config.decoder_vocab_size == 120
    torch.testing.assert_close(after[..., :97], before)
    assert model.lm_head.weight is model.model.shared.weight


@pytest.mark.parametrize("tie_word_embeddings", [True, False])
def test_resize_token_embeddings_with_separate_vocabularies_resizes_the_source_only(tie_word_embeddings):
    # the output projection and its bias belong to the target vocabulary, which stays as it is (as in Marian)
    model = tiny_model(
        seed=36,
        share_encoder_decoder_embeddings=False,
        decoder_vocab_size=50,
        tie_word_embeddings=tie_word_embeddings,
    )
    src, mask = random_batch(97, 2, 6, seed=37)
    tgt = src % 50
    before = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    head, bias = model.lm_head.weight.clone(), model.final_logits_bias.clone()
    model.resize_token_embeddings(120, mean_resizing=False)
    assert model.config.vocab_size == model.model.encoder.embed_tokens.weight.shape[0] == 120
    assert model.config.decoder_vocab_size == model.model.decoder.embed_tokens.weight.shape[0] == 50
    torch.testing.assert_close(model.lm_head.weight, head)
    torch.testing.assert_close(model.final_logits_bias, bias)
    torch.testing.assert_close(
        model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits, before
    )
    assert (model.lm_head.weight is model.model.decoder.embed_tokens.weight) == tie_word_embeddings


@pytest.mark.parametrize("linear_init_std", [None, 0.02])
def test_initialisation_follows_the_config(linear_init_std):
    """Linear layers: Xavier-uniform (bounded by sqrt(6 / (fan_in + fan_out))) by default, N(0, linear_init_std)
    when set; embeddings N(0, init_std) with a zero pad row."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(
        tiny_config(d_model=128, encoder_ffn_dim=512, linear_init_std=linear_init_std, init_std=0.05)
    )
    linears = [
        m.weight for m in model.modules() if isinstance(m, torch.nn.Linear) and m.weight.shape == (512, 128)
    ]
    assert linears, "no 128->512 feed-forward layer found"
    w = linears[0]
    if linear_init_std is None:
        bound = (6 / (128 + 512)) ** 0.5
        assert w.abs().max() <= bound and w.abs().max() > 0.9 * bound
        torch.testing.assert_close(w.std().item(), bound / 3**0.5, rtol=0.05, atol=0)
    else:
        torch.testing.assert_close(w.std().item(), 0.02, rtol=0.05, atol=0)
        torch.testing.assert_close(w.mean().item(), 0.0, rtol=0, atol=1e-3)
    emb = model.model.shared.weight
    assert torch.all(emb[model.config.pad_token_id] == 0)
    torch.testing.assert_close(emb[1:].std().item(), 0.05, rtol=0.1, atol=0)
