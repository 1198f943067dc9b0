"""Property-based tests (hypothesis): for random shapes, padding patterns and dtypes the model produces no
NaN/Inf, padding never changes real positions, and incremental decoding equals full decoding."""

from __future__ import annotations

import torch
from conftest import tiny_model
from hypothesis import given, settings
from hypothesis import strategies as st

from modeling import build_attention_mask

MODELS = {}


def model_for(attn: str, position_encoding: str, normalize_before: bool, dtype: torch.dtype = torch.float32):
    """One model per combination, built once; each dtype has its own copy (the float32 weights are never
    rounded through a half-precision type)."""
    key = (attn, position_encoding, normalize_before, dtype)
    if key not in MODELS:
        MODELS[key] = tiny_model(seed=70, attn=attn, position_encoding=position_encoding,
                                 normalize_before=normalize_before).to(dtype)
    return MODELS[key]


lengths_strategy = st.lists(st.integers(0, 9), min_size=1, max_size=4)
common = settings(max_examples=25)  # on top of conftest's "ci" profile: derandomized, no deadline


def make_batch(lengths: list[int], seed: int, left: bool):
    g = torch.Generator().manual_seed(seed)
    width = max(max(lengths), 1)
    ids = torch.randint(4, 97, (len(lengths), width), generator=g)
    positions = torch.arange(width)[None]
    n = torch.tensor(lengths)[:, None]
    mask = (positions >= width - n) if left else (positions < n)
    return ids.masked_fill(~mask, 0), mask.long()


@common
@given(lengths=lengths_strategy, seed=st.integers(0, 10_000), left=st.booleans(),
       dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float16]),
       attn=st.sampled_from(["eager", "sdpa"]), pe=st.sampled_from(["sinusoidal", "learned", "rope"]))
def test_no_nan_or_inf_for_any_padding(lengths, seed, left, dtype, attn, pe):
    model = model_for(attn, pe, False, dtype)
    src, mask = make_batch(lengths, seed, left)  # rows of length 0 are fully padded
    tgt, tgt_mask = make_batch([max(1, n) for n in lengths], seed + 1, False)
    with torch.no_grad():
        out = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask)
    assert out.logits.dtype == dtype and torch.isfinite(out.logits.float()).all()


@common
@given(lengths=st.lists(st.integers(1, 9), min_size=2, max_size=4), seed=st.integers(0, 10_000),
       left=st.booleans(), pe=st.sampled_from(["sinusoidal", "learned", "rope"]), pre=st.booleans())
def test_padding_never_changes_real_positions(lengths, seed, left, pe, pre):
    model = model_for("sdpa", pe, pre)
    src, mask = make_batch(lengths, seed, left)
    tgt = torch.randint(4, 97, (len(lengths), 3), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        batched = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        for i in range(len(lengths)):
            real = src[i][mask[i].bool()][None]
            alone = model(input_ids=real, decoder_input_ids=tgt[i : i + 1]).logits
            torch.testing.assert_close(batched[i : i + 1], alone, atol=2e-5, rtol=2e-5)


@common
@given(lengths=st.lists(st.integers(1, 9), min_size=1, max_size=3), steps=st.integers(1, 6),
       seed=st.integers(0, 10_000), pe=st.sampled_from(["sinusoidal", "learned", "rope"]), pre=st.booleans())
def test_incremental_decoding_equals_full(lengths, steps, seed, pe, pre):
    model = model_for("sdpa", pe, pre)
    src, mask = make_batch(lengths, seed, False)
    tgt = torch.randint(4, 97, (len(lengths), steps), generator=torch.Generator().manual_seed(seed + 7))
    with torch.no_grad():
        full = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt, use_cache=False).logits
        encoder_outputs = model.get_encoder()(input_ids=src, attention_mask=mask)
        cache, pieces = None, []
        for t in range(steps):
            out = model(encoder_outputs=encoder_outputs, attention_mask=mask, decoder_input_ids=tgt[:, t : t + 1],
                        cache=cache, use_cache=True)
            cache = out.past_key_values
            pieces.append(out.logits)
    torch.testing.assert_close(torch.cat(pieces, 1), full, atol=1e-5, rtol=1e-5)


@common
@given(batch=st.integers(1, 3), queries=st.integers(1, 5), keys=st.integers(1, 7), seed=st.integers(0, 10_000),
       dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float16]))
def test_mask_rows_are_never_fully_masked(batch, queries, keys, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    key_mask = torch.randint(0, 2, (batch, keys), generator=g)
    positions = torch.randint(0, keys, (queries,), generator=g).sort().values
    mask = build_attention_mask(key_mask, dtype, positions, keys)
    assert mask.shape == (batch, 1, queries, keys)
    visible = mask == 0
    assert visible.any(-1).all()
    expected = key_mask.bool()[:, None, None, :] & (torch.arange(keys) <= positions[:, None])[None, None]
    rows_with_keys = expected.any(-1, keepdim=True)
    assert torch.equal(visible & rows_with_keys, expected)
