"""The CPU precision probes of `inference.precision` replaced by given answers, so that every branch of the
automatic precision choice runs on any machine."""

from __future__ import annotations

import vanilla_transformer.inference.precision as precision
from vanilla_transformer.inference.precision import Speeds

FASTER = Speeds(fp32_seconds=1.0, bf16_seconds=0.25)  # bf16 4x as fast
SLOWER = Speeds(fp32_seconds=1.0, bf16_seconds=1.25)


def simulate(monkeypatch, flags: list[str], speeds: Speeds | None) -> list[str]:
    """Make `inference.precision` see a CPU with ``flags`` whose bf16 timings give ``speeds`` (None: timing is an
    error); returns the list of probes called."""
    called: list[str] = []

    def probe(name: str):
        def run(*args, **kwargs) -> Speeds:
            called.append(name)
            if speeds is None:
                raise AssertionError(f"{name} must not run here")
            return speeds

        return run

    monkeypatch.setattr(precision, "cpu_bf16_flags", lambda: list(flags))
    monkeypatch.setattr(precision, "training_speeds", probe("training_speeds"))
    monkeypatch.setattr(precision, "decoding_speeds", probe("decoding_speeds"))
    return called
