"""transformers' decoding rules for this model, in numpy: the settings of one call (`Decoding`, resolved from a
generation config by `resolve_decoding`), the logits processors (`process_scores`) and the numerics the searches
of `inference.engine_onnx` share (`log_softmax`, `top_k`, `PENALTY`).

Supported processors: `suppress_tokens`, `begin_suppress_tokens`, `bad_words_ids`, `min_length`,
`min_new_tokens`, `forced_bos_token_id`, `forced_eos_token_id`; the settings of `ENGINES["onnx"].refused`
(`inference.engines`: sampling, repetition penalties, n-gram blocking, ...) raise `ValueError` naming them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .engines import check_refused

if TYPE_CHECKING:
    from transformers import GenerationConfig

PENALTY = np.float32(-1.0e9)  # transformers' "never choose this" offset in beam search


@dataclass(frozen=True)
class Decoding:
    """Resolved decoding settings of one call (see the module docstring)."""

    num_beams: int
    num_return_sequences: int
    length_penalty: float
    early_stopping: bool | str
    max_new_tokens: int
    eos_token_ids: tuple[int, ...]
    pad_token_id: int
    decoder_start_token_id: int
    suppress_tokens: tuple[int, ...]
    begin_suppress_tokens: tuple[int, ...]
    bad_words_ids: tuple[tuple[int, ...], ...]
    min_length: int
    min_new_tokens: int
    forced_bos_token_id: int | None
    forced_eos_token_id: int | None


def resolve_decoding(generation_config: GenerationConfig, **overrides: Any) -> Decoding:
    """The settings of `generation_config` updated with the non-None `overrides` (generate() keyword names).

    Raises `ValueError` for an unknown option, an out-of-range value (`modeling.check_generation_arguments`) or an
    option this engine does not implement."""
    from vanilla_transformer.modeling import check_generation_arguments

    overrides = {name: value for name, value in overrides.items() if value is not None}
    check_generation_arguments(overrides, generation_config)
    config = generation_config.__class__.from_dict(generation_config.to_dict())
    unknown = config.update(**overrides)
    if unknown:
        raise ValueError(f"unknown generation options {sorted(unknown)}: expected generate() keyword names")
    check_refused("onnx", config, "the generation config and options")

    def ids(value: Any) -> tuple[int, ...]:
        return tuple(value) if isinstance(value, (list, tuple)) else (() if value is None else (value,))

    eos = ids(config.eos_token_id)
    max_new = config.max_new_tokens if config.max_new_tokens is not None else config.max_length - 1
    bad_words = tuple(tuple(words) for words in config.bad_words_ids or ())
    return Decoding(
        num_beams=config.num_beams,
        num_return_sequences=config.num_return_sequences or 1,
        length_penalty=float(config.length_penalty),
        early_stopping=config.early_stopping,
        max_new_tokens=max_new,
        eos_token_ids=eos,
        pad_token_id=config.pad_token_id if config.pad_token_id is not None else eos[0],
        decoder_start_token_id=config.decoder_start_token_id,
        suppress_tokens=ids(config.suppress_tokens),
        begin_suppress_tokens=ids(config.begin_suppress_tokens),
        bad_words_ids=tuple(words for words in bad_words if list(words) not in [[token] for token in eos]),
        min_length=config.min_length or 0,
        min_new_tokens=config.min_new_tokens or 0,
        forced_bos_token_id=config.forced_bos_token_id,
        forced_eos_token_id=config.forced_eos_token_id,
    )


def process_scores(scores: np.ndarray, sequences: np.ndarray, decoding: Decoding) -> np.ndarray:
    """transformers' logits processors, in its order, on (N, V) scores of N sequences (N, L) that start with the
    decoder start token (L = the current length). Returns a new array; banned tokens get -inf."""
    scores = scores.copy()
    length = sequences.shape[1]
    for words in decoding.bad_words_ids:
        prefix = words[:-1]
        if not prefix:
            scores[:, words[-1]] = -np.inf
        elif length >= len(prefix):
            matches = (sequences[:, length - len(prefix) :] == np.asarray(prefix)).all(axis=1)
            scores[matches, words[-1]] = -np.inf
    eos = list(decoding.eos_token_ids)
    if eos and (length < decoding.min_length or length - 1 < decoding.min_new_tokens):
        scores[:, eos] = -np.inf
    if decoding.forced_bos_token_id is not None and length == 1:
        scores[:] = -np.inf
        scores[:, decoding.forced_bos_token_id] = 0.0
    if decoding.forced_eos_token_id is not None and length == decoding.max_new_tokens:  # max_length - 1
        forced = decoding.forced_eos_token_id
        scores[:] = -np.inf
        scores[:, list(forced) if isinstance(forced, (list, tuple)) else forced] = 0.0
    if decoding.suppress_tokens:
        scores[:, list(decoding.suppress_tokens)] = -np.inf
    begin = 2 if decoding.forced_bos_token_id is not None else 1
    if decoding.begin_suppress_tokens and length == begin:
        scores[:, list(decoding.begin_suppress_tokens)] = -np.inf
    return scores


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log_softmax over the last axis, in float32."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def top_k(values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, indices) of the k largest entries of each row, largest first; equal values in index order (which
    of several equal values at the k-th place are kept is unspecified, as with torch.topk)."""
    if k < values.shape[-1]:
        indices = np.argpartition(-values, k - 1, axis=-1)[:, :k]  # the k largest, unordered
    else:
        indices = np.broadcast_to(np.arange(values.shape[-1]), values.shape)
    chosen = np.take_along_axis(values, indices, axis=-1)
    order = np.lexsort((indices, -chosen), axis=-1)  # by value, then by index
    return np.take_along_axis(chosen, order, axis=-1), np.take_along_axis(indices, order, axis=-1)
