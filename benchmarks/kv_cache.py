"""The KV cache, measured: the wall-clock speed-up of our encoder-decoder's `generate(use_cache=True)` over
`generate(use_cache=False)` in the same rounds, next to the closed-form FLOP ratios and the memory of
`benchmarks.kv_cache_model` (its docstring states the FLOP model), and the tables, CSV and plot of one study.

Nothing here prints; `vanilla-transformer bench kv-cache` prints the tables and draws the plot.
"""

from __future__ import annotations

import copy
import csv
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import torch
from transformers import GenerationConfig
from vanilla_transformer.training.presets import build_config

from .contenders import VOCAB_SIZES, fixed_length
from .harness import Stat, interleaved, per_round_ratio
from .kv_cache_model import (
    CLOSED_FORMS,
    COMPONENTS,
    LABELS,
    NOTES,
    FlopRow,
    MemoryRow,
    Sizes,
    flop_rows,
    memory_rows,
)
from .workloads import generate_call

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
    generation config (beam 4, length penalty 0.6)."""
    config = model.config
    if new_tokens + 1 > config.max_position_embeddings:
        raise ValueError(
            f"decoding {new_tokens} tokens needs {new_tokens + 1} target positions but the model has "
            f"max_position_embeddings={config.max_position_embeddings}; pass shorter lengths"
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
    `rounds` interleaved rounds (`benchmarks.speed.interleaved`, wall clock; CPU time alongside); the token check
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
    lengths = sorted(set(lengths))
    return Study(
        preset,
        sizes,
        batch,
        rounds,
        lengths,
        flop_rows(sizes, lengths),
        measure_speedups(model, lengths, source_length, rounds, batch),
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
