"""Continuous batching (`serving.continuous`): under a concurrent load of short and long requests, greedy and beam
search, n-best, scores and streams, every reply equals the same request sent alone, and the translations equal
request-level batching's; a request that arrives while a long one decodes joins the running batch and is answered
before it ends (counted in decoding steps: the batch's rows rise when it joins and fall when it leaves, before the
long request's last step); a request whose client disconnects leaves the batch (the rows on /metrics drop); what
cannot join (sampling, a glossary term) is batched by request, as /info says.

The model is an untrained tiny one with 512 positions, which never ends a sentence: each request decodes to its
length limit, so the order in which requests end is known in steps."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from helpers.serving import post, read_events, served_app

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

SHORT = ["神", "起初神创造天地。", "地是空虚混沌，", "神说：要有光，"]
LONG = "In the beginning God created the heaven and the earth. And the earth was without form"
LONG_STEPS = 100


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """The URLs of a continuous-batching and a request-level server over one untrained model, and the
    continuous server's batcher."""
    from conftest import tiny_model, tiny_tokenizer

    from vanilla_transformer.modeling import save_with_remote_code
    from vanilla_transformer.serving import Limits, start_in_thread

    tokenizer = tiny_tokenizer()
    model = tiny_model(vocab_size=len(tokenizer), max_position_embeddings=512)
    folder = save_with_remote_code(model, tmp_path_factory.mktemp("continuous"), tokenizer)
    limits = Limits(max_texts=8, max_new_tokens=LONG_STEPS, max_streams=8)
    continuous = served_app(folder, limits=limits)
    request_level = served_app(folder, limits=limits, scheduling="request")
    with start_in_thread(continuous) as one, start_in_thread(request_level) as other:
        yield one.url, other.url, continuous.state.batcher


def send(url: str, request: tuple[str, dict]) -> dict:
    """The reply of a /translate request, or of a stream: its tokens' texts and its translation."""
    kind, body = request
    if kind == "translate":
        reply = post(url, "/translate", body, timeout=300)
        assert reply.status_code == 200, reply.text
        return reply.json()
    with httpx.stream("POST", url + "/translate/stream", json=body, timeout=300) as r:
        assert r.status_code == 200
        events = read_events(r.iter_lines())
    assert events[-1][0] == "done", events[-1]
    return {
        "pieces": [data["text"] for name, data in events[:-1]],
        "translation": events[-1][1]["translation"],
    }


def rounded(reply: dict) -> dict:
    """A reply with its scores at 4 decimals (float rounding of masked padding is below that)."""
    return {
        key: re.sub(r"(-?\d+\.\d{4})\d*", r"\1", str(value)) if key == "scores" else value
        for key, value in reply.items()
    }


def test_a_mixed_load_gets_the_replies_of_each_request_alone(servers):
    continuous, request_level, batcher = servers
    requests = []
    for i, text in enumerate(SHORT):
        requests.append(("translate", {"text": text, "num_beams": 1, "max_new_tokens": 3 + i % 4}))
        requests.append(
            ("translate", {"text": text, "num_beams": 4, "num_return_sequences": 2, "max_new_tokens": 5})
        )
        if i % 2 == 0:
            requests.append(("stream", {"text": text, "max_new_tokens": 6 + i}))
    requests[3:3] = [
        ("translate", {"text": LONG, "num_beams": 1, "max_new_tokens": LONG_STEPS}),
        ("translate", {"text": [LONG, SHORT[1], ""], "num_beams": 4, "max_new_tokens": 30, "scores": True}),
        ("stream", {"text": LONG, "max_new_tokens": 50}),
    ]
    steps_before = batcher.stats["steps"]
    with ThreadPoolExecutor(12) as pool:
        together = list(pool.map(lambda request: send(continuous, request), requests))
    assert batcher.stats["largest_batch"] >= 2 and batcher.stats["fallback"] == 0
    assert batcher.stats["steps"] > steps_before
    alone = [send(continuous, request) for request in requests]
    assert [rounded(r) for r in together] == [rounded(r) for r in alone]
    # the same translations as request-level batching gives each request alone
    other = [send(request_level, request) for request in requests]
    assert [r["translation" if "pieces" in r else "translations"] for r in together] == [
        r["translation" if "pieces" in r else "translations"] for r in other
    ]


class StepHook:
    """Wraps the batcher's ``on_step``: records the rows of every step and lets a test hold the loop at a step
    until something it waits for has happened (each wait bounded)."""

    def __init__(self, batcher):
        self.batcher, self.rows = batcher, []
        self.pause: tuple | None = None  # (condition on the rows so far, event to wait for)
        self.paused = threading.Event()
        # the next step waits until it holds (up to a minute)
        self.slow: Callable[[], bool] | None = None
        self.original = batcher.on_step

    def __enter__(self):
        self.batcher.on_step = self
        return self

    def __exit__(self, *exc):
        self.batcher.on_step = self.original

    def __call__(self, rows: int) -> None:
        self.rows.append(rows)
        if self.original is not None:
            self.original(rows)
        started = time.monotonic()
        while self.slow is not None and not self.slow():
            assert time.monotonic() - started < 60, "the condition of slow never held"
            threading.Event().wait(0.01)
        self.slow = None
        if self.pause is not None and self.pause[0](self.rows):
            condition, event = self.pause
            self.pause = None
            self.paused.set()
            assert event.wait(60)

    def hold(self, condition, event: threading.Event) -> None:
        self.paused.clear()
        self.pause = (condition, event)


def test_a_request_that_arrives_mid_batch_joins_and_is_answered_before_the_batch_ends(servers):
    continuous, _, batcher = servers
    long_request = ("stream", {"text": LONG, "max_new_tokens": LONG_STEPS})
    order: list[str] = []
    with StepHook(batcher) as hook:
        queued, answered = threading.Event(), threading.Event()
        # the loop holds at the long stream's third step until the short requests are queued
        hook.hold(lambda rows: len(rows) >= 3, queued)
        with ThreadPoolExecutor(1) as pool:
            long_reply = pool.submit(lambda: (send(continuous, long_request), order.append("long")))
            assert hook.paused.wait(60)
            short = [
                ("translate", {"text": SHORT[1], "num_beams": 4, "max_new_tokens": 4}),
                ("stream", {"text": SHORT[2], "max_new_tokens": 3}),
            ]
            with ThreadPoolExecutor(2) as clients:
                replies = clients.map(lambda request: send(continuous, request), short)
                while batcher.queued < 2:
                    threading.Event().wait(0.01)
                # and once both have left the batch, until their replies are in
                hook.hold(lambda rows: rows[-1] == 1 and max(rows) == 1 + 4 + 1, answered)
                queued.set()
                replies = list(replies)
            order.append("short")
            answered.set()
            long_reply.result(timeout=300)
    assert order == ["short", "long"]
    rows = hook.rows
    joined = rows.index(6)
    left = next(i for i in range(joined, len(rows)) if rows[i] == 1)
    # the long stream decoded alone, then beside the 4 beams and the stream, then alone again until its end
    assert rows[:3] == [1, 1, 1] and set(rows[joined:left]) <= {6, 5, 2}
    assert left - joined <= 4 and len(rows) - left >= LONG_STEPS - 10
    assert replies == [send(continuous, request) for request in short]


def batch_rows(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=30).text
    return float(re.search(r"^vanilla_transformer_batch_rows (\S+)$", text, re.M).group(1))


def test_a_client_that_leaves_leaves_the_batch(servers):
    import json
    import socket

    continuous, _, batcher = servers
    body = {"text": LONG, "max_new_tokens": LONG_STEPS}
    left_before = batcher.stats["left"]
    with StepHook(batcher) as hook:
        closed, scraped = threading.Event(), threading.Event()
        hook.hold(lambda rows: rows[-1] == 2, closed)
        with ThreadPoolExecutor(1) as pool:
            staying = pool.submit(send, continuous, ("stream", body))
            address = httpx.URL(continuous)
            with socket.create_connection((address.host, address.port or 80), timeout=60) as leaving:
                payload = json.dumps({**body, "num_beams": 1}).encode()
                head = "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                leaving.sendall(f"{head}Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
                assert hook.paused.wait(60)
                assert batch_rows(continuous) == 2
            # the client is gone: the loop waits until the server has seen it go
            hook.slow = lambda: (
                batcher.stats["left"] > left_before
                or any(job.cancelled for job in list(batcher._jobs.values()))
            )
            hook.hold(lambda rows: rows[-1] == 1, scraped)
            closed.set()
            assert hook.paused.wait(60)
            assert batch_rows(continuous) == 1
            scraped.set()
            reply = staying.result(timeout=300)
    assert batcher.stats["left"] == left_before + 1
    assert reply == send(continuous, ("stream", body))
    assert len(reply["pieces"]) == LONG_STEPS


def test_what_cannot_join_is_batched_by_request(servers):
    continuous, request_level, batcher = servers
    info = httpx.get(continuous + "/info", timeout=30).json()
    assert info["batching"]["scheduling"] == "continuous"
    assert httpx.get(request_level + "/info", timeout=30).json()["batching"]["scheduling"] == "request"
    before = batcher.stats["fallback"]
    sampled = {"text": SHORT[0], "num_beams": 1, "do_sample": True, "seed": 3, "max_new_tokens": 5}
    glossary = {"text": SHORT[1], "num_beams": 2, "glossary": {"神": "God"}, "max_new_tokens": 8}
    for body in (sampled, glossary):
        assert send(continuous, ("translate", body)) == send(request_level, ("translate", body))
    assert batcher.stats["fallback"] == before + 2


def test_the_plans_kept_for_sets_of_request_options_are_bounded(servers):
    """Each set of options a client sends is planned once and kept, but clients choose the options: however many
    distinct sets arrive, at most `MAX_PLANS` stay, and a set planned afresh plans as before."""
    from vanilla_transformer.serving.continuous import MAX_PLANS

    _, _, batcher = servers
    first = batcher._plan_options({"num_beams": 2, "max_new_tokens": 3}, None)
    assert first is not None
    for length_penalty in range(MAX_PLANS + 40):
        assert batcher._plan_options({"num_beams": 2, "length_penalty": 1.0 + length_penalty / 100}, None)
        assert len(batcher._plans) <= MAX_PLANS
    assert batcher._plan_options({"num_beams": 2, "max_new_tokens": 3}, None) == first


def test_multilingual_requests_for_several_targets_decode_in_one_batch(tmp_path_factory):
    """A tiny NLLB-200 (converted from transformers): requests for three target languages, greedy and beam
    search, join one running batch each (nothing sent to request-level batching), every sentence with its own
    forced target-language token; each reply equals `inference.translate_hypotheses` of that request alone, token
    scores included (the forced token's log-probability 0)."""
    from helpers.multilingual import NLLB_TARGETS, SAMPLE, nllb_folder

    from vanilla_transformer.convert.m2m100 import convert_m2m100_checkpoint
    from vanilla_transformer.inference import load_model_and_tokenizer
    from vanilla_transformer.inference.translate import translate_hypotheses
    from vanilla_transformer.serving.continuous import ContinuousBatcher

    root = tmp_path_factory.mktemp("multilingual")
    folder = convert_m2m100_checkpoint(nllb_folder(root), root / "converted")
    model, tokenizer = load_model_and_tokenizer(str(folder), dtype="float32")
    requests = [
        (
            SAMPLE[k : k + 1 + k % 2],
            {"src_lang": "eng_Latn", "tgt_lang": target, "max_new_tokens": 12, **beams},
        )
        for k, target in enumerate(NLLB_TARGETS * 2)
        for beams in ({"num_beams": 1}, {"num_beams": 3, "num_return_sequences": 2})
    ]
    batcher = ContinuousBatcher(model, tokenizer)
    # queued before the worker starts: each decoding option's requests join their batch at its first step
    futures = [batcher.submit(texts, kwargs, 8, scores=True) for texts, kwargs in requests]
    batcher.start()
    try:
        replies = [future.result(timeout=300) for future in futures]
    finally:
        batcher.close(60)
    greedy = sum(len(texts) for texts, kwargs in requests if kwargs["num_beams"] == 1)
    assert batcher.stats["fallback"] == 0 and batcher.stats["largest_batch"] == greedy
    for (texts, kwargs), reply in zip(requests, replies):
        alone = translate_hypotheses(
            model, tokenizer, texts, batch_size=len(texts), token_scores=True, **kwargs
        )
        assert [[h.text for h in hyps] for hyps in reply] == [[h.text for h in hyps] for hyps in alone]
        for hyps, expected in zip(reply, alone):
            assert [h.score for h in hyps] == pytest.approx([h.score for h in expected], abs=1e-4)
            for got, want in zip(hyps, expected):
                assert got.tokens.token_ids == want.tokens.token_ids
                assert got.tokens.token_log_probs == pytest.approx(want.tokens.token_log_probs, abs=1e-4)
    # the forced token selects the language: the targets' replies differ
    assert len({str(reply) for reply in replies[:6:2]}) == 3
