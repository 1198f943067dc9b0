"""Which floating-point precision a device computes this model faster in: bfloat16 or float32, measured.

The flag of a CPU feature is not enough: bf16 GEMMs are several times faster than fp32 with AMX-BF16 or
AVX512-BF16, but autocast adds casts, and at a decoding step's few rows the GEMMs are a small part of the time.
So on a CPU with one of those flags the decision is a short timing of both precisions on the model's own work
(`training_speeds`, `decoding_speeds`: four calls, 0.3-0.9 s for the `small`/`base` presets on a loaded 2-core
machine, plus the process's first GEMM), and bf16 is used when it is at least ``BF16_MIN_SPEEDUP`` times as fast;
a CPU without either flag uses fp32 without timing.
A CUDA device uses bf16 when it supports it (Ampere and later); there fp16 is the training fallback (autocast
with a gradient scaler, as accelerate does it).

`cpu_bf16_flags`, `training_speeds` and `decoding_speeds` are the measurements; the rules (`auto_training_precision`,
`auto_inference_dtype`) look them up as this module's attributes at call time, so a test can replace them
(``monkeypatch.setattr(inference.precision, "training_speeds", ...)``) to simulate a machine.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# bf16 is chosen when it runs the probe at least this much faster than fp32. A training step is ~70% GEMMs on a
# CPU (docs/benchmarks.md), so a GEMM probe speedup of 1.25 bounds the step's gain near 1.15: below that, the noise
# of a shared machine and the casts outside the probe can eat the gain. The decoding probe (whole greedy steps)
# uses the same margin against the noise of a short timing.
BF16_MIN_SPEEDUP = 1.25
CPU_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@dataclass(frozen=True)
class Speeds:
    """Seconds per call of the same work in fp32 and in bf16 (medians of interleaved rounds)."""

    fp32_seconds: float
    bf16_seconds: float

    @property
    def bf16_speedup(self) -> float:
        """fp32 time / bf16 time: > 1 when bf16 is faster."""
        return self.fp32_seconds / max(self.bf16_seconds, 1e-12)


def cpu_bf16_flags() -> list[str]:
    """The bf16 features of this CPU that PyTorch's oneDNN kernels use, among ``amx_bf16`` and ``avx512_bf16``
    (read from /proc/cpuinfo; [] where it does not exist)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    present = set(line.split(":", 1)[1].split())
                    return [flag for flag in CPU_BF16_FLAGS if flag in present]
    except OSError:
        return []
    return []


def time_interleaved(
    fp32: Callable[[], object], bf16: Callable[[], object], rounds: int = 3, budget_seconds: float = 1.0
) -> Speeds:
    """Median seconds per call of ``fp32`` and ``bf16`` over up to ``rounds`` interleaved rounds (after one
    warm-up call each), stopping early once ``budget_seconds`` are spent (at least one round)."""
    fp32(), bf16()
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    start = time.perf_counter()
    for r in range(rounds):
        for name, call in (
            (("fp32", fp32), ("bf16", bf16)) if r % 2 == 0 else (("bf16", bf16), ("fp32", fp32))
        ):
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget_seconds:
            break
    return Speeds(statistics.median(times["fp32"]), statistics.median(times["bf16"]))


def training_speeds(
    d_model: int, ffn_dim: int, vocab_size: int, device: str = "cpu", tokens: int | None = None
) -> Speeds:
    """Forward and backward GEMMs of one feed-forward block and the output projection of a model of these sizes
    ((tokens, d_model) -> ffn_dim -> d_model -> vocab_size, fp32 weights), in fp32 and under bf16 autocast (the
    weight casts included, as in training); the backward starts from a given gradient of the logits, so that
    element-wise work (the loss) does not hide the GEMMs. ``tokens``: default 256, fewer for large models (at most
    ~8 GFLOP per call, at least 64 tokens), so that the probe stays short."""
    import torch
    from torch.nn import functional as F

    if tokens is None:
        flops_per_token = 6 * (2 * d_model * ffn_dim + d_model * vocab_size)  # forward + both backward GEMMs
        tokens = max(64, min(256, int(8e9 // flops_per_token)))

    g = torch.Generator(device="cpu").manual_seed(0)

    def param(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * 0.02).to(device).requires_grad_()

    w1, w2, w3 = param(ffn_dim, d_model), param(d_model, ffn_dim), param(vocab_size, d_model)
    x = torch.randn(tokens, d_model, generator=g).to(device)
    grad = torch.randn(tokens, vocab_size, generator=g).to(device)  # (N, V): d loss / d logits
    grads = {False: grad, True: grad.to(torch.bfloat16)}

    def step(autocast: bool) -> Callable[[], None]:
        def run() -> None:
            with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
                logits = F.linear(F.linear(F.relu(F.linear(x, w1)), w2), w3)  # (N, V)
            logits.backward(grads[autocast])
            for w in (w1, w2, w3):
                w.grad = None
            if device == "cuda":
                torch.cuda.synchronize()

        return run

    return time_interleaved(step(False), step(True))


def decoding_speeds(
    model: torch.nn.Module, rows: int, new_tokens: int = 8, source_length: int = 16
) -> Speeds:
    """Greedy `generate()` of ``new_tokens`` tokens for ``rows`` random sources of ``source_length`` tokens with
    ``model`` (fp32) and with a bf16 copy of it: the decoding steps of a batch of ``rows`` hypotheses."""
    import torch

    config = model.config
    device = next(model.parameters()).device
    g = torch.Generator(device="cpu").manual_seed(0)
    low = 4 if config.vocab_size > 8 else 0  # past the special ids
    src = torch.randint(low, config.vocab_size, (rows, source_length), generator=g).to(device)
    mask = torch.ones_like(src)
    settings = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, num_beams=1, do_sample=False)
    bf16 = copy.deepcopy(model).to(torch.bfloat16)

    def run(m: torch.nn.Module) -> Callable[[], None]:
        def call() -> None:
            with torch.inference_mode():
                m.generate(input_ids=src, attention_mask=mask, **settings)

        return call

    try:
        return time_interleaved(run(model), run(bf16))
    finally:
        del bf16


def _cuda_rule(device: torch.device, without_bf16: str) -> tuple[str, str]:
    import torch

    name = torch.cuda.get_device_name(device)
    if torch.cuda.is_bf16_supported():
        return "bf16", f"CUDA device {name} computes bf16"
    return without_bf16, f"CUDA device {name} has no bf16"


def _cpu_rule(measure: Callable[[], Speeds], what: str) -> tuple[str, str]:
    flags = cpu_bf16_flags()
    if not flags:
        return "no", "the CPU has neither AMX-BF16 nor AVX512-BF16"
    speeds = measure()
    verdict = "bf16" if speeds.bf16_speedup >= BF16_MIN_SPEEDUP else "no"
    return verdict, (
        f"CPU with {', '.join(flags)}: bf16 ran {what} {speeds.bf16_speedup:.2f}x as fast as fp32 "
        f"({speeds.fp32_seconds * 1e3:.1f} vs {speeds.bf16_seconds * 1e3:.1f} ms; bf16 needs >= {BF16_MIN_SPEEDUP}x)"
    )


def auto_training_precision(
    device: torch.device, d_model: int, ffn_dim: int, vocab_size: int
) -> tuple[str, str]:
    """The mixed precision a training run on ``device`` should use, in accelerate's names, and why:

    * CUDA: "bf16" where the device supports bf16, else "fp16" (autocast with a gradient scaler);
    * CPU with AMX-BF16 or AVX512-BF16: "bf16" when `training_speeds` at these sizes measures bf16 autocast at
      least ``BF16_MIN_SPEEDUP`` times as fast as fp32, else "no";
    * any other CPU or device: "no" (fp32)."""
    if device.type == "cuda":
        return _cuda_rule(device, "fp16")
    if device.type != "cpu":
        return "no", f"no bf16 rule for {device.type} devices"
    return _cpu_rule(
        lambda: training_speeds(d_model, ffn_dim, vocab_size),
        f"a training step's GEMMs (d_model {d_model}, ffn {ffn_dim}, vocabulary {vocab_size})",
    )


def auto_inference_dtype(model: torch.nn.Module, rows: int) -> tuple[torch.dtype, str]:
    """The dtype ``model`` (fp32, on its device) should decode in at ``rows`` hypotheses per step (sentences per
    batch x beams), and why:

    * CUDA: bfloat16 where the device supports it, else float32;
    * CPU with AMX-BF16 or AVX512-BF16: bfloat16 when `decoding_speeds` (greedy steps of this model at ``rows``
      rows) measures bf16 at least ``BF16_MIN_SPEEDUP`` times as fast as fp32, else float32;
    * any other CPU or device: float32."""
    import torch

    device = next(model.parameters()).device
    if device.type == "cuda":
        verdict, reason = _cuda_rule(device, "no")
    elif device.type != "cpu":
        verdict, reason = "no", f"no bf16 rule for {device.type} devices"
    else:
        verdict, reason = _cpu_rule(
            lambda: decoding_speeds(model, rows), f"this model's decoding steps at {rows} rows"
        )
    return (torch.bfloat16 if verdict == "bf16" else torch.float32), reason
