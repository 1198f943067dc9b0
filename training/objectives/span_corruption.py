"""T5's span corruption: the encoder-decoder pretrained by denoising the corpus's texts."""

from __future__ import annotations

from dataclasses import dataclass, replace

from vanilla_transformer.export.model_card import ObjectiveCard
from vanilla_transformer.modeling import shift_tokens_right

from ..batching import collate_span_corruption
from .base import Objective, seq2seq_loss
from .registry import register_objective


@register_objective
@dataclass(frozen=True)
class SpanCorruption(Objective):
    """Examples are (text, text) for every source and target text (span corruption never lengthens a text);
    each batch replaces noise spans (``noise_density`` of the tokens, spans of mean length
    ``mean_noise_span_length``) by the sentinels ``sentinel_ids`` (<extra_id_0>, ...) in the input, and the decoder
    writes the sentinels and their spans."""

    noise_density: float = 0.15
    mean_noise_span_length: float = 3.0
    sentinel_ids: tuple[int, ...] = ()

    name = "span_corruption"
    help = (
        "the encoder-decoder pretrained with T5's denoising on the source and target texts; fine-tune it with "
        "--objective translation --init_from"
    )
    denoising_tokens = True

    @classmethod
    def from_options(cls, options) -> SpanCorruption:
        return cls(options.noise_density, options.mean_noise_span_length)

    def for_tokenizer(self, tokenizer) -> SpanCorruption:
        from vanilla_transformer.tokenizer.bpe import sentinel_token_ids

        return replace(self, sentinel_ids=tuple(sentinel_token_ids(tokenizer)))

    def collate(self, sources, targets, config, rng=None):
        # span corruption draws from the seeded generator that every caller of Objective.batch passes
        assert rng is not None
        batch = collate_span_corruption(
            sources,
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
        return batch

    def loss(self, model, batch, label_smoothing):
        return seq2seq_loss(model, batch, label_smoothing)

    def card(self) -> ObjectiveCard:
        return ObjectiveCard(
            self.name,
            f"T5's span corruption (noise density {self.noise_density}, mean span length {self.mean_noise_span_length}: "
            "each noise span replaced by a sentinel <extra_id_i> in the input, the decoder writes the sentinels and "
            "their spans) on every source and target text",
            model="an encoder-decoder Transformer pretrained with T5's span-corruption denoising",
            pipeline_tag="text2text-generation",
            auto_class="AutoModelForSeq2SeqLM",
            translates=False,
        )
