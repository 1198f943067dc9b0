"""GET /metrics after a bounded load over the four APIs of a server with keys, sent with the clients people run
(`libretranslatepy`, the `deepl` SDK, `huggingface_hub.InferenceClient`) and raw requests, refusals included
(400, 403, 404, 413, 422): parsed with `prometheus_client`'s own parser, the request counters equal the requests
sent per API and status, the token counters equal the tokens of the texts sent and of the translations returned
(counted here with the tokenizer), and the batch histograms count the engine calls (counted here by wrapping
the engine's translate function)."""

from __future__ import annotations

from collections import Counter

import httpx
import pytest

pytest.importorskip("prometheus_client", reason="the serve extra (in dev): pip install -e '.[dev]'")

KEY = "metrics-test-key-5b2e"


@pytest.fixture(scope="module")
def keyed_server(served_folder, tmp_path_factory):
    from helpers.serving import served_app, with_card

    from vanilla_transformer.serving import start_in_thread

    folder = with_card(served_folder, tmp_path_factory.mktemp("metrics") / "tiny-zh-en")
    # request-level batching: one translate_hypotheses call per engine call, which the test counts
    app = served_app(folder, max_wait_ms=20, api_keys=frozenset({KEY}), scheduling="request")
    with start_in_thread(app) as running:
        yield running.url, folder


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """Every sample of /metrics, (name, sorted labels) -> value, read with `prometheus_client`'s parser."""
    from prometheus_client.parser import text_string_to_metric_families

    reply = httpx.get(url + "/metrics", timeout=30)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    assert KEY not in reply.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
    }


def grown(before: dict, after: dict, name: str, **labels: str) -> float:
    """How much the sample ``name`` with ``labels`` grew from ``before`` to ``after`` (absent: 0)."""
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_metrics_count_every_request_token_and_engine_call(keyed_server, served_sources, monkeypatch):
    import deepl
    import huggingface_hub.constants
    from huggingface_hub import InferenceClient
    from libretranslatepy import LibreTranslateAPI
    from transformers import AutoTokenizer

    import vanilla_transformer.inference as inference

    url, folder = keyed_server
    tokenizer = AutoTokenizer.from_pretrained(folder)
    # the tests run the Hub offline; this client talks to the loopback server only
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    engine_calls: list[int] = []
    translate_hypotheses = inference.translate_hypotheses

    def counted(model, tokenizer, texts, **kwargs):
        engine_calls.append(len(texts))
        return translate_hypotheses(model, tokenizer, texts, **kwargs)

    monkeypatch.setattr(inference, "translate_hypotheses", counted)
    before = scrape(url)
    sent: Counter[tuple[str, str]] = Counter()
    sources: list[str] = []
    translations: list[str] = []
    bearer = {"Authorization": f"Bearer {KEY}"}
    lt = {"source": "zh", "target": "en", "api_key": KEY}

    def raw(api: str, method: str, path: str, status: int, **request) -> httpx.Response:
        reply = httpx.request(method, url + path, timeout=60, **request)
        assert reply.status_code == status, (path, reply.text)
        sent[(api, str(status))] += 1
        return reply

    for i in range(4):
        texts = served_sources[2 * i : 2 * i + 2]
        reply = raw("own", "POST", "/translate", 200, json={"text": texts}, headers=bearer)
        sources += texts
        translations += reply.json()["translations"]
        reply = raw("libretranslate", "POST", "/translate", 200, json={"q": texts[0], **lt})
        sources.append(texts[0])
        translations.append(reply.json()["translatedText"])
    raw("own", "POST", "/translate", 403, json={"text": ["x"]})
    raw("own", "POST", "/translate", 422, json={"text": ["x"], "beams": 2}, headers=bearer)
    raw("own", "POST", "/translate", 413, json={"text": ["x" * 5000]}, headers=bearer)
    raw("own", "GET", "/no-such-path", 404)
    raw("own", "GET", "/health", 200)
    raw("libretranslate", "POST", "/translate", 400, json={"q": "x", **lt, "target": "fr"})
    raw("libretranslate", "POST", "/translate", 403, data={"q": "x", "source": "zh", "target": "en"})
    raw("libretranslate", "GET", "/libretranslate/no-such-path", 404)
    raw("huggingface", "POST", "/", 403, json={"inputs": "x"})
    raw(
        "huggingface",
        "POST",
        "/",
        422,
        json={"inputs": "x", "parameters": {"tgt_lang": "fr"}},
        headers=bearer,
    )
    deepl_key = {"Authorization": f"DeepL-Auth-Key {KEY}"}
    raw("deepl", "POST", "/v2/translate", 400, json={"text": ["x"], "target_lang": "DE"}, headers=deepl_key)
    raw("deepl", "GET", "/v2/no-such-path", 404, headers=deepl_key)
    raw("deepl", "GET", "/v2/usage", 403)

    # the clients: one request per call
    client_texts = served_sources[8:11]
    libre = LibreTranslateAPI(url, api_key=KEY)
    translations += [libre.translate(text, "zh", "en") for text in client_texts]
    sources += client_texts
    sent[("libretranslate", "200")] += len(client_texts)
    assert [entry["code"] for entry in libre.languages()] == ["zh", "en"]
    sent[("libretranslate", "200")] += 1
    translator = deepl.Translator(KEY, server_url=url)
    results = translator.translate_text(client_texts, source_lang="ZH", target_lang="EN-US")
    assert isinstance(results, list)
    translations += [result.text for result in results]
    sources += client_texts
    sent[("deepl", "200")] += 1
    with pytest.raises(deepl.AuthorizationException):
        deepl.Translator("wrong", server_url=url).translate_text("x", target_lang="EN-US")
    sent[("deepl", "403")] += 1
    hf = InferenceClient(model=url, token=KEY)
    for text in client_texts:
        translations.append(hf.translation(text).translation_text)
        sources.append(text)
    sent[("huggingface", "200")] += len(client_texts)

    after = scrape(url)
    answered = {
        dict(labels)["api"] + " " + dict(labels)["status"]: grown(before, after, name, **dict(labels))
        for name, labels in after
        if name == "vanilla_transformer_requests_total"
    }
    assert {k: v for k, v in answered.items() if v} == {
        f"{api} {status}": n for (api, status), n in sent.items()
    }
    for api in ("own", "libretranslate", "deepl", "huggingface"):
        timed = grown(before, after, "vanilla_transformer_request_seconds_count", api=api)
        assert timed == sum(n for (a, _), n in sent.items() if a == api)
    tokens_in = sum(len(ids) for ids in tokenizer(sources)["input_ids"])
    returned = tokenizer([t for t in translations if t], add_special_tokens=False)["input_ids"]
    assert grown(before, after, "vanilla_transformer_tokens_in_total") == tokens_in
    assert grown(before, after, "vanilla_transformer_tokens_out_total") == sum(len(ids) for ids in returned)
    assert grown(before, after, "vanilla_transformer_batch_texts_count") == len(engine_calls)
    assert grown(before, after, "vanilla_transformer_batch_texts_sum") == sum(engine_calls)
    assert grown(before, after, "vanilla_transformer_batch_tokens_sum") == tokens_in
    assert after[("vanilla_transformer_queue_length", ())] == 0
    info = {"engine": "torch", "languages": "zh,en", "model": "tiny-zh-en"}
    assert after[("vanilla_transformer_model_info", tuple(sorted(info.items())))] == 1
    assert after[("vanilla_transformer_model_load_seconds", (("model", "tiny-zh-en"),))] > 0


def test_each_app_counts_apart(served_folder, served_sources):
    from helpers.serving import served_app

    from vanilla_transformer.serving import start_in_thread

    with start_in_thread(served_app(served_folder)) as one, start_in_thread(served_app(served_folder)) as two:
        reply = httpx.post(one.url + "/translate", json={"text": served_sources[0]}, timeout=60)
        assert reply.status_code == 200
        first, second = scrape(one.url), scrape(two.url)
    key = ("vanilla_transformer_requests_total", (("api", "own"), ("status", "200")))
    assert first[key] == 1 and key not in second
