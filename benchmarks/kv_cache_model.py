"""The KV cache in closed form: what decoding costs with and without it, by component, and the memory the cache
takes.

**FLOP model.** Matmul FLOPs only (a multiply-add is 2 FLOPs; LayerNorm, softmax, activations and embedding
look-ups are left out), for one sentence (every count scales with the batch) of S source tokens, greedy
decoding of exactly T tokens. Decoding takes T decoder calls: call t = 1 .. T sees t target positions (the start
token and the t - 1 tokens generated so far) and produces token t. Without a cache call t runs the decoder on
all t positions; with the cache only on the newest one, which attends to the t cached keys. With d = d_model,
F = the decoder's FFN width, V = vocabulary:

    component             no cache (sum over calls)          cache                 ratio (exact)
    projections + FFN     P * T(T+1)/2                       P * T                 (T+1)/2      notes: ~T/2
        P = 12d^2 + 4dF per position: self-attention q, k, v, out (4 x 2d^2), cross-attention q, out
        (2 x 2d^2), fc1, fc2 (2 x 2dF)
    self-attention        4d * T(T+1)(T+2)/6                 4d * T(T+1)/2         (T+2)/3      notes: ~T/3
        QK^T and AV: 4d per (query, key) pair a causal query can see (key <= query): call t computes
        t(t+1)/2 pairs without a cache, t with it. (A kernel that computed the whole t x t score matrix and
        masked it would do 4d * T(T+1)(2T+1)/6 without a cache: ratio (2T+1)/3. PyTorch's CPU
        scaled_dot_product_attention with is_causal skips the key blocks above the diagonal.)
    cross-attention       4Sd^2 * T + 4Sd * T(T+1)/2         4Sd^2 + 4Sd * T       T(2d+T+1) / (2(d+T))
        K and V of the S encoder states (4Sd^2), recomputed by every call without a cache and computed once
        with it; QK^T and AV over the S keys (4Sd per query position). The ratio tends to T while T << d and to
        (T+1)/2 when T >> d.
    output layer          2dV * T(T+1)/2                     2dV * T               (T+1)/2
        our forward projects every position it is given to the vocabulary (as transformers' seq2seq models do
        without `logits_to_keep`); a decoder that projected only the last position would pay 2dV * T either way.
    encoder               E (once per generate() call, either way)                 1
        E = L_enc * (S(8d^2 + 4dF_enc) + 4S^2 d) for L_enc encoder layers of FFN width F_enc.

The first three rows are per decoder layer (`decoding_flops` multiplies them by the L decoder layers); the output
layer and the encoder are totals. The study notes' O(T^2 d^2) -> O(T d^2) and O(T^3 d) -> O(T^2 d) are the first
two rows.

**Memory.** K and V of every layer: `kv_cache_bytes` = 2 * layers * heads * length * head_dim * bytes (per
sentence). The self-attention cache grows with the decoded length T, the cross-attention cache of an
encoder-decoder holds the S source positions for the whole call.

The measured side (the same-round speed-up, the plot) is `benchmarks.kv_cache`; nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from vanilla_transformer.training.presets import PRESETS

COMPONENTS = ("projections_ffn", "self_attention", "cross_attention", "output_layer", "encoder")
LABELS = {
    "projections_ffn": "projections + FFN",
    "self_attention": "self-attn QK^T, AV",
    "cross_attention": "cross-attention",
    "output_layer": "output layer",
    "encoder": "encoder (once)",
    "total": "total",
}
CLOSED_FORMS = {
    "projections_ffn": "(T+1)/2",
    "self_attention": "(T+2)/3",
    "cross_attention": "T(2d+T+1)/(2(d+T))",
    "output_layer": "(T+1)/2",
    "encoder": "1",
}
NOTES = {"projections_ffn": ("T/2", Fraction(1, 2)), "self_attention": ("T/3", Fraction(1, 3))}

# A 7B-class decoder-only model's cache (LLaMA-7B's shape: 32 layers, 32 heads of 128, fp16), no cross-attention.
SEVEN_B = dict(name="7B-class (32 x 32 x 128, fp16)", layers=32, heads=32, head_dim=128, bytes_per_value=2)


# ------------------------------------------------------------------------------------------------------------
# FLOPs
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """The sizes the FLOP model reads: d_model, the decoder's layers and FFN width, the vocabulary, the encoder's
    layers and FFN width, and the source length S."""

    d_model: int
    layers: int
    ffn: int
    vocab: int
    encoder_layers: int
    encoder_ffn: int
    source_length: int

    @classmethod
    def from_config(cls, config, source_length: int) -> Sizes:
        """From a `VanillaTransformerConfig` and the source length of the study."""
        return cls(
            config.d_model,
            config.decoder_layers,
            config.decoder_ffn_dim,
            config.decoder_vocab_size,
            config.encoder_layers,
            config.encoder_ffn_dim,
            source_length,
        )


def decoding_flops(sizes: Sizes, new_tokens: int, use_cache: bool, causal: bool = True) -> dict[str, int]:
    """Exact matmul FLOPs of greedy decoding of `new_tokens` = T tokens for one sentence, per component of
    `COMPONENTS` (the closed forms of the module docstring), with or without the KV cache. `causal=False` counts
    the whole t x t score matrix of each uncached call, as the eager attention path computes it (the sdpa path
    skips the key blocks above the diagonal: `causal=True`, the default)."""
    t, d, s, layers = new_tokens, sizes.d_model, sizes.source_length, sizes.layers
    if t < 1:
        raise ValueError(f"new_tokens must be >= 1, got {t}")
    per_position = 12 * d * d + 4 * d * sizes.ffn
    prefix_sum = t * (t + 1) // 2  # positions run by the uncached calls: 1 + 2 + ... + T
    encoder = sizes.encoder_layers * (s * (8 * d * d + 4 * d * sizes.encoder_ffn) + 4 * s * s * d)
    if use_cache:
        return {
            "projections_ffn": layers * per_position * t,
            "self_attention": layers * 4 * d * prefix_sum,
            "cross_attention": layers * (4 * s * d * d + 4 * s * d * t),
            "output_layer": 2 * d * sizes.vocab * t,
            "encoder": encoder,
        }
    return {
        "projections_ffn": layers * per_position * prefix_sum,
        "self_attention": layers * 4 * d * (t * (t + 1) * (t + 2 if causal else 2 * t + 1) // 6),
        "cross_attention": layers * (4 * s * d * d * t + 4 * s * d * prefix_sum),
        "output_layer": 2 * d * sizes.vocab * prefix_sum,
        "encoder": encoder,
    }


def closed_form_ratio(component: str, new_tokens: int, d_model: int) -> Fraction:
    """The exact FLOP ratio no cache / cache of one component (`CLOSED_FORMS`): (T+1)/2 for projections + FFN
    and the output layer, (T+2)/3 for the self-attention interaction, T(2d+T+1)/(2(d+T)) for cross-attention,
    1 for the encoder."""
    t, d = new_tokens, d_model
    forms = {
        "projections_ffn": Fraction(t + 1, 2),
        "self_attention": Fraction(t + 2, 3),
        "cross_attention": Fraction(t * (2 * d + t + 1), 2 * (d + t)),
        "output_layer": Fraction(t + 1, 2),
        "encoder": Fraction(1),
    }
    if component not in forms:
        raise ValueError(f"unknown component {component!r}; choose one of {list(forms)}")
    return forms[component]


@dataclass
class FlopRow:
    """One component at one decoded length: FLOPs without and with the cache, their exact ratio, the closed form
    and the study notes' approximation (None where the notes give none)."""

    new_tokens: int
    component: str
    uncached: int
    cached: int
    closed_form: Fraction | None
    notes: float | None

    @property
    def ratio(self) -> Fraction:
        return Fraction(self.uncached, self.cached)


def flop_rows(sizes: Sizes, lengths: list[int]) -> list[FlopRow]:
    """A `FlopRow` per component of `COMPONENTS` and one "total" row, for each decoded length."""
    rows = []
    for t in lengths:
        uncached, cached = decoding_flops(sizes, t, False), decoding_flops(sizes, t, True)
        for name in COMPONENTS:
            note = NOTES.get(name)
            rows.append(
                FlopRow(
                    t,
                    name,
                    uncached[name],
                    cached[name],
                    closed_form_ratio(name, t, sizes.d_model),
                    None if note is None else float(note[1] * t),
                )
            )
        rows.append(FlopRow(t, "total", sum(uncached.values()), sum(cached.values()), None, None))
    return rows


# ------------------------------------------------------------------------------------------------------------
# Memory
# ------------------------------------------------------------------------------------------------------------


def kv_cache_bytes(
    layers: int, heads: int, head_dim: int, length: int, bytes_per_value: int, batch: int = 1
) -> int:
    """Bytes of the K and V tensors of `layers` layers caching `length` positions: 2 * layers * heads * length *
    head_dim * bytes_per_value * batch."""
    return 2 * layers * heads * length * head_dim * bytes_per_value * batch


@dataclass
class MemoryRow:
    """The cache of one model shape: bytes per cached position, the self-attention cache at each length, and the
    cross-attention cache of `source_length` positions (None for a decoder-only model)."""

    name: str
    layers: int
    heads: int
    head_dim: int
    bytes_per_value: int
    per_position: int
    self_attention: dict[int, int]
    cross_attention: int | None


def memory_rows(lengths: list[int], source_length: int, bytes_per_value: int = 4) -> list[MemoryRow]:
    """The decoder's cache of every `training.presets` preset (`bytes_per_value`: 4 = float32) and of a 7B-class
    decoder-only model (`SEVEN_B`, fp16)."""
    shapes = []
    for name, preset in PRESETS.items():
        model = preset["model"]
        heads = model["decoder_attention_heads"]
        shapes.append(
            dict(
                name=f"{name} (fp{8 * bytes_per_value})",
                layers=model["decoder_layers"],
                heads=heads,
                head_dim=model["d_model"] // heads,
                bytes_per_value=bytes_per_value,
                cross=True,
            )
        )
    shapes.append({**SEVEN_B, "cross": False})
    rows = []
    for shape in shapes:
        sized = (shape["layers"], shape["heads"], shape["head_dim"])
        rows.append(
            MemoryRow(
                shape["name"],
                *sized,
                shape["bytes_per_value"],
                kv_cache_bytes(*sized, 1, shape["bytes_per_value"]),
                {t: kv_cache_bytes(*sized, t, shape["bytes_per_value"]) for t in lengths},
                kv_cache_bytes(*sized, source_length, shape["bytes_per_value"]) if shape["cross"] else None,
            )
        )
    return rows


def cache_tensor_bytes(cache) -> dict[str, int]:
    """Bytes held by the key and value tensors of an `EncoderDecoderCache` (e.g. the `past_key_values` that
    `generate(..., return_dict_in_generate=True)` returns): {"self_attention": ..., "cross_attention": ...}."""

    def held(part) -> int:
        return sum(layer.keys.nbytes + layer.values.nbytes for layer in part.layers)

    return {
        "self_attention": held(cache.self_attention_cache),
        "cross_attention": held(cache.cross_attention_cache),
    }
