"""A document (HTML or XML) cut into **segments**, the runs of text between block boundaries, for markup transfer
(`inference.markup`).

Block boundaries are block elements (``<p>``, ``<li>``, ``<td>``, headings, ``<div>``, ...; any element that holds
one), ``<br>``, ``<hr>`` and the elements whose content is kept as written. A segment's text, its whitespace
collapsed as a browser shows it, is translated as one sentence, whatever inline elements (``<b>``,
``<a href=...>``, ``<span>``, elements this module does not know) cut it into text nodes. Each inline `Element` of
a segment knows its source characters in the segment's text; markup without words of its own (``<img>``,
``<a id="x"></a>``, a comment, a stray end tag) is an `Item` at one character offset.

Content kept as written: ``<script>``, ``<style>``, ``<pre>``, ``<textarea>``, ``<template>``, ``<svg>``,
``<math>`` (never translated, and no segment) and, when inline, ``<code>``, ``<kbd>``, ``<samp>``, ``<var>`` and
any element marked ``translate="no"`` or ``class="notranslate"`` (HTML's and Google's do-not-translate marks): its
words are in the segment's text, so the model reads them in context, and the element keeps itself as written
(`Element.kept`). `TagRules` adds to these rules the caller's own tag names (DeepL's ``splitting_tags``,
``non_splitting_tags`` and ``ignore_tags``): elements that always end a segment, elements that never do, elements
kept as written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser

# elements that end a segment (and any element that holds one of them)
BLOCK = frozenset(
    "address article aside base blockquote body br caption center col colgroup dd details dialog dir div dl dt "
    "fieldset figcaption figure footer form frame frameset h1 h2 h3 h4 h5 h6 head header hgroup hr html iframe "
    "legend li link main menu meta nav noscript ol optgroup option p section select summary table tbody td "
    "tfoot th thead title tr ul".split()
)
# elements kept as written, never translated (block boundaries wherever they are)
VERBATIM = frozenset("script style pre textarea template svg math".split())
# inline elements whose content is kept as written
KEPT_INLINE = frozenset("code kbd samp var".split())
# elements without an end tag
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
# HTML's whitespace, which a browser shows as one space (a no-break space is not among it)
SPACE = re.compile(r"[ \t\n\r\f]+")


@dataclass
class _Event:
    """One construct of the document: its kind (start, end, text, other), the lowercased tag name of a tag, the
    text of a text node (character references resolved), and its ``begin``/``end`` offsets in the document."""

    kind: str
    name: str
    text: str
    begin: int
    end: int = -1
    attrs: list[tuple[str, str | None]] = field(default_factory=list)


class _Events(HTMLParser):
    """The document as `_Event`s in order, each with its offsets (the parser's positions)."""

    def __init__(self, document: str) -> None:
        super().__init__(convert_charrefs=True)
        self.lines = [0, *(m.end() for m in re.finditer("\n", document))]
        self.events: list[_Event] = []

    def _add(self, kind: str, name: str = "", text: str = "", attrs: list | None = None) -> None:
        line, column = self.getpos()
        self.events.append(_Event(kind, name, text, self.lines[line - 1] + column, attrs=attrs or []))

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self._add("start", tag, attrs=attrs)

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self._add("void", tag, attrs=attrs)

    def handle_endtag(self, tag: str) -> None:
        self._add("end", tag)

    def handle_data(self, data: str) -> None:
        self._add("text", text=data)

    def handle_comment(self, data: str) -> None:
        self._add("other")

    def handle_decl(self, decl: str) -> None:
        self._add("other")

    def handle_pi(self, data: str) -> None:
        self._add("other")

    def unknown_decl(self, data: str) -> None:
        self._add("other")


def _events(document: str) -> list[_Event]:
    """`_Events` of ``document``, each with its end offset, start tags of void elements as voids."""
    parser = _Events(document)
    parser.feed(document)
    parser.close()
    events = parser.events
    for event, after in zip(events, [*events[1:], None]):
        event.end = after.begin if after is not None else len(document)
        if event.kind == "start" and event.name in VOID:
            event.kind = "void"
    return events


def _match(events: list[_Event]) -> dict[int, int]:
    """For each start tag (its index), the index of the end tag that closes it, or where it is closed implicitly
    (by an enclosing element's end tag, or the document's end: ``len(events)``). An end tag without a start tag
    becomes a stray (kind "other")."""
    closes: dict[int, int] = {}
    stack: list[int] = []
    for k, event in enumerate(events):
        if event.kind == "start":
            stack.append(k)
        elif event.kind == "end":
            opened = [i for i in stack if events[i].name == event.name]
            if not opened:
                event.kind = "other"
                continue
            while stack[-1] != opened[-1]:
                closes[stack.pop()] = k
            closes[stack.pop()] = k
    for k in stack:
        closes[k] = len(events)
    return closes


def _holding_blocks(events: list[_Event], closes: dict[int, int], rules: TagRules) -> dict[int, bool]:
    """Whether each element (the index of its start tag, and of its end tag) holds a block boundary: a block tag,
    or an element kept as written that is never translated (`VERBATIM`)."""
    boundary = [
        event.kind in ("start", "end", "void") and (rules.block(event.name) or event.name in VERBATIM)
        for event in events
    ]
    before = [0]
    for flag in boundary:
        before.append(before[-1] + flag)
    holds: dict[int, bool] = {}
    for start, close in closes.items():
        holds[start] = before[min(close, len(events))] - before[start + 1] > 0
        if close < len(events) and events[close].kind == "end":
            holds[close] = holds[start]
    return holds


def _has_words(events: list[_Event], start: int, close: int) -> bool:
    """Whether the element from ``start`` to ``close`` holds text other than whitespace."""
    return any(event.kind == "text" and SPACE.sub("", event.text) for event in events[start + 1 : close])


def _span_end(document: str, events: list[_Event], close: int) -> int:
    """The document offset where the event at ``close`` ends (the document's end where that is past the last)."""
    return events[close].end if close < len(events) else len(document)


def _end_tag(document: str, events: list[_Event], start: int, close: int) -> str:
    """The end tag of the element at ``start`` as written, or one written for an element closed implicitly."""
    if close < len(events) and events[close].kind == "end" and events[close].name == events[start].name:
        return document[events[close].begin : events[close].end]
    return f"</{_tag_name(document[events[start].begin : events[start].end])}>"


def _tag_name(raw: str) -> str:
    """The element name as written in a start tag (XML keeps its case)."""
    found = re.match(r"<\s*([^\s/>]+)", raw)
    return found[1] if found else ""


@dataclass(frozen=True)
class TagRules:
    """Tag names (any case) that the caller classes itself: ``splitting`` elements end a segment like a block
    element, ``non_splitting`` ones never do (not even a block element of HTML's), ``ignored`` ones are kept as
    written like ``translate="no"``."""

    splitting: frozenset[str] = frozenset()
    non_splitting: frozenset[str] = frozenset()
    ignored: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, splitting: Sequence[str] = (), non_splitting: Sequence[str] = (), ignored: Sequence[str] = ()
    ):
        """Rules from lists of tag names (empty names dropped)."""

        def names(given: Sequence[str]) -> frozenset[str]:
            return frozenset(name.strip().lower() for name in given if name.strip())

        return cls(names(splitting), names(non_splitting), names(ignored))

    def block(self, name: str) -> bool:
        """Whether an element named ``name`` ends a segment."""
        return (name in BLOCK or name in self.splitting) and name not in self.non_splitting

    def kept(self, event: _Event) -> bool:
        """Whether an element's content is kept as written (module docstring)."""
        attrs = {name.lower(): (value or "") for name, value in event.attrs}
        return (
            event.name in KEPT_INLINE
            or event.name in self.ignored
            or attrs.get("translate", "").strip().lower() == "no"
            or "notranslate" in attrs.get("class", "").split()
        )


@dataclass(eq=False)
class Element:
    """An inline element of a segment: its start tag and end tag as written (an end tag written for one closed
    implicitly), its nesting depth and order, and its source characters [begin, end) in the segment's text."""

    start_tag: str
    end_tag: str
    depth: int
    order: int
    # the index of the event that closes it (`_match`)
    close: int
    begin: int
    end: int = -1
    # the element as written, for one kept as written (its words are replaced by it)
    kept: str | None = None
    parent: Element | None = None
    # its start tag to its end tag, as offsets in the segment's raw (None for one closed implicitly)
    written: tuple[int, int] | None = None


@dataclass
class Item:
    """Markup with no words of its own (a void element, an element holding no words, a comment, a stray end tag),
    at character ``offset`` of the segment's text, inside the inline ``elements`` open there."""

    markup: str
    offset: int
    elements: tuple[Element, ...]


@dataclass
class Segment:
    """A run of text between block boundaries: ``text``, to translate (whitespace collapsed, stripped), the
    inline markup in it, and the document's characters it came from (written back as they are when the text is
    empty)."""

    text: str
    elements: list[Element]
    items: list[Item]
    raw: str
    leading: str
    trailing: str

    @property
    def has_markup(self) -> bool:
        """Whether rendering the translation needs a word alignment (the text holds inline markup)."""
        return bool(self.elements or self.items)


class _Builder:
    """Collects one segment of ``document`` from its ``events``, starting at document offset ``begin``: its text
    (whitespace collapsed as it comes), elements and items."""

    def __init__(self, document: str, events: list[_Event], begin: int) -> None:
        self.document = document
        self.events = events
        self.begin = begin
        self.text = ""
        self.plain = ""
        self.elements: list[Element] = []
        self.items: list[Item] = []
        self.open: list[Element] = []

    def add(self, k: int, close: int, kept: bool) -> int:
        """Add event ``k`` (``close``: the index of the event that closes it, `_match`; ``kept``: whether its
        content is kept as written) and return the index of the event to read next."""
        event = self.events[k]
        offset = len(self.text)
        if event.kind == "text":
            self.add_text(event.text)
        elif event.kind == "start" and _has_words(self.events, k, close):
            return self._add_element(k, close, kept)
        elif event.kind == "start":
            markup = self.document[event.begin : _span_end(self.document, self.events, close)]
            self.items.append(Item(markup, offset, tuple(self.open)))
            return close + 1
        elif event.kind == "end":
            while self.open and self.open[-1].close == k:
                self.open.pop().end = len(self.text)
        else:
            self.items.append(Item(self.document[event.begin : event.end], offset, tuple(self.open)))
        return k + 1

    def _add_element(self, k: int, close: int, kept: bool) -> int:
        """Add the element holding words that starts at event ``k`` (as `add`): an element kept as written with
        its text at once, any other one opened."""
        event = self.events[k]
        element = Element(
            self.document[event.begin : event.end],
            _end_tag(self.document, self.events, k, close),
            len(self.open),
            len(self.elements),
            close,
            len(self.text),
            parent=self.open[-1] if self.open else None,
        )
        if (
            close < len(self.events)
            and self.events[close].kind == "end"
            and self.events[close].name == event.name
        ):
            element.written = (event.begin - self.begin, self.events[close].end - self.begin)
        self.elements.append(element)
        if not kept:
            self.open.append(element)
            return k + 1
        element.kept = self.document[event.begin : _span_end(self.document, self.events, close)]
        self.add_text("".join(e.text for e in self.events[k + 1 : close] if e.kind == "text"), kept=True)
        element.end = len(self.text)
        return close + 1

    def add_text(self, text: str, kept: bool = False) -> None:
        """Add a text node, or the text of an element kept as written (written back with it, so no whitespace
        of its own goes around the segment)."""
        self.plain += "\ufffc" if kept else text
        collapsed = SPACE.sub(" ", text)
        if collapsed.startswith(" ") and (not self.text or self.text.endswith(" ")):
            collapsed = collapsed[1:]
        self.text += collapsed

    def segment(self, end: int) -> Segment:
        """The segment, ending at document offset ``end``, offsets moved for the stripped text."""
        shift = len(self.text) - len(self.text.lstrip(" "))
        text = self.text.strip(" ")

        def moved(offset: int) -> int:
            return min(max(offset - shift, 0), len(text))

        for element in self.open:
            element.end = len(self.text)
        for element in self.elements:
            element.begin, element.end = moved(element.begin), moved(element.end)
        for item in self.items:
            item.offset = moved(item.offset)
        stripped = self.plain.strip(" \t\n\r\f")
        leading = self.plain[: len(self.plain) - len(self.plain.lstrip(" \t\n\r\f"))] if stripped else ""
        trailing = self.plain[len(self.plain.rstrip(" \t\n\r\f")) :] if stripped else ""
        return Segment(text, self.elements, self.items, self.document[self.begin : end], leading, trailing)


def _between_segments(
    events: list[_Event], k: int, close: int, rules: TagRules, holds: dict[int, bool]
) -> int | None:
    """Where event ``k`` is markup between segments, the index of its last event: the element's end for an element
    kept whole (`VERBATIM`, or kept as written and a block or holding one), ``k`` for a block tag itself (what it
    holds is walked on); None where the event is part of a segment."""
    event = events[k]
    if event.kind == "start" and (
        event.name in VERBATIM or (rules.kept(event) and (holds.get(k, False) or rules.block(event.name)))
    ):
        return close
    if event.kind in ("start", "end", "void") and (rules.block(event.name) or holds.get(k, False)):
        return k
    return None


def parse_parts(document: str, rules: TagRules) -> list[str | Segment]:
    """``document`` (HTML or XML, parsed by the standard library's `html.parser`) in order as markup written as it
    is (str) and `Segment`s (module docstring), tags classed by ``rules`` where they name them."""
    events = _events(document)
    closes = _match(events)
    holds_block = _holding_blocks(events, closes, rules)
    parts: list[str | Segment] = []
    builder: _Builder | None = None
    k = 0
    while k < len(events):
        event, close = events[k], closes.get(k, k)
        last = _between_segments(events, k, close, rules, holds_block)
        if last is None:
            if builder is None:
                builder = _Builder(document, events, event.begin)
            k = builder.add(k, close, rules.kept(event))
            continue
        if builder is not None:
            parts.append(builder.segment(event.begin))
            builder = None
        parts.append(document[event.begin : _span_end(document, events, last)])
        k = last + 1
    if builder is not None:
        parts.append(builder.segment(len(document)))
    return parts
