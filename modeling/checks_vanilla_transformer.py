"""Checks of what users pass to the model: token ids, token masks and lengths (`generate()` arguments:
`decoding_vanilla_transformer`).

Contract: each `check_*` function returns None for valid input and raises `ValueError` for invalid input, with
a message that names the bad value, what was expected and the fix, instead of an index error deep inside torch
or a silently ignored option. Checks never change their input. Tensor values are not inspected while
compiling (a data-dependent branch would break the graph). `MaskMemo` lets the model check (and build a mask
from) the source mask once per generate() call instead of once per decoding step.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, TypeGuard

import torch

from .kernels_vanilla_transformer import IGNORE_INDEX

if TYPE_CHECKING:
    from .configuration_vanilla_base import VanillaConfigBase


# ----------------------------------------------------------------------------------------------------------------
# Model inputs
# ----------------------------------------------------------------------------------------------------------------


def check_token_ids(ids: torch.Tensor, vocab_size: int, name: str) -> None:
    """Raise `ValueError` unless `ids` is a non-empty (B, L) integer tensor with values in [0, vocab_size)."""
    if not isinstance(ids, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor of token ids, got {type(ids).__name__}")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(
            f"{name} must hold integer token ids, got dtype {ids.dtype}; pass a torch.long tensor "
            f"(for example tokenizer(..., return_tensors='pt'))"
        )
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, length), got shape {tuple(ids.shape)}")
    if ids.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch (shape {tuple(ids.shape)}); pass at least one sequence")
    if ids.shape[1] == 0:
        raise ValueError(
            f"{name} has sequences of length 0 (shape {tuple(ids.shape)}); every sequence needs at least one "
            f"token (the tokenizer appends </s> even to an empty string)"
        )
    if torch.compiler.is_compiling():
        return
    low, high = torch.aminmax(ids)
    low, high = int(low), int(high)
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(
            f"{name} contains token id {bad}, outside the model's vocabulary [0, {vocab_size}); the tokenizer "
            f"and the model do not match (use the tokenizer saved with this model) or the ids are corrupted"
        )


def check_token_mask(mask: torch.Tensor, ids_shape: tuple[int, ...], name: str) -> None:
    """Raise `ValueError` unless `mask` is a (B, L) 0/1 mask of the same shape as the ids it describes (a 4-D
    (B, 1, T, K) mask is accepted as it is, see `build_attention_mask`)."""
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor, got {type(mask).__name__}")
    if mask.dim() == 4:
        return
    if tuple(mask.shape) != tuple(ids_shape):
        raise ValueError(
            f"{name} has shape {tuple(mask.shape)} but the tokens have shape {tuple(ids_shape)}; pass the mask "
            f"returned by the tokenizer together with its input ids (1 = token, 0 = padding)"
        )
    if mask.dtype.is_complex:
        raise ValueError(f"{name} must be bool, integer or float 0/1, got dtype {mask.dtype}")
    if mask.dtype != torch.bool and not torch.compiler.is_compiling():
        bad = mask[(mask != 0) & (mask != 1)]
        if bad.numel():
            raise ValueError(
                f"{name} contains the value {bad[0].item()}; a token mask holds 1 for real tokens and 0 for "
                f"padding (pass the tokenizer's attention_mask)"
            )


# tokenizers without a real maximum report model_max_length as ~1e30
_NO_TOKENIZER_LIMIT = 10**6


def position_limit(config: Any) -> int | None:
    """The most positions a sequence of the model may have: `max_position_embeddings`, or None with rotary
    positions (`position_encoding="rope"`: no table, no limit) or a config without the field. Every length rule
    (input checks, truncation, the default and the cap of `max_new_tokens`) reads it here; any transformers
    config is accepted (Marian's, for example, has sinusoidal positions and a limit)."""
    limit = getattr(config, "max_position_embeddings", None)
    if getattr(config, "position_encoding", None) == "rope" or not limit:
        return None
    return int(limit)


def max_source_length(config: Any, tokenizer: Any) -> int | None:
    """The longest source (in tokens, special tokens included) that the model of `config` and `tokenizer` accept:
    the smaller of `position_limit` and the tokenizer's `model_max_length`; None when neither sets one. Sources are
    truncated to it by the translation pipeline and `inference.translate`, and the server refuses longer ones."""
    limits = [position_limit(config)]
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    if tokenizer_limit and tokenizer_limit < _NO_TOKENIZER_LIMIT:
        limits.append(int(tokenizer_limit))
    limits = [limit for limit in limits if limit is not None]
    return min(limits) if limits else None


def check_length(length: int, config: VanillaConfigBase, name: str) -> None:
    """Sequences longer than `position_limit` are an error (RoPE has no table and no limit)."""
    limit = position_limit(config)
    if limit is not None and length > limit:
        raise ValueError(
            f"{name} has {length} positions but the model supports at most max_position_embeddings="
            f"{limit}; truncate the input (tokenizer(..., truncation=True, max_length={limit})) or split it"
        )


def check_inputs(
    ids: torch.Tensor | None, embeds: torch.Tensor | None, vocab_size: int, name: str
) -> torch.Size:
    """Check that exactly one of token ids `ids` (B, L) and embeddings `embeds` (B, L, C) is given and valid;
    return (B, L)."""
    if (ids is None) == (embeds is None):
        raise ValueError(f"pass exactly one of {name} and the matching inputs_embeds")
    if ids is not None:
        check_token_ids(ids, vocab_size, name)
        return ids.shape
    assert embeds is not None
    if embeds.dim() != 3 or embeds.shape[0] == 0 or embeds.shape[1] == 0:
        raise ValueError(
            f"inputs_embeds for {name} must have a non-empty shape (B, L, C), got {tuple(embeds.shape)}"
        )
    return embeds.shape[:2]


def check_stack_inputs(
    ids: torch.Tensor | None,
    embeds: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
    vocab_size: int,
    config: VanillaConfigBase,
    name: str = "input_ids",
) -> torch.Size:
    """The checks of a bidirectional stack's inputs (the encoder's): exactly one of `ids` / `embeds`
    (`check_inputs`), a (B, L) 0/1 `attention_mask` of the same shape, and at most `max_position_embeddings`
    positions. Returns (B, L)."""
    shape = check_inputs(ids, embeds, vocab_size, name)
    if attention_mask is not None:
        check_token_mask(attention_mask, shape, "attention_mask")
        if attention_mask.dim() != 2:
            raise ValueError(f"attention_mask must have shape (batch, length) = {tuple(shape)}")
    check_length(shape[1], config, name)
    return shape


def check_decoder_inputs(
    attention_mask: torch.Tensor | None,
    shape: torch.Size,
    past_length: int | torch.Tensor,
    config: VanillaConfigBase,
    mask_name: str = "decoder_attention_mask",
) -> None:
    """Check what a causal stack (the decoder, the decoder-only model) gets besides its (B, T) new tokens of
    `shape`: a 0/1 token mask over the `past_length` cached + T new positions, (B, past_length + T), or a 4-D
    mask, and the total length. A compiled static cache's length is a tensor: the cache bounds the length
    itself, and only the mask's values are checked."""
    if attention_mask is not None:
        check_token_mask(attention_mask, attention_mask.shape, mask_name)
    if not isinstance(past_length, int):
        return
    batch, new_tokens = shape[0], shape[1]
    check_length(past_length + new_tokens, config, "the sequence (cached + new tokens)")
    expected = (batch, past_length + new_tokens)
    if attention_mask is not None and attention_mask.dim() != 4 and tuple(attention_mask.shape) != expected:
        raise ValueError(
            f"{mask_name} has shape {tuple(attention_mask.shape)} but the model sees {batch} sequences of "
            f"{past_length} cached + {new_tokens} new positions; pass the {expected} token mask of the whole "
            f"sequence so far (1 = token, 0 = padding), as generate() does"
        )


def _is_index_tensor(value, shape: tuple[int, ...]) -> bool:
    """Whether `value` is an integer tensor of shape (B or 1, L), where (B, L) = `shape`."""
    return (
        isinstance(value, torch.Tensor)
        and not value.dtype.is_floating_point
        and not value.dtype.is_complex
        and value.dtype != torch.bool
        and value.dim() == 2
        and value.shape[0] in (1, shape[0])
        and value.shape[1] == shape[1]
    )


def _describe(value) -> str:
    return (
        f"{value.dtype} of shape {tuple(value.shape)}"
        if isinstance(value, torch.Tensor)
        else type(value).__name__
    )


def check_token_type_ids(
    token_type_ids: torch.Tensor | None, shape: torch.Size, type_vocab_size: int
) -> None:
    """Raise `ValueError` unless `token_type_ids` is None or a (B, L) integer tensor like the input ids with values
    in [0, type_vocab_size); a model without token types (`type_vocab_size=0`) accepts only type 0 (one segment,
    what a tokenizer returns for single sentences)."""
    if token_type_ids is None:
        return
    if not _is_index_tensor(token_type_ids, tuple(shape)) or token_type_ids.shape[0] != shape[0]:
        raise ValueError(
            f"token_type_ids must be an integer tensor of the input ids' shape {tuple(shape)}, got "
            f"{_describe(token_type_ids)}; pass the token_type_ids the tokenizer returned with the input ids"
        )
    if torch.compiler.is_compiling():
        return
    low, high = (int(v) for v in torch.aminmax(token_type_ids))
    if low < 0 or high >= max(type_vocab_size, 1):
        fix = (
            "this model has no token types: leave token_type_ids unset (tokenizer(..., return_token_type_ids=False))"
            if type_vocab_size == 0
            else f"token types are 0..{type_vocab_size - 1}"
        )
        raise ValueError(
            f"token_type_ids contains {low if low < 0 else high}, but type_vocab_size={type_vocab_size}; {fix}"
        )


def check_position_ids(
    position_ids: torch.Tensor | None, shape: torch.Size, config: VanillaConfigBase
) -> None:
    """Raise `ValueError` unless `position_ids` is None or a (B or 1, L) integer tensor with positions in
    [0, max_position_embeddings) (any position >= 0 with rotary positions)."""
    if position_ids is None:
        return
    if not _is_index_tensor(position_ids, tuple(shape)):
        raise ValueError(
            f"position_ids must be an integer tensor of shape (batch or 1, length) = ({shape[0]} or 1, {shape[1]}), "
            f"got {_describe(position_ids)}"
        )
    if torch.compiler.is_compiling():
        return
    limit = position_limit(config)
    low, high = (int(v) for v in torch.aminmax(position_ids))
    if low < 0 or (limit is not None and high >= limit):
        raise ValueError(
            f"position_ids contains {low if low < 0 else high}, outside [0, {limit}) (max_position_embeddings); "
            f"leave position_ids unset to count the real tokens from 0"
        )


def input_shape(ids: torch.Tensor | None, embeds: torch.Tensor | None) -> tuple[int, int] | None:
    """(B, L) of the token ids, or else of the embeddings; None when neither is a tensor of that rank."""
    for value in (ids, embeds):
        if isinstance(value, torch.Tensor) and value.dim() >= 2:
            return value.shape[0], value.shape[1]
    return None


def check_labels(
    labels: torch.Tensor,
    vocab_size: int,
    positions: tuple[int, ...] | None,
    name: str,
    fix: str = "",
    argument: str = "labels",
) -> None:
    """The one labels check of every LM head: `labels` is a (B, L) integer tensor of token ids in
    [0, vocab_size) or IGNORE_INDEX (-100), with the shape `positions` of the input it scores (`name`), unless
    that is None (labels that become the input themselves). `fix` is appended to the shape message; `argument`
    is the name the messages give the labels (e.g. "shift_labels")."""
    if not isinstance(labels, torch.Tensor):
        raise ValueError(f"{argument} must be a torch tensor of token ids, got {type(labels).__name__}")
    if positions is not None and tuple(labels.shape) != tuple(positions):
        raise ValueError(
            f"{argument} have shape {tuple(labels.shape)} but the model scores {tuple(positions)} positions; pass "
            f"{argument} of the same shape as {name}{fix}"
        )
    check_token_ids(labels.masked_fill(labels == IGNORE_INDEX, 0), vocab_size, argument)


class MaskMemo:
    """The result last computed from one token-mask tensor, reused while the same tensor object comes back
    unmodified (same version counter): generate() passes the same source mask at every decoding step, so its
    check and the cross-attention mask built from it are done once per generate() call, not once per token.
    Only a weak reference to the mask is kept; never used while compiling or for inference-mode tensors (they
    have no version counter). Key and value are one tuple, read and replaced in one step, so that threads
    generating with one model at once (a server) never pair one call's mask with another call's value."""

    def __init__(self):
        self._entry: tuple | None = None  # ((weak ref to the mask, its version, extra), value)

    @staticmethod
    def _usable(mask: torch.Tensor | None) -> TypeGuard[torch.Tensor]:
        return (
            isinstance(mask, torch.Tensor) and not torch.compiler.is_compiling() and not mask.is_inference()
        )

    def get(self, mask: torch.Tensor | None, extra: tuple) -> tuple[bool, object]:
        """(True, value) when `mask` is the remembered tensor, unmodified, with the same `extra` key."""
        entry = self._entry
        if entry is None or not self._usable(mask):
            return False, None
        (ref, version, remembered_extra), value = entry
        if ref() is mask and mask._version == version and remembered_extra == extra:
            return True, value
        return False, None

    def put(self, mask: torch.Tensor | None, extra: tuple, value) -> None:
        if self._usable(mask):
            self._entry = (weakref.ref(mask), mask._version, extra), value

    def __getstate__(self) -> dict:  # pickling/copying a model does not carry the memo (nor a weak reference)
        return {}

    def __setstate__(self, state: dict) -> None:
        self.__init__()
