"""Named architecture presets and their training recipe: the paper's ``base`` and ``big`` (Table 3), ``small``
for the default 25-minute run on 2 CPU cores, ``tiny`` for tests; each ``small`` choice is measured in
docs/quality.md ("Tuning experiments"), with its command. The recipe values are the defaults `vanilla-transformer
train` uses for the preset unless overridden on the command line.

The long-budget rule: a run whose budget allows at least ``long_budget_epochs`` passes over its training data
trains with dropout ``long_budget_dropout`` unless ``--dropout`` is given (`budget_dropout`), because without
dropout a long run overfits. It counts epochs, not minutes, so that it means the same on a fast machine and a slow
one.
"""

from __future__ import annotations

from vanilla_transformer.modeling import VanillaTransformerConfig


def symmetric(layers: int, d_model: int, ffn_dim: int, heads: int, dropout: float, **more) -> dict:
    """The model fields of Table 3's columns (N, d_model, d_ff, h, P_drop), encoder and decoder alike, and `more`."""
    side = dict(layers=layers, attention_heads=heads, ffn_dim=ffn_dim)
    stacks = {f"{stack}_{name}": value for stack in ("encoder", "decoder") for name, value in side.items()}
    return dict(d_model=d_model, **stacks, dropout=dropout, **more)


def recipe(max_tokens: int, warmup_steps: int, lr_scale: float, clip_norm: float, **more) -> dict:
    """Target tokens per batch, warm-up steps, the factor on the schedule's learning rate, gradient clipping (0: off)
    and `more` (averaging, cooldown, the long-budget rule)."""
    return dict(
        max_tokens=max_tokens, warmup_steps=warmup_steps, lr_scale=lr_scale, clip_norm=clip_norm, **more
    )


SHORT = dict(max_position_embeddings=512)  # the shipped corpus's sentences are short
SMALL_INIT = dict(init_std=0.02, linear_init_std=0.02)
SMALL_AVERAGING = dict(average_last=5, average_every=200, cooldown=0.2)
SMALL_LONG_BUDGET = dict(long_budget_epochs=12, long_budget_dropout=0.1)

PRESETS: dict[str, dict] = {
    "tiny": dict(model=symmetric(2, 64, 128, 4, 0.1, **SHORT), recipe=recipe(1024, 100, 1.0, 0.0)),
    "small": dict(
        model=symmetric(3, 256, 1024, 4, 0.0, **SHORT, **SMALL_INIT),
        recipe=recipe(1024, 450, 0.6, 1.0, **SMALL_AVERAGING, **SMALL_LONG_BUDGET),
    ),
    # a distillation student (train --distill_from): small with two decoder layers; the decoder runs once per output
    # token, the encoder once per sentence. With one decoder layer the recipe learned to use the source far more
    # slowly (600 updates: validation BLEU 0.3 against 2.9 with three; 1,500 updates of a one-layer student: 0.4).
    "student": dict(
        model={**symmetric(3, 256, 1024, 4, 0.0, **SHORT, **SMALL_INIT), "decoder_layers": 2},
        recipe=recipe(1024, 450, 0.6, 1.0, **SMALL_AVERAGING, **SMALL_LONG_BUDGET),
    ),
    # the paper's (Table 3; §5.1-5.4: 25k-token batches, 4000 warm-up steps, no clipping)
    "base": dict(model=symmetric(6, 512, 2048, 8, 0.1), recipe=recipe(25000, 4000, 1.0, 0.0)),
    "big": dict(model=symmetric(6, 1024, 4096, 16, 0.3), recipe=recipe(25000, 4000, 1.0, 0.0)),
}


def preset_names() -> list[str]:
    return list(PRESETS)


# fine-tuning a trained model (--init_from): a short linear warm-up to a constant learning rate (Seq2SeqTrainer's
# default 5e-5), not the paper's warm-up from zero over thousands of updates, which is for random weights
FINE_TUNING = dict(lr_schedule="constant", learning_rate=5e-5, warmup_steps=100)


def recipe_defaults(preset: str, fine_tuning: bool = False) -> dict:
    """The preset's recommended ``max_tokens``, ``warmup_steps``, ``lr_schedule`` (the paper's), ``lr_scale``,
    ``clip_norm``, ``average_last``, ``average_every``, ``cooldown`` and long-budget dropout rule
    (``long_budget_epochs``, ``long_budget_dropout``; averaging, cooldown and the rule are off unless the preset sets
    them). ``fine_tuning`` (a run from ``--init_from``): the schedule, learning rate and warm-up of `FINE_TUNING`."""
    _check(preset)
    defaults = {
        "average_last": 0,
        "average_every": 100,
        "cooldown": 0.0,
        "long_budget_epochs": None,
        "long_budget_dropout": None,
        "lr_schedule": "paper",
        "learning_rate": None,
    }
    return {**defaults, **PRESETS[preset]["recipe"], **(FINE_TUNING if fine_tuning else {})}


def long_budget_rule(preset: str) -> tuple[float, float] | None:
    """``(long_budget_epochs, long_budget_dropout)`` of a preset that has the long-budget dropout rule, else None."""
    recipe = recipe_defaults(preset)
    if recipe["long_budget_epochs"] is None or recipe["long_budget_dropout"] is None:
        return None
    return recipe["long_budget_epochs"], recipe["long_budget_dropout"]


def budget_dropout(preset: str, dropout: float | None, epochs: float | None) -> float | None:
    """The dropout a run overrides its preset's model dropout with: ``dropout`` (``--dropout``) when given; else
    the preset's ``long_budget_dropout`` when its budget allows at least ``long_budget_epochs`` passes over the
    training data (``epochs``: `training.recipe.expected_epochs`); else None (keep the preset's dropout)."""
    if dropout is not None:
        return dropout
    rule = long_budget_rule(preset)
    if rule is not None and epochs is not None and epochs >= rule[0]:
        return rule[1]
    return None


def model_values(preset: str, **overrides) -> dict:
    """The preset's model fields; ``overrides`` that are not None replace them (e.g. ``dropout=0.0``)."""
    _check(preset)
    return {**PRESETS[preset]["model"], **{k: v for k, v in overrides.items() if v is not None}}


def build_config(preset: str, vocab_size: int, **overrides) -> VanillaTransformerConfig:
    """The encoder-decoder `VanillaTransformerConfig` of ``preset`` (`model_values`) with ``vocab_size``."""
    return VanillaTransformerConfig(vocab_size=vocab_size, **model_values(preset, **overrides))


def _check(preset: str) -> None:
    if preset not in PRESETS:
        raise ValueError(f"Unknown preset {preset!r}; choose one of {list(PRESETS)} (--preset).")
