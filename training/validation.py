"""Validation of any seq2seq model the way training reports it.

* loss: the label-smoothed loss and the NLL per target token over all validation pairs (teacher forcing, batches
  of at most ``max_tokens`` padded tokens), and the perplexity ``exp(nll per token)``;
* translation: greedy (or ``num_beams``) BLEU/chrF on the first ``bleu_samples`` validation sentences.

Used by the trainer (with its `accelerate.Accelerator`: the loss batches are shared among processes and summed,
translation runs on the main process) and by the quality benchmark (single process, any model, Marian included).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import torch

from inference import evaluate_translation
from modeling import shift_tokens_right

from .batching import TokenBudgetBatchSampler, collate
from .loss import label_smoothed_nll_loss

# Evaluation translations generate at most 2 * source length + 10 tokens (fairseq's max_len_a / max_len_b): enough
# for any real translation, and it bounds the time an untrained model spends repeating itself.
LENGTH_CAP = {"max_len_a": 2.0, "max_len_b": 10}


def model_batch(indices: Sequence[int], sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], config,
                device: torch.device) -> dict[str, torch.Tensor]:  # fmt: skip
    """The pairs ``indices`` of ``sources``/``targets`` collated (`training.batching.collate`), with the
    teacher-forcing decoder input (labels shifted right), on ``device``."""
    batch = collate([sources[i] for i in indices], [targets[i] for i in indices], config.pad_token_id)
    batch["decoder_input_ids"] = shift_tokens_right(
        batch["labels"], config.pad_token_id, config.decoder_start_token_id
    )
    return {k: v.to(device) for k, v in batch.items()}


def forward_loss(model, batch: dict[str, torch.Tensor], label_smoothing: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss sum, nll sum) of one prepared batch (`model_batch`) over its target tokens."""
    logits = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        decoder_input_ids=batch["decoder_input_ids"],
        use_cache=False,
    ).logits
    return label_smoothed_nll_loss(logits, batch["labels"], label_smoothing)


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
) -> dict:
    """``valid_loss``, ``valid_nll_loss``, ``valid_ppl`` over the token ids ``valid_src``/``valid_tgt`` (empty
    dict without pairs), plus ``valid_bleu``, ``valid_chrf`` and ``bleu_signature`` of the first ``bleu_samples``
    of ``sources`` translated against ``references`` (skipped when 0). The model is left in the mode it was in."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    metrics: dict = {}
    if valid_src:
        rank, world = (accelerator.process_index, accelerator.num_processes) if accelerator else (0, 1)
        longest = max(max(len(s), len(t)) for s, t in zip(valid_src, valid_tgt))
        sampler = TokenBudgetBatchSampler([len(s) for s in valid_src], [len(t) for t in valid_tgt],
                                          max(max_tokens, longest), shuffle=False)  # fmt: skip
        sums = torch.zeros(3, device=device)
        for indices in sampler.batches(0)[rank::world]:
            batch = model_batch(indices, valid_src, valid_tgt, model.config, device)
            with accelerator.autocast() if accelerator else nullcontext():
                loss, nll = forward_loss(model, batch, label_smoothing)
            sums += torch.stack([loss.float(), nll.float(), batch["ntokens"].float()])
        if world > 1:
            sums = accelerator.reduce(sums, reduction="sum")
        loss_v, nll_v, ntok = (float(x) for x in sums)
        metrics = {"valid_loss": loss_v / ntok, "valid_nll_loss": nll_v / ntok,
                   "valid_ppl": math.exp(min(nll_v / ntok, 50))}  # fmt: skip
    n = min(bleu_samples, len(sources))
    if n > 0 and (accelerator is None or accelerator.is_main_process):
        scores, _ = evaluate_translation(
            model, tokenizer, list(sources[:n]), list(references[:n]), tokenize=tokenize, num_beams=num_beams,
            length_penalty=length_penalty, batch_size=batch_size, **LENGTH_CAP,
        )  # fmt: skip
        metrics.update(valid_bleu=scores["bleu"], valid_chrf=scores["chrf"], bleu_signature=scores["bleu_signature"])
    model.train(was_training)
    return metrics
