"""Bad requests get a clear 4xx naming the option or the limit, and the server stays healthy and keeps
translating after each one."""

from __future__ import annotations

import json

import httpx
import pytest
from helpers.serving import post

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

LONG = "起初神创造天地。" * 20  # far more than the tiny model's 24 positions

# (path, raw body or JSON value, expected status, words the message must contain)
BAD = [
    ("/translate", b'{"text": "abc"', 422, ["malformed JSON"]),
    ("/translate", b"not json at all", 422, ["malformed JSON"]),
    ("/translate", {"text": "a", "beams": 2, "colour": 1}, 422, ["unknown option", "'beams'", "'colour'"]),
    ("/translate/stream", {"text": "a", "temprature": 1.0}, 422, ["unknown option", "'temprature'"]),
    ("/translate", {"num_beams": 2}, 422, ["text", "required"]),
    ("/translate", {"text": 5}, 422, ["text"]),
    ("/translate", {"text": "a", "num_beams": "many"}, 422, ["num_beams"]),
    ("/translate", {"text": []}, 422, ["empty list"]),
    ("/translate", {"text": ["a"] * 9}, 413, ["max_texts=8", "9 texts"]),
    ("/translate", {"text": "a" * 5000}, 413, ["max_request_bytes=4096"]),
    ("/translate", {"text": ["a", LONG]}, 422, ["text 1", "max_source_tokens=24"]),
    ("/translate/stream", {"text": LONG}, 422, ["max_source_tokens=24"]),
    (
        "/translate",
        {"text": "a", "max_new_tokens": 21},
        422,
        ["max_new_tokens=21", "limit max_new_tokens=20"],
    ),
    ("/translate", {"text": "a", "num_beams": 9}, 422, ["num_beams=9", "max_num_beams=8"]),
    ("/translate", {"text": "a", "num_beams": 0}, 422, ["num_beams"]),
    ("/translate", {"text": "a", "num_beams": 2, "num_return_sequences": 3}, 422, ["num_return_sequences"]),
    ("/translate", {"text": "a", "do_sample": True, "temperature": 0}, 422, ["temperature"]),
    ("/translate", {"text": "a", "do_sample": True, "top_p": 1.5}, 422, ["top_p"]),
    ("/translate/stream", {"text": "a", "num_beams": 2}, 422, ["num_beams=1"]),
    ("/translate/stream", {"text": ["a", "b"]}, 422, ["text"]),
]


def healthy_and_translating(url: str) -> None:
    assert httpx.get(url + "/health", timeout=30).json()["status"] == "ok"
    reply = post(url, "/translate", {"text": ["起初神创造天地。"]})
    assert reply.status_code == 200 and len(reply.json()["translations"]) == 1


@pytest.mark.parametrize(
    ("path", "body", "status", "words"), BAD, ids=[f"{b[2]}-{i}" for i, b in enumerate(BAD)]
)
def test_bad_request_is_refused_clearly(tiny_server, path, body, status, words):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply = httpx.post(
        tiny_server + path, content=raw, headers={"content-type": "application/json"}, timeout=60
    )
    assert reply.status_code == status, reply.text
    detail = reply.json()["detail"]
    assert isinstance(detail, str)
    assert all(word in detail for word in words), detail
    healthy_and_translating(tiny_server)


def test_body_without_content_length_and_wrong_methods(tiny_server):
    chunks = iter([b'{"text": ', b'"a"}'])
    reply = httpx.post(tiny_server + "/translate", content=chunks, timeout=60)  # chunked: no Content-Length
    assert reply.status_code == 411 and "Content-Length" in reply.json()["detail"]
    assert httpx.get(tiny_server + "/translate", timeout=30).status_code == 405
    assert httpx.get(tiny_server + "/nowhere", timeout=30).status_code == 404
    healthy_and_translating(tiny_server)


def test_a_client_that_hangs_up_does_not_hurt_the_server(tiny_server):
    """Requests abandoned by their clients (a read timeout far shorter than the translation) are dropped or
    answered to nobody; the server keeps serving."""
    for _ in range(5):
        try:
            post(tiny_server, "/translate", {"text": ["起初神创造天地。"] * 8, "num_beams": 8}, timeout=0.001)
        except httpx.TimeoutException:
            pass
    healthy_and_translating(tiny_server)
