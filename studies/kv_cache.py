"""The KV cache, in numbers: in closed form, what decoding costs with and without it by component and the memory
the cache takes; measured, the speed-up it gives.

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

**Measured.** The wall-clock speed-up of our encoder-decoder's `generate(use_cache=True)` over
`generate(use_cache=False)` in the same interleaved rounds, next to the closed-form FLOP ratios, and the cache
memory of our presets and of a 7B-class model; `main` prints the tables and writes the CSV and the plot.

    python -m studies.kv_cache --plot docs/img/kv_cache.png     # small preset, T = 16 .. 256 (~1-2 min)
    python -m studies.kv_cache --quick                          # tiny preset, two lengths, one round
"""

from __future__ import annotations

import argparse
import copy
import csv
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch
from transformers import GenerationConfig

from studies import study_parser
from vanilla_transformer.benchmarks.contenders import VOCAB_SIZES, fixed_length
from vanilla_transformer.benchmarks.harness import Stat, interleaved, per_round_ratio
from vanilla_transformer.benchmarks.workloads import generate_call
from vanilla_transformer.modeling import position_limit
from vanilla_transformer.training.presets import PRESETS, build_config

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


# ------------------------------------------------------------------------------------------------------------
# Measured speed-up
# ------------------------------------------------------------------------------------------------------------


def study_model(preset: str, seed: int = 0):
    """Our encoder-decoder with `preset`'s sizes (`training.presets`), the benchmark vocabulary of that preset
    (`benchmarks.contenders.VOCAB_SIZES`), random weights, no dropout, sdpa attention, in eval mode."""
    from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

    if preset not in VOCAB_SIZES:
        raise ValueError(f"Unknown study preset {preset!r}; choose one of {list(VOCAB_SIZES)} (--preset).")
    config = build_config(preset, VOCAB_SIZES[preset], dropout=0.0)
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    return VanillaTransformerForConditionalGeneration(config).eval()


def greedy_config(model, new_tokens: int, use_cache: bool) -> GenerationConfig:
    """Greedy decoding of exactly `new_tokens` tokens (</s> is suppressed until then) with the model's ids. The
    beam-search settings are given their neutral values: generate() fills unset ones from the model's
    generation config (beam 4, `DEFAULT_LENGTH_PENALTY`)."""
    limit = position_limit(model.config)
    if limit is not None and new_tokens + 1 > limit:
        raise ValueError(
            f"decoding {new_tokens} tokens needs {new_tokens + 1} target positions but the model has "
            f"max_position_embeddings={limit}; pass shorter lengths"
        )
    settings = copy.deepcopy(model.generation_config)  # the model's ids and suppressed tokens
    settings.update(**fixed_length(1, new_tokens, use_cache))
    return settings


def source_ids(model, batch: int, length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) random ids above the special ids, ending with </s>, and an all-ones mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, model.config.vocab_size, (batch, length), generator=g)
    ids[:, -1] = model.config.eos_token_id
    return ids, torch.ones_like(ids)


@dataclass
class Timing:
    """Seconds per `generate()` call with and without the cache at one decoded length, one value per round, of
    wall-clock time and of this process's CPU time (all its threads: on a shared machine the time it was
    actually running), and whether both produced the same tokens."""

    new_tokens: int
    cached: list[float]
    uncached: list[float]
    cached_cpu: list[float]
    uncached_cpu: list[float]
    same_tokens: bool

    @property
    def speedup(self) -> Stat:
        """Per-round wall-clock ratio no cache / cache."""
        return per_round_ratio(self.uncached, self.cached)

    @property
    def cpu_speedup(self) -> Stat:
        """Per-round CPU-time ratio no cache / cache."""
        return per_round_ratio(self.uncached_cpu, self.cached_cpu)


def _with_cpu_time(call: Callable[[], object], spent: list[float]) -> Callable[[], object]:
    """`call`, appending the process CPU time of each run to `spent`."""

    def run() -> object:
        start = time.process_time()
        try:
            return call()
        finally:
            spent.append(time.process_time() - start)

    return run


def measure_speedups(
    model, lengths: list[int], source_length: int, rounds: int, batch: int = 1
) -> list[Timing]:
    """For each length T, `generate()` of exactly T greedy tokens with and without the cache, timed in
    `rounds` interleaved rounds (`benchmarks.harness.interleaved`, wall clock; CPU time alongside); the token check
    doubles as the warm-up."""
    src, mask = source_ids(model, batch, source_length)
    configs = {
        t: (greedy_config(model, t, True), greedy_config(model, t, False)) for t in lengths
    }  # checks all
    timings = []
    for t in lengths:
        calls = [generate_call(model, src, mask, config) for config in configs[t]]
        same = torch.equal(calls[0](), calls[1]())
        cpu: dict[str, list[float]] = {"cache": [], "no_cache": []}
        cases = {name: _with_cpu_time(call, cpu[name]) for name, call in zip(cpu, calls)}
        times = interleaved(cases, rounds, warmup=0)
        timings.append(Timing(t, times["cache"], times["no_cache"], cpu["cache"], cpu["no_cache"], same))
    return timings


# ------------------------------------------------------------------------------------------------------------
# The study
# ------------------------------------------------------------------------------------------------------------


@dataclass
class Study:
    """Everything one run computed and measured."""

    preset: str
    sizes: Sizes
    batch: int
    rounds: int
    lengths: list[int]
    flops: list[FlopRow]
    timings: list[Timing]
    memory_lengths: list[int]
    memory: list[MemoryRow] = field(default_factory=list)

    def total_ratio(self, new_tokens: int) -> Fraction:
        return next(r.ratio for r in self.flops if r.new_tokens == new_tokens and r.component == "total")


def run_study(
    preset: str = "small",
    lengths: tuple[int, ...] = (16, 32, 64, 128, 256),
    source_length: int = 32,
    rounds: int = 3,
    batch: int = 1,
    memory_lengths: tuple[int, ...] = (128, 1024, 4096, 32768),
) -> Study:
    """The analytic FLOPs of `preset`'s decoder at each length, the measured speed-ups of a random-weight model
    of that preset, and the cache memory of every preset and of a 7B-class model at `memory_lengths`."""
    model = study_model(preset)
    sizes = Sizes.from_config(model.config, source_length)
    ordered = sorted(set(lengths))
    return Study(
        preset,
        sizes,
        batch,
        rounds,
        ordered,
        flop_rows(sizes, ordered),
        measure_speedups(model, ordered, source_length, rounds, batch),
        list(memory_lengths),
        memory_rows(list(memory_lengths), source_length),
    )


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def format_study(study: Study) -> list[str]:
    """The three tables of a study as text lines: FLOPs per component, measured speed-ups, cache memory."""
    s = study.sizes
    lines = [
        f"Analytic matmul FLOPs of greedy decoding, one sentence: preset {study.preset} (d_model {s.d_model}, "
        f"{s.encoder_layers}+{s.layers} layers, FFN {s.ffn}, vocabulary {s.vocab}), source {s.source_length} tokens",
        f"{'T':>4}  {'component':<20}{'no cache MFLOP':>16}{'cache MFLOP':>13}{'ratio':>9}  {'closed form':<30}"
        f"{'notes':>12}",
    ]
    for row in study.flops:
        form = (
            f"{CLOSED_FORMS[row.component]} = {float(row.closed_form):.2f}"
            if row.closed_form is not None
            else ""
        )
        note = f"{NOTES[row.component][0]} = {row.notes:.2f}" if row.notes is not None else ""
        lines.append(
            f"{row.new_tokens:>4}  {LABELS[row.component]:<20}{row.uncached / 1e6:>16.1f}"
            f"{row.cached / 1e6:>13.1f}{float(row.ratio):>9.2f}  {form:<30}{note:>12}"
        )
    lines += [
        "",
        f"Measured: generate() greedy, batch {study.batch}, exactly T tokens, {study.rounds} interleaved rounds; "
        "speed-up = time without cache / time with cache, median (min-max) of the per-round ratios, in wall-clock "
        "and in process CPU time; CPU ms per generated token and the analytic FLOPs per CPU second (medians)",
        f"{'T':>4}{'FLOP ratio':>12}{'wall speed-up':>22}{'CPU speed-up':>22}{'ms/token':>10}{'no cache':>10}"
        f"{'GFLOP/s':>9}{'no cache':>10}{'same tokens':>13}",
    ]
    totals = {
        (r.new_tokens, cached): r.cached if cached else r.uncached
        for r in study.flops
        if r.component == "total"
        for cached in (True, False)
    }
    for timing in study.timings:
        t = timing.new_tokens
        cached, uncached = Stat(timing.cached_cpu).median, Stat(timing.uncached_cpu).median
        lines.append(
            f"{t:>4}{float(study.total_ratio(t)):>12.2f}{timing.speedup.fmt(2):>22}"
            f"{timing.cpu_speedup.fmt(2):>22}{cached / t * 1e3:>10.2f}{uncached / t * 1e3:>10.2f}"
            f"{totals[t, True] * study.batch / cached / 1e9:>9.1f}"
            f"{totals[t, False] * study.batch / uncached / 1e9:>10.1f}"
            f"{'yes' if timing.same_tokens else 'NO':>13}"
        )
    lines += [
        "",
        f"KV-cache memory per sentence, 2 x layers x heads x T x head_dim x bytes (cross-attention: S = "
        f"{s.source_length} source positions)",
        f"{'model':<34}{'layers':>7}{'heads':>6}{'head_dim':>9}{'per token':>11}"
        + "".join(f"{'T=' + str(t):>11}" for t in study.memory_lengths)
        + f"{'cross':>11}",
    ]
    for row in study.memory:
        lines.append(
            f"{row.name:<34}{row.layers:>7}{row.heads:>6}{row.head_dim:>9}{_size(row.per_position):>11}"
            + "".join(f"{_size(row.self_attention[t]):>11}" for t in study.memory_lengths)
            + f"{_size(row.cross_attention) if row.cross_attention is not None else '-':>11}"
        )
    return lines


def write_csv(study: Study, path: str | Path) -> Path:
    """The FLOP rows with the measured speed-up of their length, one line per (T, component)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    timings = {timing.new_tokens: timing for timing in study.timings}
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "T",
                "component",
                "flops_no_cache",
                "flops_cache",
                "ratio",
                "closed_form",
                "notes",
                "wall_speedup_median",
                "wall_speedup_min",
                "wall_speedup_max",
                "cpu_speedup_median",
                "cpu_speedup_min",
                "cpu_speedup_max",
            ]
        )
        for row in study.flops:
            timing = timings[row.new_tokens]
            measured = [
                f"{value:.4f}"
                for stat in (timing.speedup, timing.cpu_speedup)
                for value in (stat.median, min(stat.values), max(stat.values))
            ]
            writer.writerow(
                [
                    row.new_tokens,
                    row.component,
                    row.uncached,
                    row.cached,
                    f"{float(row.ratio):.4f}",
                    CLOSED_FORMS.get(row.component, ""),
                    NOTES[row.component][0] if row.notes else "",
                    *measured,
                ]
            )
    return path


def plot_study(study: Study, path: str | Path) -> Path:
    """A PNG (matplotlib's Agg canvas, no pyplot state): left, the FLOP ratio no cache / cache of each component
    and in total against T, the notes' T/2 and T/3, and the measured speed-ups (median, min-max bars); right, the
    self-attention cache of every preset and of a 7B-class model against T. Raises ImportError without
    matplotlib."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullLocator

    figure = Figure(figsize=(12, 4.8), layout="constrained")
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2)
    lengths = study.lengths
    for name in (*COMPONENTS[:-1], "total"):
        ratios = [float(r.ratio) for r in study.flops if r.component == name]
        left.plot(
            lengths,
            ratios,
            marker="o",
            markersize=3,
            label=f"FLOPs: {LABELS[name]}",
            linewidth=2.5 if name == "total" else 1.2,
        )
    for label, factor in NOTES.values():
        left.plot(lengths, [float(factor) * t for t in lengths], linestyle="--", color="grey", linewidth=0.8)
        left.annotate(
            f"notes: {label}",
            (lengths[-1], float(factor) * lengths[-1]),
            fontsize=8,
            color="grey",
            xytext=(3, 0),
            textcoords="offset points",
        )
    for kind, marker in (("wall-clock", "s"), ("CPU time", "D")):
        stats = [timing.speedup if kind == "wall-clock" else timing.cpu_speedup for timing in study.timings]
        medians = [stat.median for stat in stats]
        errors = [
            [m - min(stat.values) for m, stat in zip(medians, stats)],
            [max(stat.values) - m for m, stat in zip(medians, stats)],
        ]
        left.errorbar(
            lengths,
            medians,
            yerr=errors,
            color="black",
            marker=marker,
            capsize=3,
            linestyle="-" if kind == "wall-clock" else ":",
            label=f"measured speed-up, {kind} (batch {study.batch})",
        )
    left.set(
        xscale="log",
        yscale="log",
        xlabel="decoded tokens T",
        ylabel="no cache / cache",
        title=f"KV cache: FLOP ratio and wall-clock speed-up ({study.preset} preset)",
    )
    left.set_xticks(lengths, [str(t) for t in lengths])
    left.xaxis.set_minor_locator(NullLocator())
    left.legend(fontsize=7)
    for row in study.memory:
        right.plot(
            study.memory_lengths,
            [row.self_attention[t] / 2**20 for t in study.memory_lengths],
            marker="o",
            markersize=3,
            label=row.name,
        )
    right.set(
        xscale="log",
        yscale="log",
        xlabel="cached positions T",
        title="Self-attention KV cache per sentence",
        ylabel="MiB = 2 · layers · heads · T · head_dim · bytes / 2^20",
    )
    right.set_xticks(study.memory_lengths, [str(t) for t in study.memory_lengths])
    right.xaxis.set_minor_locator(NullLocator())
    right.legend(fontsize=7)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path


# ------------------------------------------------------------------------------------------------------------
# The command
# ------------------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = study_parser("studies.kv_cache", __doc__)
    p.add_argument("--preset", choices=list(VOCAB_SIZES), default=None, help="model sizes (default small)")
    p.add_argument(
        "--lengths", type=int, nargs="+", default=None, help="decoded lengths T (16 32 64 128 256)"
    )
    p.add_argument("--source_length", type=int, default=None, help="source tokens S (default 32)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved timing rounds (default 5)")
    p.add_argument("--batch", type=int, default=1, help="sentences per generate() call")
    p.add_argument("--quick", action="store_true", help="tiny preset, T = 8 16, source 8, one round")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: batch-1 decoding gains little from a second thread, and two threads on a "
        "busy 2-core machine wait for each other at every operator, which swamps the measurement)",
    )
    p.add_argument("--plot", type=Path, default=None, help="write the plot (PNG) here")
    p.add_argument("--csv", type=Path, default=None, help="write the FLOP rows and speed-ups (CSV) here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parse_args(argv)
    defaults: dict[str, Any] = (
        dict(preset="tiny", lengths=[8, 16], source_length=8, rounds=1)
        if args.quick
        else dict(preset="small", lengths=[16, 32, 64, 128, 256], source_length=32, rounds=5)
    )
    chosen = {
        name: getattr(args, name) if getattr(args, name) is not None else value
        for name, value in defaults.items()
    }
    if args.batch < 1 or chosen["rounds"] < 1 or chosen["source_length"] < 1 or min(chosen["lengths"]) < 1:
        print("error: --batch, --rounds, --source_length and --lengths must be >= 1", file=sys.stderr)
        return 2
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        print(
            f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
            f"{platform.processor() or platform.machine()}, load average {os.getloadavg()[0]:.1f}"
        )
        try:
            study = run_study(
                chosen["preset"],
                tuple(chosen["lengths"]),
                chosen["source_length"],
                chosen["rounds"],
                args.batch,
            )
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    finally:
        torch.set_num_threads(threads)
    print("\n".join(format_study(study)))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if args.csv:
        print(f"wrote {write_csv(study, args.csv)}")
    if args.plot:
        try:
            print(f"wrote {plot_study(study, args.plot)}")
        except ImportError:
            fallback = write_csv(study, args.plot.with_suffix(".csv"))
            print(f"matplotlib is not installed (pip install matplotlib): no plot; wrote {fallback} instead")
    return 0


if __name__ == "__main__":
    sys.exit(main())
