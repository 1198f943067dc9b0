"""Checkpoint averaging (paper, section 6.1): of in-memory weight snapshots during a run, and of saved checkpoints
(`export_averaged_model`, behind vanilla-transformer average).

`Snapshots` keeps a CPU copy of the weights every ``every`` updates, the newest ``last`` of them. At the end of a
run (and at each ``--export_at_minutes`` mark) `average_if_better` replaces the model's weights by the mean of the
newest snapshots — the current weights always included as the newest — when that lowers the validation loss
(or always, without a validation split). Snapshots are not checkpointed: a resumed run averages the snapshots
taken since it resumed. Checkpoints keep the un-averaged training state, so averaging never affects resuming.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from vanilla_transformer.export.folders import claim_output_folder, write_output_manifest

from . import checkpoint as ckpt

logger = logging.getLogger(__name__)
OUTPUT_KIND = "averaged model"  # the kind in the output folder's manifest (export.folders)

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
    model: torch.nn.Module,
    snapshots: list[tuple[int, Weights]],
    current: Weights,
    validation_loss: Callable[[], dict],
) -> dict | None:
    """Leave the mean of ``snapshots`` in ``model`` if ``validation_loss()`` (a dict with ``valid_loss`` and
    ``valid_ppl``, empty without a validation split) is lower with it than with the model's weights now
    (``current``, a copy the caller holds), else put ``current`` back. Returns what was done, or None (model
    untouched) for fewer than two snapshots.

    The two validations run in a forked RNG, so averaging does not change the training random stream."""
    if len(snapshots) < 2:
        return None
    device = next(model.parameters()).device
    with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
        before = validation_loss()
        ckpt.load_weights_into(model, average_state_dicts([w for _, w in snapshots]))
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


def average_state_dicts(state_dicts: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The element-wise mean of state dicts with identical keys and shapes (computed in float64, returned in
    each tensor's dtype; integer tensors must be equal and are copied)."""
    if not state_dicts:
        raise ValueError("average_state_dicts needs at least one state dict.")
    keys = list(state_dicts[0])
    for i, sd in enumerate(state_dicts[1:], start=1):
        if set(sd) != set(keys):
            diff = sorted(set(sd) ^ set(keys))[:5]
            raise ValueError(
                f"State dict {i} has different keys from state dict 0 (e.g. {diff}); same model needed."
            )
    out = {}
    for k in keys:
        tensors = [sd[k] for sd in state_dicts]
        if any(t.shape != tensors[0].shape for t in tensors):
            raise ValueError(f"Parameter {k} has different shapes {[tuple(t.shape) for t in tensors]}.")
        if tensors[0].is_floating_point():
            total = sum((t.double() for t in tensors[1:]), tensors[0].double())
            out[k] = (total / len(tensors)).to(tensors[0].dtype)
        else:
            out[k] = tensors[0].clone()
    return out


def average_checkpoints(folders: Sequence[str | os.PathLike]) -> dict[str, torch.Tensor]:
    """Average the model weights of the given checkpoint directories (each verified first)."""
    return average_state_dicts([ckpt.load_model_weights(f) for f in folders])


def export_averaged_model(
    folders: Sequence[str | os.PathLike], output_dir: str | os.PathLike, tokenizer=None
) -> Path:
    """Average the model weights of checkpoint ``folders`` (same architecture; config from the newest one's
    ``config.json``) and save a self-contained model folder with `save_with_remote_code`. ``output_dir`` follows
    the rule of `export.folders`: new, empty or a complete earlier averaged model, never containing a checkpoint."""
    from vanilla_transformer.inference.loading_policy import remote_code_rule
    from vanilla_transformer.modeling import (
        VanillaTransformerConfig,
        VanillaTransformerForConditionalGeneration,
        save_with_remote_code,
    )

    if not folders:
        raise ValueError("No checkpoints to average.")
    folders = [Path(f) for f in folders]
    claim_output_folder(output_dir, OUTPUT_KIND, folders)
    config_file = folders[-1] / "config.json"
    if not config_file.exists():
        raise ckpt.CheckpointError(
            f"Checkpoint {str(folders[-1])!r} has no config.json; it was not written by training/."
        )
    # the loading policy: a checkpoint of another model type (one that needs its own code) is refused, not read
    # into this project's classes
    remote_code_rule(
        json.loads(config_file.read_text(encoding="utf-8")), str(folders[-1]), False, opt_in=None
    )
    config = VanillaTransformerConfig.from_json_file(str(config_file))
    model = VanillaTransformerForConditionalGeneration(config)
    ckpt.load_weights_into(model, average_checkpoints(folders))
    logger.info("Averaged %d checkpoints: %s", len(folders), ", ".join(f.name for f in folders))
    claim_output_folder(output_dir, OUTPUT_KIND, folders, clear=True)
    return write_output_manifest(save_with_remote_code(model.eval(), output_dir, tokenizer), OUTPUT_KIND)
