"""Causal language modelling: a decoder-only model with the preset's decoder, next-token prediction."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vanilla_transformer.export.model_card import ObjectiveCard
from vanilla_transformer.modeling import IGNORE_INDEX, VanillaDecoderOnlyForCausalLM
from vanilla_transformer.tokenizer import BOS_ID

from ..batching import collate_causal_lm
from ..loss import label_smoothed_nll_loss
from .base import Objective
from .registry import register_objective

CAUSAL_LM_DATA = ("pairs", "text")  # --causal_lm_data
_TEXTS = {
    "pairs": "causal language modelling of 'source </s> target </s>' with the loss on the target only (supervised "
    "fine-tuning of translation as next-token prediction)",
    "text": "causal language modelling of every source and target text after <s> (next-token prediction of every "
    "token)",
}


@register_objective
@dataclass(frozen=True)
class CausalLM(Objective):
    """Examples are (prompt, answer): (source, target) pairs whose lengths together are at most ``max_length``
    (``data`` 'pairs'; the loss on the target), or ([<s>], text) for every source and target text (``data``
    'text'; after <s>, so that the first token is predicted too, as generation from <s> does)."""

    data: str = "pairs"

    name = "causal_lm"
    help = "a decoder-only language model with the preset's decoder; see --causal_lm_data"
    model_class = VanillaDecoderOnlyForCausalLM
    stacks = ("decoder",)

    @classmethod
    def from_options(cls, options) -> CausalLM:
        return cls(options.causal_lm_data)

    @property
    def pairs(self) -> bool:
        return self.data == "pairs"

    def examples(self, sources, targets, max_length):
        if self.pairs:
            keep = [i for i, (s, t) in enumerate(zip(sources, targets)) if len(s) + len(t) <= max_length]
            return [sources[i] for i in keep], [targets[i] for i in keep], len(sources) - len(keep)
        _, texts, dropped = super().examples(sources, targets, max_length)
        return [[BOS_ID] for _ in texts], texts, dropped

    def lengths(self, sources, targets):
        """Both are the length of the one sequence ``prompt + answer``."""
        both = [len(s) + len(t) for s, t in zip(sources, targets)]
        return both, both

    def collate(self, sources, targets, config, rng=None):
        return collate_causal_lm(sources, targets, config.pad_token_id)

    def loss(self, model, batch, label_smoothing):
        """The logits at t score ``labels`` at t + 1 (as transformers' causal LMs shift them)."""
        logits = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False
        ).logits
        next_tokens = torch.nn.functional.pad(batch["labels"][:, 1:], (0, 1), value=IGNORE_INDEX)  # (B, T)
        return label_smoothed_nll_loss(logits, next_tokens, label_smoothing)

    def card(self) -> ObjectiveCard:
        return ObjectiveCard(
            self.name,
            _TEXTS[self.data],
            model="a decoder-only Transformer language model (the decoder stack without encoder-decoder attention)",
            pipeline_tag="text-generation",
            auto_class="AutoModelForCausalLM",
            translates=False,
        )
