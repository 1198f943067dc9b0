"""The sections of a trained model's card, written from what the run did: the options, the recipe, the model
config, the run's result and its objective's `ObjectiveCard` (`card_values`), and nothing else. The corpus is
described in words only for the corpora shipped in ``data/``; anything else only by its name and figures."""

from __future__ import annotations

from os import PathLike
from pathlib import Path

import datasets
from vanilla_transformer.corpus import DEFAULT_DATA, FORMATS, GLOB_CHARS, source_kind
from vanilla_transformer.corpus.files import COMPRESSIONS
from vanilla_transformer.export.model_card import (
    LICENSE,
    TAGS,
    CardValues,
    ObjectiveCard,
    model_card_data,
    usage_section,
)

_BIBLE_LIMITATION = (
    "- Trained only on Bible verses (archaic, religious register; World English Bible on the English side). "
    "Expect poor output on modern, technical or conversational text, and on names it has not seen."
)
SHIPPED_CORPORA = {  # file name in data/ -> (description, limitation); provenance in data/README.md
    "bible.zh-en.tsv.xz": (
        "Bible verses shipped with vanilla-transformer: the Chinese Union Version (1919, in Simplified characters) "
        "aligned verse by verse with the World English Bible; both texts are in the public domain.",
        _BIBLE_LIMITATION,
    ),
    "bible.de-en.tsv.xz": (
        "Bible verses shipped with vanilla-transformer: the unrevised Elberfelder Bible aligned verse by verse "
        "with the World English Bible; both texts are in the public domain.",
        _BIBLE_LIMITATION,
    ),
}


def is_hub_dataset(data) -> bool:
    """Whether ``--data`` names a Hub dataset (as the corpus reader decides, `corpus.source_kind`)."""
    return source_kind(data) == "hub"


def dataset_name(data) -> str | None:
    """What the card calls the data: the Hub dataset id; a file's name without its compression and format
    suffixes (``data/bible.zh-en.tsv.xz`` -> ``bible.zh-en``); a folder's name; a glob's last folder without
    wildcards; an in-memory dataset's `datasets` name, else None."""
    if isinstance(data, (datasets.Dataset, datasets.DatasetDict)):
        first = data if isinstance(data, datasets.Dataset) else next(iter(data.values()), None)
        return getattr(getattr(first, "info", None), "dataset_name", None) or None
    if is_hub_dataset(data):
        return data
    path = Path(data)
    while any(c in path.name for c in GLOB_CHARS):
        path = path.parent
    name = path.resolve().name
    if path.is_file():
        for suffixes in (tuple(COMPRESSIONS), tuple(FORMATS)):
            name = next((name[: -len(s)] for s in suffixes if name.lower().endswith(s)), name)
    return name or None


def _shipped(cfg) -> tuple[str, str] | None:
    if isinstance(cfg.data, (str, PathLike)) and Path(cfg.data).is_file():
        path = Path(cfg.data).resolve()
        if path.parent == DEFAULT_DATA.parent:
            return SHIPPED_CORPORA.get(path.name)
    return None


def _direction(cfg) -> str:
    src, tgt = cfg.languages()
    return f"**{src} → {tgt}** translation" if src and tgt else "translation"


def _named(dataset: str | None) -> str:
    return f"`{dataset}`" if dataset else "a dataset given in memory"


def _summary(cfg, result, dataset: str | None, objective: ObjectiveCard) -> str:
    m = result.test_metrics
    if not objective.translates:
        start = (
            f"initialised from `{Path(cfg.init_from).name}` and trained"
            if cfg.init_from
            else "trained from scratch"
        )
        what = objective.model
        text = (
            f"{what[0].upper()}{what[1:]}, implemented from scratch with vanilla-transformer and {start} on "
            f"{_named(dataset)} ({result.split_sizes.get('train', 0):,} training pairs) with {objective.training}: "
            f"preset `{cfg.preset}`, {result.num_parameters:,} parameters, {result.step:,} updates in "
            f"{result.train_seconds / 60:.1f} min on {result.device}."
        )
        if m:
            text += f" Test perplexity {m['perplexity']:.2f} on the {m['num_examples']:,} examples of the test split."
        return text
    text = (
        "An encoder-decoder Transformer as described in *Attention Is All You Need* (Vaswani et al., 2017), "
        "implemented from scratch with vanilla-transformer and "
        + (f"fine-tuned from `{Path(cfg.init_from).name}`" if cfg.init_from else "trained from scratch")
        + f" for {_direction(cfg)} on "
        f"{_named(dataset)} ({result.split_sizes.get('train', 0):,} training pairs): preset `{cfg.preset}`, "
        f"{result.num_parameters:,} parameters, {result.step:,} updates in {result.train_seconds / 60:.1f} min on "
        f"{result.device}."
    )
    if m:
        text += (
            f" Test BLEU {m['bleu']}, chrF {m['chrf']} on the {m['num_sentences']:,} pairs of the test split"
            + (f" ({result.split_origin['test']})." if result.split_origin.get("test") else ".")
        )
    return text


def _data_text(cfg, result, dataset: str | None) -> str:
    shipped = _shipped(cfg)
    if shipped:
        origin = shipped[0]
    elif is_hub_dataset(cfg.data):
        origin = f"The Hub dataset `{dataset}`" + (
            f", configuration `{cfg.hub_config}`." if cfg.hub_config else "."
        )
    else:
        origin = f"The parallel corpus {_named(dataset)}."
    src, tgt = cfg.languages()
    languages = f" Source language `{src}`, target language `{tgt}`." if src and tgt else ""
    return f"{origin}{languages}\n\n{result.data_summary}."


def _architecture(c) -> str:
    """Heads, d_ff, depth and LayerNorm placement of any of the model families."""
    norm = ", pre-LN" if c.normalize_before else ", post-LN"
    if hasattr(c, "encoder_layers") and hasattr(c, "decoder_layers"):
        return (
            f"{c.encoder_attention_heads} heads, d_ff {c.encoder_ffn_dim}, {c.encoder_layers}+{c.decoder_layers} "
            f"layers{norm}"
        )
    side = "decoder" if hasattr(c, "decoder_layers") else "encoder"
    return (
        f"{getattr(c, side + '_attention_heads')} heads, d_ff {getattr(c, side + '_ffn_dim')}, "
        f"{getattr(c, side + '_layers')} {side} layers{norm}"
    )


def _recipe_text(cfg, recipe, c, result, objective: ObjectiveCard) -> str:
    text = (
        f"Objective: {objective.training}"
        + (
            f", starting from the weights of `{Path(cfg.init_from).name}` (new optimizer and schedule)"
            if cfg.init_from
            else ""
        )
        + f". Preset `{cfg.preset}`: d_model {c.d_model}, {_architecture(c)}, dropout {c.dropout}, vocabulary "
        f"{c.vocab_size} (joint BPE), {result.num_parameters:,} parameters. Adam (0.9, 0.98, 1e-9), lr = {recipe.lr_scale} * d_model^-0.5 * "
        f"min(step^-0.5, step * {recipe.warmup_steps}^-1.5), label smoothing {cfg.label_smoothing}, "
        + (
            f"BPE-dropout {cfg.bpe_dropout} (training pairs re-segmented every epoch), "
            if cfg.bpe_dropout
            else ""
        )
        + f"gradient clipping {recipe.clip_norm or 'off'}, "
        + (
            f"linear learning-rate cooldown to 0 over the last {recipe.cooldown:.0%} of the budget, "
            if recipe.cooldown
            else ""
        )
        + f"token budget {recipe.max_tokens} x {cfg.grad_accum} accumulation x {result.num_processes} process(es), "
        f"{result.step} updates ({result.epochs:.2f} epochs), {result.target_tokens:,} target tokens, "
        f"{result.train_seconds / 60:.1f} min on {result.device}"
        + (f" with {result.mixed_precision} mixed precision" if result.mixed_precision != "no" else "")
        + (
            f"{' in fp32' if result.mixed_precision == 'no' else ''} (chosen automatically: "
            f"{result.precision['reason']})"
            if result.precision.get("source") == "automatic"
            else ""
        )
        + f", seed {cfg.seed}."
    )
    if result.stopped_because:
        text += f" The run ended at its budget: {result.stopped_because}."
    avg = result.averaging
    if avg:
        steps = ", ".join(map(str, avg["steps"]))
        text += (
            f" Checkpoint averaging: the exported weights are the average of the weights at updates {steps}"
            if avg["kept"]
            else f" Checkpoint averaging of updates {steps} did not lower the validation loss; the exported weights are "
            "the final ones"
        ) + (
            f" (validation perplexity {avg['valid_ppl_final']:.2f} final, {avg['valid_ppl_averaged']:.2f} averaged)."
            if avg["valid_ppl_final"] is not None
            else "."
        )
    return text


def _results_text(result) -> str:
    m = result.test_metrics
    if not m:
        return "No test split was evaluated."
    if "perplexity" in m:
        return (
            f"| split | examples | loss | perplexity |\n|---|---|---|---|\n| test | {m['num_examples']} | "
            f"{m['nll_loss']:.4f} | {m['perplexity']:.2f} |\n\nNegative log-likelihood per scored token (natural log) "
            "under the training objective, with the same seeded masks or spans at every evaluation. No translation "
            "was scored."
        )
    text = (
        f"| split | sentences | BLEU | chrF |\n|---|---|---|---|\n| test | {m['num_sentences']} | {m['bleu']} | "
        f"{m['chrf']} |\n\nBeam {m['num_beams']}, length penalty {m['length_penalty']}"
    )
    if result.length_penalty_search:
        tried = ", ".join(
            f"{r['length_penalty']} (BLEU {r['bleu']}, chrF {r['chrf']})"
            for r in result.length_penalty_search
        )
        text += f", chosen on the validation split among {tried}"
    text += (
        ". The exported `generation_config.json` uses the same settings.\n\n"
        f"sacreBLEU signatures: BLEU `{m['bleu_signature']}`, chrF `{m['chrf_signature']}`."
    )
    if result.samples:
        text += "\n\nSample translations:\n\n" + "\n".join(
            f"- {s['source']} → {s['hypothesis']}"
            + (f" (reference: {s['reference']})" if s["reference"] else "")
            for s in result.samples
        )
    return text


def _limitations_text(cfg, result, dataset: str | None) -> str:
    shipped = _shipped(cfg)
    lines = [
        shipped[1]
        if shipped
        else f"- Trained only on {_named(dataset)} ({result.split_sizes.get('train', 0):,} training pairs): expect poor output "
        "on text unlike it.",
        f"- A model trained from scratch for {result.step:,} updates: outputs can be fluent but wrong, repeat "
        "phrases or omit content. Check the evaluation above before relying on any output.",
        "- Inputs longer than the model's `max_position_embeddings` tokens are truncated.",
    ]
    if not shipped:
        lines.append(
            f"- The license ({LICENSE}) is vanilla-transformer's; check that the terms of the training data allow "
            "releasing a model trained on it."
        )
    return "\n".join(lines)


def card_values(cfg, recipe, config, result, objective: ObjectiveCard) -> CardValues:
    """The metadata and sections of the card of a finished run: ``cfg`` its `training.TrainConfig`, ``recipe`` its
    `training.recipe.Recipe`, ``config`` the model's configuration, ``result`` its `training.TrainResult`, and
    what the card says about its objective (``objective``, from `training.objectives`)."""
    dataset = dataset_name(cfg.data)
    src, tgt = cfg.languages()
    data = model_card_data(
        model_name=Path(cfg.output_dir).name,
        languages=(src, tgt),
        dataset=dataset,
        dataset_config=cfg.hub_config if is_hub_dataset(cfg.data) else None,
        test_metrics=result.test_metrics if objective.translates else None,
    )
    example = result.samples[0]["source"] if result.samples else None
    title = f"vanilla-transformer {src} → {tgt}" if src and tgt else "vanilla-transformer translation model"
    usage = usage_section(cfg.output_dir, example, objective.auto_class if not objective.translates else None)
    if not objective.translates:
        data.pipeline_tag = objective.pipeline_tag
        data.tags = [data.pipeline_tag if tag == TAGS[0] else tag for tag in data.tags]
        title = f"vanilla-transformer {objective.name.replace('_', ' ')} model"
    return CardValues(
        data,
        {
            "title": f"{title} (preset {cfg.preset})",
            "summary": _summary(cfg, result, dataset, objective),
            "usage": usage,
            "data": _data_text(cfg, result, dataset),
            "training": _recipe_text(cfg, recipe, config, result, objective),
            "results": _results_text(result),
            "limitations": _limitations_text(cfg, result, dataset),
        },
    )
