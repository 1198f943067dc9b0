"""Model cards: every README.md this project writes, built with `huggingface_hub`'s `ModelCard`, `ModelCardData`
and `EvalResult`. One module, because a card is one document: its metadata, its usage text and the language and
license rules are shared by every card, and what a trained model's card says comes from its run alone.

Three cards are written:

* the card of a trained model (`build_model_card` of `card_values`): metadata from `model_card_data` (language
  codes, license, datasets, metrics, and a ``model-index`` with the test BLEU/chrF, their sacreBLEU signatures and
  the decoding settings), text from the Jinja template ``model_card.md`` at the top of the repository (or
  ``--model_card``), filled with the sections `card_values` writes from what the run did — the options, the
  recipe, the model config, the run's result and its objective's `ObjectiveCard` — and nothing else;
* the card of an exported folder pushed without one (`hub_model_card`), from its config.json;
* the README of a folder exported for another engine (`engine_folder_card`): what the exporter says about its
  files, how to serve it, and the source card's languages.

Languages are the data's (``--source_lang``/``--target_lang`` or the file name) and are left out when unknown; the
dataset is the Hub dataset's id or the name of the corpus file or folder; the corpus is described in words only for
the corpora shipped in ``data/`` (the Bible), anything else only by its name and figures. A model that does not
translate reports the test perplexity instead of BLEU and shows the usage of its family.

The first two show how to load the model with ``model_id = "..."``: the folder a card was written for, rewritten to
the repo id when the folder is pushed (`model_card_for_repo`).

Cards are read back here too: `load_card` reads the card of a local folder, or of a Hub repo (downloaded with
`huggingface_hub`, or from its cache); a model without a card, or a Hub that cannot be reached, gives no card
(logged), never an error. `card_languages` is its ``language`` metadata (the server's pairs, /info, the sentence
rules of `translate --split_sentences`), `card_examples` the source sentences its usage section translates (the
demo page's examples).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import datasets
import jinja2
import jinja2.meta
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from vanilla_transformer.corpus import DEFAULT_DATA, FORMATS, GLOB_CHARS, source_kind
from vanilla_transformer.corpus.files import COMPRESSIONS
from vanilla_transformer.modeling import position_limit

# the template: export/model_card.md (in a checkout, a link to the model_card.md at the top)
TEMPLATE_FILE = Path(__file__).parent / "model_card.md"
LICENSE = "apache-2.0"  # vanilla-transformer's license, which the exported code files carry
TAGS = ("translation", "vanilla-transformer", "attention-is-all-you-need", "custom_code")
METRICS = {"bleu": "BLEU", "chrf": "chrF"}  # Hub metric id -> name; the test metrics' keys
logger = logging.getLogger(__name__)

_LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}$")  # ISO 639-1 (two letters) or 639-2/3 (three letters)
_MODEL_ID_LINE = re.compile(r'^model_id = ".*"$', re.MULTILINE)
# the commands of vanilla_transformer.serving, run in (a copy of) the model folder
SERVE_AND_DEMO = """To serve the model over HTTP (dynamic batching, streaming) or try it in a demo page, run in this
folder or a download of it (`pip install 'vanilla-transformer[serve,demo]'`):

```bash
vanilla-transformer serve --model . --port 8000   # POST /translate, /translate/stream; GET /health, /info
vanilla-transformer demo --model .                # a page at http://127.0.0.1:7860
```"""

# the Hub's library_name of a folder exported for an engine (`inference.engines.ENGINES`)
ENGINE_LIBRARIES = {"ct2": "ctranslate2", "onnx": "transformers.js"}

_BIBLE_LIMITATION = (
    "- Trained only on Bible verses (archaic, religious register; World English Bible on the English side). "
    "Expect poor output on modern, technical or conversational text, and on names it has not seen."
)
# file name in data/ -> (description, limitation); provenance in data/README.md
SHIPPED_CORPORA = {
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


@dataclass
class CardValues:
    """What a trained model's card is built from: its metadata and the template's variables (Markdown)."""

    data: ModelCardData
    text: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ObjectiveCard:
    """What a trained model's card says about its training objective (each objective of `training.objectives`
    writes its own): ``training`` the objective in words; for an objective that does not translate, ``model`` what
    the model is, its Hub ``pipeline_tag`` and the ``auto_class`` that loads it."""

    name: str
    training: str
    model: str = ""
    pipeline_tag: str = "translation"
    auto_class: str = "AutoModelForSeq2SeqLM"
    translates: bool = True


def language_codes(*languages: str | None) -> list[str]:
    """The ISO 639 codes among ``languages`` in order, without duplicates; anything else (None, a name) is left
    out, so that the card never states a language it does not know."""
    codes: list[str] = []
    for language in languages:
        if language and _LANGUAGE_CODE.match(language) and language not in codes:
            codes.append(language)
    return codes


def model_card_data(
    *,
    model_name: str,
    languages: tuple[str | None, str | None],
    dataset: str | None,
    dataset_config: str | None = None,
    test_metrics: Mapping | None = None,
    license: str = LICENSE,
) -> ModelCardData:
    """The card's metadata. ``dataset`` is a Hub dataset id or the name of the corpus (None: unnamed, left out of
    ``datasets``). ``test_metrics`` (as `inference.evaluate_translation` returns them, with ``num_beams`` and
    ``length_penalty``) become the ``model-index``: one result per metric on the test split, with the sacreBLEU
    signature as the metric's ``config`` and the decoding settings as its ``args``."""
    results = []
    if test_metrics:
        decoding = {
            name: test_metrics[name] for name in ("num_beams", "length_penalty") if name in test_metrics
        }
        results = [
            EvalResult(
                task_type="translation",
                task_name="Translation",
                dataset_type=dataset or "unnamed",
                dataset_name=dataset or "unnamed dataset",
                dataset_config=dataset_config,
                dataset_split="test",
                metric_type=metric,
                metric_name=name,
                metric_value=test_metrics[metric],
                metric_config=test_metrics.get(f"{metric}_signature"),
                metric_args=decoding or None,
            )
            for metric, name in METRICS.items()
        ]
    return ModelCardData(
        model_name=model_name,
        language=language_codes(*languages) or None,
        license=license,
        library_name="transformers",
        pipeline_tag="translation",
        tags=list(TAGS),
        datasets=[dataset] if dataset else None,
        metrics=list(METRICS) if results else None,
        eval_results=results or None,
    )


def usage_section(model_id: str, example: str | None = None, auto_class: str | None = None) -> str:
    """How to load the model (remote code) and translate with it, ``example`` being a source sentence to show, and
    how to serve it and open its demo page (`SERVE_AND_DEMO`); or, with ``auto_class`` (a model that does not
    translate), how to load it with that Auto class."""
    loading = (
        f"model_id = {json.dumps(model_id, ensure_ascii=False)}\n"
        "tokenizer = AutoTokenizer.from_pretrained(model_id, trust_remote_code=True)\n"
        f"model = {auto_class or 'AutoModelForSeq2SeqLM'}.from_pretrained(model_id, trust_remote_code=True)\n"
    )
    if auto_class is not None:
        return f"```python\nfrom transformers import {auto_class}, AutoTokenizer\n\n{loading}```"
    text = json.dumps(example, ensure_ascii=False) if example else None
    pipe = 'translator = pipeline("translation", model=model_id, trust_remote_code=True)\n'
    translate = (
        f'batch = tokenizer([{text}], return_tensors="pt")\n'
        "print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))\n\n"
        f"{pipe}print(translator({text}))\n"
        if text
        else pipe
    )
    return (
        f"```python\nfrom transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline\n\n{loading}{translate}```"
        f"\n\n{SERVE_AND_DEMO}"
    )


# the trained model's card: its sections, written from the run


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


def _schedule_text(recipe) -> str:
    """The learning-rate schedule of ``recipe`` (`training.schedule`) as a formula."""
    schedule = getattr(recipe, "lr_schedule", "paper")
    if schedule == "paper":
        return f"lr = {recipe.lr_scale} * d_model^-0.5 * min(step^-0.5, step * {recipe.warmup_steps}^-1.5)"
    after = "constant" if schedule == "constant" else f"then * sqrt({recipe.warmup_steps} / step)"
    return f"lr {recipe.learning_rate} after a linear warm-up of {recipe.warmup_steps} updates, {after}"


def _recipe_text(cfg, recipe, c, result, objective: ObjectiveCard) -> str:
    text = (
        f"Objective: {objective.training}"
        + (
            f", starting from the weights of `{Path(cfg.init_from).name}` (new optimizer and schedule)"
            if cfg.init_from
            else ""
        )
        + f". Preset `{cfg.preset}`: d_model {c.d_model}, {_architecture(c)}, dropout {c.dropout}, vocabulary "
        f"{c.vocab_size} ({'its own tokenizer' if cfg.init_from else 'joint BPE'}), {result.num_parameters:,} "
        f"parameters. Adam (0.9, 0.98, 1e-9), {_schedule_text(recipe)}, label smoothing {cfg.label_smoothing}, "
        + (
            f"LoRA rank {cfg.lora} adapters on the {'attention and feed-forward' if cfg.lora_ffn else 'attention'} "
            "projections (the rest frozen), merged into the weights, "
            if getattr(cfg, "lora", None)
            else ""
        )
        + (
            f"{cfg.mix_ratio:.0%} of the training pairs from the general-domain `{Path(str(cfg.mix_data)).name}`, "
            if getattr(cfg, "mix_data", None)
            else ""
        )
        + (
            f"training targets translated by the teacher `{Path(str(cfg.distill_from)).name}` (sequence-level "
            "distillation), "
            if getattr(cfg, "distill_from", None)
            else ""
        )
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
        f"{m['chrf']} |\n\nBeam {m['num_beams']}, length penalty {m['length_penalty']}. The exported "
        "`generation_config.json` uses the same settings.\n\n"
        f"sacreBLEU signatures: BLEU `{m['bleu_signature']}`, chrF `{m['chrf_signature']}`."
    )
    domains = getattr(result, "domain_bleu", None)
    if domains:
        rows = "".join(
            f"| {'yours (the test split)' if name == 'yours' else name} | {before} | {domains['after'].get(name, '')} |\n"
            for name, before in domains["before"].items()
        )
        text += (
            "\n\nFine-tuning: BLEU on the held-out pairs, before (the starting model) and after, same decoding.\n\n"
            "| held-out pairs | BLEU before | BLEU after |\n|---|---|---|\n" + rows.rstrip("\n")
        )
    if result.samples:
        text += "\n\nSample translations:\n\n" + "\n".join(
            f"- {s['source']} → {s['hypothesis']}"
            + (f" (reference: {s['reference']})" if s["reference"] else "")
            for s in result.samples
        )
    return text


def _limitations_text(cfg, config, result, dataset: str | None) -> str:
    shipped = _shipped(cfg)
    limit = position_limit(config)
    lines = [
        shipped[1]
        if shipped
        else f"- Trained only on {_named(dataset)} ({result.split_sizes.get('train', 0):,} training pairs): expect poor output "
        "on text unlike it.",
        f"- A model trained from scratch for {result.step:,} updates: outputs can be fluent but wrong, repeat "
        "phrases or omit content. Check the evaluation above before relying on any output.",
        f"- Inputs longer than {limit:,} tokens (the model's `max_position_embeddings`) are truncated."
        if limit is not None
        else "- Rotary positions set no input length limit; quality on inputs much longer than the training "
        "sentences is untested.",
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
        data.tags = [data.pipeline_tag if tag == TAGS[0] else tag for tag in data.tags or []]
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
            "limitations": _limitations_text(cfg, config, result, dataset),
        },
    )


def load_template(path: str | Path | None = None) -> str:
    """The Jinja template at ``path`` (default: the repository's ``model_card.md``)."""
    return Path(path or TEMPLATE_FILE).read_text(encoding="utf-8")


def build_model_card(values: CardValues, template: str | Path | None = None) -> ModelCard:
    """The card rendered from the template at ``template`` (default ``model_card.md``) with
    `ModelCard.from_template`: ``{{ card_data }}`` is the YAML metadata, the other variables come from
    ``values.text`` and the metadata fields.

    Raises:
        ValueError: the template uses variables that have no value (all are named).
    """
    source = load_template(template)
    known = {"card_data", *values.text, *values.data.to_dict()}
    unknown = sorted(jinja2.meta.find_undeclared_variables(jinja2.Environment().parse(source)) - known)
    if unknown:
        raise ValueError(
            f"model card template {str(template or TEMPLATE_FILE)!r} uses variable(s) {unknown} that have no "
            f"value; available: {sorted(known)}. Fix the template."
        )
    return ModelCard.from_template(values.data, template_str=source, **values.text)


# the cards of exported folders


def model_card_for_repo(text: str, repo_id: str) -> str:
    """The card ``text`` of an exported folder, pushed as ``repo_id``: its ``model_id = "..."`` usage line and
    the ``model-index`` name become ``repo_id``. A card without that usage line (not written here) is returned
    unchanged."""
    if not _MODEL_ID_LINE.search(text):
        return text
    card = ModelCard(_MODEL_ID_LINE.sub(lambda _: f"model_id = {json.dumps(repo_id)}", text, count=1))
    if card.data.get("eval_results"):
        card.data["model_name"] = repo_id
    return str(card)


def hub_model_card(config: Mapping, repo_id: str, generation_config: Mapping | None = None) -> str:
    """A README.md for an exported folder pushed as `repo_id` without a card, from its config.json and
    generation_config.json (as dicts): metadata, the architecture's sizes, the default decoding and the usage."""
    generation_config = generation_config or {}

    def value(name: str) -> str:
        return str(config.get(name, "not set"))

    decoding = ", ".join(
        f"{name}={generation_config[name]}"
        for name in ("num_beams", "length_penalty", "max_new_tokens")
        if name in generation_config
    )
    data = ModelCardData(library_name="transformers", pipeline_tag="translation", tags=list(TAGS))
    body = f"""
# {repo_id}

An encoder-decoder Transformer as in "Attention Is All You Need" (Vaswani et al., 2017), implemented from
scratch as Hugging Face remote code (`{value("model_type")}`).

| field | value |
|---|---|
| d_model | {value("d_model")} |
| encoder / decoder layers | {value("encoder_layers")} / {value("decoder_layers")} |
| attention heads (encoder / decoder) | {value("encoder_attention_heads")} / {value("decoder_attention_heads")} |
| feed-forward size (encoder / decoder) | {value("encoder_ffn_dim")} / {value("decoder_ffn_dim")} |
| vocabulary | {value("vocab_size")} |
| maximum positions | {value("max_position_embeddings")} |
| default decoding | {decoding or "see generation_config.json"} |

`length_penalty` follows transformers: a finished hypothesis scores sum(log p) / length ** length_penalty.

## How to use

{usage_section(repo_id)}
"""
    return str(ModelCard(f"---\n{data.to_yaml()}\n---\n{body}"))


def card_language_codes(folder: str | Path | None) -> list[str]:
    """The ISO 639 codes of the ``language`` metadata of the model card (README.md) in ``folder``; empty when
    ``folder`` is None or empty (a model that was not loaded from a folder) or has no card or no language."""
    card = Path(folder) / "README.md" if folder else None
    if card is None or not card.is_file():
        return []
    language = ModelCard.load(card).data.get("language")
    return language_codes(*([language] if isinstance(language, str) else language or []))


def engine_folder_card(body: str, engine: str, source: str | Path | None = None) -> str:
    """The README.md of a folder exported for ``engine`` ("ct2" or "onnx"): metadata (the source model folder's
    card languages, `card_language_codes` of ``source``, which the server's GET /info reports; the engine's
    library), then ``body`` (the exporter's account of the files and how to run them), then how to serve the
    folder over HTTP and where the demo page runs."""
    data = ModelCardData(
        language=card_language_codes(source) or None,
        library_name=ENGINE_LIBRARIES[engine],
        pipeline_tag="translation",
        tags=["translation", "vanilla-transformer", engine],
    )
    serve = f"""## Serve it

With this project installed (`pip install 'vanilla-transformer[serve]'`), in this folder or a download of it:

```bash
vanilla-transformer serve --model . --engine {engine} --port 8000   # POST /translate, /translate/stream; GET /health, /info
```

The demo page (`vanilla-transformer demo --model MODEL`) runs the PyTorch model, whose cross-attention it draws:
pass it the model folder this folder was exported from, not this folder.
"""
    return f"---\n{data.to_yaml()}\n---\n\n{body.rstrip()}\n\n{serve}"


# ---- reading a card ------------------------------------------------------------------------------------------
_CARD_EXAMPLE = re.compile(r'^print\(translator\(("(?:[^"\\]|\\.)*")\)\)$', re.MULTILINE)


def load_card(model: str | Path) -> Any | None:
    """The `huggingface_hub.ModelCard` of the folder or Hub id ``model``; None when it has none or it cannot be
    read (the reason is logged)."""
    from huggingface_hub import ModelCard
    from huggingface_hub.errors import EntryNotFoundError

    folder = Path(model)
    if folder.is_dir():
        card = folder / "README.md"
        return ModelCard.load(card) if card.is_file() else None
    try:
        return ModelCard.load(str(model))
    except EntryNotFoundError:
        return None
    except Exception as err:  # noqa: BLE001 - unreachable, offline, not a repo: the card is optional
        logger.warning(
            "no model card for %s (%s: %s); set HF_ENDPOINT / HF_HUB_OFFLINE or pass a local folder to read it",
            model,
            type(err).__name__,
            str(err).splitlines()[0] if str(err) else "no details",
        )
        return None


def card_languages(model: str | Path) -> list[str]:
    """The ``language`` list of the model card of the folder or Hub id ``model``; empty when there is none."""
    card = load_card(model)
    language = card.data.language if card is not None else None
    return [language] if isinstance(language, str) else list(language or [])


def card_examples(model: str | Path) -> list[str]:
    """The source sentences the model card of the folder or Hub id ``model`` translates in its usage section
    (`export.model_card.usage_section`); empty when there is no card or no example."""
    card = load_card(model)
    return [] if card is None else [json.loads(found) for found in _CARD_EXAMPLE.findall(card.text)]
