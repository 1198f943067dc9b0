"""Bad requests get a clear 4xx naming the option or the limit, and the server stays healthy and keeps
translating after each one."""

from __future__ import annotations

import json
import math

import httpx
import pytest
from helpers.serving import post
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

LONG = "起初神创造天地。" * 20  # far more than the tiny model's 24 positions

# (path, raw body or JSON value, expected status, words the message must contain)
BAD = [
    ("/translate", b'{"text": "abc"', 422, ["malformed JSON"]),
    ("/translate", b"not json at all", 422, ["malformed JSON"]),
    ("/translate", {"text": "a", "beams": 2, "colour": 1}, 422, ["unknown option", "'beams'", "'colour'"]),
    ("/translate/stream", {"text": "a", "temprature": 1.0}, 422, ["unknown option", "'temprature'"]),
    ("/translate", {"num_beams": 2}, 422, ["text", "required"]),
    ("/translate", {"text": 5}, 422, ["text"]),
    ("/translate", {"text": "a", "num_beams": "many"}, 422, ["num_beams"]),
    ("/translate", {"text": []}, 422, ["empty list"]),
    ("/translate", {"text": ["a"] * 9}, 413, ["max_texts=8", "9 texts"]),
    ("/translate", {"text": "a" * 5000}, 413, ["max_request_bytes=4096"]),
    ("/translate", {"text": ["a", LONG]}, 422, ["text 1", "max_source_tokens=24"]),
    ("/translate/stream", {"text": LONG}, 422, ["max_source_tokens=24"]),
    (
        "/translate",
        {"text": "a", "max_new_tokens": 21},
        422,
        ["max_new_tokens=21", "limit max_new_tokens=20"],
    ),
    ("/translate", {"text": "a", "num_beams": 9}, 422, ["num_beams=9", "max_num_beams=8"]),
    ("/translate", {"text": "a", "num_beams": 0}, 422, ["num_beams"]),
    ("/translate", {"text": "a", "num_beams": 2, "num_return_sequences": 3}, 422, ["num_return_sequences"]),
    ("/translate", {"text": "a", "do_sample": True, "temperature": 0}, 422, ["temperature"]),
    ("/translate", {"text": "a", "do_sample": True, "top_p": 1.5}, 422, ["top_p"]),
    ("/translate/stream", {"text": "a", "num_beams": 2}, 422, ["num_beams=1"]),
    ("/translate/stream", {"text": ["a", "b"]}, 422, ["text"]),
    # valid JSON, invalid decoding settings: each refused by its rule, never a 500
    ("/translate", {"text": "a", "do_sample": True, "seed": -1}, 422, ["seed=-1 is invalid", "4294967295"]),
    ("/translate", {"text": "a", "do_sample": True, "seed": 2**32}, 422, ["seed=4294967296 is invalid"]),
    ("/translate", {"text": "\ud800"}, 422, ["lone surrogate", "'\\ud800'"]),
    ("/translate", {"text": ["a", "b\udfff"]}, 422, ["text 1", "lone surrogate"]),
    ("/translate/stream", {"text": "\ud800"}, 422, ["lone surrogate"]),
    (
        "/translate",
        b'{"text": "a", "do_sample": true, "temperature": NaN}',
        422,
        ["temperature=nan is invalid"],
    ),
    ("/translate", b'{"text": "a", "do_sample": true, "temperature": Infinity}', 422, ["temperature=inf"]),
    ("/translate", {"text": "a", "do_sample": True, "temperature": 1e-320}, 422, ["temperature=1e-320"]),
    (
        "/translate",
        b'{"text": "a", "num_beams": 2, "length_penalty": -Infinity}',
        422,
        ["length_penalty=-inf"],
    ),
    ("/translate", {"text": "a", "do_sample": True, "top_k": -1}, 422, ["top_k=-1 is invalid"]),
    ("/translate", {"text": "a", "do_sample": True, "top_p": 0}, 422, ["top_p=0.0 is invalid"]),
    ("/translate", {"text": "a", "max_new_tokens": 0}, 422, ["max_new_tokens=0 is invalid"]),
    ("/translate", {"text": "a", "num_beams": True}, 422, ["num_beams", "integer"]),
    ("/translate", {"text": "a", "do_sample": 1}, 422, ["do_sample", "boolean"]),
    (
        "/translate",
        {"text": "a", "do_sample": True, "num_return_sequences": 9},
        422,
        ["num_return_sequences=9", "max_num_return_sequences=8"],
    ),
]


def healthy_and_translating(url: str) -> None:
    assert httpx.get(url + "/health", timeout=30).json()["status"] == "ok"
    reply = post(url, "/translate", {"text": ["起初神创造天地。"]})
    assert reply.status_code == 200 and len(reply.json()["translations"]) == 1


@pytest.mark.parametrize(
    ("path", "body", "status", "words"), BAD, ids=[f"{b[2]}-{i}" for i, b in enumerate(BAD)]
)
def test_bad_request_is_refused_clearly(tiny_server, path, body, status, words):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply = httpx.post(
        tiny_server + path, content=raw, headers={"content-type": "application/json"}, timeout=60
    )
    assert reply.status_code == status, reply.text
    detail = reply.json()["detail"]
    assert isinstance(detail, str)
    assert all(word in detail for word in words), detail
    healthy_and_translating(tiny_server)


def test_body_without_content_length_and_wrong_methods(tiny_server):
    chunks = iter([b'{"text": ', b'"a"}'])
    reply = httpx.post(tiny_server + "/translate", content=chunks, timeout=60)  # chunked: no Content-Length
    assert reply.status_code == 411 and "Content-Length" in reply.json()["detail"]
    assert httpx.get(tiny_server + "/translate", timeout=30).status_code == 405
    assert httpx.get(tiny_server + "/nowhere", timeout=30).status_code == 404
    healthy_and_translating(tiny_server)


def test_a_client_that_hangs_up_does_not_hurt_the_server(tiny_server):
    """Requests abandoned by their clients (a read timeout far shorter than the translation) are dropped or
    answered to nobody; the server keeps serving."""
    for _ in range(5):
        try:
            post(tiny_server, "/translate", {"text": ["起初神创造天地。"] * 8, "num_beams": 8}, timeout=0.001)
        except httpx.TimeoutException:
            pass
    healthy_and_translating(tiny_server)


# the server's answer and the command line's error line for the same bad value: one rule, one message
SAME_RULE = [
    ("seed", -1),
    ("seed", 2**32),
    ("temperature", 1e-320),
    ("temperature", 1001.0),
    ("top_p", 0.0),
    ("top_k", -1),
    ("num_beams", 0),
    ("max_new_tokens", 0),
    ("num_return_sequences", 0),
]


@pytest.mark.parametrize(("name", "value"), SAME_RULE, ids=[f"{n}={v}" for n, v in SAME_RULE])
def test_the_server_and_the_command_line_refuse_a_value_with_one_message(
    tiny_server, served_folder, monkeypatch, capsys, name, value
):
    from helpers.shared import run_main

    from vanilla_transformer.modeling import DECODING_OPTIONS

    with pytest.raises(ValueError) as rule:
        DECODING_OPTIONS[name].check(value)
    reply = post(tiny_server, "/translate", {"text": "a", "do_sample": True, name: value})
    assert reply.status_code == 422 and reply.json()["detail"] == str(rule.value)
    code, out, err = run_main(
        monkeypatch, capsys, "--model", str(served_folder), f"--{name}", str(value), stdin="起初\n"
    )
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(errors) == 1 and errors[0].endswith(f"argument --{name}: {rule.value}"), err


# any JSON value (NaN and the infinities included, which Python's json reads) in any field
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=6,
)
OPTIONS = [
    "num_beams",
    "length_penalty",
    "max_new_tokens",
    "num_return_sequences",
    "do_sample",
    "temperature",
]
OPTIONS += ["top_k", "top_p", "seed"]
# values near the rules' and limits' edges, which arbitrary JSON rarely hits, drawn twice as often as the rest
EDGES = st.sampled_from(
    [0, 1, 2, 3, 8, 9, 20, 21, -1, 0.5, 1.0, 1e-320, 1e300, 2**32, 2**64, math.nan, -math.inf, True, None]
)
TEXTS = st.sampled_from(["起初", ["神", ""], ""])


@given(
    text=st.one_of(TEXTS, TEXTS, TEXTS, JSON_VALUES),
    sample=st.booleans(),
    name=st.sampled_from(OPTIONS),
    value=st.one_of(EDGES, EDGES, JSON_VALUES),
    others=st.dictionaries(st.sampled_from(OPTIONS), st.one_of(EDGES, JSON_VALUES), max_size=1),
    stream=st.booleans(),
)
@settings(
    max_examples=50,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
def test_any_json_value_in_any_field_is_answered_or_refused_never_a_500(
    tiny_server, text, sample, name, value, others, stream
):
    """A text and one or two options of any JSON value, sampling or not: an answer or a 4xx with a message."""
    body = {"text": text, **({"do_sample": True} if sample else {}), **others, name: value}
    raw = json.dumps(body).encode()
    path = "/translate/stream" if stream else "/translate"
    reply = httpx.post(
        tiny_server + path, content=raw, headers={"content-type": "application/json"}, timeout=120
    )
    assert reply.status_code < 500, (body, reply.text)
    if reply.status_code >= 400:
        assert isinstance(reply.json()["detail"], str)
