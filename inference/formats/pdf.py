"""PDF (.pdf): its text extracted by pypdf and translated into a new file, a Word document (.docx, the default:
a paragraph per paragraph, a page break between pages) or plain text (.txt: paragraphs apart by a blank line,
pages by a form feed). The PDF's layout, fonts and images are not carried over: this is text extraction, not a
translated PDF.

Each page's extracted lines are joined into paragraphs: a paragraph ends at an empty line or after a line
shorter than three quarters of the page's longest (the end of a paragraph in justified or ragged text); a word
hyphenated across lines is joined. A scanned PDF (images only) has no text to extract and is refused.
"""

from __future__ import annotations

import io
import re

from . import DocumentError, FileDocument, FileLimits, TooLarge
from .inline import Run, encode, plain, translatable

HYPHENATED = re.compile(r"(\w)-$")


def _paragraphs(page_text: str) -> list[str]:
    lines = [line.strip() for line in page_text.splitlines()]
    longest = max((len(line) for line in lines), default=0)
    paragraphs: list[str] = []
    current = ""
    for line in lines:
        if not line:
            if current:
                paragraphs.append(current)
            current = ""
            continue
        if HYPHENATED.search(current):
            current = current[:-1] + line
        else:
            current = f"{current} {line}" if current else line
        if len(line) < 0.75 * longest:
            paragraphs.append(current)
            current = ""
    if current:
        paragraphs.append(current)
    return paragraphs


def _pages(data: bytes, limits: FileLimits) -> list[list[str]]:
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError, PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError("the pdf is encrypted with a password: remove it")
        if len(reader.pages) > limits.max_paragraphs:
            raise TooLarge(
                f"the pdf has {len(reader.pages)} pages, more than the limit {limits.max_paragraphs}"
            )
        return [_paragraphs(page.extract_text() or "") for page in reader.pages]
    except LimitReachedError as err:
        raise TooLarge(f"the pdf decompresses past pypdf's limit: {err}") from None
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError) as err:
        raise DocumentError(f"this is not a readable pdf file: {err}") from None


def _docx(pages: list[list[str]]) -> bytes:
    import docx as python_docx
    from docx.enum.text import WD_BREAK

    document = python_docx.Document()
    for number, paragraphs in enumerate(pages):
        if number:
            document.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def read(data: bytes, fmt: str, limits: FileLimits, output_format: str) -> FileDocument:
    pages = _pages(data, limits)
    if not any(pages):
        raise DocumentError("the pdf has no text to extract (a scanned document? run OCR on it first)")
    places = [
        (i, j) for i, page in enumerate(pages) for j, text in enumerate(page) if translatable([Run(text, 0)])
    ]

    def write(translations: list[str]) -> bytes:
        out = [list(page) for page in pages]
        for (i, j), translated in zip(places, translations):
            out[i][j] = plain(translated)
        if output_format == "docx":
            return _docx(out)
        return "\n\f\n".join("\n\n".join(page) for page in out).encode("utf-8") + b"\n"

    return FileDocument([encode([Run(pages[i][j], 0)]).html for i, j in places], write, output_format)
