"""POST /translate with "alignments": true: the Pharaoh alignment of each translation, as `inference.alignment`
computes it in process, and the flag explained in the OpenAPI schema."""

from __future__ import annotations

import httpx
import pytest
from helpers.serving import post

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

TEXTS = ["起初神创造天地。", "", "地是空虚混沌"]


def test_alignments_of_each_translation_equal_the_in_process_ones(tiny_server, served_folder):
    from vanilla_transformer.inference import load_model_and_tokenizer
    from vanilla_transformer.inference.alignment import align_pairs, pharaoh

    reply = post(tiny_server, "/translate", {"text": TEXTS, "num_beams": 1, "alignments": True})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    model, tokenizer = load_model_and_tokenizer(str(served_folder), dtype="float32")
    expected = align_pairs(model, tokenizer, TEXTS, body["translations"])
    assert body["alignments"] == [pharaoh(links) for links in expected]
    assert body["alignments"][0] and body["alignments"][1] == ""
    without = post(tiny_server, "/translate", {"text": TEXTS, "num_beams": 1}).json()
    assert "alignments" not in without and without["translations"] == body["translations"]


def test_openapi_explains_the_alignments_flag(tiny_server):
    schema = httpx.get(tiny_server + "/openapi.json", timeout=30).json()
    field = schema["components"]["schemas"]["TranslateRequest"]["properties"]["alignments"]
    assert "Pharaoh" in field["description"] and field["default"] is False
