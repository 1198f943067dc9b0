"""The LibreTranslate, Hugging Face Inference and DeepL APIs of the translation server, driven on a loopback port by
the clients people run: `libretranslatepy`, the `deepl` SDK, `huggingface_hub.InferenceClient`, and requests
shaped as Mastodon, Weblate and Discourse send them. Every reply equals the server's own /translate for the same
texts (with ``split_sentences`` where the API cuts texts into sentences: LibreTranslate's, DeepL's), and HTML markup
survives. The model is the tiny one of the other serving tests, with a card naming zh -> en.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from helpers.serving import post

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def zh_en_folder(served_folder, tmp_path_factory) -> Path:
    """A copy of `served_folder` whose model card names zh -> en, as a trained model's card does."""
    from helpers.serving import with_card

    return with_card(served_folder, tmp_path_factory.mktemp("drop-in") / "tiny-zh-en", ("zh", "en"))


@pytest.fixture(scope="module")
def server(zh_en_folder):
    from helpers.serving import served_app

    from vanilla_transformer.serving import start_in_thread

    with start_in_thread(served_app(zh_en_folder, max_wait_ms=20)) as running:
        yield running.url


def own(url: str, texts: list[str], **options) -> list[str]:
    """The server's own /translate of ``texts``."""
    reply = post(url, "/translate", {"text": texts, **options})
    assert reply.status_code == 200, reply.text
    return reply.json()["translations"]


def deepl_text(result: object) -> str:
    """The text of the `deepl` SDK's result for one text."""
    import deepl

    assert isinstance(result, deepl.TextResult)
    return result.text


def html(texts: list[str]) -> str:
    return f'<p>{texts[0]} <a href="https://example.org/?a=1&amp;b=2">{texts[1]}</a></p><!-- kept --><br/>'


def check_markup(url: str, reply: str, document: str, split_sentences: bool = True) -> None:
    """``reply`` is ``document`` translated by the server's HTML mode: each segment (the text between block
    elements, inline markup and all) translated as /translate translates it (sentence by sentence with
    ``split_sentences``, as LibreTranslate's and DeepL's APIs do), every tag of the document kept as written and
    the result well formed. Where the tags go is tested in tests/inference/test_markup.py."""
    import re

    from vanilla_transformer.inference.markup import split_document

    split = split_document(document)
    texts = [segment.text for segment in split.segments]
    expected = split.render(own(url, texts, split_sentences=split_sentences), [None] * len(texts))

    def text(found: str) -> str:
        return re.sub(r"<[^>]*>", "", found)

    def tags(found: str) -> list[str]:
        return sorted(re.findall(r"<[^>]*>", found))

    assert text(reply) == text(expected) and tags(reply) == tags(document), (reply, expected)


def test_libretranslatepy(server, served_sources):
    from libretranslatepy import LibreTranslateAPI

    client = LibreTranslateAPI(server)
    expected = own(server, served_sources[:3], split_sentences=True)
    assert [client.translate(text, "zh", "en") for text in served_sources[:3]] == expected
    assert client.languages() == [
        {"code": "zh", "name": "zh", "targets": ["en"]},
        {"code": "en", "name": "en", "targets": []},
    ]
    [detected] = client.detect(served_sources[0])
    assert detected["language"] == "zh" and 0 <= detected["confidence"] <= 100


def test_mastodon(server, served_sources):
    # Mastodon's TranslationService::LibreTranslate: JSON, a list of HTML posts, source auto, api_key null
    texts = served_sources[:4]
    expected = own(server, texts, split_sentences=True)
    posts = [f"<p>{texts[0]}</p>", html(texts[1:3]), texts[3]]
    languages = httpx.get(server + "/languages", headers={"Content-Type": "application/json"}, timeout=30)
    assert {entry["code"]: entry["targets"] for entry in languages.json()} == {"zh": ["en"], "en": []}
    body = {"q": posts, "source": "auto", "target": "en", "format": "html", "api_key": None}
    reply = httpx.post(server + "/translate", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    data = reply.json()
    first, marked, plain = data["translatedText"]
    assert first == f"<p>{expected[0]}</p>" and plain == expected[3]
    check_markup(server, marked, posts[1])
    assert [entry["language"] for entry in data["detectedLanguage"]] == ["zh"] * 3


def test_weblate(server, served_sources):
    texts = served_sources[:3]
    expected = own(server, texts, split_sentences=True)
    # Weblate's batch machinery: JSON with a list and an empty key
    body = {"api_key": "", "q": texts, "source": "zh", "target": "en"}
    assert httpx.post(server + "/translate", json=body, timeout=60).json() == {"translatedText": expected}
    # its older machinery: one text per form
    for text, translation in zip(texts, expected):
        form = {"api_key": "", "q": text, "source": "zh", "target": "en"}
        reply = httpx.post(server + "/translate", data=form, timeout=60)
        assert reply.json() == {"translatedText": translation}


def test_discourse(server, served_sources):
    # discourse-translator: url-encoded forms, /detect on the text without tags, then /translate of the HTML
    texts = served_sources[4:6]
    form = {"q": " ".join(texts), "api_key": ""}
    detected = httpx.post(server + "/detect", data=form, timeout=60).json()[0]["language"]
    body = {"q": html(texts), "source": detected, "target": "en", "format": "html", "api_key": ""}
    reply = httpx.post(server + "/translate", data=body, timeout=60)
    check_markup(server, reply.json()["translatedText"], html(texts))


def test_alternatives_are_the_nbest_list(server, served_sources):
    texts = served_sources[:2]
    # two alternatives: three hypotheses, from the model's beams or three if it has fewer
    beams = max(httpx.get(server + "/info", timeout=30).json()["defaults"]["num_beams"] or 1, 3)
    own_reply = post(
        server,
        "/translate",
        {"text": texts, "num_beams": beams, "num_return_sequences": 3, "split_sentences": True},
    )
    nbest = own_reply.json()["nbest"]
    body = {"q": texts, "source": "zh", "target": "en", "alternatives": 2}
    reply = httpx.post(server + "/translate", json=body, timeout=60).json()
    assert reply == {"translatedText": [h[0] for h in nbest], "alternatives": [h[1:] for h in nbest]}
    single = httpx.post(server + "/translate", data={**body, "q": texts[0]}, timeout=60).json()
    assert single == {"translatedText": nbest[0][0], "alternatives": nbest[0][1:]}
    # with HTML, each alternative is the document with that hypothesis of the segment and its markup
    document = f"<p><b>{texts[0]}</b></p>"
    reply = httpx.post(
        server + "/translate", json={**body, "q": document, "format": "html"}, timeout=60
    ).json()
    assert reply == {
        "translatedText": f"<p><b>{nbest[0][0]}</b></p>",
        "alternatives": [f"<p><b>{hypothesis}</b></p>" for hypothesis in nbest[0][1:]],
    }


def test_libretranslate_errors(server, tiny_server):
    for body, needle in (
        ({"source": "zh", "target": "en"}, "missing q"),
        ({"q": "x", "source": "de", "target": "en"}, "de is not supported"),
        ({"q": "x", "source": "zh", "target": "fr"}, "fr is not supported"),
        ({"q": "x", "source": "zh", "target": "en", "format": "pdf"}, "pdf format"),
        ({"q": ["x"] * 9, "source": "zh", "target": "en"}, "max_texts=8"),
    ):
        reply = httpx.post(server + "/translate", json=body, timeout=60)
        assert reply.status_code == 400 and needle in reply.json()["error"], reply.text
    # a model whose card names no languages: the request is refused with the way to name them
    body = {"q": "x", "source": "auto", "target": "en"}
    reply = httpx.post(tiny_server + "/translate", json=body, timeout=60)
    assert reply.status_code == 400 and "language: [SOURCE, TARGET]" in reply.json()["error"]
    assert httpx.get(tiny_server + "/languages", timeout=30).json() == []


def test_frontend_settings(server):
    settings = httpx.get(server + "/frontend/settings", timeout=30).json()
    assert settings["language"]["source"]["code"] == "zh" and settings["language"]["target"]["code"] == "en"


def test_deepl_sdk(server, served_sources):
    import deepl

    texts = served_sources[:3]
    expected = own(server, texts, split_sentences=True)
    translator = deepl.Translator("any-key", server_url=server)
    results = translator.translate_text(texts, source_lang="ZH", target_lang="EN-US")
    assert isinstance(results, list)
    assert [r.text for r in results] == expected
    assert [r.detected_source_lang for r in results] == ["ZH"] * 3
    assert [r.billed_characters for r in results] == [len(t) for t in texts]
    marked = translator.translate_text(html(texts[:2]), target_lang="EN-GB", tag_handling="html")
    assert isinstance(marked, deepl.TextResult)
    check_markup(server, marked.text, html(texts[:2]))
    assert [lang.code for lang in translator.get_source_languages()] == ["ZH"]
    assert [lang.code for lang in translator.get_target_languages()] == ["EN-GB", "EN-US"]
    assert (translator.get_usage().character.count or 0) >= sum(len(t) for t in texts)
    with pytest.raises(deepl.DeepLException, match="target_lang"):
        translator.translate_text(texts[0], target_lang="DE")
    if hasattr(deepl, "DeepLClient"):
        client = deepl.DeepLClient("any-key", server_url=server)
        assert deepl_text(client.translate_text(texts[0], target_lang="EN-US")) == expected[0]


def test_deepl_form(server, served_sources):
    # the v2 form body of DeepL's older clients: repeated text
    texts = served_sources[:2]
    form = {"text": texts, "target_lang": "EN-US"}
    headers = {"Authorization": "DeepL-Auth-Key any-key"}
    reply = httpx.post(server + "/v2/translate", data=form, headers=headers, timeout=60).json()
    assert [t["text"] for t in reply["translations"]] == own(server, texts, split_sentences=True)
    bad = httpx.post(server + "/v2/translate", data={"target_lang": "EN-US"}, timeout=60)
    assert bad.status_code == 400 and "text" in bad.json()["message"]


def test_hf_inference_client(server, served_sources, monkeypatch):
    import huggingface_hub.constants
    from huggingface_hub import InferenceClient

    # the tests run the Hub offline; this client talks to the loopback server only
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    client = InferenceClient(model=server)
    text = served_sources[0]
    assert client.translation(text).translation_text == own(server, [text])[0]
    beams = client.translation(text, src_lang="zh", tgt_lang="en", generate_parameters={"num_beams": 3})
    assert beams.translation_text == own(server, [text], num_beams=3)[0]


def test_hf_task_shape(server, served_sources):
    texts = served_sources[:2]
    expected = [{"translation_text": t} for t in own(server, texts)]
    for path in ("/", "/translate"):
        assert post(server, path, {"inputs": texts}).json() == expected
    bad = post(server, "/", {"inputs": texts[0], "parameters": {"generate_parameters": {"beams": 2}}})
    assert bad.status_code == 422 and "'beams'" in bad.json()["error"]
    bad = post(server, "/", {"inputs": texts[0], "parameters": {"tgt_lang": "fr"}})
    assert bad.status_code == 422 and "zh to en" in bad.json()["error"]


def test_openapi_lists_every_api(server):
    import warnings

    with warnings.catch_warnings():
        # FastAPI warns of an operation id given twice
        warnings.simplefilter("error")
        paths = httpx.get(server + "/openapi.json", timeout=30).json()["paths"]
    assert {"/", "/languages", "/detect", "/v2/translate", "/v2/languages", "/v2/usage"} <= set(paths)
    assert {"/libretranslate/translate", "/translate"} <= set(paths)


KEY = "k3y-for-the-tests-7f1d9c"


@pytest.fixture(scope="module")
def keyed_server(zh_en_folder):
    """A server over `zh_en_folder` with two API keys and one CORS origin."""
    from helpers.serving import served_app

    from vanilla_transformer.serving import start_in_thread

    app = served_app(
        zh_en_folder,
        max_wait_ms=20,
        api_keys=frozenset({KEY, "another-key"}),
        cors_origins=("https://app.example",),
    )
    with start_in_thread(app) as running:
        yield running.url


def test_keys_in_each_apis_own_way(keyed_server, served_sources, caplog, monkeypatch):
    import logging

    import deepl
    import huggingface_hub.constants
    from huggingface_hub import InferenceClient
    from libretranslatepy import LibreTranslateAPI

    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    url, text = keyed_server, served_sources[0]
    replies: list[httpx.Response] = []

    def send(path: str, key: str | None, scheme: str = "Bearer", **body) -> httpx.Response:
        headers = {} if key is None else {"Authorization": f"{scheme} {key}"}
        replies.append(httpx.post(url + path, headers=headers, timeout=60, **body))
        return replies[-1]

    expected = send("/translate", KEY, json={"text": [text]}).json()["translations"][0]
    lt = {"q": text, "source": "zh", "target": "en"}
    for key in (None, "wrong"):
        for path, body, scheme, field in (
            ("/translate", {"json": {"text": [text]}}, "Bearer", "detail"),
            ("/translate/stream", {"json": {"text": text}}, "Bearer", "detail"),
            ("/", {"json": {"inputs": text}}, "Bearer", "error"),
            ("/translate", {"json": {"inputs": text}}, "Bearer", "error"),
            ("/translate", {"json": {**lt, "api_key": key}}, None, "error"),
            ("/translate", {"data": {**lt, "api_key": key or ""}}, None, "error"),
            ("/detect", {"data": {"q": text, "api_key": key or ""}}, None, "error"),
            (
                "/v2/translate",
                {"json": {"text": [text], "target_lang": "EN-US"}},
                "DeepL-Auth-Key",
                "message",
            ),
            ("/v2/usage", {}, "DeepL-Auth-Key", "message"),
        ):
            reply = send(path, key if scheme else None, scheme or "", **body)
            assert reply.status_code == 403 and set(reply.json()) == {field}, (path, body, reply.text)
    # Mastodon's api_key null on a server with keys
    assert send("/translate", None, json={**lt, "api_key": None}).status_code == 403

    # the right key, each in its API's way
    assert send("/translate", KEY, json={"inputs": text}).json() == [{"translation_text": expected}]
    assert send("/translate", None, json={**lt, "api_key": KEY}).json() == {"translatedText": expected}
    assert LibreTranslateAPI(url, api_key=KEY).translate(text, "zh", "en") == expected
    assert InferenceClient(model=url, token=KEY).translation(text).translation_text == expected
    assert (
        deepl_text(deepl.Translator(KEY, server_url=url).translate_text(text, target_lang="EN-US"))
        == expected
    )
    with pytest.raises(deepl.AuthorizationException):
        deepl.Translator("wrong", server_url=url).translate_text(text, target_lang="EN-US")
    events = httpx.post(
        url + "/translate/stream", json={"text": text}, headers={"Authorization": f"Bearer {KEY}"}
    )
    assert events.status_code == 200
    # what answers anyone, and says that keys are needed
    for path in ("/languages", "/health", "/info", "/openapi.json"):
        replies.append(httpx.get(url + path, timeout=30))
        assert replies[-1].status_code == 200, path
    replies.append(httpx.get(url + "/frontend/settings", timeout=30))
    assert replies[-1].json()["keyRequired"] is True

    # the key is in no reply and no log line
    assert not [r for r in replies if KEY in r.text or "another-key" in r.text]
    assert not [r for r in caplog.records if KEY in r.getMessage()]


def test_cors_origins(keyed_server, server):
    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    allowed = httpx.options(keyed_server + "/translate", headers=preflight, timeout=30)
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    other = httpx.options(
        keyed_server + "/translate", headers={**preflight, "Origin": "https://evil.example"}
    )
    assert "access-control-allow-origin" not in other.headers
    simple = httpx.get(keyed_server + "/languages", headers={"Origin": "https://app.example"}, timeout=30)
    assert simple.headers["access-control-allow-origin"] == "https://app.example"
    # without --cors_origins, no browser origin is allowed
    default = httpx.get(server + "/languages", headers={"Origin": "https://app.example"}, timeout=30)
    assert "access-control-allow-origin" not in default.headers


def test_load_api_keys(tmp_path):
    from vanilla_transformer.serving.keys import load_api_keys

    keys = tmp_path / "keys"
    keys.write_text("# the team's keys\none\n\n  two  \n", encoding="utf-8")
    assert load_api_keys(str(keys), {}) == {"one", "two"}
    assert load_api_keys(str(keys), {"VANILLA_TRANSFORMER_API_KEYS": "three, four"}) == {
        "one",
        "two",
        "three",
        "four",
    }
    assert load_api_keys(None, {}) == frozenset()
    keys.write_text("# none\n", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no key"):
        load_api_keys(str(keys), {})
    with pytest.raises(ValueError, match="one a line"):
        load_api_keys(str(tmp_path / "missing"), {})


def test_deepl_legacy_auth_key_field(keyed_server, served_sources):
    # DeepL's older clients send the key as the auth_key field of the form or of the query string
    form = {"text": served_sources[0], "target_lang": "EN-US"}
    url = keyed_server + "/v2/translate"
    expected = own_keyed(keyed_server, served_sources[0])
    for key, status in ((KEY, 200), ("wrong", 403)):
        by_form = httpx.post(url, data={**form, "auth_key": key}, timeout=60)
        by_query = httpx.post(url, params={"auth_key": key}, data=form, timeout=60)
        for reply in (by_form, by_query):
            assert reply.status_code == status, reply.text
            if status == 200:
                assert reply.json()["translations"][0]["text"] == expected
            else:
                assert set(reply.json()) == {"message"} and KEY not in reply.text


def own_keyed(url: str, text: str) -> str:
    headers = {"Authorization": f"Bearer {KEY}"}
    reply = httpx.post(url + "/translate", json={"text": [text]}, headers=headers, timeout=60)
    return reply.json()["translations"][0]


def test_refusals_before_a_handler_in_each_apis_shape(server):
    # a body over max_request_bytes (4096), by its Content-Length and as it arrives, and unknown paths and methods
    big = "x" * 5000
    for path, form, body, status, field in (
        ("/v2/translate", {"text": big, "target_lang": "EN-US"}, None, 413, "message"),
        ("/translate", {"q": big, "source": "zh", "target": "en"}, None, 400, "error"),
        ("/libretranslate/translate", None, {"q": big}, 400, "error"),
        ("/", None, {"inputs": big}, 413, "error"),
        ("/translate", None, {"text": big}, 413, "detail"),
    ):
        reply = httpx.post(server + path, data=form, json=body, timeout=60)
        assert reply.status_code == status and set(reply.json()) == {field}, (path, reply.text)
        assert "max_request_bytes=4096" in reply.json()[field]
    assert set(httpx.get(server + "/v2/unknown", timeout=30).json()) == {"message"}
    not_allowed = httpx.get(server + "/v2/translate", timeout=30)
    assert set(not_allowed.json()) == {"message"} and not_allowed.headers["allow"] == "POST"
    assert set(httpx.get(server + "/libretranslate/translate", timeout=30).json()) == {"error"}
    assert set(httpx.get(server + "/nowhere", timeout=30).json()) == {"detail"}


def test_segments_count_toward_max_texts(server, served_sources):
    # one document of nine paragraphs is more than the server's max_texts=8
    document = "".join(f"<p>{text}</p>" for text in served_sources[:9])
    for path, body, field in (
        ("/translate", {"q": document, "source": "zh", "target": "en", "format": "html"}, "error"),
        ("/v2/translate", {"text": [document], "target_lang": "EN-US", "tag_handling": "html"}, "message"),
    ):
        reply = httpx.post(server + path, json=body, timeout=60)
        assert reply.status_code in (400, 413) and "9 text segments" in reply.json()[field], reply.text


def test_own_api_translates_html_documents(server, served_sources):
    document = html(served_sources[:2])
    reply = post(server, "/translate", {"text": [document, "<p></p>"], "format": "html"})
    assert reply.status_code == 200, reply.text
    marked, empty = reply.json()["translations"]
    check_markup(server, marked, document, split_sentences=False)
    assert empty == "<p></p>"
    nbest = post(
        server, "/translate", {"text": document, "format": "html", "num_beams": 2, "num_return_sequences": 2}
    )
    assert nbest.status_code == 200 and len(nbest.json()["nbest"][0]) == 2, nbest.text
    for field in ("scores", "alignments"):
        refused = post(server, "/translate", {"text": document, "format": "html", field: True})
        assert refused.status_code == 422 and f"{field} of the whole" in refused.json()["detail"]
    schema = httpx.get(server + "/openapi.json", timeout=30).json()
    assert "inline elements" in str(
        schema["components"]["schemas"]["TranslateRequest"]["properties"]["format"]
    )


def test_long_texts_are_translated_sentence_by_sentence(server, served_sources):
    """A text of three sentences on two paragraphs, longer than the tiny model's positions: whole it is refused,
    and LibreTranslate's API (always), DeepL's (``split_sentences`` 1, its default; nonewlines) and the server's
    own with ``split_sentences`` translate it sentence by sentence, each sentence as /translate translates it
    alone, the paragraph break kept (or not: nonewlines); DeepL's 0 translates it whole (refused here)."""
    import deepl
    import numpy as np

    from vanilla_transformer.inference.alignment import (
        WordAlignment,
        joined_alignment,
        parse_pharaoh,
        pharaoh,
    )
    from vanilla_transformer.inference.sentences import split_text

    ends = [text for text in served_sources if text.endswith("。")][:3]
    assert len(ends) == 3
    text = f"{ends[0]}{ends[1]}\n\n{ends[2]}"
    split = split_text(text, "zh")
    assert split.sentences == tuple(ends)
    alone = own(server, ends)
    expected, flat = split.join(alone), split_text(text, "zh", newlines=False).join(alone)
    assert "\n\n" in expected and "\n" not in flat
    whole = post(server, "/translate", {"text": text})
    assert whole.status_code == 422 and "max_source_tokens" in whole.text, whole.text
    assert own(server, [text, ends[0]], split_sentences=True) == [expected, alone[0]]
    body = {"q": text, "source": "zh", "target": "en"}
    assert httpx.post(server + "/translate", json=body, timeout=60).json() == {"translatedText": expected}
    # twelve sentences, more than the server's max_texts=8: sentences do not count toward it
    many = "".join(ends * 4)
    reply = httpx.post(server + "/translate", json={**body, "q": many}, timeout=60).json()
    assert reply == {"translatedText": split_text(many, "zh").join(alone * 4)}
    for options, wanted in (
        ({}, expected),
        ({"split_sentences": "1"}, expected),
        ({"split_sentences": "nonewlines"}, flat),
    ):
        reply = httpx.post(
            server + "/v2/translate", json={"text": [text], "target_lang": "EN-US", **options}, timeout=60
        )
        assert reply.json()["translations"][0]["text"] == wanted, (options, reply.text)
    translator = deepl.Translator("any-key", server_url=server)
    assert (
        deepl_text(translator.translate_text(text, target_lang="EN-US", split_sentences="nonewlines")) == flat
    )
    with pytest.raises(deepl.DeepLException, match="max_source_tokens"):
        translator.translate_text(text, target_lang="EN-US", split_sentences="0")
    bad = httpx.post(
        server + "/v2/translate",
        json={"text": [text], "target_lang": "EN-US", "split_sentences": "2"},
        timeout=60,
    )
    assert bad.status_code == 400 and "split_sentences" in bad.json()["message"]
    # n-best: hypothesis k joins hypothesis k of each sentence
    options = {"num_beams": 2, "num_return_sequences": 2}
    nbest = post(server, "/translate", {"text": text, "split_sentences": True, **options}).json()["nbest"][0]
    each = post(server, "/translate", {"text": ends, **options}).json()["nbest"]
    assert nbest == split.join_nbest(each)
    refused = post(server, "/translate", {"text": text, "split_sentences": True, "scores": True})
    assert refused.status_code == 422 and "scores of the whole" in refused.json()["detail"]
    # alignments: each sentence's own (POST /translate of the sentence alone), numbered over the whole text
    reply = post(
        server, "/translate", {"text": [text, ends[0]], "split_sentences": True, "alignments": True}
    ).json()
    each = post(server, "/translate", {"text": ends, "alignments": True}).json()["alignments"]
    parts = [
        (sentence, translation, WordAlignment(sorted(parse_pharaoh(links)[0]), np.zeros((0, 0))))
        for sentence, translation, links in zip(ends, alone, each)
    ]
    assert reply["translations"] == [expected, alone[0]]
    assert reply["alignments"] == [pharaoh(joined_alignment(text, expected, parts).links), each[0]]
    assert len(parse_pharaoh(reply["alignments"][0])[0]) > len(parse_pharaoh(each[0])[0])
    schema = httpx.get(server + "/openapi.json", timeout=30).json()
    assert "sentence" in str(
        schema["components"]["schemas"]["TranslateRequest"]["properties"]["split_sentences"]
    )


def test_deepl_tag_options(server, served_sources):
    """DeepL's splitting_tags, non_splitting_tags and ignore_tags (lists in the SDK, comma-separated on the wire)
    class the document's elements: the <s> elements are segments of their own, <keep> comes out as written."""
    import deepl

    from vanilla_transformer.inference.markup import TagRules, split_document

    texts = served_sources[:3]
    document = f"<doc><s>{texts[0]}</s><s>{texts[1]}<keep>{texts[2]}</keep></s></doc>"
    split = split_document(document, TagRules.of(splitting=["s"], ignored=["keep"]))
    assert [segment.text for segment in split.segments] == [texts[0], texts[1] + texts[2]]
    translator = deepl.Translator("any-key", server_url=server)
    options = {"target_lang": "EN-US", "tag_handling": "xml"}
    result = deepl_text(
        translator.translate_text(
            document,
            target_lang="EN-US",
            tag_handling="xml",
            splitting_tags=["s"],
            ignore_tags=["keep", "other"],
        )
    )
    first = own(server, [texts[0]], split_sentences=True)[0]
    assert result.startswith(f"<doc><s>{first}</s><s>") and f"<keep>{texts[2]}</keep></s></doc>" in result, (
        result
    )
    # without the rules the document is one segment and <keep> is translated
    plain = deepl_text(translator.translate_text(document, target_lang="EN-US", tag_handling="xml"))
    assert "<keep>" in plain and f"<keep>{texts[2]}</keep>" not in plain
    # non_splitting_tags: <p>, a block element of HTML's, no longer ends a segment
    joined = f"<div>{texts[0]}<p>{texts[1]}</p></div>"
    reply = httpx.post(
        server + "/v2/translate",
        data={"text": joined, "non_splitting_tags": "p,div", **options},
        timeout=60,
    )
    assert reply.status_code == 200 and reply.json()["translations"][0]["text"].startswith("<div>"), (
        reply.text
    )
    assert len(split_document(joined, TagRules.of(non_splitting=["p", "div"])).segments) == 1
    bad = httpx.post(
        server + "/v2/translate", json={"text": [joined], "ignore_tags": 5, **options}, timeout=60
    )
    assert bad.status_code == 400 and "ignore_tags" in bad.json()["message"]
