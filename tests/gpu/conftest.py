"""The ``gpu`` tests' device and sizes: a CUDA device (default "cuda"), or the CPU with tiny sizes when the GPU check's
dry run sets ``studies.gpu.DEVICE_ENV`` to "cpu" (so that the same test bodies run in CI). Without a CUDA
device and without that setting every ``gpu`` test is skipped (tests/conftest.py)."""

from __future__ import annotations

import os

import pytest
import torch

from studies.gpu import DEVICE_ENV

from .checks import resolve, trainer_history

CLIP_NORM = 0.5


@pytest.fixture(scope="session")
def clip_norm() -> float:
    """Below the tiny preset's gradient norm in its first updates: every compared update is clipped."""
    return CLIP_NORM


@pytest.fixture(scope="session")
def device() -> torch.device:
    return resolve(os.environ.get(DEVICE_ENV, "cuda"))


@pytest.fixture(scope="session")
def steps(device) -> dict[str, int]:
    """Updates of the trainer runs: 50 bf16 updates against fp32 (the check's claim), 8 fp16 ones; 4 on the CPU."""
    return {"bf16": 50, "fp16": 8} if device.type == "cuda" else {"bf16": 4, "fp16": 4}


@pytest.fixture(scope="session")
def scaled_precision(device) -> str:
    """fp16 with accelerate's gradient scaler on CUDA; on the CPU, where the trainer refuses fp16, the dry run runs
    the same comparison in bf16 (no scaler)."""
    return "fp16" if device.type == "cuda" else "bf16"


@pytest.fixture(scope="session")
def runs(device, steps, scaled_precision, tmp_path_factory) -> dict:
    """Trainer runs on ``device`` with clipping at `CLIP_NORM`, as (trainer, history): the fp32 reference
    ("no", ``steps["bf16"]`` updates), "bf16" (as many) and the scaled precision (``steps["fp16"]`` updates), all
    with the tokenizer the reference trained."""
    root = tmp_path_factory.mktemp("gpu_runs")
    reference = trainer_history(device, "no", steps["bf16"], root / "fp32", CLIP_NORM)
    tokenizer = root / "tokenizer"
    reference[0].data.tokenizer.save_pretrained(tokenizer)
    result = {"no": reference}
    result["bf16"] = trainer_history(device, "bf16", steps["bf16"], root / "bf16", CLIP_NORM, str(tokenizer))
    if scaled_precision == "bf16":
        result["scaled"] = (result["bf16"][0], result["bf16"][1][: steps["fp16"]])
    else:
        result["scaled"] = trainer_history(
            device, "fp16", steps["fp16"], root / "fp16", CLIP_NORM, str(tokenizer)
        )
    return result
