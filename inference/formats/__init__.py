"""Files translated with their formatting kept: one reader/writer per file format, each a module here.

A reader turns a file's bytes into a `FileDocument`: its ``texts``, HTML fragments (or, for HTML, the document)
whose inline formatting is markup around words (`inference.formats.inline`), and ``write``, which takes their
translations (the same fragments translated by the markup transfer, `inference.markup`) and returns the file's bytes
with the same structure, styles and everything not translated (images, table layout, fields, numbers, code) as it
was. Each text becomes an `inference.documents.DocumentPlan` (`plan_file`): translated sentence by sentence, its
markup placed by the word alignments, by the command line (`translate_file`) or the server
(`serving.documents.translate_file`) alike.

    txt   each non-empty line a paragraph; indentation and line endings kept
    html  the document through the markup transfer (htm, xhtml too)
    md    Markdown's paragraphs, headings, list items and table cells with their emphasis and links
          (`inference.formats.markdown`); code, front matter and HTML blocks kept (markdown too)
    srt, vtt  each cue a paragraph, its timings, numbers, settings and NOTE/STYLE blocks kept, its lines
          rebalanced to the same count
    docx, pptx, xlsx  OOXML edited in place (`inference.formats.ooxml`): Word paragraphs of the body, headers,
          footers, foot- and endnotes; slide and notes paragraphs; the shared and inline strings of text cells
          (formulas, numbers and their cached values kept)
    odt, odp  OpenDocument edited in place (`inference.formats.odf`): paragraphs and headings of the body,
          tables, frames, headers and footers; slides' text boxes and notes
    epub  each XHTML content document as an HTML file, the table of contents' titles; the rest kept
          (`inference.formats.epub`)
    pdf   its text extracted (pypdf) into paragraphs, written as a new .docx (the default) or .txt: not a PDF,
          its layout not kept (`inference.formats.pdf`)

Bounds (`FileLimits`): the file's size, the zip's entries and uncompressed size, the paragraph count (`TooLarge`);
a file its reader cannot parse is a `DocumentError` saying why.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..documents import DocumentPlan

# each format's module (in this package) and its media type (that of what it writes, as its own output format)
FORMATS = {
    "txt": ("text", "text/plain; charset=utf-8"),
    "html": ("html", "text/html; charset=utf-8"),
    "md": ("markdown", "text/markdown; charset=utf-8"),
    "srt": ("subtitles", "application/x-subrip"),
    "vtt": ("subtitles", "text/vtt; charset=utf-8"),
    "docx": ("ooxml", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    "pptx": ("ooxml", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
    "xlsx": ("ooxml", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    "odt": ("odf", "application/vnd.oasis.opendocument.text"),
    "odp": ("odf", "application/vnd.oasis.opendocument.presentation"),
    "epub": ("epub", "application/epub+zip"),
    "pdf": ("pdf", "application/pdf"),
}
# the mimetype entry of the zipped formats that have one (ODF, EPUB)
MIMETYPES = {
    "odt": b"application/vnd.oasis.opendocument.text",
    "odp": b"application/vnd.oasis.opendocument.presentation",
    "epub": b"application/epub+zip",
}
# other extensions of a format
ALIASES = {"htm": "html", "xhtml": "html", "text": "txt", "markdown": "md"}
# the formats a format's file can be written as (the first: its own)
OUTPUT_FORMATS = {name: (name,) for name in FORMATS} | {"pdf": ("docx", "txt")}


class DocumentError(ValueError):
    """A file its format's reader cannot read (the message says why and what to do)."""


class TooLarge(DocumentError):
    """A file over one of the `FileLimits`."""


@dataclass(frozen=True)
class FileLimits:
    """How large a file may be: its bytes, the entries and uncompressed bytes of a zipped package, the
    paragraphs (pieces of its `DocumentPlan`s) it holds."""

    max_bytes: int = 20 * 2**20
    max_unzipped_bytes: int = 200 * 2**20
    max_entries: int = 10_000
    max_paragraphs: int = 20_000


@dataclass
class FileDocument:
    """A file read by its format (module docstring): ``texts`` to translate with their markup, ``write`` of their
    translations (one each, in order) to the file's bytes in ``output_format``."""

    texts: list[str]
    write: Callable[[list[str]], bytes]
    output_format: str


def file_format(name: str, given: str | None = None, data: bytes | None = None) -> str:
    """The format of a file called ``name`` (by its extension), or ``given``; for a name without an extension,
    that of ``data`` when it says it (an OOXML package by its main part, WebVTT by its header); `DocumentError`
    naming the formats for one not among them."""
    wanted = (given or PurePath(name).suffix.lstrip(".")).lower()
    if not wanted and data is not None:
        wanted = _sniffed(data)
    wanted = ALIASES.get(wanted, wanted)
    if wanted not in FORMATS:
        raise DocumentError(
            f"file format {wanted or '(no extension)'!r} is not supported: use one of {', '.join(FORMATS)}"
        )
    return wanted


def _sniffed(data: bytes) -> str:
    """The format ``data`` says it is in, or ""."""
    import io
    import zipfile

    if data.startswith(b"PK"):
        try:
            names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
        except (zipfile.BadZipFile, EOFError, ValueError):
            return ""
        parts = {"word/document.xml": "docx", "ppt/presentation.xml": "pptx", "xl/workbook.xml": "xlsx"}
        found = next((fmt for part, fmt in parts.items() if part in names), "")
        if not found and "mimetype" in names:
            mimetype = zipfile.ZipFile(io.BytesIO(data)).read("mimetype").strip()
            found = next((fmt for fmt, value in MIMETYPES.items() if value == mimetype), "")
        return found
    return "vtt" if data.lstrip(b"\xef\xbb\xbf").startswith(b"WEBVTT") else ""


def read_file(
    data: bytes, fmt: str, limits: FileLimits | None = None, output_format: str | None = None
) -> FileDocument:
    """``data``, a file in format ``fmt`` (`file_format`), read by its format's module, to be written as
    ``output_format`` (default: its own, `OUTPUT_FORMATS`). `DocumentError` for an empty file or one its reader
    cannot read, `TooLarge` for one over ``limits``."""
    limits = limits or FileLimits()
    out = output_format.lower() if output_format else OUTPUT_FORMATS[fmt][0]
    if out not in OUTPUT_FORMATS[fmt]:
        raise DocumentError(
            f"a {fmt} file cannot be written as {out}: choose one of {', '.join(OUTPUT_FORMATS[fmt])}"
        )
    if not data:
        raise DocumentError(f"the {fmt} file is empty (0 bytes)")
    if len(data) > limits.max_bytes:
        raise TooLarge(f"the file has {len(data)} bytes, more than the limit {limits.max_bytes}")
    module = importlib.import_module(f"{__name__}.{FORMATS[fmt][0]}")
    return module.read(data, fmt, limits, out)


def decode_text(data: bytes, fmt: str) -> str:
    """A text file's characters: UTF-8 (with or without a byte-order mark), else UTF-16 with its mark;
    `DocumentError` for anything else."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DocumentError(f"the {fmt} file is not UTF-8 text ({err}): save it as UTF-8") from None


def plan_file(
    document: FileDocument,
    limits: FileLimits | None = None,
    split_sentences: bool = True,
    language: str | None = None,
) -> list[DocumentPlan]:
    """The `DocumentPlan` of each of the document's texts (markup kept, with ``split_sentences`` cut into the
    sentences of ``language``); `TooLarge` for more paragraphs than ``limits`` allow."""
    from ..documents import DocumentPlan

    limits = limits or FileLimits()
    plans = []
    count = 0
    for text in document.texts:
        plan = DocumentPlan.of(text, markup=True, split_sentences=split_sentences, language=language)
        count += len(plan.pieces)
        if count > limits.max_paragraphs:
            raise TooLarge(f"the file has more than {limits.max_paragraphs} paragraphs, the limit: split it")
        plans.append(plan)
    return plans


def translate_file(
    model: Any,
    tokenizer: Any,
    data: bytes,
    fmt: str,
    *,
    limits: FileLimits | None = None,
    output_format: str | None = None,
    batch_size: int = 32,
    split_sentences: bool = True,
    language: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    **generate_kwargs: Any,
) -> bytes:
    """``data`` (a ``fmt`` file) translated with ``model`` (`inference.documents.translate_plans`; the best
    hypothesis, ``generate_kwargs`` as there; a sentence without a letter kept as written), written as
    ``output_format``; ``progress(done, total)`` after
    each group of paragraphs."""
    from ..documents import translate_plans

    document = read_file(data, fmt, limits, output_format)
    plans = plan_file(document, limits, split_sentences, language)
    translated = translate_plans(
        model, tokenizer, plans, batch_size, progress=progress, kept=untranslatable, **generate_kwargs
    )
    return document.write(translated)


def untranslatable(sentence: str) -> bool:
    """Whether a sentence of a file is kept as written: it holds no letter (numbers, dates, punctuation)."""
    from .inline import LETTER

    return not LETTER.search(sentence)


def supported(names: Sequence[str] = tuple(FORMATS)) -> list[str]:
    """The extensions of the supported formats, with their dot (LibreTranslate's ``supportedFilesFormat``)."""
    return [f".{name}" for name in names]
