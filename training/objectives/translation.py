"""Translation: the encoder-decoder trained on the corpus's pairs, scored by translating."""

from __future__ import annotations

from vanilla_transformer.export.model_card import ObjectiveCard

from ..alignment import guided_alignment_loss, reference_alignment
from ..loss import label_smoothed_nll_loss
from .base import Objective, seq2seq_loss, teacher_forced
from .registry import register_objective


@register_objective
class Translation(Objective):
    """Teacher-forced cross entropy of the target given the source; examples are the (source, target) pairs with
    at most ``max_length`` tokens on each side. Targets that carry a reference alignment (`training.alignment`,
    ``--alignment_data``) add the guided-alignment loss times ``alignment_loss_weight``."""

    name = "translation"
    help = "the encoder-decoder on the pairs"
    translates = True
    pairs = True

    def __init__(self, alignment_loss_weight: float = 0.0):
        self.alignment_loss_weight = alignment_loss_weight

    @classmethod
    def from_options(cls, options) -> Translation:
        return cls(alignment_loss_weight=options.alignment_loss_weight if options.alignment_data else 0.0)

    def examples(self, sources, targets, max_length):
        keep = [
            i
            for i, (s, t) in enumerate(zip(sources, targets))
            if len(s) <= max_length and len(t) <= max_length
        ]
        return [sources[i] for i in keep], [targets[i] for i in keep], len(sources) - len(keep)

    def collate(self, sources, targets, config, rng=None):
        batch = teacher_forced(sources, targets, config)
        if self.alignment_loss_weight:
            shape = (len(targets), batch["labels"].shape[1], batch["input_ids"].shape[1])
            reference = reference_alignment(targets, shape)
            if reference is not None:
                batch["alignment"] = reference  # (B, T, S)
        return batch

    def loss(self, model, batch, label_smoothing):
        if "alignment" not in batch:
            return seq2seq_loss(model, batch, label_smoothing)
        from vanilla_transformer.inference.attention import alignment_attention

        out = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=batch["decoder_input_ids"],
            output_attentions=True,
            use_cache=False,
        )
        loss, nll = label_smoothed_nll_loss(out.logits, batch["labels"], label_smoothing)
        # a model wrapped for distributed training keeps its config on the module it wraps
        config = getattr(model, "module", model).config
        attention = alignment_attention(out.cross_attentions, config)  # (B, T, S)
        return loss + self.alignment_loss_weight * guided_alignment_loss(attention, batch["alignment"]), nll

    def card(self) -> ObjectiveCard:
        guided = (
            f", plus guided alignment of one cross-attention head (weight {self.alignment_loss_weight})"
            if self.alignment_loss_weight
            else ""
        )
        return ObjectiveCard(
            self.name, f"translation (teacher-forced cross entropy of the target given the source{guided})"
        )
