"""Every endpoint of the translation tiny_server on a loopback port, against the translation loop called directly
(`inference.translate_nbest`, the path `vanilla-transformer translate` takes): /translate with one text, a list,
n-best lists, seeded sampling; /translate/stream (greedy and sampling) against /translate; /health, /info and
the OpenAPI schema."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from helpers.serving import post, read_events

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def reference(served_folder):
    """(model, tokenizer) loaded as the tiny_server loads them, for the expected outputs."""
    from vanilla_transformer.inference import load_model_and_tokenizer

    return load_model_and_tokenizer(str(served_folder), dtype="float32")


def test_health_and_info(tiny_server, served_folder):
    health = httpx.get(tiny_server + "/health", timeout=30)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    reply = httpx.get(tiny_server + "/info", timeout=30)
    info = reply.json()
    # the folder's name, never its path: /info answers anyone who can reach the server
    assert info["model"] == served_folder.name and info["engine"] == "torch" and info["streaming"]
    assert str(served_folder.parent) not in reply.text
    # every limit and timeout, max_source_tokens lowered to the model's positions
    from vanilla_transformer.serving import Limits

    assert set(info["limits"]) == set(Limits().as_dict())
    assert info["limits"]["max_texts"] == 8 and info["limits"]["max_source_tokens"] == 24
    assert info["defaults"]["max_new_tokens"] == 6
    assert {"text", "num_beams", "do_sample", "seed"} <= set(info["options"])
    schema = httpx.get(tiny_server + "/openapi.json", timeout=30).json()
    assert {"/translate", "/translate/stream", "/health", "/info"} <= set(schema["paths"])


def test_one_text_and_a_list_equal_the_translation_loop(tiny_server, reference, served_sources):
    from vanilla_transformer.inference import translate_nbest

    model, tokenizer = reference
    texts = [*served_sources[:5], "", "   "]
    options: dict[str, Any]
    for options in ({}, {"num_beams": 3, "length_penalty": 0.6}, {"num_beams": 2, "max_new_tokens": 4}):
        expected = [hyps[0] for hyps in translate_nbest(model, tokenizer, texts, **options)]
        reply = post(tiny_server, "/translate", {"text": texts, **options})
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"translations": expected}
        single = post(tiny_server, "/translate", {"text": texts[1], **options}).json()
        assert single == {"translations": [expected[1]]}
    assert expected[-2:] == ["", ""] and any(expected[:5])


def test_nbest(tiny_server, reference, served_sources):
    from vanilla_transformer.inference import translate_nbest

    model, tokenizer = reference
    expected = translate_nbest(model, tokenizer, served_sources[:3], num_beams=4, num_return_sequences=3)
    reply = post(
        tiny_server, "/translate", {"text": served_sources[:3], "num_beams": 4, "num_return_sequences": 3}
    ).json()
    assert reply["nbest"] == expected and reply["translations"] == [hyps[0] for hyps in expected]
    assert all(len(hyps) == 3 for hyps in reply["nbest"])


def test_seeded_sampling_is_reproducible_and_samples(tiny_server, served_sources):
    body = {
        "text": served_sources[:4],
        "do_sample": True,
        "top_k": 0,
        "temperature": 1.5,
        "max_new_tokens": 10,
    }
    first = post(tiny_server, "/translate", {**body, "seed": 3}).json()["translations"]
    assert post(tiny_server, "/translate", {**body, "seed": 3}).json()["translations"] == first
    others = [
        tuple(post(tiny_server, "/translate", {**body, "seed": s}).json()["translations"]) for s in (4, 5, 6)
    ]
    assert any(other != tuple(first) for other in others)  # sampling, not search


def test_stream_equals_the_greedy_translation(tiny_server, served_sources):
    for text in served_sources[:4]:
        expected = post(tiny_server, "/translate", {"text": text, "num_beams": 1}).json()["translations"][0]
        with httpx.stream(
            "POST", tiny_server + "/translate/stream", json={"text": text}, timeout=60
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = read_events(response.iter_lines())
        tokens = [data["text"] for name, data in events if name == "token"]
        assert events[-1][0] == "done" and events[-1][1]["translation"] == expected
        assert " ".join("".join(tokens).split()) == expected
        assert len(tokens) >= 1


def test_stream_samples_with_a_seed(tiny_server, served_sources):
    body = {
        "text": served_sources[0],
        "do_sample": True,
        "top_k": 0,
        "temperature": 1.5,
        "max_new_tokens": 12,
    }

    def sample(seed: int) -> str:
        with httpx.stream(
            "POST", tiny_server + "/translate/stream", json={**body, "seed": seed}, timeout=60
        ) as r:
            return read_events(r.iter_lines())[-1][1]["translation"]

    assert sample(7) == sample(7)
    assert len({sample(s) for s in (1, 2, 3, 4)}) > 1


def test_stream_of_an_empty_text(tiny_server):
    with httpx.stream("POST", tiny_server + "/translate/stream", json={"text": " "}, timeout=60) as response:
        assert read_events(response.iter_lines()) == [("done", {"translation": ""})]
