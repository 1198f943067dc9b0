"""POST /translate with ``scores``: per text the records of `vanilla-transformer translate --output_format jsonl`
(`inference.translation_record`), each score forced decoding's score of its output, n-best sorted and as long as
asked; without ``scores`` the reply is as before; the field explained in the OpenAPI schema."""

from __future__ import annotations

import httpx
import pytest
from conftest import export_scoring_model
from helpers.serving import post

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

TEXTS = ["起初神创造天地。", "", "地是空虚混沌", "神看光是好的"]
BEAMS = {"num_beams": 4, "num_return_sequences": 3, "length_penalty": 0.6}


@pytest.fixture(scope="module")
def scoring_server(tmp_path_factory):
    """(URL, folder) of a torch server over `conftest.export_scoring_model` (a generation config that alters no
    logits), in a thread of the test process."""
    from helpers.serving import served_app

    from vanilla_transformer.serving import start_in_thread

    folder = export_scoring_model(tmp_path_factory.mktemp("scoring"))
    with start_in_thread(served_app(folder)) as running:
        yield running.url, folder


@pytest.fixture(scope="module")
def reference(scoring_server):
    from vanilla_transformer.inference import load_model_and_tokenizer

    return load_model_and_tokenizer(str(scoring_server[1]), dtype="float32")


def test_scores_are_the_jsonl_records_and_forced_decoding_scores_of_the_outputs(scoring_server, reference):
    from vanilla_transformer.inference import translate_hypotheses, translation_record
    from vanilla_transformer.inference.forced_decoding import score_ids

    url, _ = scoring_server
    model, tokenizer = reference
    reply = post(url, "/translate", {"text": TEXTS, "scores": True, **BEAMS})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    nbest = translate_hypotheses(model, tokenizer, TEXTS, token_scores=True, **BEAMS)
    expected = [translation_record(hypotheses, tokenizer) for hypotheses in nbest]
    assert body["translations"] == [record["translation"] for record in expected]
    assert body["nbest"] == [[r["translation"] for r in record["nbest"]] for record in expected]
    assert len(body["scores"]) == len(TEXTS)
    for text, record, wanted in zip(TEXTS, body["scores"], expected):
        assert len(record["nbest"]) == 3
        assert [r["tokens"] for r in record["nbest"]] == [r["tokens"] for r in wanted["nbest"]]
        if not text:
            assert record == wanted
            continue
        scores = [r["score"] for r in record["nbest"]]
        assert scores == sorted(scores, reverse=True)
        ids = [tokenizer.convert_tokens_to_ids(r["tokens"]) for r in record["nbest"]]
        sources = [tokenizer(text)["input_ids"]] * len(ids)
        for r, forced in zip(record["nbest"], score_ids(model, sources, ids, append_eos=False)):
            assert r["token_log_probs"] == pytest.approx(forced.token_log_probs, abs=1e-4)
            assert r["log_prob"] == pytest.approx(forced.log_prob, abs=1e-4)
            assert r["score"] == pytest.approx(forced.score(0.6), abs=1e-4)


def test_without_scores_the_reply_has_none_and_a_bad_value_is_refused(scoring_server):
    url, _ = scoring_server
    reply = post(url, "/translate", {"text": TEXTS[0], "num_beams": 1})
    assert reply.status_code == 200 and set(reply.json()) == {"translations"}
    greedy = post(url, "/translate", {"text": TEXTS[0], "num_beams": 1, "scores": True}).json()
    assert greedy["translations"] == reply.json()["translations"]
    [record] = greedy["scores"]
    assert "nbest" not in record and record["score"] == pytest.approx(record["log_prob"], abs=1e-4)
    bad = post(url, "/translate", {"text": TEXTS[0], "scores": "yes"})
    assert bad.status_code == 422 and "scores" in bad.json()["detail"]
    typo = post(url, "/translate", {"text": TEXTS[0], "score": True})
    assert typo.status_code == 422 and "scores" in typo.json()["detail"]


def test_openapi_explains_the_scores(scoring_server):
    url, _ = scoring_server
    schema = httpx.get(url + "/openapi.json", timeout=30).json()
    operation = schema["paths"]["/translate"]["post"]
    for field in ("scores", "score", "log_prob", "length_penalty", "tokens", "token_log_probs", "nbest"):
        assert field in operation["description"]
    request = schema["components"]["schemas"]["TranslateRequest"]["properties"]["scores"]
    assert "token_log_probs" in request["description"]
