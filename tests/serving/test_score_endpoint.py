"""POST /score on a running server (loopback): the records of `vanilla-transformer score` for the same pairs, the
limits of /translate, bad bodies refused, and the endpoint explained in the OpenAPI schema."""

from __future__ import annotations

import httpx
import pytest
from helpers.serving import post

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

PAIRS = [["起初神创造天地。", "In the beginning"], ["", "nothing"], ["地是空虚混沌", ""]]


@pytest.fixture(scope="module")
def reference(served_folder):
    from vanilla_transformer.inference import load_model_and_tokenizer

    return load_model_and_tokenizer(str(served_folder), dtype="float32")


def test_scores_equal_forced_decoding_in_process(tiny_server, reference):
    from vanilla_transformer.inference.forced_decoding import score_pairs, score_record

    model, tokenizer = reference
    reply = post(tiny_server, "/score", {"pairs": PAIRS, "length_penalty": 0.6})
    assert reply.status_code == 200, reply.text
    expected = score_pairs(model, tokenizer, [p[0] for p in PAIRS], [p[1] for p in PAIRS])
    records = reply.json()["scores"]
    assert len(records) == len(PAIRS)
    for record, scored in zip(records, expected):
        wanted = score_record(scored, tokenizer, 0.6)
        assert record["tokens"] == wanted["tokens"] and record["length"] == wanted["length"]
        assert record["score"] == pytest.approx(wanted["score"], abs=1e-4)
        assert record["token_log_probs"] == pytest.approx(wanted["token_log_probs"], abs=1e-4)
    # without length_penalty: the model's generation config's
    default = post(tiny_server, "/score", {"pairs": PAIRS[:1]}).json()["scores"][0]
    penalty = model.generation_config.length_penalty
    assert default["score"] == pytest.approx(default["log_prob"] / default["length"] ** penalty, abs=1e-5)


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"pairs": []}, 422, "empty list"),
        ({"pairs": [["a", "b"]] * 9}, 413, "max_texts=8"),
        ({"pairs": [["a"]]}, 422, "pairs"),
        ({"pairs": [["a", "b"]], "num_beams": 2}, 422, "num_beams"),
        ({"pairs": [["神" * 40, "b"]]}, 422, "max_source_tokens=24"),
        ({"pairs": [["a", "In the beginning God created"]]}, 422, "24 positions"),
        ({"pairs": [["a", "b"]], "length_penalty": "x"}, 422, "length_penalty"),
    ],
)
def test_bad_bodies_are_refused_with_a_message(tiny_server, body, status, message):
    reply = post(tiny_server, "/score", body)
    assert reply.status_code == status, reply.text
    assert message in reply.json()["detail"]


def test_openapi_explains_score(tiny_server):
    schema = httpx.get(tiny_server + "/openapi.json", timeout=30).json()
    operation = schema["paths"]["/score"]["post"]
    assert "forced decoding" in operation["summary"] and "length_penalty" in operation["description"]
    fields = schema["components"]["schemas"]["ScoreRequest"]["properties"]
    assert {"pairs", "length_penalty", "source", "target"} == set(fields)
    assert all(field.get("description") for field in fields.values())


def test_score_needs_a_key_on_a_server_with_keys(served_folder):
    from helpers.serving import served_app

    from vanilla_transformer.serving import start_in_thread

    with start_in_thread(served_app(served_folder, api_keys=frozenset({"s3cret"}))) as running:
        body = {"pairs": PAIRS[:1]}
        refused = httpx.post(running.url + "/score", json=body, timeout=60)
        assert refused.status_code == 403 and "key" in refused.json()["detail"]
        accepted = httpx.post(
            running.url + "/score", json=body, headers={"Authorization": "Bearer s3cret"}, timeout=60
        )
        assert accepted.status_code == 200 and len(accepted.json()["scores"]) == 1
        assert "s3cret" not in refused.text + accepted.text
