"""Training: data, token-budget batching, label-smoothed loss, schedule, checkpoints, trainer, evaluation.

Heavy modules (`training.trainer`, which imports accelerate and the model) are imported on use, not here.
"""

from .model_card import render_model_card

__all__ = ["render_model_card"]
