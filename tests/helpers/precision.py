"""The CPU precision probes of `inference.precision` replaced by given answers, so that every branch of the
automatic precision choice runs on any machine."""

from __future__ import annotations

import vanilla_transformer.inference.precision as precision
from vanilla_transformer.inference.precision import CPU_BF16_ENV, Speeds

FASTER = Speeds(fp32_seconds=1.0, bf16_seconds=0.25)  # bf16 4x as fast
SLOWER = Speeds(fp32_seconds=1.0, bf16_seconds=1.25)
# the CPU kinds a test can simulate: AMX and AVX512-BF16 (bf16 timed faster), AVX512-BF16 only (bf16 timed slower),
# neither (no timing at all)
CPU_KINDS = {
    "amx": (["amx_bf16", "avx512_bf16"], FASTER),
    "avx512_bf16": (["avx512_bf16"], SLOWER),
    "no-bf16": ([], None),
}


def simulate(monkeypatch, flags: list[str], speeds: Speeds | None) -> list[str]:
    """Make `inference.precision` see a CPU with ``flags`` whose bf16 timings give ``speeds`` (None: timing is an
    error), whatever ``VANILLA_TRANSFORMER_CPU_BF16`` says outside the test; returns the list of probes called."""
    called: list[str] = []

    def probe(*args, **kwargs) -> Speeds:
        called.append("training_speeds")
        if speeds is None:
            raise AssertionError("training_speeds must not run here")
        return speeds

    monkeypatch.delenv(CPU_BF16_ENV, raising=False)
    monkeypatch.setattr(precision, "cpu_bf16_flags", lambda: list(flags))
    monkeypatch.setattr(precision, "training_speeds", probe)
    return called
