"""Document files through the server's drop-in APIs, driven by the real clients: the ``deepl`` SDK's
``translate_document`` (upload, status, download) and LibreTranslate's /translate_file as its web page sends it (a
multipart form), with the tiny copy model, whose translation of the test documents (tests/helpers/documents.py) is
their text with every word's formatting; bad files are refused in each API's shape and the server keeps serving."""

from __future__ import annotations

import io

import httpx
import pytest
from helpers.documents import BUILDERS, HTML, SIGNATURES, TXT

pytest.importorskip("fastapi", reason="the serve extra (in dev): pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from helpers.copy_task import train_copy_model
    from helpers.serving import served_app, with_card

    from vanilla_transformer.modeling import save_with_remote_code
    from vanilla_transformer.serving import Limits, start_in_thread

    model, tokenizer = train_copy_model()
    root = tmp_path_factory.mktemp("documents")
    folder = with_card(save_with_remote_code(model, root / "model", tokenizer), root / "carded", ("en", "de"))
    limits = Limits(
        max_texts=8,
        max_request_bytes=4096,
        max_new_tokens=20,
        max_file_bytes=60_000,
        max_file_unzipped_bytes=2_000_000,
        max_file_paragraphs=40,
    )
    with start_in_thread(served_app(folder, max_wait_ms=20, limits=limits)) as running:
        yield running.url


def deepl_translate(url: str, data: bytes, name: str, key: str = "k1", **options) -> bytes:
    import deepl

    out, upload = io.BytesIO(), io.BytesIO(data)
    # what an open file has: the SDK sends it as the file's name
    upload.name = name
    deepl.Translator(key, server_url=url).translate_document(upload, out, target_lang="DE", **options)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["docx", "pptx", "odt", "epub"])
def test_deepl_sdk_translates_office_documents(server, fmt):
    source = BUILDERS[fmt]()
    assert SIGNATURES[fmt](deepl_translate(server, source, f"report.{fmt}")) == SIGNATURES[fmt](source)


def test_deepl_sdk_translates_html_and_text(server):
    from vanilla_transformer.inference.formats import read_file

    html = deepl_translate(server, HTML.encode(), "page.html").decode()
    assert "<style>p { color: red }</style>" in html and '<a href="https://example.com/">w4</a>' in html
    assert read_file(html.encode(), "html").texts[0].count("<") == HTML.count("<")
    assert deepl_translate(server, TXT.encode(), "notes.txt").decode() == TXT


def test_deepl_sdk_translates_a_pdf_into_text_or_a_word_document(server):
    import docx as python_docx

    paragraphs = ["w1 w2 w3 w4 w5 w6", "42.5", "w7 w8 w9"]
    text = deepl_translate(server, BUILDERS["pdf"](), "scan.pdf", output_format="txt").decode()
    assert text == f"{paragraphs[0]}\n\n{paragraphs[1]}\n\f\n{paragraphs[2]}\n"
    # the default: a Word document, a page break between the pages
    document = python_docx.Document(io.BytesIO(deepl_translate(server, BUILDERS["pdf"](), "scan.pdf")))
    assert [p.text for p in document.paragraphs] == [paragraphs[0], paragraphs[1], "", paragraphs[2]]


def test_deepl_documents_status_billing_download_once_and_per_key(server):
    import deepl

    translator = deepl.Translator("k1", server_url=server)
    handle = translator.translate_document_upload(TXT.encode(), target_lang="DE", filename="a.txt")
    status = translator.translate_document_wait_until_done(handle)
    assert status.done and status.billed_characters == len("w1 w2 w3w4 w5 w6w7 w8 w9")
    # another key sees no such document
    with pytest.raises(deepl.DeepLException, match="not found"):
        deepl.Translator("k2", server_url=server).translate_document_get_status(handle)
    out = io.BytesIO()
    translator.translate_document_download(handle, out)
    assert out.getvalue() == TXT.encode()
    # downloaded: deleted
    with pytest.raises(deepl.DeepLException, match="not found"):
        translator.translate_document_get_status(handle)


def test_libretranslate_translate_file_as_its_web_page_sends_it(server):
    settings = httpx.get(f"{server}/frontend/settings").json()
    assert settings["filesTranslation"] and ".docx" in settings["supportedFilesFormat"]
    assert {".md", ".odt", ".odp", ".epub", ".pdf"} <= set(settings["supportedFilesFormat"])
    source = BUILDERS["docx"]()
    reply = httpx.post(
        f"{server}/translate_file",
        data={"source": "en", "target": "de", "api_key": ""},
        files={"file": ("report.docx", source, "application/octet-stream")},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    url = reply.json()["translatedFileUrl"]
    assert url.startswith(f"{server}/download_file/") and url.endswith("report.de.docx")
    download = httpx.get(url, timeout=60)
    assert download.status_code == 200
    assert SIGNATURES["docx"](download.content) == SIGNATURES["docx"](source)
    assert httpx.get(url).status_code == 404


def _zip_bomb() -> bytes:
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"\0" * 3_000_000)
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "data", "status", "message"),
    [
        ("empty.docx", b"", 400, "empty"),
        ("cut.docx", None, 400, "not a readable zip"),
        ("locked.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 512, 400, "password"),
        ("wrong.pptx", None, 400, "no ppt/presentation.xml"),
        ("book.mobi", b"BOOKMOBI", 400, "not supported"),
        ("cut.pdf", b"%PDF-1.4", 400, "not a readable pdf"),
        ("bomb.docx", "bomb", 413, "unzips to"),
        ("big.txt", b"w1 " * 30_000, 413, "more than the limit"),
        ("long.txt", b"w1\n" * 41, 413, "paragraphs"),
    ],
)
def test_bad_files_are_refused_in_each_apis_shape_and_the_server_keeps_serving(
    server, name, data, status, message
):
    if data is None:
        data = BUILDERS["docx"]()
        data = data[:2000] if name == "cut.docx" else data
    elif data == "bomb":
        data = _zip_bomb()
    files = {"file": (name, data, "application/octet-stream")}
    deepl = httpx.post(f"{server}/v2/document", data={"target_lang": "DE"}, files=files, timeout=60)
    assert deepl.status_code == status and message in deepl.json()["message"], deepl.text
    libre = httpx.post(
        f"{server}/translate_file", data={"source": "en", "target": "de"}, files=files, timeout=60
    )
    # LibreTranslate refuses with 400 what DeepL refuses with 413
    assert libre.status_code == 400 and message in libre.json()["error"], libre.text
    assert (
        httpx.post(f"{server}/v2/translate", json={"text": ["w1 w2 w3"], "target_lang": "DE"}).status_code
        == 200
    )


def test_a_file_over_the_upload_limit_is_refused_before_it_is_read(server):
    reply = httpx.post(
        f"{server}/v2/document",
        data={"target_lang": "DE"},
        files={"file": ("big.txt", b"w1 " * 50_000, "text/plain")},
        timeout=60,
    )
    assert reply.status_code == 413 and "max_request_bytes" in reply.json()["message"]
