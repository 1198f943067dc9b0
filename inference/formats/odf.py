"""OpenDocument text and presentations (.odt, .odp) edited in place: only the paragraphs' inline content changes;
every other part and element (styles, automatic styles, frames and their images, tables, lists, the manifest,
the thumbnail) is written back as it was (`inference.formats.packages`).

A paragraph (``text:p``, ``text:h``) of content.xml (a document's body; a presentation's slides, their text boxes,
tables and notes) and, in a text document, of styles.xml's master pages (headers and footers) is read into
`inference.formats.inline.Run`s: its text keyed by the ``text:span`` and ``text:a`` elements around it (their
names and attributes: a span's style, a link's target), ``text:s`` read as the spaces it stands for; every other
child (a frame with its image or text box, a note, a tab, a line break, a field, a bookmark) is a kept run,
written back as it was where the alignment puts it. The paragraphs inside a kept frame or note are paragraphs of
their own. A translated paragraph is written as its text in copies of its spans and links, runs of spaces as
``text:s``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# lxml's etree is compiled: no source for the type checker
from lxml import etree  # pyright: ignore[reportAttributeAccessIssue]

from . import MIMETYPES, DocumentError, FileDocument, FileLimits
from .inline import Run, written
from .packages import EditedParts, Package, parse_xml

TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
PARAGRAPHS = (f"{{{TEXT}}}p", f"{{{TEXT}}}h")
WRAPPERS = (f"{{{TEXT}}}span", f"{{{TEXT}}}a")
SPACE = f"{{{TEXT}}}s"
SPACES = re.compile(r"( {2,})")


@dataclass
class _Paragraph:
    """A paragraph ``element`` as read: what each run key stands for, the wrappers (tag and attributes, outer
    first) around a text run or a kept element, and the key of its main formatting."""

    element: Any
    slots: list[tuple[tuple, Any]] = field(default_factory=list)
    base: int = -1


def _read_paragraph(p) -> tuple[_Paragraph, list[Run]]:
    paragraph = _Paragraph(p)
    runs: list[Run] = []
    keys: dict[tuple, int] = {}

    def text(value: str | None, path: tuple) -> None:
        if not value:
            return
        value = re.sub(r"[\n\t\r]", " ", value)
        if path not in keys:
            paragraph.slots.append((path, None))
            keys[path] = len(paragraph.slots) - 1
        runs.append(Run(value, keys[path]))

    def walk(element, path: tuple) -> None:
        text(element.text, path)
        for child in element:
            if isinstance(child.tag, str) and child.tag in WRAPPERS:
                walk(child, (*path, (child.tag, tuple(child.attrib.items()))))
            elif child.tag == SPACE:
                text(" " * int(child.get(f"{{{TEXT}}}c", "1") or 1), path)
            else:
                # the text it shows (a field's value), not that of the paragraphs it holds
                shown = "" if any(True for _ in child.iter(*PARAGRAPHS)) else "".join(child.itertext())
                paragraph.slots.append((path, child))
                runs.append(Run(shown, len(paragraph.slots) - 1, kept=True))
            text(child.tail, path)

    walk(p, ())
    return paragraph, runs


def _append_text(parent, value: str) -> None:
    """Appends ``value`` to the end of ``parent``'s content, runs of spaces as ``text:s``."""
    for part in SPACES.split(value):
        if not part:
            continue
        if SPACES.fullmatch(part):
            _append_text(parent, " ")
            etree.SubElement(parent, SPACE, {f"{{{TEXT}}}c": str(len(part) - 1)})
            continue
        if len(parent):
            last = parent[-1]
            last.tail = (last.tail or "") + part
        else:
            parent.text = (parent.text or "") + part


def _write_paragraph(paragraph: _Paragraph, translated: str) -> None:
    p = paragraph.element
    for child in list(p):
        p.remove(child)
    p.text = None

    def container(path: tuple):
        parent = p
        for tag, attrib in path:
            parent = etree.SubElement(parent, tag, dict(attrib))
        return parent

    def put(key: int) -> None:
        path, kept = paragraph.slots[key]
        kept.tail = None
        container(path).append(kept)

    for text, key in written(translated, paragraph.base, [kept is not None for _, kept in paragraph.slots]):
        path, kept = paragraph.slots[key]
        if kept is not None:
            put(key)
        else:
            _append_text(container(path) if path else p, text)


def read(data: bytes, fmt: str, limits: FileLimits, output_format: str) -> FileDocument:
    package = Package.open(data, limits, fmt)
    if package.entries.get("mimetype", b"").strip() != MIMETYPES[fmt] or "content.xml" not in package.entries:
        found = package.entries.get("mimetype", b"no mimetype").decode("ascii", "replace")[:80]
        raise DocumentError(f"this is not a {fmt} file: the package says {found!r} (wrong extension?)")
    parts = EditedParts(package)
    names = ["content.xml"] + (["styles.xml"] if fmt == "odt" and "styles.xml" in package.entries else [])
    for name in names:
        root = parse_xml(package.entries[name], name)
        parts.roots[name] = root
        scope = root if name == "content.xml" else root.find(f"{{{OFFICE}}}master-styles")
        if scope is None:
            continue
        for p in list(scope.iter(*PARAGRAPHS)):
            parts.add(name, *_read_paragraph(p))
    return parts.document(_write_paragraph, output_format)
