"""Terminology on the server: a /translate request's ``glossary`` field, the server's own glossary (serve
--glossary) for every API, the refusals, and the OpenAPI text; on the tiny copy model (helpers.copy_task)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from helpers.copy_task import train_copy_model
from helpers.serving import post, served_app, with_card

from vanilla_transformer.inference import translate_nbest
from vanilla_transformer.inference.glossary import Glossary
from vanilla_transformer.modeling import save_with_remote_code

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

SOURCES = ["w5 w6 w7", "w1 w2 w3", "w0 w4"]


@pytest.fixture(scope="module")
def copier(tmp_path_factory) -> tuple[Path, object, object]:
    """(folder with a zh -> en card, model, tokenizer) of the tiny copy model."""
    model, tokenizer = train_copy_model()
    root = tmp_path_factory.mktemp("copier")
    folder = save_with_remote_code(model, root / "model", tokenizer)
    return with_card(folder, root / "carded", ("zh", "en")), model, tokenizer


def test_request_glossary_and_server_glossary(copier):
    """A request's glossary puts its terms into the translations (what `translate_nbest` with that glossary
    gives); the server's glossary applies to every API (DeepL's here), a request's entries go over it, and a stream
    of a text it has terms for is refused."""
    from vanilla_transformer.serving import start_in_thread

    folder, model, tokenizer = copier
    server_glossary = Glossary.from_pairs([("w6", "x1 x2")])
    with start_in_thread(served_app(folder, max_wait_ms=20, glossary=server_glossary)) as running:
        reply = post(running.url, "/translate", {"text": SOURCES, "glossary": {"w2": "x0"}})
        assert reply.status_code == 200, reply.text
        both = Glossary.from_pairs([("w6", "x1 x2"), ("w2", "x0")])
        expected = [hyps[0] for hyps in translate_nbest(model, tokenizer, SOURCES, glossary=both)]
        assert reply.json()["translations"] == expected
        assert "x1 x2" in expected[0] and "x0" in expected[1].split()

        form = {"text": SOURCES[0], "target_lang": "EN-US"}
        deepl = httpx.post(running.url + "/v2/translate", data=form, timeout=60).json()
        assert deepl["translations"][0]["text"] == expected[0]

        over = post(running.url, "/translate", {"text": SOURCES[0], "glossary": {"w6": "x3"}}).json()
        assert "x3" in over["translations"][0].split() and "x1" not in over["translations"][0].split()

        # a stream decodes greedily: a text with a term of the server's glossary is refused, others stream
        refused = post(running.url, "/translate/stream", {"text": SOURCES[0]})
        assert refused.status_code == 422 and "POST /translate" in refused.text
        assert post(running.url, "/translate/stream", {"text": SOURCES[1]}).status_code == 200


def test_glossary_refusals_and_openapi(copier):
    """Sampling with a glossary, an entry without a source term and a target term the model cannot write are 422s
    that say why; an unknown field's
    message lists glossary among the options; the OpenAPI schema explains the field."""
    from vanilla_transformer.serving import start_in_thread

    folder, _, _ = copier
    with start_in_thread(served_app(folder, max_wait_ms=20)) as running:
        sampled = post(running.url, "/translate", {"text": "w6", "glossary": {"w6": "x1"}, "do_sample": True})
        assert sampled.status_code == 422 and "needs beam search" in sampled.text
        empty = post(running.url, "/translate", {"text": "w6", "glossary": {" ": "x1"}})
        assert empty.status_code == 422 and "empty source term" in empty.text
        unwritable = post(running.url, "/translate", {"text": "w6", "glossary": {"w6": "x1 zebra"}})
        assert unwritable.status_code == 422, unwritable.text
        assert "'x1 zebra' (the tokenizer writes it with the unknown token" in unwritable.json()["detail"]
        unknown = post(running.url, "/translate", {"text": "w6", "glosary": {}})
        assert unknown.status_code == 422 and "glossary" in unknown.text.split("options are")[1]
        schema = httpx.get(running.url + "/openapi.json", timeout=60).json()
        field = schema["components"]["schemas"]["TranslateRequest"]["properties"]["glossary"]
        assert "do-not-translate" in field["description"]


def test_serve_refuses_a_glossary_term_the_model_cannot_write(copier, tmp_path, capsys):
    from vanilla_transformer.commands import serve

    folder, _, _ = copier
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("w6\tx1 x2\nw2\tx1 zebra\n", encoding="utf-8")
    assert serve.main(["--model", str(folder), "--glossary", str(glossary), "--port", "1"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("error: the glossary has 1 target term(s)") and "'x1 zebra'" in last, last
