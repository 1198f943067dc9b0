"""Masked language modelling: an encoder-only model with the preset's encoder, BERT's masking."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from vanilla_transformer.export.model_card import ObjectiveCard
from vanilla_transformer.modeling import VanillaEncoderOnlyForMaskedLM

from ..batching import collate_masked_lm
from ..loss import label_smoothed_nll_loss
from .base import Objective
from .registry import register_objective


@register_objective
@dataclass(frozen=True)
class MaskedLM(Objective):
    """Examples are (text, text) for every source and target text; ``probability`` of the tokens are chosen (80%
    of them replaced by <mask>, 10% by a random token, 10% kept: transformers' `DataCollatorForLanguageModeling`,
    the ``masker``) and scored."""

    probability: float = 0.15
    masker: Any = None

    name = "masked_lm"
    help = "an encoder-only model with the preset's encoder, BERT's masking; see --mlm_probability"
    model_class = VanillaEncoderOnlyForMaskedLM
    stacks = ("encoder",)
    denoising_tokens = True

    @classmethod
    def from_options(cls, options) -> MaskedLM:
        return cls(options.mlm_probability)

    def for_tokenizer(self, tokenizer) -> MaskedLM:
        from transformers import DataCollatorForLanguageModeling

        if tokenizer.mask_token is None:
            raise ValueError(
                "masked_lm needs a tokenizer with a mask token (<mask>); train one with "
                "train_bpe_tokenizer(..., denoising_tokens=True), or leave --tokenizer unset so that the run trains one."
            )
        return replace(
            self, masker=DataCollatorForLanguageModeling(tokenizer, mlm_probability=self.probability)
        )

    def collate(self, sources, targets, config, rng=None):
        # masking draws from the seeded generator that every caller of Objective.batch passes
        assert rng is not None
        return collate_masked_lm(sources, self.masker, rng)

    def loss(self, model, batch, label_smoothing):
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        return label_smoothed_nll_loss(logits, batch["labels"], label_smoothing)

    def card(self) -> ObjectiveCard:
        return ObjectiveCard(
            self.name,
            f"masked language modelling (BERT's: {self.probability:.0%} of the tokens chosen, 80% of them replaced by "
            "<mask>, 10% by a random token, 10% kept; the loss on the chosen tokens) on every source and target text",
            model="an encoder-only Transformer masked language model (the encoder stack with a masked-LM head)",
            pipeline_tag="fill-mask",
            auto_class="AutoModelForMaskedLM",
            translates=False,
        )
