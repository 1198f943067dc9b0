"""The protocol of a training objective: what a run's model learns from its examples.

An objective decides, for the one trainer: the model family (``model_class``, and its configuration from the
preset: `Objective.model_config`), the examples a split's token ids give (`Objective.examples`), how the
token-budget sampler measures them (`Objective.lengths`), a batch of them (`Objective.collate`: ``input_ids``,
``attention_mask``, ``labels`` with -100 where nothing is scored, ``ntokens`` = the number of scored positions),
the loss over the scored positions (`Objective.loss`: sums, never means), whether the run is scored by translating
(``translates``: validation and test BLEU, the length penalty) and what the model card says (`Objective.card`).

Examples are pairs ``(sources[i], targets[i])`` of token-id lists; each objective says how it arranges them.
Objectives are found by name in the registry (`training.objectives.get_objective`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from vanilla_transformer.export.model_card import ObjectiveCard
from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration, shift_tokens_right

from ..batching import collate
from ..loss import label_smoothed_nll_loss
from ..presets import model_values

STACKS = ("encoder", "decoder")


class Objective:
    """One training objective (subclass it, set the class attributes, implement `collate`, `loss` and `card`).

    An instance is built from the run's options (`from_options`), then given the run's tokenizer
    (`for_tokenizer`) before its examples are batched.
    """

    name: ClassVar[str]  # the --objective value
    help: ClassVar[str]  # one line for --objective's help
    model_class: ClassVar[type] = VanillaTransformerForConditionalGeneration
    stacks: ClassVar[tuple[str, ...]] = STACKS  # the preset's stacks the model has
    translates: ClassVar[bool] = False  # scored by translating (BLEU), with a length penalty
    denoising_tokens: ClassVar[bool] = False  # a tokenizer trained by the run gets <mask> and the sentinels
    pairs: ClassVar[bool] = False  # examples are (source, target) pairs of the corpus, not its texts

    @classmethod
    def from_options(cls, options: Any) -> Objective:
        """The objective with its settings read from ``options`` (a `TrainConfig`)."""
        return cls()

    @classmethod
    def conflicts(cls, options: Any) -> list[str]:
        """Options of a run of this objective that its model or its examples cannot use."""
        problems = []
        for side in STACKS:
            if side not in cls.stacks and getattr(options, f"{side}_layers") is not None:
                problems.append(f"--objective {cls.name} trains a model without {side}: drop --{side}_layers")
        if options.export_ct2 is not None and cls.stacks != STACKS:
            problems.append(f"--export_ct2 exports translation models; --objective {cls.name} cannot use it")
        if options.bpe_dropout > 0 and not cls.translates:
            problems.append(
                f"--bpe_dropout re-segments translation pairs; --objective {cls.name} cannot use it "
                "(pass --bpe_dropout 0)"
            )
        return problems

    def for_tokenizer(self, tokenizer) -> Objective:
        """The objective with what it needs from ``tokenizer``; raises `ValueError` saying how to get one."""
        return self

    @classmethod
    def model_config(cls, preset: str, vocab_size: int, **overrides):
        """The configuration of ``model_class`` with the preset's fields of the stacks it has (width, depth,
        heads, d_ff, dropout, positions, initialisation); ``overrides`` that are not None replace them."""
        others = [f"{side}_" for side in STACKS if side not in cls.stacks]
        values = model_values(preset, **overrides)
        values = {k: v for k, v in values.items() if not any(k.startswith(other) for other in others)}
        return cls.model_class.config_class(vocab_size=vocab_size, **values)

    def examples(
        self, sources: list[list[int]], targets: list[list[int]], max_length: int
    ) -> tuple[list[list[int]], list[list[int]], int]:
        """The examples of a split's token ids (each ending with </s>) and how many were dropped for having more
        than ``max_length`` tokens; by default every source and every target text alone, as (text, text)."""
        texts = [t for t in sources + targets if len(t) <= max_length]
        return texts, texts, len(sources) + len(targets) - len(texts)

    def lengths(
        self, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]]
    ) -> tuple[list[int], list[int]]:
        """The (source, target) lengths the token-budget sampler sizes batches by; by default each side's."""
        return [len(s) for s in sources], [len(t) for t in targets]

    def collate(
        self,
        sources: Sequence[Sequence[int]],
        targets: Sequence[Sequence[int]],
        config,
        rng: np.random.Generator | None = None,
    ) -> dict[str, torch.Tensor]:
        """A batch of examples on the CPU; ``rng`` draws its random choices (seeded per batch: an objective that
        draws any needs it)."""
        raise NotImplementedError

    def loss(
        self, model, batch: dict[str, torch.Tensor], label_smoothing: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(label-smoothed loss sum, NLL sum) of ``model`` on a prepared batch, over its scored positions."""
        raise NotImplementedError

    def card(self) -> ObjectiveCard:
        """What the model card says about the objective."""
        raise NotImplementedError

    def batch(
        self,
        indices: Sequence[int],
        sources: Sequence[Sequence[int]],
        targets: Sequence[Sequence[int]],
        config,
        device: torch.device,
        rng: np.random.Generator | None = None,
    ) -> dict[str, torch.Tensor]:
        """The examples ``indices`` collated (`collate`), on ``device``."""
        batch = self.collate([sources[i] for i in indices], [targets[i] for i in indices], config, rng)
        return {k: v.to(device) for k, v in batch.items()}


def teacher_forced(
    sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], config
) -> dict[str, torch.Tensor]:
    """Pairs collated (`training.batching.collate`) with the teacher-forcing decoder input (labels shifted right
    behind ``decoder_start_token_id``)."""
    batch = collate(sources, targets, config.pad_token_id)
    batch["decoder_input_ids"] = shift_tokens_right(
        batch["labels"], config.pad_token_id, config.decoder_start_token_id
    )
    return batch


def seq2seq_loss(
    model, batch: dict[str, torch.Tensor], label_smoothing: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss sum, NLL sum) of an encoder-decoder over the decoder's targets (``labels`` not -100)."""
    logits = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        decoder_input_ids=batch["decoder_input_ids"],
        use_cache=False,
    ).logits
    return label_smoothed_nll_loss(logits, batch["labels"], label_smoothing)
