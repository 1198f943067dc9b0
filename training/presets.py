"""Named architecture presets and their recommended training recipe.

``base`` and ``big`` are the paper's Table 3 models (big: dropout 0.3, as for EN-DE); ``small`` is the CPU
default (about 7.5M parameters with an 8k vocabulary) and ``tiny`` is for tests and smoke runs. ``small``'s
recipe is sized for the default 25-minute run on 2 CPU cores (about 7,000-8,000 updates of 1,024-token batches,
7-8 epochs, in bf16 on the AMD EPYC machine of docs/quality.md; fewer in fp32 or on a slower one), each choice
measured on whole held-out books or, where so marked, on the in-domain split (docs/quality.md): small batches for
more updates (1,024-token budgets: after the same 1.4M target tokens, 1,400 updates of 1,024 reached validation
perplexity 21.8 where 700 of 2,048 reached 31.3, at the same tokens per second on 2 cores; 512 scored 0.7 BLEU
lower), a linear warm-up over 450 updates to a peak of about 1.8e-3, then inverse-square-root decay
(``lr_scale`` 0.6, ``warmup_steps`` 450: 3x the rate of the paper's schedule at 0.2 with 200 warm-up updates
after the peak; each step up of that later rate was measured: 0.3 with 450 over 0.2 with 200 (in-domain), 0.45
with 1,012 over 0.3 with 450 (+0.6 BLEU on unseen books), 0.6 with 1,000 or 1,778 over 0.45 with 1,000 (+0.8 BLEU
on unseen books, test 24.57 / 45.62 and 24.60 / 45.62 against 23.78 / 44.92: the warm-up's length did not matter
at 8,000 updates); 450 warm-up updates instead of 1,000 scored +2.4 BLEU where a slower machine stops at 1,000
updates and level at 3,000 (18.67 / 40.13 against 18.53 / 39.76); peaks of 1.3e-3 with 200 updates were worse,
``lr_scale`` 0.7 with the cooldown 0.6 BLEU lower at 2,900 updates, and 0.8 far worse: validation perplexity 66
against 39 after 1,000 updates) with
gradient clipping at 1.0 (``lr_scale`` 0.5 without clipping left the decoder ignoring the source), Marian's N(0,
0.02) initialisation of embeddings and linear layers (validation perplexity after 1,000 updates 24 instead of 40
with Xavier-uniform), averaging of the last 5 weight snapshots taken every 200 updates (the token span of the 5 x
100 snapshots of 2,048-token batches that gave +0.5 test BLEU; after a cooldown validation usually keeps the
final weights instead), a linear cooldown of the learning rate to 0 over the last 20 % of the budget (``cooldown``
0.2: on unseen books +1.1 BLEU / +1.9 chrF at 1,674 updates and +0.4 / +0.2 at 2,900, each paired against the same
recipe without it on 2-core AVX2 machines; not measured at 8,000 updates), and no dropout (in 25 minutes the
extra updates are worth more on unseen books than dropout's regularisation: paired, dropout 0.1 scored 0.86 BLEU
lower with the 0.45 learning rate; it overfits in longer runs: in 120 minutes without dropout validation perplexity rose from
10.3 at update 3,000 to 30 and in-domain test BLEU fell by ~1.8). Hence the long-budget rule: a run whose budget
lets it pass over its training data at least ``long_budget_epochs`` (12) times trains with dropout
``long_budget_dropout`` (0.1) unless ``--dropout`` is given (`budget_dropout`). The rule counts epochs, not
minutes, so that it means the same on a fast machine and a slow one: 25 minutes are 8-9 epochs on the fast
machine (no dropout level or ahead on unseen books) and 60 minutes 16-19 there; in-domain, about 12 epochs with
dropout scored 24.46 / 46.51 on test against 22.13 / 44.78 without; a slow fp32 machine makes only 3-4 epochs in
60 minutes, where dropout 0.1 scored lower at equal updates (docs/quality.md "Slower machines"). The recipe
values (``max_tokens``, ``warmup_steps``, ``lr_scale``, ``clip_norm``, ``average_last``, ``average_every``,
``cooldown``, the long-budget rule) are the defaults `vanilla-transformer train` uses for the preset unless overridden on
the command line.
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
    training data (``epochs``: `training.recipe.expected_epochs`; ``small``: 0.1 from 12 epochs on, because
    without dropout it overfits; docs/quality.md "Longer budgets"); else None (keep the preset's dropout)."""
    if dropout is not None:
        return dropout
    rule = long_budget_rule(preset)
    if rule is not None and epochs is not None and epochs >= rule[0]:
        return rule[1]
    return None


def build_config(preset: str, vocab_size: int, **overrides) -> VanillaTransformerConfig:
    """A `VanillaTransformerConfig` for ``preset`` with the tokenizer's ``vocab_size``; ``overrides`` that are
    not None replace preset fields (e.g. ``dropout=0.0``)."""
    _check(preset)
    values = dict(PRESETS[preset]["model"])
    values.update({k: v for k, v in overrides.items() if v is not None})
    return VanillaTransformerConfig(vocab_size=vocab_size, **values)


def build_family_config(objective: str, preset: str, vocab_size: int, **overrides):
    """The model configuration an ``objective`` trains, from ``preset``: the encoder-decoder
    (`build_config`) for translation and span corruption; for ``causal_lm`` a `VanillaDecoderOnlyConfig` with the
    preset's decoder (width, depth, heads, d_ff), and for ``masked_lm`` a `VanillaEncoderOnlyConfig` with its
    encoder; both keep the preset's dropout, positions and initialisation. ``overrides`` as in `build_config`."""
    if objective in ("translation", "span_corruption"):
        return build_config(preset, vocab_size, **overrides)
    _check(preset)
    values = {**PRESETS[preset]["model"], **{k: v for k, v in overrides.items() if v is not None}}
    if objective == "causal_lm":
        from vanilla_transformer.modeling import VanillaDecoderOnlyConfig

        other, config_class = "encoder", VanillaDecoderOnlyConfig
    elif objective == "masked_lm":
        from vanilla_transformer.modeling import VanillaEncoderOnlyConfig

        other, config_class = "decoder", VanillaEncoderOnlyConfig
    else:
        raise ValueError(
            f"Unknown objective {objective!r}; choose translation, causal_lm, masked_lm or span_corruption."
        )
    values = {k: v for k, v in values.items() if not k.startswith(other + "_")}
    return config_class(vocab_size=vocab_size, **values)


def _check(preset: str) -> None:
    if preset not in PRESETS:
        raise ValueError(f"Unknown preset {preset!r}; choose one of {list(PRESETS)} (--preset).")
