"""Subtitles (.srt, .vtt): each cue's text is a paragraph (its lines joined; its ``<i>``, ``<b>``, ``<u>``,
``<font>`` and WebVTT's ``<c>``, ``<v>`` tags are markup around words); cue numbers, identifiers, timings and
settings, and WebVTT's header, NOTE, STYLE and REGION blocks are kept as written; the translation is cut into as
many lines as the cue had, of balanced length."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from . import DocumentError, FileDocument, FileLimits, decode_text
from .inline import LETTER

BLOCKS = re.compile(r"(?:\r?\n){2,}")
NEWLINE = re.compile(r"\r\n|\n|\r")
# the parts of a cue's text where a line may break: spaces outside tags
TOKENS = re.compile(r"<[^>]*>|[^\s<]+|\s+")


class _Markup(HTMLParser):
    """A translated cue back to subtitle markup: tags as written, text unescaped."""

    def __init__(self, escape: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.escape = escape
        self.out: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.out.append(self.get_starttag_text() or "")

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.out.append(self.get_starttag_text() or "")

    def handle_endtag(self, tag: str) -> None:
        self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        self.out.append(html.escape(data, quote=False) if self.escape else data)


def cue_text(fragment: str, escape: bool) -> str:
    """A translated fragment as subtitle text: tags kept, text with its character references resolved (SubRip)
    or escaped (``escape``: WebVTT)."""
    parser = _Markup(escape)
    parser.feed(fragment)
    parser.close()
    return "".join(parser.out)


def balanced_lines(text: str, count: int, pattern: re.Pattern[str] = TOKENS) -> list[str]:
    """``text`` cut at spaces outside tags (between the words of ``pattern``) into at most ``count`` lines of about
    equal length."""
    tokens = pattern.findall(text.strip())
    visible = sum(len(t) for t in tokens if not t.startswith("<") and not t.isspace())
    lines: list[str] = [""]
    shown = 0
    for token in tokens:
        if token.isspace():
            # break where the characters shown so far pass the next line's share
            if len(lines) < count and shown >= visible * len(lines) / count:
                lines.append("")
            elif lines[-1]:
                lines[-1] += " "
            continue
        lines[-1] += token
        if not token.startswith("<"):
            shown += len(token)
    return [line.strip() for line in lines if line.strip()] or [""]


def _source(lines: list[str]) -> str:
    """A cue's text lines as one fragment of markup (a cue's text is markup already)."""
    return " ".join(line.strip() for line in lines if line.strip())


def read(data: bytes, fmt: str, limits: FileLimits, output_format: str) -> FileDocument:
    text = decode_text(data, fmt)
    if fmt == "vtt" and not text.lstrip("\ufeff").startswith("WEBVTT"):
        raise DocumentError("this is not a WebVTT file: it does not start with WEBVTT")
    newline = m.group(0) if (m := NEWLINE.search(text)) else "\n"
    parts = BLOCKS.split(text)
    separators = BLOCKS.findall(text)
    # per block: its lines, and the index of its first text line (None: a block kept as written)
    blocks: list[tuple[list[str], int | None]] = []
    for part in parts:
        lines = NEWLINE.split(part)
        timing = next((i for i, line in enumerate(lines) if "-->" in line), None)
        kept = fmt == "vtt" and lines[0].startswith(("WEBVTT", "NOTE", "STYLE", "REGION"))
        if timing is None or kept:
            blocks.append((lines, None))
        else:
            blocks.append((lines, timing + 1))
    if not any(start is not None for _, start in blocks) and text.strip():
        raise DocumentError(f"this is not a {fmt} file: no cue has a timing line (00:00:01,000 --> ...)")
    wanted = [
        b
        for b, (lines, start) in enumerate(blocks)
        if start is not None and LETTER.search(" ".join(lines[start:]))
    ]

    def write(translations: list[str]) -> bytes:
        out = [list(lines) for lines, _ in blocks]
        for b, translated in zip(wanted, translations):
            lines, start = blocks[b]
            cue = lines[start or 0 :]
            count = max(1, len([line for line in cue if line.strip()]))
            trailing = len(cue) - len("\n".join(cue).rstrip().split("\n"))
            out[b] = (
                lines[: start or 0]
                + balanced_lines(cue_text(translated, fmt == "vtt"), count)
                + [""] * trailing
            )
        written = [newline.join(lines) for lines in out]
        joined = [piece for pair in zip(written, [*separators, ""]) for piece in pair]
        return "".join(joined).encode("utf-8")

    return FileDocument([_source(blocks[b][0][blocks[b][1] or 0 :]) for b in wanted], write, output_format)
