"""CPU allocator settings for training: keep freed memory in the process instead of returning it to the OS.

PyTorch's CPU tensors come from the C library's ``malloc``. With glibc's defaults, a block above a dynamic
threshold (128 KiB, growing to at most 32 MiB) is a fresh ``mmap`` and freed memory at the top of the heap is
given back to the kernel, so a training step that allocates and frees the same activation-sized buffers
(dropout masks, (B*T, V) logits and their gradients, ...) page-faults on every first touch of them, every step.
Raising the mmap and trim thresholds keeps those pages mapped and reused: on the 2-core machine of
docs/benchmarks.md the small preset trained ~13% more target tokens/s (2,650 -> 3,020; batches of 2,048
tokens), with the same results (the allocator does not change any arithmetic). The cost is that the process
keeps up to ``TRIM_THRESHOLD`` bytes of freed heap mapped (its resident size stays near its peak).

This is a process-wide setting (``mallopt``), applied by `training.hardware.setup_accelerator` on CPU unless
``--no_tune_cpu_allocator``, and by the benchmarks for every contender alike. It is a no-op (returning False)
where glibc's ``mallopt`` is not available (macOS, Windows, musl).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

# glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 256 << 20  # blocks up to 256 MiB come from the reusable heap, not fresh mmaps
TRIM_THRESHOLD = 1 << 30  # keep up to 1 GiB of freed memory at the top of the heap
TOP_PAD = 64 << 20  # grow the heap in 64 MiB steps

_applied = False


def tune_cpu_allocator() -> bool:
    """Apply the settings above once per process. Returns True when they are in effect (now or earlier)."""
    global _applied
    if _applied:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = all(
        mallopt(param, value) == 1
        for param, value in (
            (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
            (M_TOP_PAD, TOP_PAD),
        )
    )
    _applied = ok
    return ok
