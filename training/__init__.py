"""Training: everything between a parallel corpus and an exported, scored model.

Modules, in the order a run uses them:
    options, presets, recipe     the options (`TrainConfig`), the preset table, the `Recipe` resolved once
    run_dir, hardware            the output folder and resume policy; accelerator, threads, allocator (allocator)
    data, batching               tokenising and caching the corpus (`TrainingData`), token-budget batches
    loss, schedule               label-smoothed loss; learning-rate schedule, budget progress and cool-down
    loop                         the training loop (`Trainer`, `TrainState`, `train`)
    validation, checkpoint       validation metrics; atomic checkpoints, resume, pruning
    averaging, finish, card      checkpoint averaging; length penalty, test score, export; model-card values
    plots, cli                   training curves; dataclass -> argparse

`train`, `TrainConfig` and `TrainResult` are importable from here; they are loaded on first use (the loop imports
accelerate and the model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .loop import Trainer, TrainResult, TrainState, train
    from .options import TrainConfig

_LAZY = {
    "train": "loop",
    "Trainer": "loop",
    "TrainResult": "loop",
    "TrainState": "loop",
    "TrainConfig": "options",
}

# the names of _LAZY, written out for static tools (tests/package/test_static.py checks that they agree)
__all__ = ["TrainConfig", "TrainResult", "TrainState", "Trainer", "train"]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
