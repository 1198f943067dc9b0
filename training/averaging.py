"""Checkpoint averaging (paper, section 6.1) on in-memory weight snapshots.

`Snapshots` keeps a CPU copy of the weights every ``every`` updates, the newest ``last`` of them. At the end of a
run (and at each ``--export_at_minutes`` mark) `average_if_better` replaces the model's weights by the mean of the
newest snapshots — the current weights always included as the newest — when that lowers the validation loss
(or always, without a validation split). Snapshots are not checkpointed: a resumed run averages the snapshots
taken since it resumed. Checkpoints keep the un-averaged training state, so averaging never affects resuming.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import checkpoint as ckpt

Weights = dict[str, torch.Tensor]


def weights_copy(model: torch.nn.Module) -> Weights:
    """A CPU copy of ``model``'s weights."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


class Snapshots:
    """Weight copies at every ``every``-th update, the newest ``last`` kept; off when ``last`` < 2."""

    def __init__(self, last: int, every: int):
        self.last = last
        self.every = every
        self.taken: list[tuple[int, Weights]] = []

    @property
    def enabled(self) -> bool:
        return self.last > 1

    def after_update(self, step: int, model: torch.nn.Module) -> None:
        """Take a snapshot when ``step`` is a multiple of ``every``."""
        if self.enabled and step % self.every == 0:
            self.taken.append((step, weights_copy(model)))
            del self.taken[: -self.last]

    def window(self, step: int, current: Weights) -> list[tuple[int, Weights]]:
        """The snapshots to average at ``step``: the newest ones, ``current`` (the weights at ``step``) last."""
        if not self.enabled:
            return []
        return ([s for s in self.taken if s[0] != step] + [(step, current)])[-self.last :]


def average_if_better(
    model: torch.nn.Module, snapshots: list[tuple[int, Weights]], validation_loss: Callable[[], dict]
) -> dict | None:
    """Leave the mean of ``snapshots`` in ``model`` if ``validation_loss()`` (a dict with ``valid_loss`` and
    ``valid_ppl``, empty without a validation split) is lower with it than with the current weights, else leave
    the current weights. Returns what was done, or None (model untouched) for fewer than two snapshots.

    The two validations run in a forked RNG, so averaging does not change the training random stream."""
    if len(snapshots) < 2:
        return None
    current = weights_copy(model)
    device = next(model.parameters()).device
    with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
        before = validation_loss()
        ckpt.load_weights_into(model, ckpt.average_state_dicts([w for _, w in snapshots]))
        after = validation_loss()
    kept = not before or after["valid_loss"] < before["valid_loss"]
    if not kept:
        ckpt.load_weights_into(model, current)
    return {
        "steps": [s for s, _ in snapshots],
        "kept": kept,
        "valid_loss_final": before.get("valid_loss"),
        "valid_loss_averaged": after.get("valid_loss"),
        "valid_ppl_final": before.get("valid_ppl"),
        "valid_ppl_averaged": after.get("valid_ppl"),
    }
