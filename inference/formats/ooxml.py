"""Office Open XML (.docx, .pptx, .xlsx) edited in place: only the paragraphs' runs change; every other part and
element (styles, numbering, tables, drawings and their media, charts, macros, embedded objects, relationships)
is written back as it was (`inference.formats.packages`).

A paragraph (Word's ``w:p``, DrawingML's ``a:p``, a spreadsheet's shared or inline string ``si``/``is``) is read
into `inference.formats.inline.Run`s: a text run (only properties and text) is text keyed by its properties and
the hyperlink around it; anything else in the paragraph (an image, a tab, a break, a field: Word's complex field
from its ``begin`` to its ``end`` is one object, a bookmark, a text box, revision marks, a slide's field) is a
kept run, written back as it was where the alignment puts it. A translated paragraph is written as one run per
piece with a copy of its source run's properties, in a copy of its hyperlink.

Parts translated: Word's body, headers, footers, footnotes and endnotes; PowerPoint's slides and notes; Excel's
shared strings and the inline strings of its sheets (a cell's formula, its number or its cached value is never a
string of these: formulas are kept).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

# lxml's etree is compiled: no source for the type checker
from lxml import etree  # pyright: ignore[reportAttributeAccessIssue]

from . import DocumentError, FileDocument, FileLimits
from .inline import Run, written
from .packages import EditedParts, Package, parse_xml

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"


@dataclass(frozen=True)
class Grammar:
    """A paragraph's element names in one of the formats: the paragraph, a run, its properties, its text, the
    hyperlink that holds runs (Word's), the children that stay first and last, those dropped (Word's proofing
    marks), the children a text run may hold beside properties and text, and the parts that hold paragraphs."""

    paragraphs: tuple[str, ...]
    run: str
    properties: str
    text: str
    link: str | None
    first: tuple[str, ...]
    last: tuple[str, ...]
    dropped: tuple[str, ...]
    in_run: tuple[str, ...]
    parts: re.Pattern[str]


GRAMMARS = {
    "docx": Grammar(
        (f"{{{W}}}p",),
        f"{{{W}}}r",
        f"{{{W}}}rPr",
        f"{{{W}}}t",
        f"{{{W}}}hyperlink",
        (f"{{{W}}}pPr",),
        (),
        (f"{{{W}}}proofErr",),
        (f"{{{W}}}lastRenderedPageBreak",),
        re.compile(r"word/(document|header\d*|footer\d*|footnotes|endnotes)\.xml"),
    ),
    "pptx": Grammar(
        (f"{{{A}}}p",),
        f"{{{A}}}r",
        f"{{{A}}}rPr",
        f"{{{A}}}t",
        None,
        (f"{{{A}}}pPr",),
        (f"{{{A}}}endParaRPr",),
        (),
        (),
        re.compile(r"ppt/(slides/slide|notesSlides/notesSlide)\d+\.xml"),
    ),
    "xlsx": Grammar(
        (f"{{{S}}}si", f"{{{S}}}is"),
        f"{{{S}}}r",
        f"{{{S}}}rPr",
        f"{{{S}}}t",
        None,
        (),
        (f"{{{S}}}rPh", f"{{{S}}}phoneticPr"),
        (),
        (),
        re.compile(r"xl/(sharedStrings|worksheets/sheet\d+)\.xml"),
    ),
}


@dataclass
class _Slot:
    """What a run key stands for: text with ``properties`` (a text run) or the ``kept`` elements, in ``link``
    (lxml elements)."""

    properties: Any
    link: Any
    kept: list[Any] = field(default_factory=list)


@dataclass
class _Paragraph:
    """A paragraph ``element`` (lxml) as read: the children that stay ``first`` and ``last``, the ``slots`` of its
    run keys, the key of its main formatting (``base``)."""

    element: Any
    first: list[Any]
    last: list[Any]
    slots: list[_Slot]
    base: int


class _Reader:
    """One paragraph's runs and slots (module docstring)."""

    def __init__(self, grammar: Grammar) -> None:
        self.g = grammar
        self.runs: list[Run] = []
        self.slots: list[_Slot] = []
        self.styles: dict[tuple[bytes, int], int] = {}
        self.field: _Slot | None = None
        self.depth = 0

    def _kept(self, element, link) -> None:
        # the text it shows (a field's result, a slide field's text), not that of the paragraphs it may hold
        texts = [
            t.text or "" for t in element.iter(self.g.text) if t.getparent().tag in (self.g.run, self.g.text)
        ]
        if self.field is not None:
            self.field.kept.append(element)
            self.runs[-1] = Run(self.runs[-1].text + "".join(texts), self.runs[-1].key, kept=True)
        else:
            self.slots.append(_Slot(None, link, [element]))
            self.runs.append(Run("".join(texts), len(self.slots) - 1, kept=True))

    def _field_char(self, element) -> str | None:
        """``begin`` or ``end`` for a Word run holding a complex field's character of that type."""
        for char in element.iter(f"{{{W}}}fldChar"):
            return char.get(f"{{{W}}}fldCharType")
        return None

    def add(self, element, link=None) -> None:
        g = self.g
        char = self._field_char(element) if g.link is not None and element.tag == g.run else None
        if char == "begin":
            if self.depth == 0:
                self.field = _Slot(None, link, [])
                self.slots.append(self.field)
                self.runs.append(Run("", len(self.slots) - 1, kept=True))
            self.depth += 1
        if self.field is not None:
            self._kept(element, link)
            if char == "end":
                self.depth -= 1
                if self.depth == 0:
                    self.field = None
            return
        children = list(element)
        if element.tag == g.text or (
            element.tag == g.run and all(c.tag in (g.properties, g.text, *g.in_run) for c in children)
        ):
            texts = [element] if element.tag == g.text else [c for c in children if c.tag == g.text]
            properties = next((c for c in children if c.tag == g.properties), None)
            signature = (etree.tostring(properties) if properties is not None else b"", id(link))
            if signature not in self.styles:
                self.slots.append(_Slot(properties, link))
                self.styles[signature] = len(self.slots) - 1
            self.runs.append(Run("".join(t.text or "" for t in texts), self.styles[signature]))
        else:
            self._kept(element, link)


def _read_paragraph(p, grammar: Grammar) -> tuple[_Paragraph, list[Run]]:
    reader = _Reader(grammar)
    first, last = [], []
    for child in p:
        if not isinstance(child.tag, str):
            reader._kept(child, None)
        elif child.tag in grammar.first:
            first.append(child)
        elif child.tag in grammar.last:
            last.append(child)
        elif child.tag in grammar.dropped:
            continue
        elif grammar.link is not None and child.tag == grammar.link and reader.field is None:
            for grandchild in child:
                reader.add(grandchild, child)
        else:
            reader.add(child)
    return _Paragraph(p, first, last, reader.slots, -1), reader.runs


def _write_paragraph(paragraph: _Paragraph, translated: str, grammar: Grammar) -> None:
    p = paragraph.element
    for child in list(p):
        p.remove(child)
    p.text = None
    for child in paragraph.first:
        p.append(child)
    wrapper: Any = None
    wrapped: Any = None

    def put(element, link) -> None:
        nonlocal wrapper, wrapped
        if link is None:
            p.append(element)
            wrapper, wrapped = None, None
            return
        if wrapped is not link:
            wrapper = etree.SubElement(p, link.tag, attrib=dict(link.attrib))
            wrapped = link
        wrapper.append(element)

    pieces = written(translated, paragraph.base, [bool(slot.kept) for slot in paragraph.slots])
    # a spreadsheet string without runs stays one text element
    if grammar.run == GRAMMARS["xlsx"].run and all(
        not s.kept and s.properties is None for s in paragraph.slots
    ):
        element = etree.SubElement(p, grammar.text)
        element.text = "".join(text for text, _ in pieces)
        _preserve(element, grammar)
        pieces = []
    for text, key in pieces:
        slot = paragraph.slots[key]
        if slot.kept:
            for element in slot.kept:
                put(element, slot.link)
        else:
            element = etree.Element(grammar.run)
            if slot.properties is not None:
                element.append(copy.deepcopy(slot.properties))
            target = etree.SubElement(element, grammar.text)
            target.text = text
            _preserve(target, grammar)
            put(element, slot.link)
    for child in paragraph.last:
        p.append(child)


def _preserve(element, grammar: Grammar) -> None:
    """Marks a text element whose spaces at either end matter (WordprocessingML and SpreadsheetML need it)."""
    text = element.text or ""
    if grammar.run != GRAMMARS["pptx"].run and text != text.strip():
        element.set(XML_SPACE, "preserve")


def read(data: bytes, fmt: str, limits: FileLimits, output_format: str) -> FileDocument:
    grammar = GRAMMARS[fmt]
    package = Package.open(data, limits, fmt)
    main = {"docx": "word/document.xml", "pptx": "ppt/presentation.xml", "xlsx": "xl/workbook.xml"}[fmt]
    if main not in package.entries:
        raise DocumentError(f"this is not a {fmt} file: the package has no {main} (wrong extension?)")
    parts = EditedParts(package)
    for name in package.names():
        if not grammar.parts.fullmatch(name):
            continue
        if fmt == "xlsx" and "worksheets/" in name and b"inlineStr" not in package.entries[name]:
            continue
        root = parse_xml(package.entries[name], name)
        parts.roots[name] = root
        for p in [e for tag in grammar.paragraphs for e in root.iter(tag)]:
            parts.add(name, *_read_paragraph(p, grammar))
    return parts.document(
        lambda paragraph, translated: _write_paragraph(paragraph, translated, grammar), output_format
    )
