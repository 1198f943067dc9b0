"""The one batch and batch loss of every training objective (`Objective`, `forward_loss`), and validation the way
training reports it.

* loss: the label-smoothed loss and the NLL per scored token over all validation examples (teacher forcing, batches
  of at most ``max_tokens`` padded tokens), and the perplexity ``exp(nll per token)``; the scored tokens are the
  objective's: the target (translation), the sentinels and spans (span corruption), the answer or every next token
  (causal LM), the chosen tokens (masked LM). Random choices of a validation batch are seeded by its place in the
  validation set, so every validation scores the same masks and spans;
* translation only: greedy (or ``num_beams``) BLEU/chrF on the first ``bleu_samples`` validation sentences.

Used by the trainer (with its `accelerate.Accelerator`: the loss batches are shared among processes and summed,
translation runs on the main process) and by the quality benchmark (single process, any model, Marian included).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from vanilla_transformer.inference import evaluate_translation
from vanilla_transformer.modeling import IGNORE_INDEX, shift_tokens_right

from .batching import (
    TokenBudgetBatchSampler,
    batch_generator,
    collate,
    collate_causal_lm,
    collate_masked_lm,
    collate_span_corruption,
)
from .loss import label_smoothed_nll_loss

# Evaluation translations generate at most 2 * source length + 10 tokens (fairseq's max_len_a / max_len_b): enough
# for any real translation, and it bounds the time an untrained model spends repeating itself.
LENGTH_CAP = {"max_len_a": 2.0, "max_len_b": 10}


def model_batch(
    indices: Sequence[int],
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    config,
    device: torch.device,
) -> dict[str, torch.Tensor]:
    """The pairs ``indices`` of ``sources``/``targets`` collated (`training.batching.collate`), with the
    teacher-forcing decoder input (labels shifted right), on ``device``."""
    batch = collate([sources[i] for i in indices], [targets[i] for i in indices], config.pad_token_id)
    batch["decoder_input_ids"] = shift_tokens_right(
        batch["labels"], config.pad_token_id, config.decoder_start_token_id
    )
    return {k: v.to(device) for k, v in batch.items()}


SEQ2SEQ_OBJECTIVES = ("translation", "span_corruption")


@dataclass(frozen=True)
class Objective:
    """What a run's model learns from its examples, and how a batch of them is built.

    Examples are pairs ``(sources[i], targets[i])`` of token-id lists (each ending with </s>), arranged by
    `training.data` for the objective: translation and ``causal_lm`` read (source, target) pairs (a causal LM
    trains on ``source + target`` with the loss on the target); ``causal_lm`` on plain text reads ([<s>], text);
    ``masked_lm`` and ``span_corruption`` read (text, text) for every source and target text of the corpus.
    """

    name: str = "translation"
    sentinel_ids: tuple[int, ...] = ()  # span_corruption: <extra_id_0>, <extra_id_1>, ...
    noise_density: float = 0.15
    mean_noise_span_length: float = 3.0
    masker: Any = None  # masked_lm: transformers' DataCollatorForLanguageModeling

    @classmethod
    def for_tokenizer(
        cls,
        name: str,
        tokenizer,
        *,
        mlm_probability: float = 0.15,
        noise_density: float = 0.15,
        mean_noise_span_length: float = 3.0,
    ) -> Objective:
        """The objective ``name`` with what it needs from ``tokenizer`` (sentinels, mask token); raises
        `ValueError` saying how to get a tokenizer that has them."""
        if name == "span_corruption":
            from vanilla_transformer.tokenizer.bpe import sentinel_token_ids

            return cls(name, tuple(sentinel_token_ids(tokenizer)), noise_density, mean_noise_span_length)
        if name == "masked_lm":
            from transformers import DataCollatorForLanguageModeling

            if tokenizer.mask_token is None:
                raise ValueError(
                    "masked_lm needs a tokenizer with a mask token (<mask>); train one with "
                    "train_bpe_tokenizer(..., denoising_tokens=True), or leave --tokenizer unset so that the run trains one."
                )
            return cls(
                name, masker=DataCollatorForLanguageModeling(tokenizer, mlm_probability=mlm_probability)
            )
        return cls(name)

    @property
    def seq2seq(self) -> bool:
        """Whether the model is the encoder-decoder (the model's input and its teacher-forced output differ)."""
        return self.name in SEQ2SEQ_OBJECTIVES

    def lengths(
        self, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]]
    ) -> tuple[list[int], list[int]]:
        """The (source, target) lengths the token-budget sampler sizes batches by: a causal LM reads both as one
        sequence; the text objectives read each text once (span corruption never lengthens a text)."""
        if self.name == "causal_lm":
            both = [len(s) + len(t) for s, t in zip(sources, targets)]
            return both, both
        return [len(s) for s in sources], [len(t) for t in targets]

    def batch(
        self,
        indices: Sequence[int],
        sources: Sequence[Sequence[int]],
        targets: Sequence[Sequence[int]],
        config,
        device: torch.device,
        rng: np.random.Generator | None = None,
    ) -> dict[str, torch.Tensor]:
        """The examples ``indices`` collated for the objective (`training.batching`), on ``device``; ``rng`` draws
        the spans or masks (unused by translation and causal LM)."""
        if self.name == "translation":
            return model_batch(indices, sources, targets, config, device)
        if self.name == "causal_lm":
            batch = collate_causal_lm(
                [sources[i] for i in indices], [targets[i] for i in indices], config.pad_token_id
            )
        elif self.name == "masked_lm":
            batch = collate_masked_lm([sources[i] for i in indices], self.masker, rng)
        elif self.name == "span_corruption":
            batch = collate_span_corruption(
                [sources[i] for i in indices],
                self.sentinel_ids,
                rng,
                eos_token_id=config.eos_token_id,
                pad_token_id=config.pad_token_id,
                noise_density=self.noise_density,
                mean_noise_span_length=self.mean_noise_span_length,
            )
            batch["decoder_input_ids"] = shift_tokens_right(
                batch["labels"], config.pad_token_id, config.decoder_start_token_id
            )
        else:
            raise ValueError(f"Unknown objective {self.name!r}.")
        return {k: v.to(device) for k, v in batch.items()}


def forward_loss(
    model, batch: dict[str, torch.Tensor], label_smoothing: float, objective: str = "translation"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss sum, nll sum) of one prepared batch (`Objective.batch`) over its scored tokens: the decoder's targets
    (encoder-decoder objectives), the next tokens where ``labels`` is not -100 (``causal_lm``: the model's logits
    at t score ``labels`` at t + 1, as transformers' causal LMs shift them), the chosen tokens (``masked_lm``)."""
    if objective in SEQ2SEQ_OBJECTIVES:
        logits = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=batch["decoder_input_ids"],
            use_cache=False,
        ).logits
        return label_smoothed_nll_loss(logits, batch["labels"], label_smoothing)
    if objective == "causal_lm":
        logits = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False
        ).logits
        next_tokens = torch.nn.functional.pad(batch["labels"][:, 1:], (0, 1), value=IGNORE_INDEX)  # (B, T)
        return label_smoothed_nll_loss(logits, next_tokens, label_smoothing)
    if objective == "masked_lm":
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        return label_smoothed_nll_loss(logits, batch["labels"], label_smoothing)
    raise ValueError(f"Unknown objective {objective!r}.")


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
    0; translation only). The model is left in the mode it was in."""
    objective = objective or Objective()
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
                loss, nll = forward_loss(model, batch, label_smoothing, objective.name)
            sums += torch.stack([loss.float(), nll.float(), batch["ntokens"].float()])
        if world > 1:
            sums = accelerator.reduce(sums, reduction="sum")
        loss_v, nll_v, ntok = (float(x) for x in sums)
        metrics = {
            "valid_loss": loss_v / ntok,
            "valid_nll_loss": nll_v / ntok,
            "valid_ppl": math.exp(min(nll_v / ntok, 50)),
        }
    n = min(bleu_samples, len(sources)) if objective.name == "translation" else 0
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
