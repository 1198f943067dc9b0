"""The model card a training run writes: a Hub card that `huggingface_hub.ModelCard.load` parses, with metadata
(language codes, license, datasets, metrics, a model-index with the run's test figures) and prose taken from
what the run did, for a corpus that is not the shipped Bible corpus as well as for the shipped one."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.synthetic_run import train_synthetic_run
from huggingface_hub import ModelCard, ModelCardData

from vanilla_transformer.corpus import DEFAULT_DATA
from vanilla_transformer.export import (
    CardValues,
    build_model_card,
    card_values,
    language_codes,
    model_card_data,
    model_card_for_repo,
)
from vanilla_transformer.training import TrainConfig, TrainResult
from vanilla_transformer.training.objectives import objective_for
from vanilla_transformer.training.recipe import resolve_recipe

BIBLE_WORDING = ("bible", "verse", "public domain", "world english", "union version", "elberfelder", "我爱")
PLACEHOLDERS = (
    "PATH_OR_REPO",
    "github.com",
    "{{",
    "}}",
    "More Information Needed",
    "source_lang",
    "target_lang",
)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[TrainConfig, TrainResult]:
    return train_synthetic_run(tmp_path_factory.mktemp("card-run"))


def test_card_of_a_run_on_a_non_bible_corpus(run):
    cfg, result = run
    folder = Path(result.output_dir)
    text = (folder / "README.md").read_text(encoding="utf-8")
    data = ModelCard.load(folder / "README.md").data
    assert isinstance(data, ModelCardData)
    assert data.language == ["fr", "en"] and data.license == "apache-2.0" and data.datasets == ["toy.fr-en"]
    assert data.library_name == "transformers" and data.pipeline_tag == "translation"
    assert data.metrics == ["bleu", "chrf"] and data.tags is not None and "custom_code" in data.tags

    # model-index: the figures training wrote to eval_results.json and the decoding of generation_config.json
    saved = json.loads((folder / "eval_results.json").read_text(encoding="utf-8"))
    generation = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    results = {r.metric_type: r for r in data.eval_results}
    assert set(results) == {"bleu", "chrf"}
    for metric in ("bleu", "chrf"):
        r = results[metric]
        assert r.metric_value == saved[metric] == result.test_metrics[metric]
        assert r.metric_config == saved[f"{metric}_signature"] and r.metric_config.startswith("nrefs:1|")
        assert r.metric_args == {
            "num_beams": generation["num_beams"],
            "length_penalty": generation["length_penalty"],
        }
        assert (r.task_type, r.dataset_type, r.dataset_split) == ("translation", "toy.fr-en", "test")
    assert data.model_name == "out"

    # prose from the run: direction, corpus, sizes, updates, figures, signature, an example from the test split
    lowered = text.lower()
    assert not [w for w in BIBLE_WORDING if w in lowered], text
    assert not [p for p in PLACEHOLDERS if p in text], text
    assert "fr → en" in text and "`toy.fr-en`" in text
    assert f"{result.split_sizes['train']:,} training pairs" in text
    assert f"{result.num_parameters:,} parameters" in text and "3 updates" in text and "max_steps=3" in text
    assert f"| test | 8 | {saved['bleu']} | {saved['chrf']} |" in text
    assert f"BLEU `{saved['bleu_signature']}`" in text and f"chrF `{saved['chrf_signature']}`" in text
    assert f"Beam {generation['num_beams']}, length penalty {generation['length_penalty']}" in text
    assert f'model_id = "{folder}"' in text
    example = re.search(r'tokenizer\(\["(.*)"\], return_tensors="pt"\)', text)[1]
    splits, _ = cfg.load_splits()
    assert example in set(splits["test"]["source"])


def test_card_for_repo_sets_the_repo_id_and_keeps_the_rest(run):
    _, result = run
    text = (Path(result.output_dir) / "README.md").read_text(encoding="utf-8")
    pushed = model_card_for_repo(text, "alice/toy-fr-en")
    assert 'model_id = "alice/toy-fr-en"' in pushed and f'model_id = "{result.output_dir}"' not in pushed
    before, after = ModelCard(text), ModelCard(pushed)
    assert isinstance(before.data, ModelCardData) and isinstance(after.data, ModelCardData)
    assert after.data.model_name == "alice/toy-fr-en"
    assert after.data.eval_results == before.data.eval_results
    assert after.text.replace("alice/toy-fr-en", str(result.output_dir)) == before.text
    assert model_card_for_repo(pushed, "alice/toy-fr-en") == pushed  # a second push changes nothing
    other = "---\nlicense: 'mit'  # chosen by hand\n---\n# someone's own card\n"  # kept byte for byte
    assert model_card_for_repo(other, "alice/x") == other


def fake_result(**overrides) -> TrainResult:
    values: dict[str, Any] = dict(
        step=40, epochs=0.5, target_tokens=12_000, train_seconds=90.0, num_parameters=1234
    )
    values.update(
        device="cpu",
        stopped_because="max_steps=40",
        data_summary="corpus: 100 pairs from 100 lines",
        split_sizes={"train": 80, "validation": 10, "test": 10},
        test_metrics={
            "bleu": 12.34,
            "chrf": 40.5,
            "bleu_signature": "nrefs:1|tok:13a",
            "chrf_signature": "nrefs:1|nc:6",
            "num_sentences": 10,
            "num_beams": 4,
            "length_penalty": 0.6,
        },
        samples=[{"source": "Guten Morgen", "reference": "Good morning", "hypothesis": "Good morning"}],
    )
    values.update(overrides)
    return TrainResult(**values)


def card_of(cfg: TrainConfig, result: TrainResult) -> ModelCard:
    recipe = resolve_recipe(cfg)
    return ModelCard(
        str(
            build_model_card(
                card_values(cfg, recipe, recipe.model_config(100), result, objective_for(cfg).card())
            )
        )
    )


def test_card_of_the_shipped_corpus_says_what_it_is():
    card = card_of(
        TrainConfig(data=str(DEFAULT_DATA.parent / "bible.de-en.tsv.xz"), output_dir="out/de-en"),
        fake_result(),
    )
    assert isinstance(card.data, ModelCardData)
    assert card.data.language == ["de", "en"] and card.data.datasets == ["bible.de-en"]
    assert "Elberfelder Bible" in card.text and "Bible verses" in card.text and "public domain" in card.text
    assert 'tokenizer(["Guten Morgen"]' in card.text and 'model_id = "out/de-en"' in card.text
    assert {r.metric_type: r.metric_value for r in card.data.eval_results} == {"bleu": 12.34, "chrf": 40.5}
    # the small preset's architecture, the paper's LayerNorm placement
    assert "3+3 layers, post-LN" in card.text
    pre_ln = card_of(TrainConfig(normalize_before=True, decoder_layers=1, output_dir="out/p"), fake_result())
    assert "3+1 layers, pre-LN" in pre_ln.text


def test_unknown_languages_are_left_out_and_hub_datasets_named(tmp_path):
    corpus = tmp_path / "pairs.tsv"  # the file name states no language pair
    corpus.write_text("a\tb\n", encoding="utf-8")
    card = card_of(
        TrainConfig(data=str(corpus), output_dir=str(tmp_path / "m")), fake_result(test_metrics=None)
    )
    assert isinstance(card.data, ModelCardData)
    assert card.data.language is None and "language:" not in str(card)
    assert "source" not in str(card.data.to_dict()) and "target" not in str(card.data.to_dict())
    assert card.data.datasets == ["pairs"] and card.data.eval_results is None
    assert "No test split was evaluated." in card.text and "for translation on `pairs`" in card.text

    hub = TrainConfig(
        data="wmt/wmt14", hub_config="de-en", source_lang="de", target_lang="en", output_dir="m"
    )
    card = card_of(hub, fake_result())
    assert isinstance(card.data, ModelCardData)
    assert card.data.datasets == ["wmt/wmt14"] and card.data.language == ["de", "en"]
    assert {r.dataset_config for r in card.data.eval_results} == {"de-en"}
    assert "The Hub dataset `wmt/wmt14`, configuration `de-en`." in card.text

    assert language_codes("fr", "fr", None, "source", "English", "deu") == ["fr", "deu"]


def test_template_variables_are_checked(tmp_path):
    values = CardValues(model_card_data(model_name="m", languages=("fr", "en"), dataset="d"), {"title": "T"})
    template = tmp_path / "card.md"
    template.write_text(
        "---\n{{ card_data }}\n---\n# {{ title }} ({{ license }}, {{ language | join('/') }})\n"
    )
    card = build_model_card(values, template)
    assert isinstance(card.data, ModelCardData)
    assert card.text.strip() == "# T (apache-2.0, fr/en)" and card.data.license == "apache-2.0"
    template.write_text("# {{ title }} {{ typo }} {{ another }}\n")
    with pytest.raises(ValueError, match=r"variable\(s\) \['another', 'typo'\] that have no value"):
        build_model_card(values, template)


def test_the_card_states_the_input_limit_of_the_models_positions():
    """Table positions truncate at max_position_embeddings; rotary positions (`position_limit` None) do not."""
    cfg = TrainConfig(output_dir="out/p")
    recipe = resolve_recipe(cfg)
    texts = {}
    for encoding in ("sinusoidal", "rope"):
        config = recipe.model_config(100)
        config.position_encoding = encoding
        values = card_values(cfg, recipe, config, fake_result(), objective_for(cfg).card())
        texts[encoding] = str(build_model_card(values))
    limit = recipe.model_config(100).max_position_embeddings
    assert f"longer than {limit:,} tokens" in texts["sinusoidal"] and "truncated" in texts["sinusoidal"]
    assert "truncated" not in texts["rope"] and "no input length limit" in texts["rope"]
