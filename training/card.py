"""The values a trained model's card (the ``model_card.md`` template, `export.model_card`) is filled with: what
the run did, in words and figures, from the options, the recipe, the model config and the run's result."""

from __future__ import annotations

from pathlib import Path

from modeling import VanillaTransformerConfig

from .options import TrainConfig
from .recipe import Recipe


def _recipe_text(cfg: TrainConfig, recipe: Recipe, c: VanillaTransformerConfig, result) -> str:
    text = (
        f"Preset `{cfg.preset}`: d_model {c.d_model}, {c.encoder_attention_heads} heads, d_ff {c.encoder_ffn_dim}, "
        f"{c.encoder_layers}+{c.decoder_layers} layers, dropout {c.dropout}, vocabulary {c.vocab_size} (joint BPE), "
        f"{result.num_parameters:,} parameters. Adam (0.9, 0.98, 1e-9), lr = {recipe.lr_scale} * d_model^-0.5 * "
        f"min(step^-0.5, step * {recipe.warmup_steps}^-1.5), label smoothing {cfg.label_smoothing}, gradient "
        f"clipping {recipe.clip_norm or 'off'}, "
        + (f"linear learning-rate cooldown to 0 over the last {recipe.cooldown:.0%} of the budget, "
           if recipe.cooldown else "")
        + f"token budget {recipe.max_tokens} x {cfg.grad_accum} accumulation x {result.num_processes} process(es), "
        f"{result.step} updates ({result.epochs:.2f} epochs), {result.target_tokens:,} target tokens, "
        f"{result.train_seconds / 60:.1f} min on {result.device}, seed {cfg.seed}."
    )  # fmt: skip
    avg = result.averaging
    if avg:
        steps = ", ".join(map(str, avg["steps"]))
        text += (
            f" Checkpoint averaging: the exported weights are the average of the weights at updates {steps}"
            if avg["kept"] else
            f" Checkpoint averaging of updates {steps} did not lower the validation loss; the exported weights are "
            "the final ones"
        ) + (
            f" (validation perplexity {avg['valid_ppl_final']:.2f} final, {avg['valid_ppl_averaged']:.2f} averaged)."
            if avg["valid_ppl_final"] is not None else "."
        )  # fmt: skip
    return text


def _metrics_text(result) -> str:
    m = result.test_metrics
    if not m:
        return "No test split was evaluated."
    text = (
        f"| split | sentences | BLEU | chrF |\n|---|---|---|---|\n| test | {m['num_sentences']} | {m['bleu']} | "
        f"{m['chrf']} |\n\nBeam {m['num_beams']}, length penalty {m['length_penalty']}"
    )
    if result.length_penalty_search:
        tried = ", ".join(
            f"{r['length_penalty']} (BLEU {r['bleu']}, chrF {r['chrf']})" for r in result.length_penalty_search
        )
        text += f", chosen on the validation split among {tried}"
    return text + ". The exported `generation_config.json` uses the same settings."


def card_values(cfg: TrainConfig, recipe: Recipe, config: VanillaTransformerConfig, result) -> dict:
    """Every placeholder of the model-card template, from a finished run (``result``: a `TrainResult`)."""
    src, tgt = cfg.languages()
    m = result.test_metrics or {}
    best = result.best_valid_loss
    return {
        "model_name": Path(cfg.output_dir).name,
        "source_lang": src or "source",
        "target_lang": tgt or "target",
        "data": result.data_summary,
        "recipe": _recipe_text(cfg, recipe, config, result),
        "metrics": _metrics_text(result),
        "bleu": m.get("bleu", "n/a"),
        "chrf": m.get("chrf", "n/a"),
        "bleu_signature": m.get("bleu_signature", "n/a"),
        "chrf_signature": m.get("chrf_signature", "n/a"),
        "preset": cfg.preset,
        "num_parameters": f"{result.num_parameters:,}",
        "steps": result.step,
        "train_minutes": f"{result.train_seconds / 60:.1f}",
        "valid_loss": f"{best:.3f}" if best is not None else "n/a",
        "train_pairs": result.split_sizes.get("train", 0),
        "valid_pairs": result.split_sizes.get("validation", 0),
        "test_pairs": result.split_sizes.get("test", 0),
        "data_file": Path(cfg.data).name,
        "samples": "\n".join(
            f"- {s['source']} → {s['hypothesis']}" + (f" (reference: {s['reference']})" if s["reference"] else "")
            for s in result.samples
        ) or "n/a",
    }  # fmt: skip
