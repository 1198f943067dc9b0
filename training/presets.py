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

PRESETS: dict[str, dict] = {
    "tiny": dict(
        model=dict(
            d_model=64,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=128,
            decoder_ffn_dim=128,
            dropout=0.1,
            max_position_embeddings=512,
        ),
        recipe=dict(max_tokens=1024, warmup_steps=100, lr_scale=1.0, clip_norm=0.0),
    ),
    "small": dict(
        model=dict(
            d_model=256,
            encoder_layers=3,
            decoder_layers=3,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=1024,
            decoder_ffn_dim=1024,
            dropout=0.0,
            max_position_embeddings=512,
            init_std=0.02,
            linear_init_std=0.02,
        ),
        recipe=dict(
            max_tokens=1024,
            warmup_steps=450,
            lr_scale=0.6,
            clip_norm=1.0,
            average_last=5,
            average_every=200,
            cooldown=0.2,
            long_budget_epochs=12,
            long_budget_dropout=0.1,
        ),
    ),
    "base": dict(
        model=dict(
            d_model=512,
            encoder_layers=6,
            decoder_layers=6,
            encoder_attention_heads=8,
            decoder_attention_heads=8,
            encoder_ffn_dim=2048,
            decoder_ffn_dim=2048,
            dropout=0.1,
        ),
        recipe=dict(max_tokens=25000, warmup_steps=4000, lr_scale=1.0, clip_norm=0.0),
    ),
    "big": dict(
        model=dict(
            d_model=1024,
            encoder_layers=6,
            decoder_layers=6,
            encoder_attention_heads=16,
            decoder_attention_heads=16,
            encoder_ffn_dim=4096,
            decoder_ffn_dim=4096,
            dropout=0.3,
        ),
        recipe=dict(max_tokens=25000, warmup_steps=4000, lr_scale=1.0, clip_norm=0.0),
    ),
}


def preset_names() -> list[str]:
    return list(PRESETS)


def recipe_defaults(preset: str) -> dict:
    """The preset's recommended ``max_tokens``, ``warmup_steps``, ``lr_scale``, ``clip_norm``, ``average_last``,
    ``average_every``, ``cooldown`` and long-budget dropout rule (``long_budget_epochs``,
    ``long_budget_dropout``; averaging, cooldown and the rule are off unless the preset sets them)."""
    _check(preset)
    defaults = {
        "average_last": 0,
        "average_every": 100,
        "cooldown": 0.0,
        "long_budget_epochs": None,
        "long_budget_dropout": None,
    }
    return {**defaults, **PRESETS[preset]["recipe"]}


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
