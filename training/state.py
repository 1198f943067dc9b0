"""What a run has done: `TrainState` (the progress a checkpoint saves) and `TrainResult` (what `train` returns)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrainState:
    """Everything of a run's progress that is not a tensor: exactly what a checkpoint saves as
    ``trainer_state.json`` (model, optimizer, scheduler and RNG states are saved by accelerate)."""

    step: int = 0  # optimizer updates done, across resumes
    # the batch order's position: epoch, position, seed, max_tokens
    stream: dict = field(default_factory=dict)
    best: dict = field(default_factory=dict)  # valid_loss, checkpoint and step of the best validation so far
    train_seconds: float = 0.0  # seconds in the training loop, all invocations
    target_tokens: int = 0  # target tokens trained on, all invocations
    num_processes: int = 1
    # updates skipped for having no target token to score (training.loop), all invocations
    skipped_updates: int = 0
    # fine-tuning (--init_from): the starting model's BLEU on the held-out splits (training.finish.domain_sets)
    bleu_before: dict = field(default_factory=dict)
    # the fingerprint of the data trained on (corpus.DataReport.fingerprint), which a resumed run compares
    data: dict = field(default_factory=dict)


@dataclass
class TrainResult:
    step: int = 0
    epoch: int = 0
    epochs: float = 0.0  # epochs done, fractional
    history: list[dict] = field(default_factory=list)
    valid_history: list[dict] = field(default_factory=list)
    test_metrics: dict | None = None
    samples: list[dict] = field(default_factory=list)
    stopped_because: str = ""
    skipped_updates: int = 0  # updates skipped for having no target token to score (training.loop)
    target_tokens_per_second: float = 0.0  # this invocation's
    target_tokens: int = 0
    train_seconds: float = 0.0
    num_parameters: int = 0
    num_processes: int = 1
    device: str = "cpu"
    # what the run used: --mixed_precision, else accelerate's configuration, else automatic
    mixed_precision: str = "no"
    # training.hardware.PrecisionChoice: mixed_precision, source, reason
    precision: dict = field(default_factory=dict)
    data_summary: str = ""
    split_sizes: dict = field(default_factory=dict)
    # where each split came from (the data's own, or held out)
    split_origin: dict = field(default_factory=dict)
    best_valid_loss: float | None = None
    output_dir: str = ""
    last_checkpoint: str | None = None
    # fine-tuning: BLEU on the held-out splits (yours, general) "before" (the --init_from model) and "after"
    domain_bleu: dict = field(default_factory=dict)
    averaging: dict | None = None  # what checkpoint averaging did (training.averaging.average_if_better)
    model: Any = field(default=None, repr=False)  # the final (possibly averaged) model, unwrapped, in memory
    # used for the test split and written to the exported generation config
    length_penalty: float | None = None
    exports: list[dict] = field(default_factory=list)  # the --export_at_minutes models
