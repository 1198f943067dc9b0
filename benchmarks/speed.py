"""Speed of our model against transformers' `MarianMTModel` (same architecture, same weights) and, when the
`ctranslate2` package is installed, against a CTranslate2 conversion of the same Marian weights; our own model
exported with `export.ct2` (fp32 and int8) and with `export.onnx` (ONNX Runtime fp32 and int8), and our model
with int8 linear layers in PyTorch (`torch_int8`), are further contenders, each with its token agreement
against our `generate()`.

Every figure is measured in interleaved rounds (each round runs every contender once, in alternating order)
and reported as the median of the per-round ratios against Marian, so that the noise of a shared machine
cancels. With `Settings.bf16`, ours and Marian also run in bf16 in the same rounds (training under
`torch.autocast`, generation with bf16 weights), so that each system's bf16/fp32 ratio, ours/Marian at the same
precision and each system's best precision on this machine come from the same rounds. Same-round probes (a large fp32 GEMM and a large memory copy) turn throughputs into training MFU and
into the decode step's distance to the memory-bandwidth floor.

Modules: `benchmarks.contenders` (the models), `benchmarks.workloads` (the timed units, FLOP and byte models),
`benchmarks.harness` (interleaved rounds, probes); this one runs the workloads and builds the rows. The logic
lives here; `vanilla-transformer bench speed` parses arguments and prints.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from vanilla_transformer.modeling import cpu_inference_gemm, set_cpu_inference_gemm

from .contenders import ENGINE_COLUMNS, TORCH_INT8, Contenders, generation_config
from .harness import Stat, copy_probe, gemm_probe, interleaved, peak_step_memory, per_round_ratio
from .workloads import (
    ct2_call,
    decode_step_bytes,
    engine_call,
    generate_call,
    source_batch,
    train_step,
    training_flops,
)

COLUMNS = (*ENGINE_COLUMNS, TORCH_INT8)  # the deployed contenders of ours, as table columns


@dataclass
class Row:
    """One measured workload: throughputs (units/s) per contender and per-round ratios against Marian."""

    name: str
    unit: str
    throughput: dict[str, Stat]
    ratio: dict[str, Stat]
    notes: list[str] = field(default_factory=list)


@dataclass
class Settings:
    rounds: int = 5
    new_tokens: int = 32
    src_len: int = 32
    train_batch: int = 32
    budget_tokens: int = 4096
    gen_batches: tuple[int, ...] = (1, 16)
    beams: tuple[int, ...] = (1, 4)
    no_cache: bool = True
    budget_training: bool = True
    peak_memory: bool = True
    # bf16 columns for ours and Marian (training under autocast, generation in bf16 weights)
    bf16: bool = True


def quick_settings() -> Settings:
    return Settings(rounds=3, budget_training=False, gen_batches=(1, 16), beams=(1, 4), no_cache=True)


def _ratios(times: dict[str, list[float]], work: float, names: list[str]) -> tuple[dict, dict]:
    throughput = {n: Stat([work / t for t in times[n]]) for n in names}
    ratio = {n: per_round_ratio(times["marian"], times[n]) for n in names if n != "marian"}
    return throughput, ratio


def bench_training(c: Contenders, s: Settings, batch: int, label: str) -> Row:
    hp = c.hp
    gemm, gemm_flops = gemm_probe()
    # copies: the optimizer steps (and the two models' different dropout draws) must not move the weights that
    # the generation workloads compare token for token
    marian, ours = copy.deepcopy(c.marian), copy.deepcopy(c.ours)
    cases = {
        "marian": train_step(marian, batch, s.src_len, hp["vocab"]),
        "ours": train_step(ours, batch, s.src_len, hp["vocab"]),
        "gemm": gemm,
    }
    if s.bf16:
        for name, model in (("marian", c.marian), ("ours", c.ours)):
            cases[f"{name}_bf16"] = train_step(copy.deepcopy(model), batch, s.src_len, hp["vocab"], bf16=True)
    times = interleaved(cases, s.rounds, repeat={"gemm": 5})
    tokens = batch * s.src_len
    throughput, ratio = _ratios(times, tokens, [k for k in cases if k != "gemm"])
    flops = training_flops(hp, batch, s.src_len, s.src_len)
    notes = []
    for name in ("marian", "ours"):
        mfu = Stat([(flops / t) / (gemm_flops / g) for t, g in zip(times[name], times["gemm"])])
        notes.append(f"{name} MFU vs same-round GEMM {mfu.fmt(2)}")
    notes.append(f"GEMM {Stat([gemm_flops / g / 1e9 for g in times['gemm']]).fmt(1)} GFLOP/s")
    row = Row(f"train {label} ({batch}x{s.src_len})", "target tok/s", throughput, ratio, notes)
    for model in (marian, ours):
        model.zero_grad(set_to_none=True)
        model.eval()
    if s.peak_memory:
        peaks = {
            name: peak_step_memory(train_step(model, batch, s.src_len, hp["vocab"]))
            for name, model in (("marian", marian), ("ours", ours))
        }
        row.notes.append(
            "peak step memory MiB: "
            + ", ".join(f"{n} {v / 2**20:.0f}" for n, v in peaks.items())
            + f" (ours/marian {peaks['ours'] / max(peaks['marian'], 1):.2f})"
        )
    return row


def _with_default_gemm(call: Callable[[], Any]) -> Callable[[], torch.Tensor]:
    """`call` run with PyTorch's default GEMM for our model's decoding, restoring the current choice after."""

    def run() -> torch.Tensor:
        current = cpu_inference_gemm()
        set_cpu_inference_gemm("default")
        try:
            return call()
        finally:
            set_cpu_inference_gemm(current)

    return run


def bench_generation(
    c: Contenders, s: Settings, batch: int, beams: int, use_cache: bool = True
) -> tuple[Row, bool]:
    """Throughput of generate() (and CTranslate2) for exactly `new_tokens` tokens; returns the row and whether
    Marian and ours produced the same tokens."""
    hp, n = c.hp, s.new_tokens
    src, mask = source_batch(hp["vocab"], batch, s.src_len, seed=7)
    config = generation_config(c.pad, beams, n, use_cache)
    # each case decodes once and returns its tokens: a tensor (generate) or lists of ids (the engines)
    cases: dict[str, Callable[[], Any]] = {
        "marian": generate_call(c.marian, src, mask, config),
        "ours": generate_call(c.ours, src, mask, config),
    }
    if c.ct2 is not None and use_cache:
        cases["ct2"] = ct2_call(c.ct2, src, hp["vocab"], beams, n)
    if use_cache:
        cases.update({name: engine_call(engine, src, beams, n) for name, engine in c.engines.items()})
        if c.int8 is not None:
            cases[TORCH_INT8] = generate_call(c.int8, src, mask, config)
    if use_cache:
        cases.update(
            {f"{name}_bf16": generate_call(model, src, mask, config) for name, model in c.bf16.items()}
        )
    copy_run, copy_bytes = copy_probe()
    cases["copy"] = copy_run
    reference = cases["marian"]()
    notes = []
    if "ours_bf16" in cases:
        agree = {
            name: sum(torch.equal(a, b) for a, b in zip(cases[name](), cases[f"{name}_bf16"]()))
            for name in ("marian", "ours")
        }
        notes.append(
            "bf16 output = the same system's fp32 output for: "
            + ", ".join(f"{name} {n}/{batch}" for name, n in agree.items())
        )
    if cpu_inference_gemm() == "onednn":
        # parity is checked with the GEMM Marian uses (oneDNN's float rounding differs from MKL's, ~1e-7 relative,
        # which can flip near-tied argmaxes of random weights, as CTranslate2's does), and that variant is timed
        # in the same rounds: the A/B of the GEMM choice
        cases["ours_default"] = _with_default_gemm(cases["ours"])
        agree = sum(torch.equal(a, b) for a, b in zip(reference, cases["ours"]()))
        notes.append(f"ours with the oneDNN GEMM: output = Marian's for {agree}/{batch} sentences")
        same = torch.equal(reference, cases["ours_default"]())
    else:
        same = torch.equal(reference, cases["ours"]())
    if "ct2" in cases:
        ref = reference[:, 1:].tolist()
        agree = sum(a == b for a, b in zip(ref, cases["ct2"]()))
        notes.append(f"CTranslate2 output = Marian's for {agree}/{batch} sentences")
    engines = [name for name in COLUMNS if name in cases]
    if engines:
        ours_tokens = _with_default_gemm(cases["ours"])()[:, 1:].tolist()  # PyTorch's default GEMM, as Marian

        def tokens(name: str) -> list[list[int]]:
            output = cases[name]()
            return output[:, 1:].tolist() if isinstance(output, torch.Tensor) else output

        agreement = [
            f"{name} {sum(a == b for a, b in zip(ours_tokens, tokens(name)))}/{batch}" for name in engines
        ]
        notes.append("sentences equal to ours (generate()): " + ", ".join(agreement))
    times = interleaved(cases, s.rounds, repeat={"copy": 5})
    names = [k for k in cases if k not in ("copy", "ours_default")]
    throughput, ratio = _ratios(times, batch * n, names)
    if "ours_default" in times:
        notes.append(
            f"ours with PyTorch's default GEMM, same rounds: {per_round_ratio(times['marian'], times['ours_default']).fmt()}"
            f" x Marian; oneDNN / default: {per_round_ratio(times['ours_default'], times['ours']).fmt()}"
        )
    if use_cache:
        bandwidth = [copy_bytes / t for t in times["copy"]]
        floor_bytes = decode_step_bytes(hp, batch * beams, s.src_len, n / 2)
        for name in ("marian", "ours"):
            # the whole generate() call divided by the steps: encoder, search and Python overhead included
            distance = Stat([(t / n) / (floor_bytes / bw) for t, bw in zip(times[name], bandwidth)])
            notes.append(f"{name} step time / memory-bandwidth floor {distance.fmt(1)}")
        notes.append(f"copy bandwidth {Stat([b / 1e9 for b in bandwidth]).fmt(1)} GB/s")
    kind = "greedy" if beams == 1 else f"beam {beams}"
    label = f"{kind} b{batch}" + ("" if use_cache else " no-cache")
    return Row(label, "new tok/s", throughput, ratio, notes), same


def cache_speedups(with_cache: Row, without: Row, new_tokens: int) -> str:
    """Measured KV-cache speedup of each model next to the theoretical ones."""
    parts = [
        f"{name} {Stat([a / b for a, b in zip(with_cache.throughput[name].values, without.throughput[name].values)]).fmt(1)}"
        for name in ("marian", "ours")
    ]
    return (
        f"KV-cache speedup ({with_cache.name}): "
        + ", ".join(parts)
        + f"; theory ~T/2 = {new_tokens / 2:.0f} for projections and FFN, ~T/3 = {new_tokens / 3:.0f} for"
        " self-attention scores (cross-attention K/V are recomputed every step without a cache)"
    )


def run_preset(
    c: Contenders, s: Settings, log: Callable[[str], None] = lambda _: None
) -> tuple[list[Row], list[str]]:
    """All workloads of one preset. Returns the rows and a list of summary lines (parity, cache speedups)."""
    rows: list[Row] = []
    summary: list[str] = []
    log(f"[{c.preset}] training {s.train_batch}x{s.src_len}")
    rows.append(bench_training(c, s, s.train_batch, c.preset))
    if s.budget_training:
        batch = max(1, s.budget_tokens // s.src_len)
        log(f"[{c.preset}] training {batch}x{s.src_len}")
        rows.append(bench_training(c, s, batch, c.preset))
    mismatches = []
    for beams in s.beams:
        for batch in s.gen_batches:
            log(f"[{c.preset}] generation beams={beams} batch={batch}")
            row, same = bench_generation(c, s, batch, beams)
            rows.append(row)
            if not same:
                mismatches.append(row.name)
            if s.no_cache and beams == 1:
                log(f"[{c.preset}] generation beams={beams} batch={batch} without cache")
                slow, same = bench_generation(c, s, batch, beams, use_cache=False)
                rows.append(slow)
                if not same:
                    mismatches.append(slow.name)
                summary.append(cache_speedups(row, slow, s.new_tokens))
    summary.extend(precision_summary(rows))
    summary.insert(
        0,
        "ours and Marian generate identical tokens in every workload"
        + (
            " (ours checked with PyTorch's default GEMM, as Marian)"
            if cpu_inference_gemm() == "onednn"
            else ""
        )
        if not mismatches
        else f"OUTPUT MISMATCH ours vs Marian in: {', '.join(mismatches)}",
    )
    return rows, summary


PRECISION_COLUMNS = {  # header -> (numerator, denominator): per-round throughput ratios of the same rounds
    "Marian bf16/fp32": ("marian_bf16", "marian"),
    "ours bf16/fp32": ("ours_bf16", "ours"),
    "ours/Marian bf16": ("ours_bf16", "marian_bf16"),
}


def same_round_ratio(row: Row, numerator: str, denominator: str) -> Stat | None:
    """Per-round throughput ratio of two contenders of a row (None when either did not run)."""
    if numerator not in row.throughput or denominator not in row.throughput:
        return None
    return Stat([a / b for a, b in zip(row.throughput[numerator].values, row.throughput[denominator].values)])


def best_precision(row: Row, system: str) -> str | None:
    """ "bf16" or "fp32": the precision in which ``system`` ("ours", "marian") ran the row's workload faster (median
    of the per-round bf16/fp32 ratios); None without a bf16 measurement."""
    ratio = same_round_ratio(row, f"{system}_bf16", system)
    return None if ratio is None else "bf16" if ratio.median > 1.0 else "fp32"


def best_of_each(row: Row) -> Stat | None:
    """Per-round ratio of ours in its best precision to Marian in its best precision (`best_precision`)."""
    ours, marian = best_precision(row, "ours"), best_precision(row, "marian")
    if ours is None or marian is None:
        return None
    suffix = {"bf16": "_bf16", "fp32": ""}
    return same_round_ratio(row, "ours" + suffix[ours], "marian" + suffix[marian])


def precision_summary(rows: list[Row]) -> list[str]:
    """One line per system: its best precision on this machine for each workload that ran in both."""
    lines = []
    for system, label in (("ours", "ours"), ("marian", "Marian")):
        parts = [
            f"{row.name} {best_precision(row, system)} ({ratio.median:.2f})"
            for row in rows
            if (ratio := same_round_ratio(row, system + "_bf16", system)) is not None
        ]
        if parts:
            lines.append(
                f"best precision of {label} on this machine (bf16/fp32 throughput): " + ", ".join(parts)
            )
    return lines


def format_rows(rows: list[Row]) -> list[str]:
    """A text table: throughput medians and, per contender, the median (min-max) of per-round ratios
    (contender throughput / Marian throughput; > 1 is faster than Marian). "CT2" is Marian's weights converted
    by CTranslate2's converter; "ct2_fp32", "ct2_int8", "onnx" and "onnx_int8" are ours exported
    (`export_engines`), "torch_int8" ours with int8 linear layers in PyTorch. With bf16
    measurements: each system's bf16/fp32 ratio, ours/Marian both in bf16, and "best": ours in its best precision /
    Marian in its best precision (`best_precision`), e.g. "bf16/fp32 1.30"."""
    engines = [name for name in COLUMNS if any(name in row.ratio for row in rows)]
    precisions = any("ours_bf16" in row.throughput for row in rows)
    header = f"{'workload':<28}{'unit':<14}{'Marian median':>14}{'ours/Marian':>22}{'CT2/Marian':>22}{'ours/CT2':>10}"
    header += "".join(f"{name + '/Marian':>22}" for name in engines)
    if precisions:
        header += "".join(f"{name:>22}" for name in PRECISION_COLUMNS) + f"{'best ours/Marian':>26}"
    lines = [header]
    for row in rows:
        ours, ct2 = row.ratio["ours"], row.ratio.get("ct2")
        ours_vs_ct2 = ""
        if ct2 is not None:
            ours_vs_ct2 = f"{statistics.median(a / b for a, b in zip(ours.values, ct2.values)):.2f}"
        line = (
            f"{row.name:<28}{row.unit:<14}{row.throughput['marian'].median:>14.1f}"
            f"{ours.fmt():>22}{ct2.fmt() if ct2 else '-':>22}{ours_vs_ct2:>10}"
            + "".join(f"{row.ratio[name].fmt() if name in row.ratio else '-':>22}" for name in engines)
        )
        if precisions:
            for numerator, denominator in PRECISION_COLUMNS.values():
                ratio = same_round_ratio(row, numerator, denominator)
                line += f"{ratio.fmt() if ratio else '-':>22}"
            best = best_of_each(row)
            line += (
                f"{best_precision(row, 'ours')}/{best_precision(row, 'marian')} {best.median:.2f}".rjust(26)
                if best
                else f"{'-':>26}"
            )
        lines.append(line)
        lines.extend(f"{'':<4}{note}" for note in row.notes)
    return lines
