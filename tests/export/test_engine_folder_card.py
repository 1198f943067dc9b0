"""The README of a folder exported for CTranslate2 or ONNX Runtime: Hub metadata that `huggingface_hub.ModelCard`
parses, with the source model card's languages (which the server's GET /info reports for the exported folder),
and the commands that serve the folder."""

from __future__ import annotations

import shutil

import pytest
from conftest import tiny_model, tiny_tokenizer
from huggingface_hub import ModelCard, ModelCardData

SOURCE_CARD = "---\nlanguage:\n- zh\n- en\nlicense: apache-2.0\n---\n\n# A tiny model\n"


@pytest.mark.parametrize("engine", ["ct2", "onnx"])
def test_exported_readme_keeps_languages_and_says_how_to_serve(engine, export, tmp_path):
    pytest.importorskip("ctranslate2" if engine == "ct2" else "onnxscript")
    from vanilla_transformer.export import exporter

    source = tmp_path / "model"
    shutil.copytree(export, source)
    (source / "README.md").write_text(SOURCE_CARD, encoding="utf-8")
    out = exporter(engine)(source, tmp_path / engine)
    card = ModelCard.load(out / "README.md")
    assert isinstance(card.data, ModelCardData)
    assert card.data.language == ["zh", "en"]
    assert card.data.library_name == {"ct2": "ctranslate2", "onnx": "transformers.js"}[engine]
    assert card.data.pipeline_tag == "translation"
    assert f"vanilla-transformer serve --model . --engine {engine}" in card.text
    assert "vanilla-transformer demo --model MODEL" in card.text and "not this folder" in card.text
    assert f"translate --engine {engine}" in card.text  # the exporter's own part is kept


def test_exported_readme_without_a_source_card_states_no_language(tmp_path):
    pytest.importorskip("ctranslate2")
    from vanilla_transformer.export import export_ct2

    tokenizer = tiny_tokenizer()
    out = export_ct2(tiny_model(vocab_size=len(tokenizer)), tmp_path / "ct2", tokenizer=tokenizer)
    card = ModelCard.load(out / "README.md")
    assert isinstance(card.data, ModelCardData)
    assert card.data.language is None and "language" not in card.data.to_dict()
    assert "vanilla-transformer serve --model . --engine ct2" in card.text
