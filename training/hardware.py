"""Where a run computes: the `accelerate.Accelerator` (device, processes, mixed precision, trackers), the run's
precision (`choose_mixed_precision`) and the CPU settings of each process (threads, allocator)."""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .allocator import tune_cpu_allocator
from .options import TrainConfig, report_to_trackers

logger = logging.getLogger(__name__)

# set by `accelerate launch` (from its flags or `accelerate config`)
PRECISION_ENV = "ACCELERATE_MIXED_PRECISION"
# accelerate's mixed-precision names in words
PRECISION_NAMES = {"no": "fp32", "bf16": "bf16 autocast", "fp16": "fp16 autocast with a gradient scaler"}


@dataclass(frozen=True)
class PrecisionChoice:
    """The mixed precision of a run, in accelerate's names ("no", "bf16", "fp16"), who decided it ("command line",
    "accelerate", "automatic") and why."""

    mixed_precision: str
    source: str
    reason: str

    def describe(self) -> str:
        kind = PRECISION_NAMES.get(self.mixed_precision, self.mixed_precision)
        return f"precision: {kind} ({self.source}: {self.reason})"

    def to_dict(self) -> dict:
        return asdict(self)


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def process_device(cpu: bool = False) -> torch.device:
    """The device this process of a run computes on (accelerate's choice): CUDA (this process's local rank) or XPU
    when present and ``cpu`` is False, else the CPU. Build accelerate's state with ``cpu=True`` for the CPU, so
    that the processes of a multi-process launch on a machine without GPUs join one gloo group instead of each
    running alone."""
    if not cpu and torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    if not cpu and hasattr(torch, "xpu") and torch.xpu.is_available():
        return torch.device("xpu")
    return torch.device("cpu")


def training_device(cfg: TrainConfig) -> torch.device:
    """The device this process will train on (`process_device`; ``--cpu`` forces the CPU)."""
    return process_device(cfg.cpu)


def launched_processes() -> int:
    """The number of processes the launcher started (``WORLD_SIZE``; 1 without a launcher)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def check_launched(num_processes: int) -> None:
    """`RuntimeError` when accelerate runs another number of processes than were launched (each would work
    alone)."""
    launched = launched_processes()
    if launched != num_processes:
        raise RuntimeError(
            f"Launched as {launched} processes but accelerate runs {num_processes}; each process would "
            "work alone. On CPU use `accelerate launch --multi_gpu --num_processes N` (gloo) without --cpu; check "
            "`accelerate env`."
        )


def cpu_threads(num_threads: int | None = None) -> int:
    """Torch threads of one process on the CPU: ``num_threads``, else the cores shared by the launched
    processes."""
    return num_threads or max(1, available_cores() // launched_processes())


def choose_mixed_precision(
    cfg: TrainConfig, device: torch.device, saved: dict | None = None
) -> PrecisionChoice:
    """The run's mixed precision, first rule that applies:

    1. ``--mixed_precision`` (the command line or ``--config``);
    2. accelerate's configuration: ``ACCELERATE_MIXED_PRECISION``, which ``accelerate launch`` always sets (from its
       ``--mixed_precision`` flag, else ``accelerate config``'s file, else "no");
    3. ``saved``, the `PrecisionChoice` (as a dict) that a resumed run's first invocation chose automatically, so
       that a resumed run continues in the precision it started with;
    4. automatic, `inference.precision.auto_training_precision` for ``device`` at the preset's sizes: bf16 autocast
       on CUDA devices with bf16 and on CPUs with AMX-BF16 or AVX512-BF16 where a short timing of the model's GEMMs
       finds bf16 faster; fp16 with a gradient scaler on CUDA devices without bf16; fp32 otherwise."""
    if cfg.mixed_precision is not None:
        return PrecisionChoice(
            cfg.mixed_precision, "command line", f"--mixed_precision {cfg.mixed_precision}"
        )
    configured = os.environ.get(PRECISION_ENV, "").strip().lower()
    if configured:
        return PrecisionChoice(configured, "accelerate", f"{PRECISION_ENV}={configured}")
    if saved and saved.get("mixed_precision") and saved.get("source") == "automatic":
        return PrecisionChoice(
            saved["mixed_precision"], "automatic", f"kept from the run's start: {saved['reason']}"
        )
    from vanilla_transformer.inference.precision import auto_training_precision

    from .presets import build_config

    config = build_config(cfg.preset, cfg.vocab_size)
    verdict, reason = auto_training_precision(
        device, config.d_model, config.encoder_ffn_dim, config.vocab_size
    )
    return PrecisionChoice(verdict, "automatic", reason)


def _agreed_choice(
    cfg: TrainConfig, device: torch.device, saved: dict | None, launched: int
) -> PrecisionChoice:
    """`choose_mixed_precision`, measured on the main process and sent to the others when the run has several
    processes and decides automatically (timings differ between processes; the precision must not)."""
    if launched == 1 or cfg.mixed_precision is not None or os.environ.get(PRECISION_ENV, "").strip():
        return choose_mixed_precision(cfg, device, saved)
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    state = PartialState(cpu=device.type == "cpu")
    box = [choose_mixed_precision(cfg, device, saved) if state.is_main_process else None]
    broadcast_object_list(box)
    choice = box[0]
    # the main process's choice, which every process now holds
    assert choice is not None
    return choice


def setup_accelerator(cfg: TrainConfig, logging_dir: Path, saved_precision: dict | None = None):
    """The run's `Accelerator` (CPU when no GPU is present, so that a multi-process launch on a CPU machine
    trains with gloo instead of each process training alone) and its `PrecisionChoice`; on CPU,
    ``cores / processes`` torch threads per process (or ``--num_threads``) and the allocator settings of
    `training.allocator`.

    The mixed precision follows `choose_mixed_precision` (``saved_precision``: the choice a resumed run saved in
    its recipe).

    Raises:
        ValueError: fp16 on the CPU, where accelerate would train in float32 without saying so.
        RuntimeError: the launch and accelerate disagree about the number of processes.
    """
    from accelerate import Accelerator

    launched = launched_processes()
    device = training_device(cfg)
    threads = cpu_threads(cfg.num_threads) if device.type == "cpu" else cfg.num_threads
    if threads:
        torch.set_num_threads(threads)  # before the precision probe, which times the run's threads
    choice = _agreed_choice(cfg, device, saved_precision, launched)
    accelerator = Accelerator(
        mixed_precision=None if choice.source == "accelerate" else choice.mixed_precision,
        cpu=device.type == "cpu",
        # accelerate types log_with as a list of str | LoggerType | GeneralTracker, which a list[str] is not (lists are
        # invariant), though it only reads it
        log_with=report_to_trackers(cfg.report_to) or None,  # pyright: ignore[reportArgumentType]
        project_dir=str(logging_dir),
        step_scheduler_with_optimizer=False,  # the loop steps the scheduler once per update
    )
    if choice.source == "accelerate":  # what accelerate made of its configuration
        choice = PrecisionChoice(accelerator.mixed_precision, choice.source, choice.reason)
    if accelerator.mixed_precision == "fp16" and accelerator.device.type == "cpu":
        raise ValueError(
            "fp16 mixed precision was requested (--mixed_precision or accelerate's configuration) but the run is on "
            "the CPU, where accelerate uses neither autocast nor a gradient scaler for fp16: use bf16 on the CPU, "
            "fp16 on a GPU, or --mixed_precision no."
        )
    check_launched(accelerator.num_processes)
    if accelerator.device.type == "cpu":
        if cfg.tune_cpu_allocator:
            tune_cpu_allocator()
    logger.info(choice.describe())
    return accelerator, choice
