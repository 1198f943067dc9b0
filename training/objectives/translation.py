"""Translation: the encoder-decoder trained on the corpus's pairs, scored by translating."""

from __future__ import annotations

from vanilla_transformer.export.model_card import ObjectiveCard

from .base import Objective, seq2seq_loss, teacher_forced
from .registry import register_objective


@register_objective
class Translation(Objective):
    """Teacher-forced cross entropy of the target given the source; examples are the (source, target) pairs with
    at most ``max_length`` tokens on each side."""

    name = "translation"
    help = "the encoder-decoder on the pairs"
    translates = True
    pairs = True

    def examples(self, sources, targets, max_length):
        keep = [
            i
            for i, (s, t) in enumerate(zip(sources, targets))
            if len(s) <= max_length and len(t) <= max_length
        ]
        return [sources[i] for i in keep], [targets[i] for i in keep], len(sources) - len(keep)

    def collate(self, sources, targets, config, rng=None):
        return teacher_forced(sources, targets, config)

    def loss(self, model, batch, label_smoothing):
        return seq2seq_loss(model, batch, label_smoothing)

    def card(self) -> ObjectiveCard:
        return ObjectiveCard(
            self.name, "translation (teacher-forced cross entropy of the target given the source)"
        )
