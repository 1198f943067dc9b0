"""Property-based tests (hypothesis): for random shapes, padding patterns and dtypes the model produces no
NaN/Inf, padding never changes real positions, and incremental decoding equals full decoding; and the study
notes' claims: RoPE's scores depend only on the offset of the two positions and rotation keeps lengths, the
encoder without positions is permutation-equivariant, the decoder's output at t does not depend on later inputs."""

from __future__ import annotations

import pytest
import torch
from conftest import step_by_step_logits, tiny_config, tiny_model
from hypothesis import given, settings
from hypothesis import strategies as st

from vanilla_transformer.modeling import build_attention_mask
from vanilla_transformer.modeling.positions_vanilla_transformer import RotaryEmbedding, apply_rotary

MODELS = {}


def model_for(attn: str, position_encoding: str, normalize_before: bool, dtype: torch.dtype = torch.float32):
    """One model per combination, built once; each dtype has its own copy (the float32 weights are never
    rounded through a half-precision type)."""
    key = (attn, position_encoding, normalize_before, dtype)
    if key not in MODELS:
        model = tiny_model(
            seed=70, attn=attn, position_encoding=position_encoding, normalize_before=normalize_before
        )
        # transformers wraps PreTrainedModel.to with functools.wraps(nn.Module.to), so checkers see an unbound method
        MODELS[key] = model.to(dtype)  # pyright: ignore[reportArgumentType]
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
@given(
    lengths=lengths_strategy,
    seed=st.integers(0, 10_000),
    left=st.booleans(),
    dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float16]),
    attn=st.sampled_from(["eager", "sdpa"]),
    pe=st.sampled_from(["sinusoidal", "learned", "rope", "none"]),
)
def test_no_nan_or_inf_for_any_padding(lengths, seed, left, dtype, attn, pe):
    model = model_for(attn, pe, False, dtype)
    src, mask = make_batch(lengths, seed, left)  # rows of length 0 are fully padded
    tgt, tgt_mask = make_batch([max(1, n) for n in lengths], seed + 1, False)
    with torch.no_grad():
        out = model(
            input_ids=src, attention_mask=mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask
        )
    assert out.logits.dtype == dtype and torch.isfinite(out.logits.float()).all()


@common
@given(
    lengths=st.lists(st.integers(1, 9), min_size=2, max_size=4),
    seed=st.integers(0, 10_000),
    left=st.booleans(),
    pe=st.sampled_from(["sinusoidal", "learned", "rope", "none"]),
    pre=st.booleans(),
)
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
@given(
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    steps=st.integers(1, 6),
    seed=st.integers(0, 10_000),
    pe=st.sampled_from(["sinusoidal", "learned", "rope", "none"]),
    pre=st.booleans(),
)
def test_incremental_decoding_equals_full(lengths, steps, seed, pe, pre):
    model = model_for("sdpa", pe, pre)
    src, mask = make_batch(lengths, seed, False)
    tgt = torch.randint(4, 97, (len(lengths), steps), generator=torch.Generator().manual_seed(seed + 7))
    with torch.no_grad():
        full = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt, use_cache=False).logits
    incremental, _ = step_by_step_logits(model, src, mask, tgt)
    torch.testing.assert_close(incremental, full, atol=1e-5, rtol=1e-5)


@common
@given(
    batch=st.integers(1, 3),
    queries=st.integers(1, 5),
    keys=st.integers(1, 7),
    seed=st.integers(0, 10_000),
    dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float16]),
)
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


# ------------------------------------------------------------------------------------------------------------
# The study notes' claims: RoPE's scores depend on the offset only and keep lengths; without positions the encoder
# is permutation-equivariant; the decoder is causal
# ------------------------------------------------------------------------------------------------------------


def rotated(head_dim: int, x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """(N, D) vectors rotated by our RotaryEmbedding + apply_rotary at their (N,) positions."""
    config = tiny_config(position_encoding="rope", rope_theta=theta)
    cos, sin = RotaryEmbedding(config, head_dim)(positions[None], torch.float32)  # (1, 1, N, D)
    return apply_rotary(x[None, None], cos, sin)[0, 0]  # (N, D)


rope_vectors = dict(
    half=st.integers(1, 32), seed=st.integers(0, 10_000), theta=st.sampled_from([10000.0, 500.0, 1e6])
)


@common
@given(m=st.integers(0, 512), n=st.integers(0, 512), offset=st.integers(0, 512), **rope_vectors)
def test_rope_scores_depend_only_on_the_offset(m, n, offset, half, seed, theta):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 2 * half, generator=g)

    def score(query_position: int, key_position: int) -> torch.Tensor:
        query = rotated(2 * half, q[None], torch.tensor([query_position]), theta)  # (1, D)
        key = rotated(2 * half, k[None], torch.tensor([key_position]), theta)  # (1, D)
        return (query * key).sum()

    # float32 angles of positions up to ~1,000: errors ~1e-4 of |q| |k|
    torch.testing.assert_close(
        score(m + offset, n + offset), score(m, n), atol=2e-4 * float(q.norm() * k.norm()), rtol=0
    )


@common
@given(positions=st.lists(st.integers(0, 2048), min_size=1, max_size=6), **rope_vectors)
def test_rope_is_the_rotation_of_each_pair_and_keeps_lengths(positions, half, seed, theta):
    """The rotate_half convention: dimension i and i + D/2 form a pair, rotated by position * theta^(-2i/D)
    (computed here in float64); a rotation keeps every vector's length."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(positions), 2 * half, generator=g)
    ours = rotated(2 * half, x, torch.tensor(positions), theta)
    torch.testing.assert_close(ours.norm(dim=-1), x.norm(dim=-1), atol=0, rtol=1e-5)
    angle = torch.tensor(positions, dtype=torch.float64)[:, None] * theta ** (
        -torch.arange(half, dtype=torch.float64) * 2 / (2 * half)
    )  # (N, D/2)
    first, second = x.double()[:, :half], x.double()[:, half:]
    expected = torch.cat(
        (first * angle.cos() - second * angle.sin(), first * angle.sin() + second * angle.cos()), -1
    )
    torch.testing.assert_close(ours.double(), expected, atol=2e-3 * float(x.abs().max()), rtol=0)


@common
@given(
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    seed=st.integers(0, 10_000),
    attn=st.sampled_from(["eager", "sdpa"]),
    pre=st.booleans(),
)
def test_encoder_without_positions_is_permutation_equivariant(lengths, seed, attn, pre):
    """position_encoding="none": permuting the source tokens (and their mask) permutes the encoder states the
    same way, and the decoder, which sees the source only through attention, gives the same logits."""
    model = model_for(attn, "none", pre)
    src, mask = make_batch(lengths, seed, left=bool(seed % 2))
    perm = torch.randperm(src.shape[1], generator=torch.Generator().manual_seed(seed))
    tgt = torch.randint(4, 97, (len(lengths), 4), generator=torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        states = model.get_encoder()(input_ids=src, attention_mask=mask).last_hidden_state  # (B, S, C)
        permuted = model.get_encoder()(input_ids=src[:, perm], attention_mask=mask[:, perm]).last_hidden_state
        logits = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        logits_permuted = model(
            input_ids=src[:, perm], attention_mask=mask[:, perm], decoder_input_ids=tgt
        ).logits
    torch.testing.assert_close(permuted, states[:, perm], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits_permuted, logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pe", ["sinusoidal", "learned", "rope"])
def test_encoder_with_positions_is_not_permutation_equivariant(pe):
    """The property above is a property of "none": every position scheme breaks it."""
    model = model_for("sdpa", pe, False)
    src = torch.randint(4, 97, (1, 6), generator=torch.Generator().manual_seed(0))
    perm = torch.tensor([5, 0, 3, 1, 4, 2])
    with torch.no_grad():
        states = model.get_encoder()(input_ids=src).last_hidden_state
        permuted = model.get_encoder()(input_ids=src[:, perm]).last_hidden_state
    assert not torch.allclose(permuted, states[:, perm], atol=1e-3)


@common
@given(
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    steps=st.integers(2, 8),
    seed=st.integers(0, 10_000),
    attn=st.sampled_from(["eager", "sdpa"]),
    pe=st.sampled_from(["sinusoidal", "learned", "rope", "none"]),
    pre=st.booleans(),
)
def test_decoder_output_at_t_does_not_depend_on_later_inputs(lengths, steps, seed, attn, pe, pre):
    """Changing the decoder inputs after position t changes no logit at positions <= t, and the gradient of
    those logits with respect to the later input embeddings is exactly zero."""
    model = model_for(attn, pe, pre)
    src, mask = make_batch(lengths, seed, left=False)
    g = torch.Generator().manual_seed(seed + 3)
    tgt = torch.randint(4, 97, (len(lengths), steps), generator=g)
    t = int(torch.randint(0, steps - 1, (1,), generator=g))
    changed = tgt.clone()
    shift = torch.randint(1, 89, (len(lengths), steps - t - 1), generator=g)
    # another id in [4, 97) at every later position
    changed[:, t + 1 :] = (tgt[:, t + 1 :] - 4 + shift) % 93 + 4
    with torch.no_grad():
        logits = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        logits_changed = model(input_ids=src, attention_mask=mask, decoder_input_ids=changed).logits
    torch.testing.assert_close(logits_changed[:, : t + 1], logits[:, : t + 1], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(logits_changed[:, t + 1 :], logits[:, t + 1 :])  # later positions do see them

    embeds = model.get_decoder().embed_tokens(tgt).detach().requires_grad_(True)  # (B, T, C)
    out = model(input_ids=src, attention_mask=mask, decoder_inputs_embeds=embeds).logits
    (grad,) = torch.autograd.grad(out[:, : t + 1].sum(), embeds)
    assert torch.equal(grad[:, t + 1 :], torch.zeros_like(grad[:, t + 1 :]))
    assert grad[:, : t + 1].abs().sum() > 0
