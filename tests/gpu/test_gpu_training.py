"""Training on the device through the project's trainer (accelerate's backward, gradient clipping after
unscaling, the optimizer step through the gradient scaler): fp16 with loss scaling and bf16 autocast against the
fp32 run, and a save/load round trip of the trained model from the device."""

from __future__ import annotations

import math

import pytest

from .checks import history_difference, save_load_round_trip

pytestmark = pytest.mark.gpu


def test_scaled_training_with_clipping_equals_the_unscaled_reference(
    runs, steps, scaled_precision, clip_norm
):
    """fp16 + GradScaler: the gradient norm the trainer clips is the unscaled one (clipping the scaled gradients
    would report and clip a norm ~65536 times too large) and the losses follow the fp32 run's."""
    trainer, history = runs["scaled"]
    reference = runs["no"][1]
    assert trainer.accelerator.mixed_precision == scaled_precision
    assert (trainer.accelerator.scaler is not None) == (scaled_precision == "fp16")
    norms = history_difference(reference, history, "grad_norm")
    losses = history_difference(reference, history, "loss")
    # an update skipped by the scaler (overflow) ends the comparison; most updates must be compared
    assert norms["compared"] >= steps["fp16"] // 2, norms
    # clipping was active
    assert all(logs["grad_norm"] > clip_norm for logs in reference[: norms["compared"]])
    assert norms["max_relative"] < 0.05, norms
    assert losses["max_relative"] < 0.01, losses


def test_bf16_training_losses_within_one_percent_of_fp32(runs, steps):
    reference, history = runs["no"][1], runs["bf16"][1]
    assert len(reference) == len(history) == steps["bf16"]
    assert all(math.isfinite(logs["loss"]) for logs in history)
    losses = history_difference(reference, history, "loss")
    assert losses["compared"] == steps["bf16"]
    assert losses["max_relative"] < 0.01, losses


def test_save_load_round_trip_from_the_device(runs, device, tmp_path):
    trainer = runs["no"][0]
    model = trainer.unwrapped
    assert next(model.parameters()).device.type == device.type
    result = save_load_round_trip(model, trainer.data.tokenizer, device, tmp_path / "saved")
    assert result["weights_equal"] and result["tokens_equal"], result
    assert result["loaded_device"].startswith(device.type)
