"""Which floating-point precision a device computes in: the rules of `--dtype auto` and of a training run's
automatic mixed precision, and the one switch that forces a CPU's bf16 capability.

Inference (`auto_inference_dtype`) decides from the hardware alone, never from a timing, so that the same command on
the same machine always decodes in the same precision: bf16 on CUDA devices with bf16 and on CPUs with AMX-BF16 or
AVX512-BF16, float32 elsewhere. It is used only for ``--dtype auto``: a loaded model keeps its saved precision
unless asked (`inference.loading.resolve_dtype`), as transformers and CTranslate2 do.

Training (`auto_training_precision`) may time: bf16 GEMMs are several times faster than fp32 with AMX-BF16 or
AVX512-BF16, but autocast adds casts, so on such a CPU a short timing of both precisions on the model's own GEMMs
(`training_speeds`: four calls, 0.3-0.9 s for the `small`/`base` presets on a loaded 2-core machine, plus the
process's first GEMM) picks bf16 when it is at least ``BF16_MIN_SPEEDUP`` times as fast; the choice is saved in the
run's recipe, so that a resumed run keeps it. A CUDA device uses bf16 when it supports it (Ampere and later); there
fp16 is the training fallback (autocast with a gradient scaler, as accelerate does it).

`cpu_bf16_support` is the one place that says whether this CPU computes bf16: the environment variable
``VANILLA_TRANSFORMER_CPU_BF16`` (``1`` or ``0``) forces the answer for inference and training alike (to run the
test suite as on the other kind of CPU; ``1`` on a CPU without the features still computes bf16, emulated and
slower), else `cpu_bf16_flags` reads the CPU's features. The rules look `cpu_bf16_flags` and `training_speeds` up as
this module's attributes at call time, so a test can replace them
(``monkeypatch.setattr(inference.precision, "training_speeds", ...)``) to simulate a machine.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# bf16 is chosen when it runs the probe at least this much faster than fp32. A training step is ~70% GEMMs on a
# CPU (docs/benchmarks.md), so a GEMM probe speedup of 1.25 bounds the step's gain near 1.15: below that, the noise
# of a shared machine and the casts outside the probe can eat the gain.
BF16_MIN_SPEEDUP = 1.25
CPU_BF16_FLAGS = ("amx_bf16", "avx512_bf16")
# "1": treat this CPU as computing bf16, "0": as not; unset or empty: read its features
CPU_BF16_ENV = "VANILLA_TRANSFORMER_CPU_BF16"


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


@dataclass(frozen=True)
class CpuBf16:
    """Whether this CPU computes bf16, whether ``VANILLA_TRANSFORMER_CPU_BF16`` forced the answer, and why (words
    for the log)."""

    supported: bool
    forced: bool
    reason: str


def cpu_bf16_support() -> CpuBf16:
    """Whether this CPU computes bf16: as ``VANILLA_TRANSFORMER_CPU_BF16`` forces it (1 or 0), else where
    `cpu_bf16_flags` finds AMX-BF16 or AVX512-BF16. `ValueError` for another value of the variable."""
    forced = os.environ.get(CPU_BF16_ENV, "").strip()
    if forced in ("0", "1"):
        return CpuBf16(forced == "1", True, f"{CPU_BF16_ENV}={forced}")
    if forced:
        raise ValueError(
            f"{CPU_BF16_ENV}={forced!r} is invalid: expected 1 (bf16 on), 0 (bf16 off) or unset (the CPU's features)"
        )
    flags = cpu_bf16_flags()
    if not flags:
        return CpuBf16(False, False, "the CPU has neither AMX-BF16 nor AVX512-BF16")
    return CpuBf16(True, False, f"CPU with {', '.join(flags)}")


def time_interleaved(
    fp32: Callable[[], object], bf16: Callable[[], object], rounds: int = 3, budget_seconds: float = 1.0
) -> Speeds:
    """Median seconds per call of ``fp32`` and ``bf16`` over up to ``rounds`` interleaved rounds (after one
    warm-up call each), stopping early once ``budget_seconds`` are spent (at least one round)."""
    fp32()
    bf16()
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


def _cuda_rule(device: torch.device, without_bf16: str) -> tuple[str, str]:
    import torch

    name = torch.cuda.get_device_name(device)
    if torch.cuda.is_bf16_supported():
        return "bf16", f"CUDA device {name} computes bf16"
    return without_bf16, f"CUDA device {name} has no bf16"


def auto_training_precision(
    device: torch.device, d_model: int, ffn_dim: int, vocab_size: int
) -> tuple[str, str]:
    """The mixed precision a training run on ``device`` should use, in accelerate's names, and why:

    * CUDA: "bf16" where the device supports bf16, else "fp16" (autocast with a gradient scaler);
    * CPU that computes bf16 (`cpu_bf16_support`): "bf16" when `training_speeds` at these sizes measures bf16
      autocast at least ``BF16_MIN_SPEEDUP`` times as fast as fp32, else "no"; where ``VANILLA_TRANSFORMER_CPU_BF16``
      forces the answer, "bf16" (1) or "no" (0) without timing;
    * any other CPU or device: "no" (fp32)."""
    if device.type == "cuda":
        return _cuda_rule(device, "fp16")
    if device.type != "cpu":
        return "no", f"no bf16 rule for {device.type} devices"
    cpu = cpu_bf16_support()
    if not cpu.supported or cpu.forced:
        return ("bf16" if cpu.supported else "no"), cpu.reason
    speeds = training_speeds(d_model, ffn_dim, vocab_size)
    verdict = "bf16" if speeds.bf16_speedup >= BF16_MIN_SPEEDUP else "no"
    return verdict, (
        f"{cpu.reason}: bf16 ran a training step's GEMMs (d_model {d_model}, ffn {ffn_dim}, vocabulary {vocab_size}) "
        f"{speeds.bf16_speedup:.2f}x as fast as fp32 ({speeds.fp32_seconds * 1e3:.1f} vs "
        f"{speeds.bf16_seconds * 1e3:.1f} ms; bf16 needs >= {BF16_MIN_SPEEDUP}x)"
    )


def auto_inference_dtype(device: torch.device) -> tuple[torch.dtype, str]:
    """The dtype ``--dtype auto`` decodes in on ``device``, and why; a rule of the hardware, never a timing:

    * CUDA: bfloat16 where the device supports it (compute capability 8.0 and later), else float32;
    * CPU: bfloat16 where `cpu_bf16_support` says the CPU computes bf16 (AMX-BF16 or AVX512-BF16, or
      ``VANILLA_TRANSFORMER_CPU_BF16=1``), else float32;
    * any other device: float32."""
    import torch

    if device.type == "cuda":
        verdict, reason = _cuda_rule(device, "no")
    elif device.type != "cpu":
        verdict, reason = "no", f"no bf16 rule for {device.type} devices"
    else:
        cpu = cpu_bf16_support()
        verdict, reason = ("bf16" if cpu.supported else "no"), cpu.reason
    return (torch.bfloat16 if verdict == "bf16" else torch.float32), f"--dtype auto: {reason}"
