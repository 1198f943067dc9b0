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

The document is read in one pass (`_Scanner`) whose time and memory are linear in its length: a tag, a quoted
attribute value or a comment not closed before the end takes the rest of the document as markup, as a browser
reads it. A document with more than ``max_depth`` elements open at once (`MAX_DEPTH` by default) is refused
(`MarkupTooDeep`) before anything else is built.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import unescape

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


# the most elements open at once in a document (`MarkupTooDeep` beyond it), the default of `split_document` and of
# `vanilla-transformer serve --max_markup_depth`: as deep as a browser's parser builds a page (Chromium's 512)
MAX_DEPTH = 512


class MarkupTooDeep(ValueError):
    """A document whose elements nest deeper than the limit: ``depth`` (the most open at once when it was
    refused) and ``limit``."""

    def __init__(self, depth: int, limit: int) -> None:
        super().__init__(
            f"the markup nests more than {limit} elements deep (the limit max_markup_depth={limit}): close its "
            "elements (each start tag with its end tag) or raise the limit (--max_markup_depth)"
        )
        self.depth = depth
        self.limit = limit


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


# the elements whose content is text up to their end tag (as the standard library's `html.parser` reads them)
_RAW_TEXT_END = {name: re.compile(rf"</\s*{name}\s*>", re.IGNORECASE) for name in ("script", "style")}
_TAG_NAME = re.compile(r"</?([a-zA-Z][^\t\n\r\f />\x00]*)")
_GAP = re.compile(r"(?:\s|/(?!>))*")
_ATTRIBUTE_NAME = re.compile(r"[^\s/>][^\s/=>]*")
_EQUALS = re.compile(r"\s*=+\s*")
_UNQUOTED = re.compile(r"[^>\s]*")


class _Scanner:
    """The constructs of a document in order, in one pass: each step consumes what it reads, and a construct not
    closed before the end of the document (a tag, a quoted attribute value, a comment) takes the rest of it, as a
    browser reads it, so the work and the memory are linear in the document's length whatever it holds."""

    def __init__(self, document: str) -> None:
        self.document = document
        self.events: list[_Event] = []
        # where the text not yet added starts
        self.text_from = 0

    def scan(self) -> list[_Event]:
        document, at = self.document, 0
        while True:
            at = document.find("<", at)
            if at < 0:
                break
            after = self._construct(at)
            at = after if after is not None else at + 1
        self._text(len(document))
        return self.events

    def _text(self, end: int, raw: bool = False) -> None:
        """The text from `text_from` to ``end`` (character references resolved unless ``raw``)."""
        if end > self.text_from:
            text = self.document[self.text_from : end]
            self.events.append(_Event("text", "", text if raw else unescape(text), self.text_from))
        self.text_from = end

    def _add(self, kind: str, begin: int, end: int, name: str = "", attrs: list | None = None) -> int:
        self._text(begin)
        self.events.append(_Event(kind, name, "", begin, attrs=attrs or []))
        self.text_from = end
        return end

    def _until(self, begin: int, marker: str, start: int) -> int:
        """A construct from ``begin`` that ends after the first ``marker`` from ``start`` (at the document's end
        without one), added as markup without words."""
        close = self.document.find(marker, start)
        return self._add("other", begin, len(self.document) if close < 0 else close + len(marker))

    def _construct(self, at: int) -> int | None:
        """Add the construct that starts with the "<" at ``at`` and return where the next one may start; None where
        the "<" is text."""
        document = self.document
        if document.startswith("<!--", at):
            return self._until(at, "-->", at + 4)
        if document.startswith("<![CDATA[", at):
            return self._until(at, "]]>", at + 9)
        if document.startswith(("<!", "<?"), at):
            return self._until(at, ">", at + 2)
        name = _TAG_NAME.match(document, at)
        if document.startswith("</", at):
            close = document.find(">", at + 2)
            end = len(document) if close < 0 else close + 1
            if name is None or close < 0:
                return self._add("other", at, end)
            return self._add("end", at, end, name[1].lower())
        if name is None:
            return None
        return self._start_tag(at, name[1].lower(), name.end())

    def _start_tag(self, at: int, name: str, pos: int) -> int:
        """Add the start tag named ``name`` at ``at`` whose attributes start at ``pos`` (and the text of a raw text
        element after it); the rest of the document as markup where the tag is not closed."""
        document = self.document
        attrs: list[tuple[str, str | None]] = []
        while True:
            pos = _GAP.match(document, pos).end()  # type: ignore[union-attr]
            if document.startswith("/>", pos):
                return self._add("void", at, pos + 2, name, attrs)
            if document.startswith(">", pos):
                end = self._add("start", at, pos + 1, name, attrs)
                return self._raw_text(name, end) if name in _RAW_TEXT_END else end
            if pos >= len(document):
                return self._add("other", at, len(document))
            attribute = _ATTRIBUTE_NAME.match(document, pos)
            pos = attribute.end()  # type: ignore[union-attr]
            equals = _EQUALS.match(document, pos)
            if equals is None:
                attrs.append((attribute[0].lower(), None))  # type: ignore[index]
                continue
            pos = equals.end()
            quote = document[pos : pos + 1]
            if quote in ("'", '"'):
                close = document.find(quote, pos + 1)
                if close < 0:
                    return self._add("other", at, len(document))
                value, pos = document[pos + 1 : close], close + 1
            else:
                unquoted = _UNQUOTED.match(document, pos)
                value, pos = unquoted[0], unquoted.end()  # type: ignore[index, union-attr]
            attrs.append((attribute[0].lower(), unescape(value)))  # type: ignore[index]

    def _raw_text(self, name: str, start: int) -> int:
        """The text of a raw text element from ``start`` up to its end tag (the document's end without one)."""
        close = _RAW_TEXT_END[name].search(self.document, start)
        end = close.start() if close else len(self.document)
        self._text(end, raw=True)
        return end


def _events(document: str) -> list[_Event]:
    """The constructs of ``document`` (`_Scanner`), each with its end offset, start tags of void elements as
    voids."""
    events = _Scanner(document).scan()
    for event, after in zip(events, [*events[1:], None]):
        event.end = after.begin if after is not None else len(document)
        if event.kind == "start" and event.name in VOID:
            event.kind = "void"
    return events


def _match(events: list[_Event], max_depth: int) -> dict[int, int]:
    """For each start tag (its index), the index of the end tag that closes it, or where it is closed implicitly
    (by an enclosing element's end tag, or the document's end: ``len(events)``). An end tag without a start tag
    becomes a stray (kind "other"). `MarkupTooDeep` where more than ``max_depth`` elements are open at once."""
    closes: dict[int, int] = {}
    stack: list[int] = []
    # the positions in the stack of the open elements of each name
    open_named: dict[str, list[int]] = {}
    for k, event in enumerate(events):
        if event.kind == "start":
            open_named.setdefault(event.name, []).append(len(stack))
            stack.append(k)
            if len(stack) > max_depth:
                raise MarkupTooDeep(len(stack), max_depth)
        elif event.kind == "end":
            opened = open_named.get(event.name)
            if not opened:
                event.kind = "other"
                continue
            for _ in range(len(stack) - opened[-1]):
                start = stack.pop()
                open_named[events[start].name].pop()
                closes[start] = k
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


def _words_before(events: list[_Event]) -> list[int]:
    """For each index k (up to ``len(events)``), how many of the events before it are text other than
    whitespace: an element from ``start`` to ``close`` holds words where the count grows between ``start + 1`` and
    ``close``."""
    before = [0]
    for event in events:
        before.append(before[-1] + (event.kind == "text" and bool(SPACE.sub("", event.text))))
    return before


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

    def __init__(self, document: str, events: list[_Event], words_before: list[int], begin: int) -> None:
        self.document = document
        self.events = events
        self.words_before = words_before
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
        elif event.kind == "start" and self.words_before[close] > self.words_before[k + 1]:
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


def parse_parts(document: str, rules: TagRules, max_depth: int = MAX_DEPTH) -> list[str | Segment]:
    """``document`` (HTML or XML) in order as markup written as it is (str) and `Segment`s (module docstring), tags
    classed by ``rules`` where they name them; `MarkupTooDeep` where more than ``max_depth`` elements are open at
    once. Time and memory are linear in the document's length (times its depth for the markup of its segments)."""
    events = _events(document)
    closes = _match(events, max_depth)
    words_before = _words_before(events)
    holds_block = _holding_blocks(events, closes, rules)
    parts: list[str | Segment] = []
    builder: _Builder | None = None
    k = 0
    while k < len(events):
        event, close = events[k], closes.get(k, k)
        last = _between_segments(events, k, close, rules, holds_block)
        if last is None:
            if builder is None:
                builder = _Builder(document, events, words_before, event.begin)
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
