"""Files translated with their formatting kept (inference/formats): each format's test document (tests/helpers/
documents.py) translated by the tiny copy model, whose translation is its source and whose alignment is the
diagonal, so that the output must have the same structure and every word its formatting; what is not translated
is byte-identical; files that cannot be read are refused with a reason, by the library and by the command line."""

from __future__ import annotations

import io
import zipfile

import pytest
from helpers.documents import BUILDERS, HTML, MD, SIGNATURES, SRT, TXT, VTT

from vanilla_transformer.inference.formats import (
    DocumentError,
    FileLimits,
    TooLarge,
    file_format,
    read_file,
    translate_file,
)

pytest.importorskip("lxml", reason="the documents extra: pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def copy_model():
    from helpers.copy_task import train_copy_model

    return train_copy_model()


def translated(copy_model, data: bytes, fmt: str, **options) -> bytes:
    model, tokenizer = copy_model
    return translate_file(model, tokenizer, data, fmt, num_beams=1, language="en", **options)


@pytest.mark.parametrize("fmt", ["docx", "pptx", "xlsx", "odt", "odp", "epub"])
def test_office_files_keep_structure_formatting_and_everything_else(copy_model, fmt):
    source = BUILDERS[fmt]()
    done = []
    output = translated(copy_model, source, fmt, progress=lambda d, t: done.append((d, t)))
    # the same paragraphs, runs, styles, links, tables, images, notes and formulas, word by word
    assert SIGNATURES[fmt](output) == SIGNATURES[fmt](source)
    assert done and done[-1][0] == done[-1][1] > 0
    before, after = zipfile.ZipFile(io.BytesIO(source)), zipfile.ZipFile(io.BytesIO(output))
    assert [i.filename for i in before.infolist()] == [i.filename for i in after.infolist()]
    # every part but the translated ones byte-identical: media, styles, relationships (the numbers and formulas
    # of the sheet that holds a rich-text inline string are in the signature)
    translated_parts = {
        "docx": ("word/document.xml",),
        "pptx": ("ppt/slides/slide", "ppt/notesSlides/"),
        "xlsx": ("xl/sharedStrings.xml", "xl/worksheets/sheet"),
        "odt": ("content.xml", "styles.xml"),
        "odp": ("content.xml",),
        "epub": ("OEBPS/nav.xhtml", "OEBPS/chapter.xhtml", "OEBPS/toc.ncx"),
    }[fmt]
    for info in before.infolist():
        if not info.filename.startswith(translated_parts):
            assert after.read(info.filename) == before.read(info.filename), info.filename


def test_each_kept_run_is_written_once_and_invented_keys_take_the_main_formatting():
    """`inline.written`, what every format writes back: a kept run repeated by the translation once (at its first
    place), a kept run it dropped at the end, an element of a key the paragraph does not have as the main
    formatting's text, empty pieces left out."""
    from vanilla_transformer.inference.formats.inline import Run, encode, written

    runs = [
        Run("a ", 0),
        Run("b", 1),
        Run(" ", 0),
        Run("[img]", 2, kept=True),
        Run(" c ", 0),
        Run("@", 3, kept=True),
    ]
    encoded = encode(runs)
    # key 0 has the most characters: its text is written outside any element
    assert encoded.base == 0 and encoded.html.startswith('a <x-run k="1">b</x-run> ')
    translation = (
        '<x-run k="2" translate="no">[img]</x-run>C <x-run k="9">B</x-run><x-run k="1"></x-run>'
        ' <x-run k="2" translate="no">[img]</x-run>A'
    )
    kept = [False, False, True, True]
    assert written(translation, encoded.base, kept) == [
        ("", 2),
        ("C ", 0),
        ("B", 0),
        (" ", 0),
        ("A", 0),
        ("", 3),
    ]


def test_a_translation_that_reorders_words_moves_their_formatting_with_them():
    import docx as python_docx

    source = BUILDERS["docx"]()
    document = read_file(source, "docx")
    # the paragraph with bold, italic and link runs, its words reversed with their markup
    (k,) = [i for i, text in enumerate(document.texts) if "x-run" in text]
    assert (
        document.texts[k] == 'w1 <x-run k="1">w2</x-run> <x-run k="2">w3</x-run> <x-run k="3">w4</x-run> w5'
    )
    texts = list(document.texts)
    texts[k] = 'w5 <x-run k="3">w4</x-run> <x-run k="2">w3</x-run> <x-run k="1">w2</x-run> w1'
    out = python_docx.Document(io.BytesIO(document.write(texts)))
    paragraph = out.paragraphs[1]
    runs = [
        (item.text, getattr(item, "bold", None), getattr(item, "italic", None))
        for item in paragraph.iter_inner_content()
    ]
    assert runs == [
        ("w5 ", None, None),
        ("w4", None, None),
        (" ", None, None),
        ("w3", None, True),
        (" ", None, None),
        ("w2", True, None),
        (" w1", None, None),
    ]
    assert [link.text for link in paragraph.hyperlinks] == ["w4"]


def test_an_odt_translation_that_reorders_words_moves_their_spans_links_and_frames():
    from helpers.documents import odf_signature

    source = BUILDERS["odt"]()
    document = read_file(source, "odt")
    k = document.texts.index(
        'w1 <x-run k="1">w2</x-run> <x-run k="2">w3</x-run> <x-run k="3">w4</x-run> w5  '
    )
    (f,) = [i for i, text in enumerate(document.texts) if 'translate="no"' in text]
    texts = list(document.texts)
    texts[k] = 'w5 <x-run k="3">w4</x-run> <x-run k="2">w3</x-run>   <x-run k="1">w2</x-run> w1'
    texts[f] = '<x-run k="1" translate="no"></x-run>w8 w7 w6'
    after = odf_signature(document.write(texts))
    assert after["paragraphs"][2] == [
        ("w5", ()),
        ("w4", ("https://example.com/",)),
        ("w3", ("Italic",)),
        ("w2", ("Bold",)),
        ("w1", ()),
    ]
    # the image's frame first, then the words; every element where it was
    assert after["tags"] == odf_signature(source)["tags"]
    content = zipfile.ZipFile(io.BytesIO(document.write(texts))).read("content.xml").decode()
    assert "<draw:frame" in content.split("w8 w7 w6")[0].rsplit("<text:p", 1)[1]
    assert '<text:s text:c="2"/>' in content


def markup_and_words(document: str) -> tuple[list[str], list[str]]:
    """The tags of an HTML document as written, in order, and its words."""
    from html.parser import HTMLParser

    class Parts(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []
            self.words: list[str] = []

        def handle_starttag(self, tag, attrs) -> None:
            self.tags.append(self.get_starttag_text() or "")

        def handle_endtag(self, tag) -> None:
            self.tags.append(f"</{tag}>")

        def handle_data(self, data) -> None:
            self.words += data.split()

    parts = Parts()
    parts.feed(document)
    return parts.tags, parts.words


def test_html_keeps_its_markup_and_every_word_its_element(copy_model):
    output = translated(copy_model, HTML.encode(), "html").decode()
    assert markup_and_words(output) == markup_and_words(HTML)
    for kept in (
        "<style>p { color: red }</style>",
        "<pre>w9 code</pre>",
        "<td>42.5</td>",
        '<a href="https://example.com/">w4</a>',
        "<b>w2</b>",
    ):
        assert kept in output


@pytest.mark.parametrize(("fmt", "text"), [("txt", TXT), ("srt", SRT), ("vtt", VTT), ("md", MD)])
def test_text_formats_come_back_as_they_were_from_a_copy(copy_model, fmt, text):
    from vanilla_transformer.inference.alignment import align_words
    from vanilla_transformer.inference.markup import split_document

    # the copy model aligns each of these sentences with itself word by word (the diagonal) ...
    sentences = [s.text for t in read_file(text.encode(), fmt).texts for s in split_document(t).segments]
    for sentence, found in zip(sentences, align_words(*copy_model, sentences, sentences)):  # pyright: ignore[reportCallIssue]
        assert sorted(found.links) == [(i, i) for i in range(len(sentence.split()))], sentence
    # ... so markup, timings, cue numbers, notes, numbers, indentation and line endings come back as they were,
    # a cue's lines rebalanced to as many as it had
    assert translated(copy_model, text.encode(), fmt).decode() == text


def test_markdown_words_keep_their_emphasis_links_and_code_where_they_move():
    document = read_file(MD.encode(), "md")
    # code blocks, front matter, HTML blocks and cells without a letter are not read
    assert not any("indented" in t or "42" in t or "title" in t or "#" in t for t in document.texts)
    (k,) = [i for i, text in enumerate(document.texts) if "w6 w0" in text]
    assert document.texts[k] == (
        'w1 <x-run k="1">w2</x-run> w3 <x-run k="2">w4</x-run> <x-run k="3" translate="no">w6 w0</x-run>'
    )
    texts = list(document.texts)
    texts[k] = (
        '<x-run k="3" translate="no">w6 w0</x-run> <x-run k="2">w4 w*</x-run> w3 <x-run k="1">w2</x-run>'
    )
    out = document.write(texts).decode()
    assert '- `w6 w0` [w4 w\\*](https://example.com/a_b "w5") w3 **w2**\n- w7 ~~w8~~ w9\n' in out
    assert out.replace(out.splitlines(keepends=True)[5], MD.splitlines(keepends=True)[5]) == MD


def test_markdown_written_back_renders_as_it_did():
    from markdown_it import MarkdownIt

    source = (
        '* w1 **w2 `a > b`\n  w3** w4 [w5 w6](<a b.md> "t")\n  w7 w8 < w9 w0\n\n'
        "w1 w2 w3 w4 w5 w6 w7 w8 w9\n- w0 \\- w1 *w2\nw3*\n"
    )
    document = read_file(source.encode(), "md")
    out = document.write(document.texts).decode()
    # as many lines, and the same document (markdown-it's HTML, its line breaks aside)
    assert out.count("\n") == source.count("\n") and out != source
    md = MarkdownIt("commonmark")
    assert " ".join(md.render(out).split()) == " ".join(md.render(source).split())


def test_a_pdf_becomes_its_translated_text_as_a_word_document_or_text(copy_model, tmp_path):
    import docx as python_docx

    from vanilla_transformer.commands import translate

    source = BUILDERS["pdf"]()
    # paragraphs joined from the page's lines; a number kept; a page break between pages
    text = translated(copy_model, source, "pdf", output_format="txt").decode()
    assert text == "w1 w2 w3 w4 w5 w6\n\n42.5\n\f\nw7 w8 w9\n"
    document = python_docx.Document(io.BytesIO(translated(copy_model, source, "pdf")))
    assert [p.text for p in document.paragraphs] == ["w1 w2 w3 w4 w5 w6", "42.5", "", "w7 w8 w9"]
    with pytest.raises(DocumentError, match="cannot be written as pdf: choose one of docx, txt"):
        read_file(source, "pdf", output_format="pdf")
    # on the command line, --output's extension says which
    model, tokenizer = copy_model
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    (tmp_path / "in.pdf").write_bytes(source)
    args = ["--model", str(tmp_path / "model"), "--num_beams", "1", "--input", str(tmp_path / "in.pdf")]
    assert translate.main([*args, "--output", str(tmp_path / "out.txt")]) == 0
    assert (tmp_path / "out.txt").read_text() == text


def test_a_cue_is_cut_into_as_many_balanced_lines_as_it_had():
    document = read_file(SRT.encode(), "srt")
    assert document.texts == ["w1 <i>w2</i> w3 w4 w5", "<b>w5</b> w6 w7"]
    out = document.write(["w5 w4 <i>w3</i> w2 w1 w0", "<b>w6</b> w7 &amp; w8"]).decode()
    assert "00:00:01,000 --> 00:00:02,500\nw5 w4 <i>w3</i>\nw2 w1 w0\n\n" in out
    assert "<b>w6</b> w7 & w8\n" in out


def _zip(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()


def _bomb_part() -> bytes:
    entities = "".join(f'<!ENTITY e{i} "&e{i - 1};&e{i - 1};">' for i in range(1, 10))
    return (
        f'<?xml version="1.0"?><!DOCTYPE w:document [<!ENTITY e0 "w1">{entities}]>'
        f'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r>'
        "<w:t>&e9;</w:t></w:r></w:p></w:body></w:document>"
    ).encode()


BAD = {
    "empty": (b"", "docx", DocumentError, "empty"),
    "truncated zip": (None, "docx", DocumentError, "not a readable zip"),
    "password-protected": (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 512,
        "docx",
        DocumentError,
        "password",
    ),
    "wrong extension, not a zip": (b"w1 w2 w3\n", "docx", DocumentError, "not a readable zip"),
    "wrong extension, another package": (None, "pptx", DocumentError, "no ppt/presentation.xml"),
    "wrong extension, not an odt": (
        None,
        "odt",
        DocumentError,
        "not a odt file: the package says 'no mimetype'",
    ),
    "epub without its package document": (
        _zip({"mimetype": b"application/epub+zip", "META-INF/container.xml": b"<container/>"}),
        "epub",
        DocumentError,
        "package document",
    ),
    "truncated pdf": ("pdf", "pdf", DocumentError, "not a readable pdf"),
    "pdf without text": ("blank pdf", "pdf", DocumentError, "no text to extract"),
    "odp bomb": (_zip({"mimetype": b"\0" * 3_000_000}), "odp", TooLarge, "unzips to 3000000 bytes"),
    "zip bomb": (_zip({"word/document.xml": b"\0" * 3_000_000}), "docx", TooLarge, "unzips to 3000000 bytes"),
    "too many entries": (_zip({f"f{i}": b"" for i in range(40)}), "docx", TooLarge, "40 entries"),
    "xml bomb": (_zip({"word/document.xml": _bomb_part()}), "docx", DocumentError, "DTD"),
    "over the size limit": (b"w1 " * 400_000, "txt", TooLarge, "more than the limit 1000000"),
    "not utf-8": (b"w1 \xfa\xfb w2", "txt", DocumentError, "not UTF-8"),
    "vtt without header": (b"00:01.000 --> 00:02.000\nw1\n", "vtt", DocumentError, "WEBVTT"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_files_that_cannot_be_read_are_refused_with_the_reason(case):
    data, fmt, error, message = BAD[case]
    if data is None:
        data = BUILDERS["docx"]()
        data = data[: len(data) // 2] if case == "truncated zip" else data
    elif data == "pdf":
        data = BUILDERS["pdf"]()[:300]
    elif data == "blank pdf":
        from fpdf import FPDF

        blank = FPDF()
        blank.add_page()
        data = bytes(blank.output())
    limits = FileLimits(max_bytes=1_000_000, max_unzipped_bytes=2_000_000, max_entries=30)
    with pytest.raises(error, match=message):
        read_file(data, fmt, limits)


def test_paragraphs_over_the_limit_and_unknown_formats_are_refused():
    from vanilla_transformer.inference.formats import plan_file

    with pytest.raises(TooLarge, match="more than 2 paragraphs"):
        plan_file(read_file(TXT.encode(), "txt"), FileLimits(max_paragraphs=2), split_sentences=False)
    assert file_format("a/report.DOCX") == "docx" and file_format("x", "htm") == "html"
    with pytest.raises(DocumentError, match="'mobi' is not supported: use one of txt, html, md"):
        file_format("book.mobi")


def test_translate_input_output_on_the_command_line(copy_model, tmp_path, capsys):
    from vanilla_transformer.commands import translate

    model, tokenizer = copy_model
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    source = BUILDERS["docx"]()
    (tmp_path / "in.docx").write_bytes(source)
    common = ["--model", str(tmp_path / "model"), "--num_beams", "1"]
    assert (
        translate.main(
            [*common, "--input", str(tmp_path / "in.docx"), "--output", str(tmp_path / "out.docx")]
        )
        == 0
    )
    assert SIGNATURES["docx"]((tmp_path / "out.docx").read_bytes()) == SIGNATURES["docx"](source)
    assert "paragraphs" in capsys.readouterr().err
    # a file given the wrong extension, a truncated one: exit 2, the reason on stderr, no output written
    (tmp_path / "bad.pptx").write_bytes(source)
    (tmp_path / "cut.docx").write_bytes(source[:100])
    for name in ("bad.pptx", "cut.docx"):
        out = tmp_path / f"out-{name}"
        assert translate.main([*common, "--input", str(tmp_path / name), "--output", str(out)]) == 2
        assert f"error: {tmp_path / name}" in capsys.readouterr().err
        assert not out.exists()
    assert translate.main([*common, "--input", str(tmp_path / "in.docx")]) == 2
    assert (
        translate.main([*common, "--input", str(tmp_path / "in.docx"), "--output", "o.docx", "--alignments"])
        == 2
    )
