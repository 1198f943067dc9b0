"""Markdown (.md): paragraphs, headings, list items, block quotes and table cells translated with their emphasis,
strong, strikethrough and links as markup around words; everything else written back byte-identical.

markdown-it-py (CommonMark, with tables and strikethrough) gives each block's source lines. A block's inline
source is found in them (after its list, quote or heading markers, which are kept) and replaced by its
translation, each hard-break segment cut into as many lines of balanced length as it had (a line that would
start another block escaped). Inline code, images, autolinks and inline HTML are kept runs, written back as parsed; a
link keeps its destination and title (a reference link is written inline, to the same target). Fenced and
indented code blocks, HTML blocks, front matter (``---`` ... ``---`` at the top), link reference definitions
and every line that holds no translated text are not touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import FileDocument, FileLimits, decode_text
from .inline import Run, encode, translatable, written
from .subtitles import balanced_lines

FRONT_MATTER = re.compile(r"\A(?:---|\+\+\+)[ \t]*\r?\n(?:.*\r?\n)*?(?:---|\+\+\+|\.\.\.)[ \t]*(?:\r?\n|\Z)")
# what a translated line must not start with: it would open a block
BLOCK_START = re.compile(r"^([-+*](?=\s|$)|#{1,6}(?=\s|$)|>|=+\s*$|\d{1,9}[.)](?=\s|$))")
ESCAPED = re.compile(r"[\\`*\[\]<]|(?<!\w)_|_(?!\w)")
# a line's words: a pointy-bracketed link destination (which cannot hold a line break) and a code span (a line
# that starts inside it would be escaped) are one with their word
WORDS = re.compile(r"(?:\]\(<[^>\n]*>|`[^`\n]*`|\S)+|\s+")
CONTAINERS = ("paragraph_open", "heading_open", "th_open", "td_open")


def _parser():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    # destinations as written (not percent-encoded)
    md.normalizeLink = lambda url: url  # type: ignore[method-assign]
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return md


@dataclass
class _Block:
    """One translated block: the (line, start, end) spans of its inline source, each hard-break segment's first
    line, the hard-break marker, its run ``slots`` (wrappers, and the kept markdown or None) and main key."""

    spans: list[tuple[int, int, int]]
    groups: list[int]
    hard_break: str
    in_table: bool
    slots: list[tuple[tuple, str | None]] = field(default_factory=list)
    base: int = -1


def _runs(children, block: _Block) -> list[Run]:
    runs: list[Run] = []
    stack: list[tuple] = []
    keys: dict[tuple, int] = {}
    autolink: list[str] | None = None

    def text_key(wrappers: tuple) -> int:
        if wrappers not in keys:
            block.slots.append((wrappers, None))
            keys[wrappers] = len(block.slots) - 1
        return keys[wrappers]

    def kept(shown: str, markdown: str) -> None:
        block.slots.append((tuple(stack), markdown))
        runs.append(Run(shown, len(block.slots) - 1, kept=True))

    for token in children:
        kind = token.type
        if autolink is not None:
            if kind == "link_close":
                kept("".join(autolink), "<" + "".join(autolink) + ">")
                autolink = None
            else:
                autolink.append(token.content)
        elif kind == "text":
            if token.content:
                runs.append(Run(token.content, text_key(tuple(stack))))
        elif kind == "softbreak":
            runs.append(Run(" ", text_key(tuple(stack))))
        elif kind == "hardbreak":
            runs.append(Run(" ", text_key(tuple(stack))))
            kept("", "\n")
        elif kind in ("em_open", "strong_open", "s_open"):
            stack.append((kind[:-5], token.markup))
        elif kind == "link_open":
            if token.markup in ("autolink", "linkify"):
                autolink = []
            else:
                stack.append(("link", token.attrs.get("href", ""), token.attrs.get("title")))
        elif kind in ("em_close", "strong_close", "s_close", "link_close"):
            if stack:
                stack.pop()
        elif kind == "code_inline":
            kept(token.content, _code(token.content, token.markup))
        elif kind == "image":
            alt = token.content
            kept(alt, "!" + _link(f"{alt}", token.attrs.get("src", ""), token.attrs.get("title")))
        else:  # html_inline and whatever else: as written
            kept("", token.content)
    return runs


def _code(content: str, ticks: str) -> str:
    pad = " " if content.startswith("`") or content.endswith("`") else ""
    return f"{ticks}{pad}{content}{pad}{ticks}"


def _link(text: str, href, title) -> str:
    href = str(href)
    if not href or re.search(r"[\s<>]", href) or href.count("(") != href.count(")"):
        href = "<" + href.replace(">", "%3E") + ">"
    title_part = ' "' + str(title).replace('"', '\\"') + '"' if title else ""
    return f"[{text}]({href}{title_part})"


def _escape(text: str, in_table: bool) -> str:
    text = ESCAPED.sub(lambda m: "\\" + m.group(0), text)
    return text.replace("|", "\\|") if in_table else text


def _wrap(body: str, wrapper: tuple) -> str:
    """``body`` in a wrapper's markup, the spaces at its ends outside it (emphasis cannot start or end with one)."""
    inner = body.strip()
    if not inner:
        return body
    lead, trail = body[: len(body) - len(body.lstrip())], body[len(body.rstrip()) :]
    if wrapper[0] == "link":
        return lead + _link(inner, wrapper[1], wrapper[2]) + trail
    return f"{lead}{wrapper[1]}{inner}{wrapper[1]}{trail}"


def _render(block: _Block, translated: str) -> list[str]:
    """The translated inline source, one string per hard-break segment: consecutive pieces inside the same
    wrappers (emphasis, links) written inside one of each."""
    stack: list[tuple] = []
    buffers: list[list[str]] = [[]]

    def close_to(depth: int) -> None:
        while len(stack) > depth:
            body = "".join(buffers.pop())
            buffers[-1].append(_wrap(body, stack.pop()))

    def put(wrappers: tuple, content: str) -> None:
        common = 0
        while common < min(len(stack), len(wrappers)) and stack[common] == wrappers[common]:
            common += 1
        close_to(common)
        for wrapper in wrappers[common:]:
            stack.append(wrapper)
            buffers.append([])
        buffers[-1].append(content)

    for text, key in written(translated, block.base, [markdown is not None for _, markdown in block.slots]):
        wrappers, markdown = block.slots[key]
        put(wrappers, markdown if markdown is not None else _escape(text, block.in_table))
    close_to(0)
    return [s.strip() for s in "".join(buffers[0]).split("\n")]


def _line(text: str) -> str:
    """A line of a translated block, escaped where its start would open another block."""
    return BLOCK_START.sub(
        lambda m: "\\" + m.group(0) if m.group(0)[0] in "-+*#>=" else m.group(0)[:-1] + "\\" + m.group(0)[-1],
        text,
    )


def read(data: bytes, fmt: str, limits: FileLimits, output_format: str) -> FileDocument:
    source = decode_text(data, fmt)
    lines = source.splitlines(keepends=True)
    front = FRONT_MATTER.match(source)
    skipped = front.group(0).count("\n") if front else 0
    parsed = "\n" * skipped + "".join(lines[skipped:])
    tokens = _parser().parse(parsed)
    cursors: dict[int, int] = {}
    blocks: list[_Block] = []
    texts: list[str] = []
    for i, token in enumerate(tokens):
        if token.type != "inline" or i == 0 or tokens[i - 1].type not in CONTAINERS or token.map is None:
            continue
        content = token.content.split("\n")
        spans = []
        for j, part in enumerate(content):
            index = token.map[0] + j
            if index >= len(lines):
                break
            line = lines[index]
            start = line.find(part, cursors.get(index, 0)) if part else -1
            if start < 0:
                spans = []
                break
            cursors[index] = start + len(part)
            spans.append((index, start, start + len(part)))
        if not spans:
            continue
        groups = [0] + [j + 1 for j, part in enumerate(content[:-1]) if part.endswith(("\\", "  "))]
        marker = "\\" if any(part.endswith("\\") for part in content[:-1]) else "  "
        block = _Block(spans, groups, marker, tokens[i - 1].type in ("th_open", "td_open"))
        runs = _runs(token.children or [], block)
        if not translatable(runs):
            continue
        encoded = encode(runs)
        block.base = encoded.base
        blocks.append(block)
        texts.append(encoded.html)

    def write(translations: list[str]) -> bytes:
        out: list[str | None] = list(lines)
        edits: dict[int, list[tuple[int, int, str]]] = {}
        for block, translated in zip(blocks, translations):
            segments = _render(block, translated)
            bounds = [*block.groups, len(block.spans)]
            groups = [block.spans[a:b] for a, b in zip(bounds, bounds[1:])]
            if len(segments) > len(groups):
                segments[len(groups) - 1 :] = [" ".join(segments[len(groups) - 1 :])]
            for k, spans in enumerate(groups):
                # as many lines as the segment had, of balanced length
                lines_k = [
                    _line(line)
                    for line in balanced_lines(segments[k] if k < len(segments) else "", len(spans), WORDS)
                ]
                if k < len(groups) - 1:
                    lines_k[-1] += block.hard_break
                for j, (index, start, end) in enumerate(spans):
                    if j < len(lines_k):
                        edits.setdefault(index, []).append((start, end, lines_k[j]))
                    elif lines[index][:start].strip(" \t>") == "" and not lines[index][end:].strip():
                        out[index] = None
                    else:
                        edits.setdefault(index, []).append((start, end, ""))
        for index, changes in edits.items():
            line = out[index]
            if line is None:
                continue
            for start, end, text in sorted(changes, reverse=True):
                line = line[:start] + text + line[end:]
            out[index] = line
        return "".join(line for line in out if line is not None).encode("utf-8")

    return FileDocument(texts, write, output_format)
