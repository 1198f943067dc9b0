"""Streams that end early: a client that disconnects mid-stream cancels its generation and frees its slot; a
server whose stream slots are all taken refuses another stream (429 naming the limit) until one is freed.

The model here is the tiny one with 512 positions and a generation config that forces 400 new tokens, so that
a stream is still decoding when the client goes away."""

from __future__ import annotations

import time

import httpx
import pytest
from helpers.serving import post, served_app

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

LENGTH = 400


@pytest.fixture(scope="module")
def long_server(tmp_path_factory):
    from conftest import tiny_model, tiny_tokenizer
    from vanilla_transformer.modeling import save_with_remote_code
    from vanilla_transformer.serving import Limits, start_in_thread

    tokenizer = tiny_tokenizer()
    model = tiny_model(vocab_size=len(tokenizer), max_position_embeddings=512)
    model.generation_config.max_new_tokens = LENGTH
    model.generation_config.min_new_tokens = LENGTH
    folder = save_with_remote_code(model, tmp_path_factory.mktemp("long"), tokenizer)
    app = served_app(folder, limits=Limits(max_streams=1, max_new_tokens=LENGTH))
    with start_in_thread(app) as running:
        yield running.url


def stream_stats(url: str) -> dict:
    stats = httpx.get(url + "/info", timeout=30).json()["stats"]
    return {k: v for k, v in stats.items() if k.startswith("streams_")}


def wait_until_idle(url: str) -> dict:
    deadline = time.monotonic() + 60
    while (stats := stream_stats(url))["streams_active"] and time.monotonic() < deadline:
        time.sleep(0.05)
    return stats


def first_event_then_hang_up(url: str) -> None:
    with httpx.stream("POST", url + "/translate/stream", json={"text": "起初神创造天地。"}, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data:"):
                return  # leaving the block closes the connection mid-stream


def test_a_disconnect_cancels_the_generation_and_frees_the_slot(long_server):
    with httpx.stream("POST", long_server + "/translate/stream", json={"text": "神"}, timeout=120) as r:
        done = [line for line in r.iter_lines() if line.startswith("data:")]
    assert len(done) >= 2 and '"translation"' in done[-1]  # a stream read to its end
    assert wait_until_idle(long_server) == {"streams_active": 0, "streams_served": 1, "streams_cancelled": 0}
    first_event_then_hang_up(long_server)
    stats = wait_until_idle(long_server)
    assert stats == {"streams_active": 0, "streams_served": 2, "streams_cancelled": 1}
    assert httpx.get(long_server + "/health", timeout=30).json()["status"] == "ok"


def test_all_slots_taken_gives_429_until_one_is_freed(long_server):
    wait_until_idle(long_server)
    with httpx.stream("POST", long_server + "/translate/stream", json={"text": "神"}, timeout=60) as first:
        lines = first.iter_lines()  # kept: a dropped iterator closes the connection
        assert next(lines).startswith("event:")  # decoding now
        refused = post(long_server, "/translate/stream", {"text": "地"})
        assert refused.status_code == 429 and "max_streams=1" in refused.json()["detail"]
    assert wait_until_idle(long_server)["streams_active"] == 0
    with httpx.stream("POST", long_server + "/translate/stream", json={"text": "地"}, timeout=120) as again:
        assert again.status_code == 200
        assert '"translation"' in [line for line in again.iter_lines() if line.startswith("data:")][-1]
