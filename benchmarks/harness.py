"""The benchmarks' timing harness: interleaved rounds, per-round ratios and same-round probes.

Every benchmark measures its contenders in interleaved rounds (`interleaved`: each round runs every contender
once, in alternating order) and reports the median of the per-round ratios against a peer (`per_round_ratio`,
`Stat`), so that the noise of a shared machine cancels. The probes (a large fp32 GEMM, a large memory copy) run in
the same rounds and turn throughputs into MFU and distances to the memory-bandwidth floor; `peak_step_memory`
is the allocator's peak during one call.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


def interleaved(cases: dict[str, Callable], rounds: int, warmup: int = 1, repeat: dict | None = None) -> dict:
    """Seconds per call of each case, `rounds` values each; every round runs every case once, the order
    reversed every other round. `repeat[name]` runs a (fast) case several times per round and averages."""
    repeat = repeat or {}
    names = list(cases)
    for _ in range(warmup):
        for name in names:
            cases[name]()
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            n = repeat.get(name, 1)
            start = time.perf_counter()
            for _ in range(n):
                cases[name]()
            times[name].append((time.perf_counter() - start) / n)
    return times


@dataclass
class Stat:
    """Median and range of a list of values."""

    values: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def fmt(self, digits: int = 2) -> str:
        return f"{self.median:.{digits}f} ({min(self.values):.{digits}f}-{max(self.values):.{digits}f})"


def per_round_ratio(numerator: list[float], denominator: list[float]) -> Stat:
    return Stat([a / b for a, b in zip(numerator, denominator)])


def gemm_probe(n: int = 1024) -> tuple[Callable[[], None], float]:
    """A square fp32 GEMM and its FLOP count."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)

    def run() -> None:
        torch.mm(a, b, out=out)

    return run, 2.0 * n**3


def copy_probe(megabytes: int = 128) -> tuple[Callable[[], None], float]:
    """A large memory copy (well beyond the caches) and the bytes it moves (read + write)."""
    numel = megabytes * 2**20 // 4
    a, b = torch.randn(numel), torch.empty(numel)

    def run() -> None:
        b.copy_(a)

    return run, 2.0 * numel * 4


def peak_step_memory(step: Callable[[], object]) -> int:
    """Peak bytes allocated by PyTorch's CPU allocator during one call, above the level at its start (after a
    warm-up step, so Adam's state already exists): activations, gradients and temporaries."""
    from torch.profiler import ProfilerActivity, profile

    step()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    # set once the profile has run
    assert prof.profiler is not None and prof.profiler.kineto_results is not None
    events = sorted(
        # torch's stub of the kineto event leaves out nbytes
        (e.start_ns(), e.nbytes())  # pyright: ignore[reportAttributeAccessIssue]
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]"
    )
    level = peak = 0
    for _, nbytes in events:
        level += nbytes
        peak = max(peak, level)
    return peak
