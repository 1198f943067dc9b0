"""Protected spans on the server: a URL, an e-mail address, a mention, a hashtag, each placeholder syntax, inline code,
a number with a unit and ``translate="no"`` come out exactly as written, once, inside the element that held them,
through LibreTranslate's API (`libretranslatepy` for text; HTML and a Mastodon post as Mastodon and Discourse send
them), DeepL's (the `deepl` SDK), the Hugging Face Inference API and the server's own; ``protect`` false gives the
raw translation. The model is a tiny untrained one (whatever it writes, the spans must survive), with room for
longer sources than the other serving tests' model."""

from __future__ import annotations

import re
from typing import cast

import httpx
import pytest
from helpers.serving import post

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

# one text per kind: the span, and a sentence holding it
SPANS = {
    "url": "https://example.org/a?b=1&c=2",
    "email": "alice@example.org",
    "mention": "@alice@example.social",
    "hashtag": "#rustlang",
    "braces": "{name}",
    "index": "{0}",
    "printf": "%s",
    "named printf": "%(count)d",
    "template": "{{user}}",
    "backticks": "`pip install x`",
    "number": "5 km",
}
MASTODON = (
    '<p>Hello <span class="h-card"><a href="https://example.social/@alice" class="u-url mention">@<span>alice'
    '</span></a></span> see <a href="https://example.org/x" rel="nofollow noopener" translate="no">'
    '<span class="invisible">https://</span><span class="">example.org/x</span></a> '
    '<a href="https://example.social/tags/rust" class="mention hashtag" rel="tag">#<span>rust</span></a></p>'
)
# the parts of the post that must come out as written
MASTODON_KEPT = [
    '<span class="h-card"><a href="https://example.social/@alice" class="u-url mention">@<span>alice</span></a>'
    "</span>",
    '<a href="https://example.org/x" rel="nofollow noopener" translate="no"><span class="invisible">https://'
    '</span><span class="">example.org/x</span></a>',
    '<a href="https://example.social/tags/rust" class="mention hashtag" rel="tag">#<span>rust</span></a>',
]


def sentence(span: str) -> str:
    return f"The people said that {span} is here today."


@pytest.fixture(scope="module")
def server(served_folder, tmp_path_factory):
    """A server over a tiny untrained en -> fr model that reads 128 positions and writes up to 10 tokens (16 texts a
    request)."""
    from conftest import tiny_model
    from helpers.serving import served_app, with_card
    from transformers import AutoTokenizer

    from vanilla_transformer.modeling import save_with_remote_code
    from vanilla_transformer.serving import Limits, start_in_thread

    tokenizer = AutoTokenizer.from_pretrained(served_folder)
    model = tiny_model(3, vocab_size=len(tokenizer), max_position_embeddings=128)
    model.generation_config.max_new_tokens = 10
    root = tmp_path_factory.mktemp("protected")
    folder = with_card(save_with_remote_code(model, root / "model", tokenizer), root / "carded", ("en", "fr"))
    limits = Limits(max_texts=16, max_request_bytes=8192, max_new_tokens=20)
    with start_in_thread(served_app(folder, max_wait_ms=5, limits=limits)) as running:
        yield running.url


def inside(reply: str, written: str, tag: str) -> bool:
    """Whether ``written`` occurs once in ``reply``, inside an element ``tag``."""
    if reply.count(written) != 1:
        return False
    at = reply.index(written)
    opened = reply.rfind(f"<{tag}", 0, at)
    return opened >= 0 and reply.find(f"</{tag}>", opened, at) < 0 and reply.find(f"</{tag}>", at) >= 0


def test_text_through_libretranslatepy(server):
    from libretranslatepy import LibreTranslateAPI

    client = LibreTranslateAPI(server)
    for kind, span in SPANS.items():
        reply = client.translate(sentence(span), "en", "fr")
        assert reply.count(span) == 1, (kind, reply)


def test_html_through_libretranslate(server):
    """Each span inside a <b> of a paragraph, <code> and translate="no" / class="notranslate" among them, sent as
    Discourse sends HTML (a form), and as Mastodon sends it (JSON, a list)."""
    written = {kind: span.replace("&", "&amp;") for kind, span in SPANS.items()}
    written["code element"] = "<code>x = f(y)</code>"
    written["translate no"] = '<span translate="no">Acme Widget</span>'
    written["notranslate"] = '<span class="notranslate">Acme Widget</span>'
    documents = {kind: f"<p>Then they said <b>that {w} is</b> here today.</p>" for kind, w in written.items()}
    for kind in ("url", "code element"):
        form = {"q": documents[kind], "source": "en", "target": "fr", "format": "html", "api_key": ""}
        reply = httpx.post(server + "/translate", data=form, timeout=60).json()["translatedText"]
        assert inside(reply, written[kind], "b"), (kind, reply)
    body = {"q": list(documents.values()), "source": "en", "target": "fr", "format": "html", "api_key": None}
    replies = httpx.post(server + "/translate", json=body, timeout=60).json()["translatedText"]
    assert all(inside(r, w, "b") for r, w in zip(replies, written.values())), replies


def test_mastodon_post(server):
    """A Mastodon post (its mention, link and hashtag markup) as Mastodon sends it: each part as written, once,
    inside the paragraph."""
    body = {"q": [MASTODON], "source": "auto", "target": "fr", "format": "html", "api_key": None}
    reply = httpx.post(server + "/translate", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    [translated] = reply.json()["translatedText"]
    for part in MASTODON_KEPT:
        assert inside(translated, part, "p"), (part, translated)
    assert re.sub(r"<[^>]*>", "", translated).count("@alice") == 1


def test_deepl_hf_and_own_api(server):
    """The `deepl` SDK (text, and HTML with tag_handling), the Hugging Face Inference API and the server's own
    /translate keep the spans; ``protect`` false gives what the model writes (no span of a source it cannot spell
    survives there)."""
    import deepl

    translator = deepl.Translator("any-key", server_url=server)
    texts = [sentence(span) for span in SPANS.values()]
    results = translator.translate_text(texts, source_lang="EN", target_lang="FR")
    found = [r.text for r in cast(list, results)]
    assert all(f.count(span) == 1 for f, span in zip(found, SPANS.values())), found
    document = f"<p>So <b>{MASTODON_KEPT[2]} now</b> then</p>"
    marked = cast(
        deepl.TextResult,
        translator.translate_text(document, source_lang="EN", target_lang="FR", tag_handling="html"),
    ).text
    assert inside(marked, MASTODON_KEPT[2], "b"), marked

    hf = httpx.post(server + "/", json={"inputs": texts}, timeout=60).json()
    assert all(r["translation_text"].count(span) == 1 for r, span in zip(hf, SPANS.values())), hf
    own = post(server, "/translate", {"text": texts}).json()["translations"]
    assert all(t.count(span) == 1 for t, span in zip(own, SPANS.values())), own

    raw = post(server, "/translate", {"text": texts, "protect": False}).json()["translations"]
    unprotected = post(server, "/translate", {"text": texts, "scores": True}).json()["translations"]
    assert raw == unprotected and raw != own
    lt_raw = httpx.post(
        server + "/translate", json={"q": texts, "source": "en", "target": "fr", "protect": False}, timeout=60
    ).json()["translatedText"]
    assert lt_raw != found
    bad = httpx.post(
        server + "/translate", json={"q": "x", "source": "en", "target": "fr", "protect": "maybe"}
    )
    assert bad.status_code == 400 and "protect" in bad.json()["error"]
