"""Validation the way training reports it, for every objective (`training.objectives`):

* loss: the label-smoothed loss and the NLL per scored token over all validation examples (teacher forcing, batches
  of at most ``max_tokens`` padded tokens), and the perplexity ``exp(nll per token)``; the scored tokens are the
  objective's (`Objective.loss`). Random choices of a validation batch are seeded by its place in the validation
  set, so every validation scores the same masks and spans;
* objectives that translate: greedy (or ``num_beams``) BLEU/chrF on the first ``bleu_samples`` validation
  sentences.

Used by the trainer (with its `accelerate.Accelerator`: the loss batches are shared among processes and summed,
translation runs on the main process) and by the quality benchmark (single process, any model, Marian included).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import torch

from vanilla_transformer.inference import evaluate_translation
from vanilla_transformer.inference.translate import LENGTH_CAP

from .batching import TokenBudgetBatchSampler, batch_generator
from .objectives import Objective, Translation


@torch.no_grad()
def validation_metrics(
    model,
    tokenizer,
    valid_src: Sequence[Sequence[int]],
    valid_tgt: Sequence[Sequence[int]],
    sources: Sequence[str],
    references: Sequence[str],
    *,
    label_smoothing: float,
    bleu_samples: int,
    length_penalty: float | None,
    batch_size: int,
    tokenize: str,
    num_beams: int = 1,
    max_tokens: int = 4096,
    accelerator: Any = None,
    objective: Objective | None = None,
) -> dict:
    """``valid_loss``, ``valid_nll_loss``, ``valid_ppl`` over the token ids ``valid_src``/``valid_tgt`` (empty
    dict without pairs) for ``objective`` (default: translation), plus ``valid_bleu``, ``valid_chrf`` and
    ``bleu_signature`` of the first ``bleu_samples`` of ``sources`` translated against ``references`` (skipped when
    0, and unless the objective translates). The model is left in the mode it was in."""
    objective = objective or Translation()
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    metrics: dict = {}
    if valid_src:
        rank, world = (accelerator.process_index, accelerator.num_processes) if accelerator else (0, 1)
        src_lengths, tgt_lengths = objective.lengths(valid_src, valid_tgt)
        longest = max(max(src_lengths), max(tgt_lengths))
        sampler = TokenBudgetBatchSampler(src_lengths, tgt_lengths, max(max_tokens, longest), shuffle=False)
        batches = sampler.batches(0)
        sums = torch.zeros(3, device=device)
        for number in range(rank, len(batches), world):
            batch = objective.batch(
                batches[number], valid_src, valid_tgt, model.config, device, batch_generator(number)
            )
            with accelerator.autocast() if accelerator else nullcontext():
                loss, nll = objective.loss(model, batch, label_smoothing)
            sums += torch.stack([loss.float(), nll.float(), batch["ntokens"].float()])
        if world > 1:
            sums = accelerator.reduce(sums, reduction="sum")
        loss_v, nll_v, ntok = (float(x) for x in sums)
        if ntok == 0:
            raise ValueError(
                f"the {len(valid_src)} validation examples have no target token to score (with --objective "
                "masked_lm: --mlm_probability chose none of their tokens); raise --mlm_probability or --valid_size."
            )
        metrics = {
            "valid_loss": loss_v / ntok,
            "valid_nll_loss": nll_v / ntok,
            "valid_ppl": math.exp(min(nll_v / ntok, 50)),
        }
    n = min(bleu_samples, len(sources)) if objective.translates else 0
    if n > 0 and (accelerator is None or accelerator.is_main_process):
        scores, _ = evaluate_translation(
            model,
            tokenizer,
            list(sources[:n]),
            list(references[:n]),
            tokenize=tokenize,
            num_beams=num_beams,
            length_penalty=length_penalty,
            batch_size=batch_size,
            **LENGTH_CAP,
        )
        metrics.update(
            valid_bleu=scores["bleu"], valid_chrf=scores["chrf"], bleu_signature=scores["bleu_signature"]
        )
    model.train(was_training)
    return metrics
