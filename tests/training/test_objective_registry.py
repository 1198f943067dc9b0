"""The objective registry: a fifth objective defined here (write every text reversed) trains through the normal
`train(TrainConfig(...))` path once registered, and unknown names are refused with the choices."""

from __future__ import annotations

import math

import pytest
from conftest import small_run

from vanilla_transformer.export.model_card import ObjectiveCard
from vanilla_transformer.training import train
from vanilla_transformer.training.objectives import (
    OBJECTIVES,
    Objective,
    get_objective,
    register_objective,
    seq2seq_loss,
    teacher_forced,
)
from vanilla_transformer.training.options import check_options


class Reverse(Objective):
    """The encoder-decoder writes each text of the corpus backwards (the toy objective of docs/design.md)."""

    name = "reverse"
    help = "the encoder-decoder writes every text reversed"

    def examples(self, sources, targets, max_length):
        texts, _, dropped = super().examples(sources, targets, max_length)
        return texts, [text[-2::-1] + text[-1:] for text in texts], dropped  # </s> stays last

    def collate(self, sources, targets, config, rng=None):
        return teacher_forced(sources, targets, config)

    def loss(self, model, batch, label_smoothing):
        return seq2seq_loss(model, batch, label_smoothing)

    def card(self):
        return ObjectiveCard(self.name, "reversing every text", model="an encoder-decoder", translates=False)


@pytest.fixture
def reverse():
    register_objective(Reverse)
    yield Reverse
    OBJECTIVES.pop(Reverse.name)


def test_a_registered_objective_trains_through_the_one_trainer(reverse, tokenizer_dir, tmp_path):
    assert get_objective("reverse") is Reverse
    result = train(small_run(tmp_path / "run", tokenizer=tokenizer_dir, objective="reverse", max_steps=20))
    losses = [log["loss"] for log in result.history]
    assert result.step == 20 and len(losses) == 20 and all(math.isfinite(x) for x in losses)
    assert sum(losses[-5:]) < sum(losses[:5])  # it learns
    assert type(result.model).__name__ == "VanillaTransformerForConditionalGeneration"
    assert "Objective reverse:" in result.data_summary and "training and" in result.data_summary


def test_an_unknown_objective_is_refused_with_the_choices(reverse):
    with pytest.raises(
        ValueError, match="Unknown objective 'copy'; choose one of translation, causal_lm, .*reverse"
    ):
        get_objective("copy")
    with pytest.raises(ValueError, match="--objective must be one of translation, .*reverse, got 'copy'"):
        check_options(small_run("out", objective="copy", max_steps=1))
    with pytest.raises(ValueError, match="'reverse' is registered already"):
        register_objective(type("Other", (Reverse,), {}))


def test_a_registered_objective_is_a_choice_of_the_command_line(reverse):
    from vanilla_transformer.training import TrainConfig
    from vanilla_transformer.training.cli import parse_dataclass

    assert parse_dataclass(TrainConfig, ["--objective", "reverse"]).objective == "reverse"
