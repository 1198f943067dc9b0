"""HTML (.html, .htm, .xhtml): the document through the markup transfer (`inference.markup`), written as UTF-8."""

from __future__ import annotations

from . import FileDocument, FileLimits, decode_text


def read(data: bytes, fmt: str, limits: FileLimits, output_format: str) -> FileDocument:
    document = decode_text(data, fmt)
    return FileDocument([document], lambda translations: translations[0].encode("utf-8"), output_format)
