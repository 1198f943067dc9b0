"""The masks of attention: the one place where key padding and causality become an additive attention mask.

Convention (relied on by every model family): one additive mask per stack, built once by `build_attention_mask`,
of shape (B, 1, T or 1, K): 0.0 where a query may attend, the dtype's most negative finite value where it may
not. A query row with nothing to attend to (a fully padded sequence) is left unmasked instead, so softmax never
sees only masked entries and no NaN appears in fp32, fp16 or bf16; such rows are padding and never reach the
loss. No mask (None) where nothing is masked; in causal self-attention None means causal, applied by the kernel
(`decoder_self_attention_mask` decides).

Shape legend: B batch size, T queries of this call, K keys (source length, or cached + new target positions).
"""

from __future__ import annotations

import torch


def build_attention_mask(
    key_mask: torch.Tensor | None,
    dtype: torch.dtype,
    query_positions: torch.Tensor | None = None,
    key_length: int | None = None,
) -> torch.Tensor | None:
    """Additive attention mask for one stack, built once and shared by all its layers.

    Args:
        key_mask: (B, K) token mask of the keys (1/True = real token, 0/False = padding), or a ready-made 4-D
            (B, 1, T, K) mask (bool: True = attend; float: additive, masked entries very negative), or None.
        dtype: dtype of the attention scores; masked entries get `torch.finfo(dtype).min`.
        query_positions: (T,) or (B, T) absolute positions of the queries for causal self-attention: key j is
            visible to a query at position p iff j <= p. None means no causal constraint.
        key_length: number of keys K when `key_mask` is None (needed for causal masks).

    Returns:
        (B or 1, 1, T or 1, K) float mask with 0.0 (attend) or finfo(dtype).min (do not attend), or None when
        nothing is masked. Rows with no visible key are fully unmasked (see the module docstring).
    """
    if key_mask is not None and key_mask.dim() == 4:
        allowed = key_mask if key_mask.dtype == torch.bool else key_mask > torch.finfo(key_mask.dtype).min / 2
    else:
        if key_mask is None and query_positions is None:
            return None
        allowed = None
        if key_mask is not None:
            allowed = key_mask.bool()[:, None, None, :]  # (B, 1, 1, K)
            key_length = key_mask.shape[-1]
        if query_positions is not None:
            # the contract: key_length is given when key_mask is not
            assert key_length is not None
            keys = torch.arange(key_length, device=query_positions.device)
            causal = keys <= query_positions[..., None]  # (T, K) or (B, T, K)
            causal = causal[None, None] if causal.dim() == 2 else causal[:, None]  # (B or 1, 1, T, K)
            allowed = causal if allowed is None else allowed & causal
        # key_mask or query_positions is given
        assert allowed is not None
    allowed = allowed | ~allowed.any(dim=-1, keepdim=True)  # no fully masked row -> no NaN
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(
        ~allowed, torch.finfo(dtype).min
    )


def without_padding(token_mask: torch.Tensor | None) -> torch.Tensor | None:
    """A 2-D token mask with no padding at all masks nothing: return None for it (so no additive mask is built
    and attention runs unmasked, its fastest path); return any other mask unchanged. Never inspects values
    while compiling (a data-dependent branch would break the graph)."""
    if token_mask is None or token_mask.dim() != 2 or torch.compiler.is_compiling():
        return token_mask
    return None if bool(token_mask.all()) else token_mask


def decoder_self_attention_mask(
    token_mask: torch.Tensor | None,
    dtype: torch.dtype,
    device: torch.device,
    past_length: int | torch.Tensor,
    new_tokens: int,
    key_length: int,
    kernel_is_causal: bool,
) -> torch.Tensor | None:
    """The decoder's self-attention mask (causality and target padding), or None where no tensor is needed.

    Args:
        token_mask: (B, K) target token mask over cached + new positions, None when there is no padding (see
            `without_padding`), or a ready-made 4-D mask (see `build_attention_mask`).
        dtype, device: those of the attention scores.
        past_length: P, the cached positions (a tensor when a static cache is compiled); new_tokens: T.
        key_length: K, the keys attention sees: P + T, or more with a static cache (slots not yet written).
        kernel_is_causal: whether the attention kernel applies the causal pattern itself when given no mask
            (sdpa's `is_causal`; not the eager path, which `output_attentions` selects).

    Returns:
        The (B or 1, 1, T, K) mask of `build_attention_mask` for query positions P .. P + T - 1, or None, which
        means "causal, applied by the kernel": either one query that sees all K = P + 1 keys (nothing to mask),
        or T > 1 queries from an empty cache (K = T) with `kernel_is_causal`. None is returned only without
        padding. Causal self-attention given None therefore uses `is_causal` exactly when it has T > 1 queries.
    """
    if token_mask is None and isinstance(past_length, int) and key_length == past_length + new_tokens:
        if new_tokens == 1 or (past_length == 0 and kernel_is_causal):
            return None
    query_positions = torch.arange(new_tokens, device=device) + past_length  # (T,)
    return build_attention_mask(token_mask, dtype, query_positions, key_length)
