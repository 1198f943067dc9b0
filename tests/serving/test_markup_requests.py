"""HTML and XML documents sent to the server (its own format html, LibreTranslate's format html, DeepL's
tag_handling): a document nesting deeper than ``max_markup_depth`` is refused at once in each API's own error shape,
and parsing documents (to detect their language, and to translate them) and rendering them run in a worker thread
while the event loop serves the other clients."""

from __future__ import annotations

import threading

import httpx
import pytest
from helpers.serving import post, served_app

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

SENTENCE = "起初神创造天地。"


@pytest.fixture(scope="module")
def server(served_folder, tmp_path_factory):
    """A server over the tiny model with a card naming zh -> en, taking bodies up to 64 KiB as the default limits
    do."""
    from helpers.serving import with_card

    from vanilla_transformer.serving import Limits, start_in_thread

    folder = with_card(served_folder, tmp_path_factory.mktemp("markup") / "tiny-zh-en", ("zh", "en"))
    limits = Limits(max_texts=8, max_request_bytes=65536, max_new_tokens=20)
    with start_in_thread(served_app(folder, limits=limits)) as running:
        yield running.url


def nested(depth: int) -> str:
    return "<p>" + "<b>" * depth + SENTENCE + "</b>" * depth + "</p>"


def requests(document: str) -> dict[str, tuple[str, dict]]:
    """One request for ``document`` in each API that takes HTML: path and JSON body."""
    return {
        "own": ("/translate", {"text": document, "format": "html"}),
        "libretranslate": ("/translate", {"q": document, "source": "zh", "target": "en", "format": "html"}),
        "deepl": (
            "/v2/translate",
            {"text": [document], "source_lang": "ZH", "target_lang": "EN", "tag_handling": "html"},
        ),
    }


def test_nesting_deeper_than_the_limit_is_refused_in_each_apis_shape(server):
    from vanilla_transformer.inference.markup import MAX_DEPTH

    # a 64 KiB attack: thousands of levels, refused by the depth check (linear) before any translation
    attack = nested(9000)
    assert len(attack.encode()) <= 65536
    expected = {"own": (413, "detail"), "libretranslate": (400, "error"), "deepl": (413, "message")}
    for api, (path, body) in requests(attack).items():
        reply = post(server, path, body)
        status, field = expected[api]
        assert reply.status_code == status, (api, reply.text)
        assert f"max_markup_depth={MAX_DEPTH}" in reply.json()[field], (api, reply.text)
    assert httpx.get(server + "/info", timeout=60).json()["limits"]["max_markup_depth"] == MAX_DEPTH
    # as deep as the limit allows: translated, every tag kept
    reply = post(server, *requests(nested(MAX_DEPTH - 1))["deepl"])
    assert reply.status_code == 200, reply.text
    assert reply.json()["translations"][0]["text"].count("<b>") == MAX_DEPTH - 1


def test_parsing_and_rendering_a_document_leave_the_event_loop_free(server, monkeypatch):
    """While a document is parsed, and while it is rendered (each held until the other clients have their
    answers), another client's /health and a plain translation are answered: the event loop is not the thread
    that parses or renders."""
    from vanilla_transformer.inference import documents

    held = {name: (threading.Event(), threading.Event()) for name in ("parse", "render")}
    released: list[bool] = []

    def holding(name: str, function):
        def held_call(*args, **kwargs):
            started, release = held[name]
            started.set()
            # bounded, so that a server parsing on its event loop fails the test (never released) rather than
            # hangs it
            released.append(release.wait(timeout=20))
            return function(*args, **kwargs)

        return held_call

    monkeypatch.setattr(documents, "split_document", holding("parse", documents.split_document))
    monkeypatch.setattr(documents.Document, "render", holding("render", documents.Document.render))
    replies: list[httpx.Response] = []
    document = requests(nested(3))["deepl"]
    attack = threading.Thread(target=lambda: replies.append(post(server, *document)))
    attack.start()
    try:
        for name in ("parse", "render"):
            started, release = held[name]
            assert started.wait(timeout=60), f"the document's {name} never started"
            assert httpx.get(server + "/health", timeout=60).json()["status"] == "ok"
            assert post(server, "/translate", {"text": SENTENCE}).status_code == 200
            # both answered while the document's request still waits for its parse (render)
            assert not release.is_set() and attack.is_alive(), name
            release.set()
    finally:
        for _, release in held.values():
            release.set()
        attack.join(timeout=60)
    assert released and all(released), released
    assert replies and replies[0].status_code == 200, replies
    assert replies[0].json()["translations"][0]["text"].count("<b>") == 3


def test_detecting_the_language_of_a_document_leaves_the_event_loop_free(server, monkeypatch):
    """LibreTranslate's source "auto" with format html: while the document is parsed to detect its language (held
    until another client has its answer), /health is answered: the event loop is not the thread that parses."""
    from vanilla_transformer.inference import markup

    started, release = threading.Event(), threading.Event()
    split_document = markup.split_document
    released: list[bool] = []

    def held_split(*args, **kwargs):
        started.set()
        # bounded, so that a server parsing on its event loop fails the test (never released) rather than hangs it
        released.append(release.wait(timeout=20))
        return split_document(*args, **kwargs)

    monkeypatch.setattr(markup, "split_document", held_split)
    replies: list[httpx.Response] = []
    path, body = requests(nested(3))["libretranslate"]
    attack = threading.Thread(target=lambda: replies.append(post(server, path, {**body, "source": "auto"})))
    attack.start()
    try:
        assert started.wait(timeout=60), "the document's language was never detected"
        assert httpx.get(server + "/health", timeout=60).json()["status"] == "ok"
        # answered while the document's request still waits for its parse
        assert not release.is_set() and attack.is_alive()
    finally:
        release.set()
        attack.join(timeout=60)
    assert released == [True]
    assert replies and replies[0].status_code == 200, replies
    reply = replies[0].json()
    assert reply["translatedText"].count("<b>") == 3 and reply["detectedLanguage"]["language"] == "zh"
