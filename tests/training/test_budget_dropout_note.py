"""The long-budget dropout decision when the batch time is measured as 0.0 seconds (a first epoch without a
batch): the minute marks' epochs cannot be estimated, and the decision is still made and explained."""

from __future__ import annotations


def test_a_mark_without_an_epoch_estimate_is_left_out_of_the_note():
    from vanilla_transformer.training.options import TrainConfig
    from vanilla_transformer.training.recipe import budget_dropout_decision, resolve_recipe

    cfg = TrainConfig(preset="small", max_minutes=60, max_epochs=30, export_at_minutes="25")
    recipe, note = budget_dropout_decision(cfg, resolve_recipe(cfg), 1000, 1, lambda: 0.0)
    # the 30 epochs of --max_epochs reach the rule's threshold; minute 25 has no estimate without a batch time
    assert recipe.dropout == 0.1 and recipe.expected_epochs == 30.0
    assert note.startswith("dropout 0.1: the budget allows about 30 epochs") and "minute-25" not in note
