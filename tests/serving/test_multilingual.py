"""One multilingual folder (a tiny NLLB-200 converted from transformers, helpers.multilingual) served beside a
model of one pair (the tiny zh -> en model of the other serving tests): every API selects the target language, with
the clients people run (`libretranslatepy`, the `deepl` SDK, `huggingface_hub.InferenceClient`); each reply equals
`inference.translate` with the same languages; unknown languages get each API's own error naming what is served;
the pair both models translate goes to the model of that pair."""

from __future__ import annotations

import httpx
import pytest
from helpers.multilingual import SAMPLE, nllb_folder
from helpers.serving import post

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

# (ISO code as the APIs send it, the model's FLORES-200 code)
PAIRS = [
    (("en", "eng_Latn"), ("fr", "fra_Latn")),
    (("en", "eng_Latn"), ("de", "deu_Latn")),
    (("fr", "fra_Latn"), ("zh", "zho_Hans")),
]
TEXTS = SAMPLE[:3]


@pytest.fixture(scope="module")
def folders(served_folder, tmp_path_factory):
    """(the converted multilingual folder, the zh -> en folder)."""
    from helpers.serving import with_card

    from vanilla_transformer.convert.m2m100 import convert_m2m100_checkpoint

    root = tmp_path_factory.mktemp("multilingual")
    multilingual = convert_m2m100_checkpoint(nllb_folder(root), root / "converted")
    return multilingual, with_card(served_folder, root / "tiny-zh-en", ("zh", "en"))


@pytest.fixture(scope="module")
def server(folders):
    from helpers.serving import served_app

    from vanilla_transformer.serving import start_in_thread

    with start_in_thread(served_app(list(folders), max_wait_ms=20)) as running:
        yield running.url


@pytest.fixture(scope="module")
def reference(folders):
    """``reference(texts, src, tgt)``: `inference.translate` of the multilingual folder in process, with the
    server's output limit (max_new_tokens 20)."""
    from vanilla_transformer.inference import load_model_and_tokenizer
    from vanilla_transformer.inference.translate import translate

    model, tokenizer = load_model_and_tokenizer(str(folders[0]), dtype="float32")

    def run(texts: list[str], src_lang: str, tgt_lang: str) -> list[str]:
        return translate(model, tokenizer, texts, src_lang=src_lang, tgt_lang=tgt_lang, max_new_tokens=20)

    return run


def own(url: str, texts: list[str], source: str, target: str, **options) -> list[str]:
    reply = post(url, "/translate", {"text": texts, "source": source, "target": target, **options})
    assert reply.status_code == 200, reply.text
    return reply.json()["translations"]


def test_every_api_selects_the_target(server, reference, monkeypatch):
    import deepl
    import huggingface_hub
    from huggingface_hub import InferenceClient
    from libretranslatepy import LibreTranslateAPI

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    libre, translator = LibreTranslateAPI(server), deepl.Translator("any-key", server_url=server)
    client = InferenceClient(model=server)
    outputs = set()
    for (source, src_code), (target, tgt_code) in PAIRS:
        expected = reference(TEXTS, src_code, tgt_code)
        outputs.add(tuple(expected))
        # the server's own API, by ISO code and by the model's code
        assert own(server, TEXTS, source, target) == expected
        assert own(server, TEXTS, src_code, tgt_code) == expected
        # each sample text is one sentence: the sentence splitting of LibreTranslate and DeepL keeps it whole
        assert [libre.translate(text, source, target) for text in TEXTS] == expected
        results = translator.translate_text(TEXTS, source_lang=source.upper(), target_lang=target.upper())
        assert isinstance(results, list) and [r.text for r in results] == expected
        assert [r.detected_source_lang for r in results] == [source.upper()] * len(TEXTS)
        hf = [client.translation(text, src_lang=source, tgt_lang=target).translation_text for text in TEXTS]
        assert hf == expected
    assert len(outputs) == len(PAIRS)


def test_languages_are_listed(server):
    languages = {
        entry["code"]: entry["targets"] for entry in httpx.get(server + "/languages", timeout=30).json()
    }
    assert {"en", "fr", "de", "zh"} <= set(languages) and {"fr", "de", "zh"} <= set(languages["en"])
    assert "en" in languages["zh"]
    codes = [
        entry["language"] for entry in httpx.get(server + "/v2/languages?type=target", timeout=30).json()
    ]
    assert {"FR", "DE", "EN-US"} <= set(codes)
    info = httpx.get(server + "/info", timeout=30).json()
    assert any(len(model["languages"]) > 100 for model in info.get("models", [info]))


def test_unknown_languages_get_each_apis_error(server):
    import deepl
    from libretranslatepy import LibreTranslateAPI

    reply = post(server, "/translate", {"text": TEXTS[:1], "source": "en", "target": "qq"})
    assert (
        reply.status_code == 422
        and "qq is not supported: this server translates zh to en and between" in reply.text
    )
    # LibreTranslate's shape (libretranslatepy shows only the status of an error)
    reply = httpx.post(
        server + "/translate", json={"q": TEXTS[0], "source": "en", "target": "qq"}, timeout=60
    )
    assert reply.status_code == 400 and "qq is not supported" in reply.json()["error"]
    with pytest.raises(Exception, match="400"):
        LibreTranslateAPI(server).translate(TEXTS[0], "xx", "fr")
    with pytest.raises(deepl.DeepLException, match="not supported"):
        deepl.Translator("any-key", server_url=server).translate_text(
            TEXTS[0], source_lang="EN", target_lang="QQ"
        )
    reply = post(server, "/", {"inputs": TEXTS[0], "parameters": {"src_lang": "en", "tgt_lang": "qq"}})
    assert reply.status_code == 422 and "qq is not supported" in reply.text
    reply = post(server, "/translate/stream", {"text": TEXTS[0], "source": "en", "target": "qq"})
    assert reply.status_code == 422 and "qq is not supported" in reply.text


def test_a_pair_served_twice_goes_to_the_model_of_that_pair(folders):
    from helpers.serving import served_app

    app = served_app(list(folders))
    lanes = app.state.server.lanes
    assert lanes.route("zh", "en").served.name == folders[1].name
    multilingual = lanes.route("en", "zh")
    assert multilingual.served.name == folders[0].name and multilingual.model_codes == (
        "eng_Latn",
        "zho_Hans",
    )


def test_source_auto_and_detect_name_served_languages(server, reference):
    """/detect ranks the served source languages only; ``source=auto`` translates from the language detected."""
    detected = httpx.post(server + "/detect", data={"q": SAMPLE[1]}, timeout=30).json()
    assert detected[0]["language"] == "fr" and detected[0]["confidence"] > 50
    served = {entry["code"] for entry in httpx.get(server + "/languages", timeout=30).json()}
    assert {entry["language"] for entry in detected} <= served
    body = {"q": SAMPLE[1:3], "source": "auto", "target": "en"}
    reply = httpx.post(server + "/translate", json=body, timeout=60).json()
    assert [entry["language"] for entry in reply["detectedLanguage"]] == ["fr", "de"]
    assert reply["translatedText"] == [
        reference([SAMPLE[1]], "fra_Latn", "eng_Latn")[0],
        reference([SAMPLE[2]], "deu_Latn", "eng_Latn")[0],
    ]


def test_a_stream_translates_into_the_target_asked_for(server):
    """Greedy streams (in the server's decoding loop) into two targets and a seeded sampled stream (in a thread of
    its own) each end with the translation POST /translate gives for the same request."""
    from helpers.serving import read_events

    for target, options in (("fr", {}), ("de", {}), ("fr", {"do_sample": True, "seed": 5})):
        body = {"text": TEXTS[1], "source": "en", "target": target, "num_beams": 1, **options}
        with httpx.stream("POST", server + "/translate/stream", json=body, timeout=120) as reply:
            assert reply.status_code == 200
            events = read_events(reply.iter_lines())
        assert events[-1][0] == "done", events[-1]
        translation = events[-1][1]["translation"]
        assert translation == own(server, [TEXTS[1]], "en", target, num_beams=1, **options)[0]
        assert "".join(data["text"] for _, data in events[:-1]).split() == translation.split()


def test_score_and_alignments_read_the_requests_languages(server, folders):
    """POST /score of a multilingual model scores each target as a translation from ``source`` into ``target``
    (`inference.forced_decoding.score_pairs` with those languages: the target language's token first, log-prob 0);
    a translation's alignments are computed in its languages; without a target, 422 naming the languages."""
    from vanilla_transformer.inference import load_model_and_tokenizer
    from vanilla_transformer.inference.alignment import align_pairs, pharaoh
    from vanilla_transformer.inference.forced_decoding import score_pairs, score_record

    model, tokenizer = load_model_and_tokenizer(str(folders[0]), dtype="float32")
    translations = own(server, TEXTS, "de", "fr")
    reply = post(
        server,
        "/score",
        {"pairs": [list(p) for p in zip(TEXTS, translations)], "source": "de", "target": "fr"},
    )
    assert reply.status_code == 200, reply.text
    expected = score_pairs(model, tokenizer, TEXTS, translations, src_lang="deu_Latn", tgt_lang="fra_Latn")
    penalty = model.generation_config.length_penalty
    assert reply.json()["scores"] == [score_record(scored, tokenizer, penalty) for scored in expected]
    assert all(
        s["tokens"][0] == "fra_Latn" and s["token_log_probs"][0] == 0.0 for s in reply.json()["scores"]
    )
    other = post(server, "/score", {"pairs": [[TEXTS[0], translations[0]]], "source": "en", "target": "fr"})
    assert other.json()["scores"][0]["score"] != reply.json()["scores"][0]["score"]
    reply = post(server, "/translate", {"text": TEXTS, "source": "de", "target": "fr", "alignments": True})
    assert reply.status_code == 200, reply.text
    links = align_pairs(model, tokenizer, TEXTS, translations, src_lang="deu_Latn", tgt_lang="fra_Latn")
    assert reply.json()["alignments"] == [pharaoh(found) for found in links]
    reply = post(server, "/score", {"pairs": [[TEXTS[0], translations[0]]], "source": "de"})
    assert reply.status_code == 422, reply.text
