"""Plain text (.txt): each line that holds a letter is a paragraph; its indentation, the other lines and the line
endings are kept."""

from __future__ import annotations

import re

from . import FileDocument, FileLimits, decode_text
from .inline import Run, encode, plain, translatable

LINE = re.compile(r"([ \t]*)(.*?)([ \t]*)(\r\n|\n|\r|$)")


def read(data: bytes, fmt: str, limits: FileLimits, output_format: str) -> FileDocument:
    text = decode_text(data, fmt)
    lines = [m.groups() for m in LINE.finditer(text) if m.group(0)]
    wanted = [i for i, (_, body, _, _) in enumerate(lines) if translatable([Run(body, 0)])]

    def write(translations: list[str]) -> bytes:
        out = [list(line) for line in lines]
        for i, translated in zip(wanted, translations):
            out[i][1] = plain(translated)
        return "".join("".join(line) for line in out).encode("utf-8")

    return FileDocument([encode([Run(lines[i][1], 0)]).html for i in wanted], write, output_format)
