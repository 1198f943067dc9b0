"""Label-smoothed cross entropy as in fairseq (``label_smoothed_cross_entropy``).

The target distribution puts ``1 - epsilon`` on the reference token and spreads ``epsilon`` uniformly over
the other ``V - 1`` tokens, so the loss of one position is
``(1 - epsilon - epsilon / (V - 1)) * nll + epsilon / (V - 1) * sum_j(-log p_j)``. Losses are **sums** over the
non-ignored target positions (every real target token, </s> included; padding is -100 and ignored); divide
by the number of target tokens for per-token values. ``nll`` is the plain negative log-likelihood, whose
per-token mean gives perplexity ``exp(nll / ntokens)`` (natural log).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


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
    lprobs = F.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    mask = labels != ignore_index  # (B, T)
    target = labels.masked_fill(~mask, 0).unsqueeze(-1)  # (B, T, 1)
    nll = -lprobs.gather(-1, target).squeeze(-1)  # (B, T)
    smooth = -lprobs.sum(-1)  # (B, T)
    nll = nll.masked_fill(~mask, 0.0).sum()
    smooth = smooth.masked_fill(~mask, 0.0).sum()
    eps_i = epsilon / (lprobs.size(-1) - 1)
    loss = (1.0 - epsilon - eps_i) * nll + eps_i * smooth
    return loss, nll
