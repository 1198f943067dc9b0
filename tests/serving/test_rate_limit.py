"""The per-key rate limit (`serving.ratelimit.RateLimiter`, ``serve --rate_limit N``) with an injected clock: the
N+1-th request within a minute gets 429 with Retry-After in each API's own error shape (through the server, and
DeepL's through its SDK), another key is unaffected, the minute passing allows again; without keys, each client
address has its own budget; the limiter tracks a bounded number of clients."""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

KEYS = ("rate-key-one-9d1", "rate-key-two-4c7")
PER_MINUTE = 2


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def limited(served_folder, tmp_path_factory):
    """(URL, clock) of a server with two keys and a limit of PER_MINUTE requests a minute per key."""
    from helpers.serving import served_app, with_card

    from vanilla_transformer.serving import start_in_thread
    from vanilla_transformer.serving.ratelimit import RateLimiter

    folder = with_card(served_folder, tmp_path_factory.mktemp("rate") / "tiny-zh-en")
    clock = Clock()
    app = served_app(folder, api_keys=frozenset(KEYS), rate_limiter=RateLimiter(PER_MINUTE, clock=clock))
    with start_in_thread(app) as running:
        yield running.url, clock


def requests_of(api: str, key: str, text: str) -> dict:
    """httpx keyword arguments of one translation through ``api`` with ``key``, in the API's own way."""
    return {
        "own": {"url": "/translate", "json": {"text": [text]}, "headers": {"Authorization": f"Bearer {key}"}},
        "huggingface": {"url": "/", "json": {"inputs": text}, "headers": {"Authorization": f"Bearer {key}"}},
        "libretranslate": {
            "url": "/translate",
            "data": {"q": text, "source": "zh", "target": "en", "api_key": key},
        },
        "deepl": {
            "url": "/v2/translate",
            "json": {"text": [text], "target_lang": "EN-US"},
            "headers": {"Authorization": f"DeepL-Auth-Key {key}"},
        },
    }[api]


@pytest.mark.parametrize(
    "api, field, message",
    [
        ("own", "detail", "more than 2 requests a minute"),
        ("huggingface", "error", "more than 2 requests a minute"),
        ("libretranslate", "error", "Slowdown: 2 per 1 minute"),
        ("deepl", "message", "Too many requests"),
    ],
)
def test_the_next_request_gets_429_in_each_apis_shape(limited, served_sources, api, field, message):
    url, clock = limited
    # a new minute: every key has its whole budget
    clock.now += 60

    def send(key: str) -> httpx.Response:
        request = requests_of(api, key, served_sources[0])
        return httpx.post(url + request.pop("url"), timeout=60, **request)

    for _ in range(PER_MINUTE):
        assert send(KEYS[0]).status_code == 200
    refused = send(KEYS[0])
    assert refused.status_code == 429
    assert set(refused.json()) == {field} and message in refused.json()[field]
    # the bucket refills at PER_MINUTE a minute: one request back after 60 / PER_MINUTE seconds
    assert refused.headers["retry-after"] == str(60 // PER_MINUTE)
    assert send(KEYS[1]).status_code == 200
    clock.now += 60 / PER_MINUTE
    assert send(KEYS[0]).status_code == 200
    assert send(KEYS[0]).status_code == 429
    clock.now += 60
    assert send(KEYS[0]).status_code == 200
    # what is not a translation is not limited
    for path in ("/languages", "/health", "/info", "/metrics"):
        assert httpx.get(url + path, timeout=30).status_code == 200


def test_deepl_sdk_sees_too_many_requests(limited, served_sources, monkeypatch):
    import deepl

    # the SDK retries a 429 after a back-off; without retries it raises at once
    monkeypatch.setattr(deepl.http_client, "max_network_retries", 0)
    url, clock = limited
    clock.now += 60
    translator = deepl.Translator(KEYS[0], server_url=url)
    for _ in range(PER_MINUTE):
        translator.translate_text(served_sources[0], target_lang="EN-US")
    with pytest.raises(deepl.TooManyRequestsException):
        translator.translate_text(served_sources[0], target_lang="EN-US")


def test_without_keys_each_client_address_has_its_budget(served_folder):
    import asyncio

    from helpers.serving import served_app

    from vanilla_transformer.serving.ratelimit import RateLimiter

    app = served_app(served_folder, rate_limiter=RateLimiter(PER_MINUTE, clock=Clock()))

    async def usage(address: str) -> int:
        # /v2/usage is limited like every DeepL route and needs no engine
        transport = httpx.ASGITransport(app=app, client=(address, 1234))
        async with httpx.AsyncClient(transport=transport, base_url="http://server") as client:
            return (await client.get("/v2/usage")).status_code

    async def run() -> list[int]:
        return [await usage(a) for a in ("10.0.0.1", "10.0.0.1", "10.0.0.1", "10.0.0.2")]

    assert asyncio.run(run()) == [200, 200, 429, 200]


def test_the_limiter_is_bounded_and_refills():
    from vanilla_transformer.serving.ratelimit import RateLimiter

    clock = Clock()
    limiter = RateLimiter(3, clock=clock, max_clients=2)
    assert [limiter.acquire("a") for _ in range(4)] == [None, None, None, 20]
    clock.now += 10
    assert limiter.acquire("a") == 10
    clock.now += 10
    assert limiter.acquire("a") is None
    limiter.acquire("b")
    limiter.acquire("c")
    # the least recently seen client was dropped: "a" starts again with its whole budget
    assert len(limiter) == 2
    assert [limiter.acquire("a") for _ in range(3)] == [None, None, None]
    with pytest.raises(ValueError, match="expected integers >= 1"):
        RateLimiter(0)


def test_serve_rate_limit_option(served_folder):
    from helpers.serving import serve_process

    with serve_process(served_folder, "--rate_limit", "1") as (_, url):
        statuses = [httpx.get(url + "/v2/usage", timeout=30).status_code for _ in range(2)]
        metrics = httpx.get(url + "/metrics", timeout=30)
    assert statuses == [200, 429]
    assert 'vanilla_transformer_requests_total{api="deepl",status="429"} 1.0' in metrics.text
