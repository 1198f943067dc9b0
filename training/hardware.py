"""Where a run computes: the `accelerate.Accelerator` (device, processes, mixed precision, trackers) and the CPU
settings of each process (threads, allocator)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from .allocator import tune_cpu_allocator
from .options import TrainConfig, report_to_trackers


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def setup_accelerator(cfg: TrainConfig, logging_dir: Path):
    """The run's `Accelerator` (CPU when no GPU is present, so that a multi-process launch on a CPU machine
    trains with gloo instead of each process training alone); on CPU, ``cores / processes`` torch threads per
    process (or ``--num_threads``) and the allocator settings of `training.allocator`.

    Mixed precision is ``--mixed_precision`` when given, else accelerate's configuration
    (``ACCELERATE_MIXED_PRECISION``, set by ``accelerate launch --mixed_precision`` and ``accelerate config``).

    Raises:
        ValueError: fp16 on the CPU, where accelerate would train in float32 without saying so.
        RuntimeError: the launch and accelerate disagree about the number of processes.
    """
    from accelerate import Accelerator

    accelerated = torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())
    accelerator = Accelerator(
        mixed_precision=cfg.mixed_precision,  # None: accelerate's configuration decides
        cpu=cfg.cpu or not accelerated,
        log_with=report_to_trackers(cfg.report_to) or None,
        project_dir=str(logging_dir),
        step_scheduler_with_optimizer=False,  # the loop steps the scheduler once per update
    )
    if accelerator.mixed_precision == "fp16" and accelerator.device.type == "cpu":
        raise ValueError(
            "fp16 mixed precision was requested (--mixed_precision or accelerate's configuration) but the run is on "
            "the CPU, where accelerate uses neither autocast nor a gradient scaler for fp16: use bf16 on the CPU, "
            "fp16 on a GPU, or --mixed_precision no."
        )
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched != accelerator.num_processes:
        raise RuntimeError(
            f"Launched as {launched} processes but accelerate runs {accelerator.num_processes}; each process would "
            "train alone. On CPU use `accelerate launch --multi_gpu --num_processes N` (gloo) and leave --cpu to the "
            "trainer; check `accelerate env`."
        )
    if accelerator.device.type == "cpu":
        torch.set_num_threads(cfg.num_threads or max(1, available_cores() // accelerator.num_processes))
        if cfg.tune_cpu_allocator:
            tune_cpu_allocator()
    elif cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    return accelerator
