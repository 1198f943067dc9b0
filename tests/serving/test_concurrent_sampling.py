"""Seeded sampling under concurrency: torch has one global random generator, so a seeded request's reply must not
depend on what else samples at the same time. Seeded /translate requests and seeded streams, sent together with
unseeded sampling requests and streams, each equal the same request sent alone."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from helpers.serving import post, read_events

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

SAMPLING = {"do_sample": True, "top_k": 0, "temperature": 1.5, "max_new_tokens": 20}
ROUNDS = 3


def translate(url: str, body: dict) -> list[str]:
    reply = post(url, "/translate", body)
    assert reply.status_code == 200, reply.text
    return reply.json()["translations"]


def stream(url: str, body: dict) -> str:
    with httpx.stream("POST", url + "/translate/stream", json=body, timeout=60) as response:
        assert response.status_code == 200
        events = read_events(response.iter_lines())
    assert events[-1][0] == "done", events[-1]
    return events[-1][1]["translation"]


@pytest.fixture(scope="module")
def tiny_server(served_folder):
    """A server over `served_folder` with slots for every stream the test runs at once."""
    from helpers.serving import served_app

    from vanilla_transformer.serving import Limits, start_in_thread

    limits = Limits(max_texts=8, max_request_bytes=4096, max_new_tokens=20, max_streams=8)
    with start_in_thread(served_app(served_folder, limits=limits, max_wait_ms=20)) as running:
        yield running.url


def test_seeded_replies_do_not_depend_on_concurrent_sampling(tiny_server, served_sources):
    seeded = [
        (translate, {"text": served_sources[2 * i : 2 * i + 2], **SAMPLING, "seed": 10 + i}) for i in range(4)
    ]
    seeded += [(stream, {"text": served_sources[10 + i], **SAMPLING, "seed": 20 + i}) for i in range(3)]
    unseeded = [(stream, {"text": served_sources[13 + i], **SAMPLING}) for i in range(3)]
    unseeded += [(translate, {"text": served_sources[16:18], **SAMPLING})]
    alone = [call(tiny_server, body) for call, body in seeded]
    assert len({str(reply) for reply in alone[:4]}) == 4  # different texts and seeds: different samples
    with ThreadPoolExecutor(len(seeded) + len(unseeded)) as pool:
        for _ in range(ROUNDS):
            noise = [pool.submit(call, tiny_server, body) for call, body in unseeded]
            together = [pool.submit(call, tiny_server, body) for call, body in seeded]
            assert [future.result(timeout=120) for future in together] == alone
            for future in noise:
                future.result(timeout=120)
    assert httpx.get(tiny_server + "/health", timeout=30).json()["status"] == "ok"
