"""The paper's optimiser and learning-rate schedule (section 5.3), and the schedules of fine-tuning.

``paper``: ``lr(step) = scale * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)``: linear warm-up for
``warmup`` steps, then decay with the inverse square root of the step. ``constant`` and ``inverse_sqrt`` (for a
trained model, ``--init_from``): a linear warm-up to a given peak learning rate, then that rate, or its decay with
``sqrt(warmup / step)`` (fairseq's ``inverse_sqrt``). ``step`` counts optimizer updates from 1 (the first update
uses step 1, never a zero learning rate). Adam with betas (0.9, 0.98), eps 1e-9.
"""

from __future__ import annotations

import torch
from torch.optim.lr_scheduler import LambdaLR


class InverseSqrtSchedule:
    """The multiplier ``d_model ** -0.5 * min(s ** -0.5, s * warmup ** -1.5)`` with ``s = index + 1``, for
    `LambdaLR` whose base learning rate is ``scale``. A class (not a lambda) so that the scheduler's
    ``state_dict`` records its parameters."""

    def __init__(self, d_model: int, warmup_steps: int):
        if d_model < 1 or warmup_steps < 1:
            raise ValueError(f"d_model={d_model} and warmup_steps={warmup_steps} must be >= 1.")
        self.d_model = d_model
        self.warmup_steps = warmup_steps

    def __call__(self, index: int) -> float:
        step = index + 1
        return self.d_model**-0.5 * min(step**-0.5, step * self.warmup_steps**-1.5)


LR_SCHEDULES = ("paper", "constant", "inverse_sqrt")


class WarmupSchedule:
    """The multiplier of the peak learning rate (`LambdaLR`'s base) in the fine-tuning schedules: ``s / warmup``
    for the first ``warmup_steps`` updates (``s = index + 1``), then 1 (``constant``) or ``sqrt(warmup / s)``
    (``inverse_sqrt``)."""

    def __init__(self, warmup_steps: int, decay: str):
        if warmup_steps < 1 or decay not in ("constant", "inverse_sqrt"):
            raise ValueError(
                f"warmup_steps={warmup_steps} must be >= 1 and decay={decay!r} 'constant' or 'inverse_sqrt'."
            )
        self.warmup_steps = warmup_steps
        self.decay = decay

    def __call__(self, index: int) -> float:
        step = index + 1
        if step < self.warmup_steps:
            return step / self.warmup_steps
        return 1.0 if self.decay == "constant" else (self.warmup_steps / step) ** 0.5


def build_optimizer(
    model: torch.nn.Module,
    lr_scale: float = 1.0,
    betas: tuple[float, float] = (0.9, 0.98),
    eps: float = 1e-9,
    weight_decay: float = 0.0,
) -> torch.optim.Adam:
    """Adam over the model's trainable parameters with base learning rate ``lr_scale`` (the schedule's scale)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if weight_decay:
        return torch.optim.AdamW(params, lr=lr_scale, betas=betas, eps=eps, weight_decay=weight_decay)
    return torch.optim.Adam(params, lr=lr_scale, betas=betas, eps=eps)


def build_scheduler(
    optimizer: torch.optim.Optimizer, d_model: int, warmup_steps: int, schedule: str = "paper"
) -> LambdaLR:
    """`LambdaLR` with `InverseSqrtSchedule` (``schedule`` 'paper'; the optimizer's learning rate is the scale) or
    `WarmupSchedule` ('constant', 'inverse_sqrt'; the optimizer's learning rate is the peak); call ``step()`` once
    after every optimizer update."""
    if schedule == "paper":
        return LambdaLR(optimizer, InverseSqrtSchedule(d_model, warmup_steps))
    return LambdaLR(optimizer, WarmupSchedule(warmup_steps, schedule))


def budget_progress(
    *,
    step: int,
    epochs: float,
    seconds: float,
    max_steps: int | None,
    max_epochs: int | None,
    max_minutes: float | None,
) -> float:
    """The fraction of the budget done before the next update: the largest of ``step / max_steps``,
    ``epochs / max_epochs`` and ``seconds / (60 * max_minutes)`` (the rule that stops the run first), at most 1.
    ``seconds`` are this invocation's training seconds (``--max_minutes`` budgets one invocation)."""
    done = [0.0]
    if max_steps:
        done.append(step / max_steps)
    if max_epochs:
        done.append(epochs / max_epochs)
    if max_minutes:
        done.append(seconds / (max_minutes * 60))
    return min(1.0, max(done))


def cooldown_factor(progress: float, cooldown: float) -> float:
    """The multiplier of the scheduled learning rate in a linear cool-down over the last ``cooldown`` fraction of
    the budget: 1 until ``1 - cooldown`` of it is done, then ``(1 - progress) / cooldown`` down to 0; 1 when off."""
    if not cooldown:
        return 1.0
    return min(1.0, max(0.0, (1.0 - progress) / cooldown))
