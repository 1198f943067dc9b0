"""Two models behind one server (zh -> en and de -> en, each with its own tokenizer), driven on a loopback port by
the real clients: each client reaches each pair and each reply equals the server's own /translate on that model;
an unknown pair gets the API's own error naming the pairs served; the language lists name everything served;
`source=auto` (and DeepL without source_lang) picks, text by text, the model whose vocabulary reads most of it; the
command line refuses bad --model values with one `error:` line.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from helpers.serving import post

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")

# German the de -> en tokenizer learns (with English), spelled with letters the zh -> en tokenizer never saw
GERMAN = [
    "Am Anfang schuf Gott Himmel und Erde.",
    "Und die Erde war wüst und leer, und es war finster auf der Tiefe.",
    "Und Gott sah, daß das Licht gut war.",
    "Über dem Wasser schwebte der Geist Gottes.",
    "Da ward aus Abend und Morgen der erste Tag; größer war die Güte.",
]
# short German texts to translate, each with a letter of GERMAN that the zh -> en tokenizer does not know
GERMAN_TEXTS = ["Die Erde war wüst.", "Über dem Wasser.", "Größe und Güte."]
PAIRS = "zh to en and de to en"


@pytest.fixture(scope="module")
def folders(served_folder, tmp_path_factory) -> dict[str, Path]:
    """zh-en: `served_folder` with a card naming zh -> en; de-en: another tiny model with a tokenizer of German
    and English and a card naming de -> en."""
    from conftest import ROOT, export_tiny_model, tiny_tokenizer
    from helpers.serving import with_card

    root = tmp_path_factory.mktemp("several")
    import lzma

    with lzma.open(ROOT / "data" / "bible.zh-en.tsv.xz", "rt", encoding="utf-8") as f:
        english = [line.rstrip("\n").split("\t")[1] for _, line in zip(range(200), f)]
    de_tokenizer = tiny_tokenizer(vocab_size=300, texts=GERMAN * 5 + english)
    de_folder = export_tiny_model(root / "de-en-bare", tokenizer=de_tokenizer, seed=1)
    return {
        "zh-en": with_card(served_folder, root / "tiny-zh-en", ("zh", "en")),
        "de-en": with_card(de_folder, root / "tiny-de-en", ("de", "en")),
    }


@pytest.fixture(scope="module")
def server(folders):
    from helpers.serving import served_app

    from vanilla_transformer.serving import start_in_thread

    with start_in_thread(served_app([folders["zh-en"], folders["de-en"]], max_wait_ms=20)) as running:
        yield running.url


def own(url: str, texts: list[str], source: str) -> list[str]:
    """The server's own /translate of ``texts`` by the model from ``source`` into en."""
    reply = post(url, "/translate", {"text": texts, "source": source, "target": "en"})
    assert reply.status_code == 200, reply.text
    return reply.json()["translations"]


def test_the_models_differ(server, served_sources):
    # each text is read by one model only, and the two models translate differently
    zh, de = served_sources[:3], GERMAN_TEXTS
    assert own(server, zh, "zh") != own(server, zh, "de")
    shares = httpx.post(server + "/detect", json={"q": de[0]}, timeout=30).json()
    assert [s["language"] for s in shares] == ["de", "zh"] and shares[0]["confidence"] == 100
    assert shares[1]["confidence"] < 100


def test_libretranslatepy_reaches_each_pair(server, served_sources):
    from libretranslatepy import LibreTranslateAPI

    client = LibreTranslateAPI(server)
    for source, texts in (("zh", served_sources[:3]), ("de", GERMAN_TEXTS)):
        assert [client.translate(text, source, "en") for text in texts] == own(server, texts, source)
    assert client.languages() == [
        {"code": "zh", "name": "zh", "targets": ["en"]},
        {"code": "en", "name": "en", "targets": []},
        {"code": "de", "name": "de", "targets": ["en"]},
    ]
    assert client.detect(served_sources[0])[0]["language"] == "zh"
    assert client.detect(GERMAN_TEXTS[1])[0]["language"] == "de"


def test_source_auto_picks_the_model_of_each_text(server, served_sources):
    texts = [served_sources[0], GERMAN_TEXTS[0], served_sources[1], GERMAN_TEXTS[1]]
    zh, de = own(server, texts[0::2], "zh"), own(server, texts[1::2], "de")
    body = {"q": texts, "source": "auto", "target": "en"}
    reply = httpx.post(server + "/translate", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    data = reply.json()
    assert data["translatedText"] == [zh[0], de[0], zh[1], de[1]]
    assert [d["language"] for d in data["detectedLanguage"]] == ["zh", "de", "zh", "de"]
    # markup: the text nodes of each document go to its model
    marked = {"q": f"<p>{texts[1]}</p>", "source": "auto", "target": "en", "format": "html"}
    assert httpx.post(server + "/translate", data=marked, timeout=60).json()["translatedText"] == (
        f"<p>{de[0]}</p>"
    )


def test_deepl_sdk_reaches_each_pair(server, served_sources):
    import deepl

    translator = deepl.Translator("any-key", server_url=server)
    zh, de = served_sources[:2], GERMAN_TEXTS[:2]
    results = translator.translate_text(zh, source_lang="ZH", target_lang="EN-US")
    assert isinstance(results, list) and [r.text for r in results] == own(server, zh, "zh")
    results = translator.translate_text(de, source_lang="DE", target_lang="EN-GB")
    assert isinstance(results, list) and [r.text for r in results] == own(server, de, "de")
    # without source_lang, each text is detected
    results = translator.translate_text([zh[0], de[0]], target_lang="EN-US")
    assert isinstance(results, list)
    assert [r.text for r in results] == [own(server, zh, "zh")[0], own(server, de, "de")[0]]
    assert [r.detected_source_lang for r in results] == ["ZH", "DE"]
    assert [lang.code for lang in translator.get_source_languages()] == ["ZH", "DE"]
    assert [lang.code for lang in translator.get_target_languages()] == ["EN-GB", "EN-US"]
    with pytest.raises(deepl.DeepLException, match=PAIRS):
        translator.translate_text(zh[0], source_lang="FR", target_lang="EN-US")


def test_hf_inference_client_reaches_each_pair(server, served_sources, monkeypatch):
    import huggingface_hub.constants
    from huggingface_hub import InferenceClient

    # the tests run the Hub offline; this client talks to the loopback server only
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    client = InferenceClient(model=server)
    for source, text in (("zh", served_sources[0]), ("de", GERMAN_TEXTS[0])):
        reply = client.translation(text, src_lang=source, tgt_lang="en")
        assert reply.translation_text == own(server, [text], source)[0]


def test_unknown_or_ambiguous_pairs_get_each_apis_own_error(server, served_sources):
    text = served_sources[0]
    for path, body, status, field, needle in (
        ("/translate", {"q": text, "source": "fr", "target": "en"}, 400, "error", "fr is not supported"),
        ("/translate", {"q": text, "source": "zh", "target": "fr"}, 400, "error", "zh to fr"),
        ("/translate", {"q": text, "source": "auto", "target": "fr"}, 400, "error", "fr is not"),
        ("/v2/translate", {"text": [text], "target_lang": "FR"}, 400, "message", "target_lang fr"),
        ("/", {"inputs": text, "parameters": {"tgt_lang": "fr"}}, 422, "error", "tgt_lang fr"),
        ("/", {"inputs": text}, 422, "error", "send src_lang and tgt_lang"),
        ("/translate", {"text": text}, 422, "detail", "send source and target"),
        ("/translate", {"text": text, "source": "fr"}, 422, "detail", "source fr is not"),
    ):
        reply = post(server, path, body)
        assert reply.status_code == status and set(reply.json()) == {field}, (body, reply.text)
        assert needle in reply.json()[field] and PAIRS in reply.json()[field], reply.text
    # one language is enough where it names one model
    assert (
        own(server, [text], "zh")
        == post(server, "/translate", {"text": text, "source": "zh"}).json()["translations"]
    )


def test_info_and_health_list_the_models(server):
    info = httpx.get(server + "/info", timeout=30).json()
    assert [(m["model"], m["languages"]) for m in info["models"]] == [
        ("tiny-zh-en", ["zh", "en"]),
        ("tiny-de-en", ["de", "en"]),
    ]
    assert info["model"] == "tiny-zh-en"
    health = httpx.get(server + "/health", timeout=30).json()
    assert health["status"] == "ok"
    assert [(m["model"], m["status"]) for m in health["models"]] == [
        ("tiny-zh-en", "ok"),
        ("tiny-de-en", "ok"),
    ]


def test_create_app_refuses_pairs_it_cannot_route(folders, served_folder):
    from vanilla_transformer.serving import create_app, load_served

    zh_en = load_served(str(folders["zh-en"]))
    with pytest.raises(ValueError, match="zh-en is served twice"):
        create_app([zh_en, load_served(str(served_folder), pair=("zh", "en"))])
    with pytest.raises(ValueError, match="names no language pair"):
        create_app([zh_en, load_served(str(served_folder))])


@pytest.mark.parametrize(
    "models, needle",
    [
        (["zh_en=F"], "'zh_en' is not a language pair"),
        (["zh-zh=F"], "'zh-zh' is not a language pair"),
        (["zh-en=F", "zh-en=G"], "zh-en is served twice"),
        (["zh-en=F", "BARE"], "names no language pair and several models are served"),
        (["BARE"], None),
    ],
)
def test_serve_refuses_bad_model_values(models, needle, folders, served_folder, capsys, monkeypatch):
    from vanilla_transformer.commands import serve

    def never_load(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("vanilla_transformer.serving.server.load_served", never_load)
    named = {"F": str(folders["zh-en"]), "G": str(folders["de-en"]), "BARE": str(served_folder)}
    argv = []
    for model in models:
        argv += ["--model", "=".join(named[part] if part in named else part for part in model.split("="))]
    if needle is None:
        # one model without a pair loads as it always did (here: the loading is what fails)
        with pytest.raises(AssertionError, match="a model was loaded"):
            serve.main(argv)
        return
    assert serve.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0], err


def test_model_specs(folders, served_folder, tmp_path):
    from vanilla_transformer.serving.server import model_specs

    zh, de = str(folders["zh-en"]), str(folders["de-en"])
    assert model_specs([zh]) == [(None, zh)]
    # with several, a folder without its pair takes the one of its card
    assert model_specs([zh, f"DE-en={de}"]) == [(("zh", "en"), zh), (("de", "en"), de)]
    # a folder whose name holds "=" is a folder
    odd = tmp_path / "lr=3e-4"
    odd.mkdir()
    assert model_specs([str(odd)]) == [(None, str(odd))]


def test_stream_picks_the_model(server):
    from helpers.serving import read_events

    text = GERMAN_TEXTS[0]
    body = {"text": text, "source": "de", "target": "en"}
    with httpx.stream("POST", server + "/translate/stream", json=body, timeout=60) as reply:
        events = read_events(reply.iter_lines())
    assert events[-1] == ("done", {"translation": own(server, [text], "de")[0]})
    ambiguous = post(server, "/translate/stream", {"text": text})
    assert ambiguous.status_code == 422 and PAIRS in ambiguous.json()["detail"]


def test_load_all_logs_each_model(folders, tmp_path, caplog):
    pytest.importorskip("ctranslate2", reason="the export extra (in dev)")
    import logging

    from vanilla_transformer.export.ct2 import export_ct2
    from vanilla_transformer.serving.server import load_all

    zh, de = export_ct2(folders["zh-en"], tmp_path / "zh"), export_ct2(folders["de-en"], tmp_path / "de")
    caplog.set_level(logging.INFO, logger="vanilla_transformer.serving.server")
    served = load_all([(("zh", "en"), str(zh)), (None, str(de))], "ct2")
    assert [(m.engine, m.languages) for m in served] == [("ct2", ["zh", "en"]), ("ct2", ["de", "en"])]
    lines = [r.getMessage() for r in caplog.records if r.name == "vanilla_transformer.serving.server"]
    # an exported engine's weights are the file it loaded
    sizes = [(folder / "model.bin").stat().st_size / 2**20 for folder in (zh, de)]
    assert lines[0].startswith("model zh (zh-en): loaded in ") and f"weights {sizes[0]:.1f} MiB" in lines[0]
    assert lines[1].startswith("model de (de-en): loaded in ") and "warmed up in " in lines[1]
    assert lines[2] == f"2 model(s), weights {sum(sizes):.1f} MiB in all"
