"""Model cards: every README.md this project writes, built with `huggingface_hub`'s `ModelCard`, `ModelCardData`
and `EvalResult`. One module, because a card is one document: its metadata, its usage text and the language and
license rules are shared by every card, and what a trained model's card says comes from its run alone.

Three cards are written:

* the card of a trained model (`build_model_card` of `card_values`): metadata from `model_card_data` (language
  codes, license, datasets, metrics, and a ``model-index`` with the test BLEU/chrF, their sacreBLEU signatures and
  the decoding settings), text from the Jinja template ``model_card.md`` at the top of the repository (or
  ``--model_card``), which words the facts `card_values` gathers from what the run did — the options, the
  recipe, the model config, the run's result and its objective's `ObjectiveCard` — and nothing else: the prose,
  its conditions and its loops are in the template, the Python side computes plain values;
* the card of an exported folder pushed without one (`hub_model_card`), from its config.json;
* the README of a folder exported for another engine (`engine_folder_card`): what the exporter says about its
  files, how to serve it, and the source card's languages.

Languages are the data's (``--source_lang``/``--target_lang`` or the file name) and are left out when unknown; the
dataset is the Hub dataset's id or the name of the corpus file or folder; the corpus is described in words only for
the corpora shipped in ``data/`` (the Bible), anything else only by its name and figures. A model that does not
translate reports the test perplexity instead of BLEU and shows the usage of its family.

The first two show how to load the model with ``model_id = "..."``: the folder a card was written for, rewritten to
the repo id when the folder is pushed (`model_card_for_repo`). Cards are read back by `inference.cards`.
"""

from __future__ import annotations

import dataclasses
import json
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
from vanilla_transformer.inference.cards import card_languages
from vanilla_transformer.modeling import position_limit

# the template: export/model_card.md (in a checkout, a link to the model_card.md at the top)
TEMPLATE_FILE = Path(__file__).parent / "model_card.md"
LICENSE = "apache-2.0"  # vanilla-transformer's license, which the exported code files carry
TAGS = ("translation", "vanilla-transformer", "attention-is-all-you-need", "custom_code")
METRICS = {"bleu": "BLEU", "chrf": "chrF"}  # Hub metric id -> name; the test metrics' keys

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
    """What a trained model's card is built from: its metadata and the template's variables (``context``: plain
    values, the facts of the run that the template words)."""

    data: ModelCardData
    context: dict[str, Any] = field(default_factory=dict)


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


# the trained model's card: the run's facts, which the template words


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


def _shipped(cfg) -> dict[str, str] | None:
    """The description and limitation of the shipped corpus ``cfg.data`` is (`SHIPPED_CORPORA`), else None."""
    if isinstance(cfg.data, (str, PathLike)) and Path(cfg.data).is_file():
        path = Path(cfg.data).resolve()
        if path.parent == DEFAULT_DATA.parent and path.name in SHIPPED_CORPORA:
            description, limitation = SHIPPED_CORPORA[path.name]
            return {"description": description, "limitation": limitation}
    return None


def _data_facts(cfg, result, dataset: str | None) -> dict[str, Any]:
    """What the run trained on: the corpus, its languages and what reading and splitting did."""
    src, tgt = cfg.languages()
    hub = is_hub_dataset(cfg.data)
    return {
        "source_lang": src,
        "target_lang": tgt,
        "dataset": dataset,
        "hub_dataset": hub,
        "hub_config": cfg.hub_config if hub else None,
        "shipped": _shipped(cfg),
        "train_pairs": result.split_sizes.get("train", 0),
        "data_summary": result.data_summary,
    }


def _model_facts(config) -> dict[str, Any]:
    """The model's architecture, for any of the model families (an encoder-decoder states its encoder's heads and
    d_ff; an encoder-only or decoder-only model has None for the stack it lacks)."""
    encoder_layers = getattr(config, "encoder_layers", None)
    decoder_layers = getattr(config, "decoder_layers", None)
    side = "encoder" if encoder_layers is not None else "decoder"
    return {
        "d_model": config.d_model,
        "heads": getattr(config, f"{side}_attention_heads"),
        "ffn_dim": getattr(config, f"{side}_ffn_dim"),
        "encoder_layers": encoder_layers,
        "decoder_layers": decoder_layers,
        "pre_ln": bool(config.normalize_before),
        "dropout": config.dropout,
        "vocab_size": config.vocab_size,
    }


def _recipe_facts(cfg, recipe, result) -> dict[str, Any]:
    """How the run trained: the options and recipe the card states, and the budget it spent."""
    precision_automatic = result.precision.get("source") == "automatic"
    mix_data = getattr(cfg, "mix_data", None)
    distill_from = getattr(cfg, "distill_from", None)
    return {
        "preset": cfg.preset,
        "init_from": Path(cfg.init_from).name if cfg.init_from else None,
        "schedule": {
            "kind": getattr(recipe, "lr_schedule", "paper"),
            "lr_scale": recipe.lr_scale,
            "learning_rate": recipe.learning_rate,
            "warmup_steps": recipe.warmup_steps,
        },
        "label_smoothing": cfg.label_smoothing,
        "lora": getattr(cfg, "lora", None),
        "lora_ffn": getattr(cfg, "lora_ffn", False),
        "mix": {"ratio": cfg.mix_ratio, "name": Path(str(mix_data)).name} if mix_data else None,
        "distill_from": Path(str(distill_from)).name if distill_from else None,
        "bpe_dropout": cfg.bpe_dropout,
        "clip_norm": recipe.clip_norm,
        "cooldown": recipe.cooldown,
        "max_tokens": recipe.max_tokens,
        "grad_accum": cfg.grad_accum,
        "seed": cfg.seed,
        "num_processes": result.num_processes,
        "mixed_precision": result.mixed_precision,
        "precision_reason": result.precision["reason"] if precision_automatic else None,
    }


def _result_facts(result, config) -> dict[str, Any]:
    """What the run did and measured: its size, time and budget, checkpoint averaging, the test figures, the
    held-out BLEU of a fine-tuning, the sample translations and the input length limit."""
    domains = getattr(result, "domain_bleu", None) or {}
    return {
        "parameters": result.num_parameters,
        "updates": result.step,
        "epochs": result.epochs,
        "target_tokens": result.target_tokens,
        "minutes": result.train_seconds / 60,
        "device": result.device,
        "stopped_because": result.stopped_because,
        "averaging": result.averaging,
        "test": result.test_metrics,
        "test_origin": result.split_origin.get("test"),
        "domains": [
            {"name": name, "before": before, "after": domains["after"].get(name, "")}
            for name, before in domains.get("before", {}).items()
        ],
        "samples": result.samples,
        "position_limit": position_limit(config),
    }


def card_values(cfg, recipe, config, result, objective: ObjectiveCard) -> CardValues:
    """The metadata and template variables of the card of a finished run: ``cfg`` its `training.TrainConfig`,
    ``recipe`` its `training.recipe.Recipe`, ``config`` the model's configuration, ``result`` its
    `training.TrainResult`, and what the card says about its objective (``objective``, from
    `training.objectives`). The variables are plain values (the run's facts); ``model_card.md`` words them."""
    dataset = dataset_name(cfg.data)
    data = model_card_data(
        model_name=Path(cfg.output_dir).name,
        languages=cfg.languages(),
        dataset=dataset,
        dataset_config=cfg.hub_config if is_hub_dataset(cfg.data) else None,
        test_metrics=result.test_metrics if objective.translates else None,
    )
    example = result.samples[0]["source"] if result.samples else None
    usage = usage_section(cfg.output_dir, example, objective.auto_class if not objective.translates else None)
    if not objective.translates:
        data.pipeline_tag = objective.pipeline_tag
        data.tags = [data.pipeline_tag if tag == TAGS[0] else tag for tag in data.tags or []]
    context = {
        "objective": dataclasses.asdict(objective),
        "usage": usage,
        **_data_facts(cfg, result, dataset),
        "model": _model_facts(config),
        **_recipe_facts(cfg, recipe, result),
        **_result_facts(result, config),
    }
    return CardValues(data, context)


def _paragraph(text: str) -> str:
    """The template's ``{% filter paragraph %}``: the block's lines joined by one space (a paragraph that wraps in
    the template is one line in the card)."""
    return " ".join(text.strip("\n").split("\n"))


def _environment() -> jinja2.Environment:
    """The Jinja environment cards are rendered in: a line that holds only a tag leaves nothing, a variable that
    has no value is an error, and two filters: ``fmt`` (a number in a Python format spec: ``{{ n | fmt(",") }}``)
    and ``paragraph``."""
    environment = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    environment.filters["fmt"] = format
    environment.filters["paragraph"] = _paragraph
    return environment


def load_template(path: str | Path | None = None) -> str:
    """The Jinja template at ``path`` (default: the repository's ``model_card.md``)."""
    return Path(path or TEMPLATE_FILE).read_text(encoding="utf-8")


def build_model_card(values: CardValues, template: str | Path | None = None) -> ModelCard:
    """The card rendered from the template at ``template`` (default ``model_card.md``) in `_environment`, as
    `ModelCard.from_template` renders: ``{{ card_data }}`` is the YAML metadata, the other variables come from
    ``values.context`` and the metadata fields.

    Raises:
        ValueError: the template uses variables that have no value (all are named), or a field that its variable
            lacks.
    """
    source = load_template(template)
    environment = _environment()
    variables = {**values.data.to_dict(), **values.context}
    known = {"card_data", *variables}
    unknown = sorted(jinja2.meta.find_undeclared_variables(environment.parse(source)) - known)
    name = str(template or TEMPLATE_FILE)
    if unknown:
        raise ValueError(
            f"model card template {name!r} uses variable(s) {unknown} that have no value; available: "
            f"{sorted(known)}. Fix the template."
        )
    try:
        text = environment.from_string(source).render(card_data=values.data.to_yaml(), **variables)
    except jinja2.UndefinedError as err:
        raise ValueError(f"model card template {name!r}: {err}. Fix the template.") from None
    return ModelCard(text)


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
    if not folder or not Path(folder).is_dir():
        return []
    return language_codes(*card_languages(folder))


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
