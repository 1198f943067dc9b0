"""The server's bounds on what a connection can hold: a body that stops arriving gets 408 after
``body_timeout_s`` and its connection is closed while other clients are served; an idle keep-alive connection is
closed after ``idle_timeout_s``; a request whose client left while it was queued never reaches the engine; the
number of sequences a request asks for has a limit."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
from helpers.serving import post, served_app

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

SMALL = {"max_texts": 8, "max_request_bytes": 4096, "max_new_tokens": 20}


@pytest.fixture(scope="module")
def short_timeouts_server(served_folder):
    """A server whose bodies must arrive within 0.5 s and whose idle connections close after 0.5 s."""
    from vanilla_transformer.serving import Limits, start_in_thread

    limits = Limits(**SMALL, body_timeout_s=0.5, idle_timeout_s=0.5)
    with start_in_thread(served_app(served_folder, limits=limits)) as running:
        yield running.url


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=60)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a socket timeout fails the test)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def test_a_stalled_body_gets_408_and_its_connection_closes_while_others_are_served(short_timeouts_server):
    body = b'{"text": "\xe8\xb5\xb7\xe5\x88\x9d"}'
    with connect(short_timeouts_server) as sock:
        head = f"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
        sock.sendall(head.encode() + b"\r\n\r\n" + body[:5])
        # the stalled connection holds nothing else up
        assert post(short_timeouts_server, "/translate", {"text": "起初神创造天地。"}).status_code == 200
        reply = read_until_closed(sock)
    assert reply.startswith(b"HTTP/1.1 408"), reply
    assert b"body_timeout_s=0.5" in reply
    assert httpx.get(short_timeouts_server + "/health", timeout=30).json()["status"] == "ok"


def test_an_idle_connection_is_closed_after_the_idle_timeout(short_timeouts_server):
    with connect(short_timeouts_server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = read_until_closed(sock)
    assert reply.startswith(b"HTTP/1.1 200") and b'"status":"ok"' in reply
    info = httpx.get(short_timeouts_server + "/info", timeout=30).json()
    assert info["limits"]["idle_timeout_s"] == 0.5 and info["limits"]["body_timeout_s"] == 0.5


def test_sampled_sequences_have_a_limit(short_timeouts_server):
    """Sampling can return any number of sequences per text: max_num_return_sequences (8) bounds them."""
    asked = {"text": "起初", "do_sample": True, "seed": 0, "max_new_tokens": 2}
    over = post(short_timeouts_server, "/translate", {**asked, "num_return_sequences": 9})
    assert over.status_code == 422, over.text
    assert "num_return_sequences=9" in over.json()["detail"]
    assert "max_num_return_sequences=8" in over.json()["detail"]
    at = post(short_timeouts_server, "/translate", {**asked, "num_return_sequences": 8})
    assert at.status_code == 200 and len(at.json()["nbest"][0]) == 8


def test_a_queued_request_whose_client_left_never_reaches_the_engine(served_folder, monkeypatch):
    """One request holds the engine; a second is queued behind it and its client disconnects; once the engine is
    free, the second request's text is not among the texts the engine received."""
    import vanilla_transformer.inference as inference
    from vanilla_transformer.serving import Limits, create_app, load_served, start_in_thread

    served = load_served(str(served_folder), dtype="float32")
    # request-level batching, whose engine calls are translate_hypotheses' (continuous batching's clients that
    # leave: tests/serving/test_continuous.py)
    app = create_app(served, Limits(**SMALL), max_wait_ms=0, scheduling="request")
    batcher = app.state.batcher
    translate_hypotheses, received, busy, release = (
        inference.translate_hypotheses,
        [],
        threading.Event(),
        threading.Event(),
    )

    def engine(model, tokenizer, texts, *args, **kwargs):
        received.extend(texts)
        busy.set()
        release.wait(60)
        return translate_hypotheses(model, tokenizer, texts, *args, **kwargs)

    monkeypatch.setattr(inference, "translate_hypotheses", engine)
    with start_in_thread(app) as running, connect(running.url) as gone:
        holder = threading.Thread(target=post, args=(running.url, "/translate", {"text": "起初"}))
        holder.start()
        assert busy.wait(60), "the first request never reached the engine"
        body = '{"text": "地是空虚混沌"}'.encode()
        head = f"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
        gone.sendall(head.encode() + b"\r\n\r\n" + body)
        try:
            assert wait_until(lambda: batcher.queued == 1), "the second request never reached the queue"
            gone.shutdown(socket.SHUT_RDWR)
            gone.close()
            # the server sees the disconnect and cancels the queued request (the queue's own record of it)
            wait_until(lambda: batcher._pending and batcher._pending[0].future.cancelled())
        finally:
            release.set()
        holder.join(60)
        assert wait_until(lambda: batcher.queued == 0)
        assert post(running.url, "/translate", {"text": "神"}).status_code == 200
    assert received == ["起初", "神"]
    assert batcher.stats["dropped"] == 1


def wait_until(predicate, timeout: float = 30.0) -> bool:
    """Whether ``predicate()`` holds within ``timeout`` seconds (polled)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_model_default_over_the_new_tokens_limit_is_lowered_to_it(served_folder, served_sources):
    """The tiny model's generation config asks for 6 new tokens; a server limited to 2 generates at most 2 for a
    request that leaves max_new_tokens to the model, as translate does with max_new_tokens=2."""
    from vanilla_transformer.inference import load_model_and_tokenizer, translate
    from vanilla_transformer.serving import Limits, start_in_thread

    model, tokenizer = load_model_and_tokenizer(str(served_folder), dtype="float32")
    assert model.generation_config.max_new_tokens == 6
    texts = served_sources[:4]
    expected = translate(model, tokenizer, texts, num_beams=1, max_new_tokens=2)
    assert expected != translate(model, tokenizer, texts, num_beams=1)
    limits = Limits(**{**SMALL, "max_new_tokens": 2})
    with start_in_thread(served_app(served_folder, limits=limits)) as running:
        reply = post(running.url, "/translate", {"text": texts, "num_beams": 1})
    assert reply.status_code == 200 and reply.json()["translations"] == expected
