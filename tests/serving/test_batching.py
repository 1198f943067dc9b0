"""Dynamic batching: requests with the same decoding options are translated in one engine call, and each reply
equals what the request gets alone (`inference.translate_nbest` on its texts only), for greedy and beam search;
other options, seeds and the token budget split groups; an engine error fails only its group; abandoned requests
are dropped; closing translates what is queued. And load tests through HTTP: 500 requests from 32 concurrent
clients, and 256 through LibreTranslate's API and the server's own mixed, every one answered, every answer
right."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from helpers.serving import post

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def loaded_folder(served_folder):
    from vanilla_transformer.inference import load_model_and_tokenizer

    return load_model_and_tokenizer(str(served_folder), dtype="float32")


def alone(model, tokenizer, texts, kwargs):
    from vanilla_transformer.inference import translate_nbest

    return translate_nbest(model, tokenizer, texts, batch_size=1, **kwargs)


def texts_of(nbest):
    """The texts of a batcher result's n-best lists of hypotheses."""
    return [[hypothesis.text for hypothesis in hypotheses] for hypotheses in nbest]


def queued_then_started(batcher, requests):
    """Submit every (texts, kwargs, seed) before the worker starts, so that the grouping does not depend on
    timing; then start it and wait for every result (the texts of its n-best lists)."""
    futures = [
        batcher.submit(texts, kwargs, tokens=10 * len(texts), seed=seed) for texts, kwargs, seed in requests
    ]
    batcher.start()
    try:
        return [texts_of(future.result(timeout=120)) for future in futures]
    finally:
        batcher.close(timeout=60)


@pytest.mark.parametrize("kwargs", [{"num_beams": 1}, {"num_beams": 3, "length_penalty": 0.6}])
def test_one_group_one_call_and_each_reply_as_alone(loaded_folder, served_sources, kwargs):
    from vanilla_transformer.serving import Batcher

    model, tokenizer = loaded_folder
    requests = [(served_sources[i : i + 1 + i % 3], kwargs, None) for i in range(8)]
    batcher = Batcher(model, tokenizer, max_wait_s=0.0, max_batch_tokens=10**6)
    results = queued_then_started(batcher, requests)
    assert batcher.stats["batches"] == 1 and batcher.stats["largest_batch"] == 8
    assert results == [alone(model, tokenizer, texts, kwargs) for texts, kwargs, _ in requests]


def test_options_seeds_and_the_token_budget_split_groups(loaded_folder, served_sources):
    from vanilla_transformer.serving import Batcher

    model, tokenizer = loaded_folder
    greedy, beams = {"num_beams": 1}, {"num_beams": 2, "num_return_sequences": 2}
    sample = {"num_beams": 1, "do_sample": True, "top_k": 0}
    requests = [([served_sources[i]], greedy if i % 2 else beams, None) for i in range(6)]
    requests += [([served_sources[0]], sample, 5), ([served_sources[0]], sample, 5)]
    batcher = Batcher(model, tokenizer, max_wait_s=0.0, max_batch_tokens=20)  # two 10-token requests per call
    results = queued_then_started(batcher, requests)
    # greedy: 3 requests -> 2 calls, beams: 3 -> 2, each seeded request alone: 2
    assert batcher.stats["batches"] == 6 and batcher.stats["largest_batch"] == 2
    assert results[:6] == [alone(model, tokenizer, texts, kwargs) for texts, kwargs, _ in requests[:6]]
    assert results[6] == results[7]  # the same seed, each alone: the same sample


def test_an_engine_error_fails_its_group_only_and_cancelled_requests_are_dropped(
    loaded_folder, served_sources
):
    from vanilla_transformer.serving import Batcher

    model, tokenizer = loaded_folder
    batcher = Batcher(model, tokenizer, max_wait_s=0.0)
    bad = batcher.submit([served_sources[0]], {"no_such_generate_option": 1}, tokens=10)  # generate() raises
    gone = batcher.submit([served_sources[1]], {"num_beams": 2}, tokens=10)
    gone.cancel()
    good = batcher.submit([served_sources[2]], {"num_beams": 1}, tokens=10)
    batcher.start()
    assert texts_of(good.result(timeout=120)) == alone(
        model, tokenizer, [served_sources[2]], {"num_beams": 1}
    )
    with pytest.raises(ValueError, match="no_such_generate_option"):
        bad.result(timeout=120)
    after = batcher.submit([served_sources[3]], {}, tokens=10)
    assert texts_of(after.result(timeout=120)) == alone(model, tokenizer, [served_sources[3]], {})
    batcher.close(timeout=60)
    assert batcher.stats["failed_batches"] == 1 and batcher.stats["dropped"] == 1 and not batcher.alive


def test_close_translates_what_is_queued_then_refuses(loaded_folder, served_sources):
    from vanilla_transformer.serving import Batcher

    model, tokenizer = loaded_folder
    batcher = Batcher(model, tokenizer, max_wait_s=30.0)  # a long wait that closing cuts short
    futures = [batcher.submit([text], {"num_beams": 1}, tokens=10) for text in served_sources[:5]]
    batcher.start()
    batcher.close(timeout=120)
    assert [texts_of(f.result(timeout=0)) for f in futures] == [
        alone(model, tokenizer, [text], {"num_beams": 1}) for text in served_sources[:5]
    ]
    with pytest.raises(RuntimeError, match="shutting down"):
        batcher.submit(["a"], {}, tokens=1)


def test_500_requests_from_32_clients(tiny_server, loaded_folder, served_sources):
    model, tokenizer = loaded_folder
    options = [{"num_beams": 1}, {"num_beams": 2, "max_new_tokens": 5}]
    expected = {
        (i, k): alone(model, tokenizer, [text], kwargs)[0][0]
        for i, text in enumerate(served_sources)
        for k, kwargs in enumerate(options)
    }
    draws = random.Random(0)
    jobs = [(draws.randrange(len(served_sources)), draws.randrange(len(options))) for _ in range(500)]

    def client(share: list[tuple[int, int]]) -> list[tuple[tuple[int, int], int, str]]:
        with httpx.Client(timeout=120) as session:
            replies = []
            for i, k in share:
                reply = session.post(
                    tiny_server + "/translate", json={"text": served_sources[i], **options[k]}
                )
                replies.append(((i, k), reply.status_code, reply.json()["translations"][0]))
            return replies

    before = httpx.get(tiny_server + "/info", timeout=30).json()["stats"]
    with ThreadPoolExecutor(32) as pool:
        answered = [reply for share in pool.map(client, [jobs[c::32] for c in range(32)]) for reply in share]
    assert len(answered) == 500
    assert all(status == 200 for _, status, _ in answered)
    wrong = [(key, text, expected[key]) for key, _, text in answered if text != expected[key]]
    assert not wrong, wrong[:5]
    stats = httpx.get(tiny_server + "/info", timeout=30).json()["stats"]
    assert stats["requests"] - before["requests"] == 500 and stats["failed_batches"] == 0
    assert stats["largest_batch"] > 1  # concurrent requests were grouped
    assert post(tiny_server, "/translate", {"text": served_sources[0]}).status_code == 200


def test_the_load_test_through_libretranslate(served_folder, loaded_folder, served_sources, tmp_path):
    from helpers.serving import served_app, with_card

    from vanilla_transformer.serving import start_in_thread

    model, tokenizer = loaded_folder
    folder = with_card(served_folder, tmp_path / "tiny-zh-en")
    # LibreTranslate decodes with the model's defaults; the server's own requests beside it ask for greedy search
    bodies = [
        lambda text: {"q": text, "source": "auto", "target": "en"},
        lambda text: {"text": text, "num_beams": 1},
    ]
    expected = {
        (i, k): alone(model, tokenizer, [text], kwargs)[0][0]
        for i, text in enumerate(served_sources)
        for k, kwargs in enumerate([{}, {"num_beams": 1}])
    }
    draws = random.Random(1)
    jobs = [(draws.randrange(len(served_sources)), draws.randrange(2)) for _ in range(256)]

    def client(share: list[tuple[int, int]]) -> list[tuple[tuple[int, int], int, str]]:
        with httpx.Client(timeout=120) as session:
            replies = []
            for i, k in share:
                reply = session.post(url + "/translate", json=bodies[k](served_sources[i]))
                data = reply.json()
                replies.append(
                    ((i, k), reply.status_code, data["translatedText"] if k == 0 else data["translations"][0])
                )
            return replies

    with start_in_thread(served_app(folder, max_wait_ms=20)) as server:
        url = server.url
        with ThreadPoolExecutor(32) as pool:
            answered = [
                reply for share in pool.map(client, [jobs[c::32] for c in range(32)]) for reply in share
            ]
        stats = httpx.get(url + "/info", timeout=30).json()["stats"]
    assert len(answered) == len(jobs) and all(status == 200 for _, status, _ in answered)
    wrong = [(key, text, expected[key]) for key, _, text in answered if text != expected[key]]
    assert not wrong, wrong[:5]
    assert stats["requests"] == len(jobs) and stats["largest_batch"] > 1


def test_scored_requests_group_apart_and_carry_their_scores(loaded_folder, served_sources):
    """A request with scores is not grouped with one without (other work); its hypotheses carry the sequence
    scores and per-token log-probabilities of `inference.translate_hypotheses` alone, the other's none."""
    from vanilla_transformer.inference import translate_hypotheses
    from vanilla_transformer.serving import Batcher

    model, tokenizer = loaded_folder
    beams: dict[str, Any] = {"num_beams": 2, "num_return_sequences": 2}
    batcher = Batcher(model, tokenizer, max_wait_s=0.0, max_batch_tokens=10**6)
    plain = [batcher.submit([text], beams, tokens=10) for text in served_sources[:2]]
    scored = [batcher.submit([text], beams, tokens=10, scores=True) for text in served_sources[2:4]]
    batcher.start()
    try:
        plain_results = [future.result(timeout=120) for future in plain]
        scored_results = [future.result(timeout=120) for future in scored]
    finally:
        batcher.close(timeout=60)
    assert batcher.stats["batches"] == 2
    for text, [hypotheses] in zip(served_sources[:2], plain_results):
        assert all(h.score is None and h.tokens is None for h in hypotheses)
        assert [h.text for h in hypotheses] == alone(model, tokenizer, [text], beams)[0]
    for text, [hypotheses] in zip(served_sources[2:4], scored_results):
        [expected] = translate_hypotheses(model, tokenizer, [text], batch_size=1, token_scores=True, **beams)
        assert [h.text for h in hypotheses] == [h.text for h in expected]
        for mine, theirs in zip(hypotheses, expected):
            assert mine.tokens is not None and theirs.tokens is not None
            assert mine.score == pytest.approx(theirs.score, abs=1e-4)
            assert mine.tokens.token_ids == theirs.tokens.token_ids
            assert mine.tokens.token_log_probs == pytest.approx(theirs.tokens.token_log_probs, abs=1e-4)
