"""The key/value caches of the causal stacks and the outputs that carry them.

transformers 5.23 names the cache `past_key_values` (argument of `forward` and field of the model outputs);
5.24 renamed both to `cache` and still passes the old argument name on. Every forward takes both arguments
(`given_cache` picks the one passed) and every output sets its field through `CACHE_FIELD`, so that one code
runs on every transformers release from the floor on.

Contract of the caches: the decoder of the encoder-decoder takes an `EncoderDecoderCache` (self-attention K/V
growing by T positions per call, encoder K/V computed once); the decoder-only model takes one self-attention
`Cache` (`DynamicCache`, `StaticCache`). With `use_cache` and no cache, a dynamic one is created.
"""

from __future__ import annotations

from typing import TypeVar

import torch
from transformers.cache_utils import Cache, CacheLayerMixin, DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import Seq2SeqLMOutput

# the output field of the cache in this transformers release: "cache" (5.24 on) or "past_key_values" (5.23)
CACHE_FIELD = "cache" if "cache" in Seq2SeqLMOutput.__dataclass_fields__ else "past_key_values"


AnyCache = TypeVar("AnyCache", bound=Cache)


def given_cache(cache: AnyCache | None, past_key_values: AnyCache | None) -> AnyCache | None:
    """The cache a forward was given, under the name of this release (`cache`) or of 5.23 (`past_key_values`)."""
    return cache if cache is not None else past_key_values


def cache_output(cache: Cache | None, use_cache: bool) -> dict[str, Cache | None]:
    """The cache keyword of a model output: the cache when `use_cache`, else None."""
    return {CACHE_FIELD: cache if use_cache else None}


def encoder_decoder_cache(cache: Cache | None, use_cache: bool, config) -> EncoderDecoderCache | None:
    """The decoder's cache: `cache` checked to be an `EncoderDecoderCache`, a new dynamic one with `use_cache`
    and none given, or None."""
    if use_cache and cache is None:
        cache = EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))
    if cache is not None and not isinstance(cache, EncoderDecoderCache):
        raise ValueError(
            f"the decoder cache must be an EncoderDecoderCache (self- and cross-attention), got "
            f"{type(cache).__name__}"
        )
    return cache


def self_attention_cache(cache: Cache | None, use_cache: bool, config) -> Cache | None:
    """The decoder-only model's cache: `cache` checked to be a self-attention `Cache` (not an
    `EncoderDecoderCache`), a new `DynamicCache` with `use_cache` and none given, or None."""
    if use_cache and cache is None:
        cache = DynamicCache(config=config)
    if cache is not None and (not isinstance(cache, Cache) or isinstance(cache, EncoderDecoderCache)):
        raise ValueError(
            f"cache must be a transformers Cache of self-attention K/V (DynamicCache or StaticCache), got "
            f"{type(cache).__name__}"
        )
    return cache


def layer_keys_values(cache: Cache, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys and values, (B, H, S, D) each, that layer `layer_idx` of the filled attention cache holds."""
    layer = cache.layers[layer_idx]
    # transformers types a layer as any of its kinds (attention, linear attention) and its tensors as optional
    assert isinstance(layer, CacheLayerMixin) and layer.keys is not None and layer.values is not None
    return layer.keys, layer.values
