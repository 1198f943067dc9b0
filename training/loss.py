"""Label-smoothed cross entropy as in fairseq (``label_smoothed_cross_entropy``).

The target distribution puts ``1 - epsilon`` on the reference token and spreads ``epsilon`` uniformly over
the other ``V - 1`` tokens, so the loss of one position is
``(1 - epsilon - epsilon / (V - 1)) * nll + epsilon / (V - 1) * sum_j(-log p_j)``. Losses are **sums** over the
non-ignored target positions (every real target token, </s> included; padding is -100 and ignored); divide
by the number of target tokens for per-token values. ``nll`` is the plain negative log-likelihood, whose
per-token mean gives perplexity ``exp(nll / ntokens)`` (natural log).

The arithmetic (and a fused backward pass) is the model's `smoothed_cross_entropy`, the same function its
``labels`` loss uses.
"""

from __future__ import annotations

import torch

from vanilla_transformer.modeling import IGNORE_INDEX, smoothed_cross_entropy


def label_smoothed_nll_loss(
    logits: torch.Tensor, labels: torch.Tensor, epsilon: float = 0.1, ignore_index: int = IGNORE_INDEX
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(loss_sum, nll_sum)`` for logits (B, T, V) and labels (B, T), computed in float32.

    Raises:
        ValueError: ``epsilon`` outside [0, 1) or shapes that do not match.
    """
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"label smoothing epsilon={epsilon} must be in [0, 1) (the paper uses 0.1).")
    if logits.shape[:-1] != labels.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)} do not match (B, T, V)/(B, T)"
        )
    return smoothed_cross_entropy(logits, labels, epsilon, ignore_index)
