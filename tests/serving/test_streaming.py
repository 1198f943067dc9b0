"""Streams that end early: a client that disconnects mid-stream cancels its generation and frees its slot; a
server whose stream slots are all taken refuses another stream (429 naming the limit) until one is freed; an
engine that fails mid-stream ends the stream with an "error" event after the tokens sent so far, frees the slot,
and the server streams on.

The model of the first two is the tiny one with 512 positions and a generation config that forces 400 new
tokens, so that a stream is still decoding when the client goes away."""

from __future__ import annotations

import time

import httpx
import pytest
from helpers.serving import post, read_events, served_app

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


class FailingModel:
    """The model, except that while ``failing`` is set its generations raise after ``after`` decoding steps."""

    def __init__(self, model, after: int):
        import threading

        self.model, self.after, self.failing = model, after, threading.Event()

    def __getattr__(self, name: str):
        return getattr(self.model, name)

    def generate(self, **kwargs):
        from transformers import LogitsProcessor, LogitsProcessorList

        outer = self

        class FailAfter(LogitsProcessor):
            steps = 0

            def __call__(self, input_ids, scores):
                self.steps += 1
                if outer.failing.is_set() and self.steps > outer.after:
                    raise RuntimeError(f"the engine failed at step {self.steps}")
                return scores

        return self.model.generate(**kwargs, logits_processor=LogitsProcessorList([FailAfter()]))


def stream_events(url: str, text: str) -> list[tuple[str, dict]]:
    with httpx.stream("POST", url + "/translate/stream", json={"text": text}, timeout=60) as response:
        assert response.status_code == 200
        return read_events(response.iter_lines())


def test_an_engine_error_mid_stream_is_an_error_event_and_the_server_goes_on(served_folder, served_sources):
    from vanilla_transformer.inference import load_model_and_tokenizer
    from vanilla_transformer.serving import Limits, ServedModel, create_app, start_in_thread

    model, tokenizer = load_model_and_tokenizer(str(served_folder), dtype="float32")
    failing = FailingModel(model, after=2)
    served = ServedModel(failing, tokenizer, "torch", "failing")
    with start_in_thread(create_app(served, Limits(max_streams=1))) as running:
        healthy = {text: stream_events(running.url, text) for text in served_sources[:10]}
        text = next(t for t, events in healthy.items() if len(events) >= 4)  # 3 tokens or more, then done
        failing.failing.set()
        events = stream_events(running.url, text)
        assert events[-1] == ("error", {"detail": "RuntimeError: the engine failed at step 3"})
        assert 1 <= len(events) - 1 <= 2 and events[:-1] == healthy[text][: len(events) - 1]  # sent so far
        assert wait_until_idle(running.url)["streams_active"] == 0  # its slot is free again
        assert httpx.get(running.url + "/health", timeout=30).json()["status"] == "ok"
        failing.failing.clear()
        assert stream_events(running.url, text) == healthy[text]
