"""Translating HTML (and XML): whole sentences go to the model, and the inline markup is put back where the word
alignments say (the approach of Bergamot's HTML mode and Marian's ``--alignment``-based tag projection).

`split_document` cuts a document into **segments**, the runs of text between block boundaries: block elements
(``<p>``, ``<li>``, ``<td>``, headings, ``<div>``, ...; any element that holds one), ``<br>``, ``<hr>`` and the
elements whose content is kept as written. A segment's text, its whitespace collapsed as a browser shows it, is
translated as one sentence, whatever inline elements (``<b>``, ``<a href=...>``, ``<span>``, elements this module
does not know) cut it into text nodes. `Document.render` then writes each translation back in place and, in it,
each inline element around the target words aligned with the source words it held
(`inference.alignment.WordAlignment`):

- an element's target words are found as grow-diag symmetrises alignments: the target words linked to its source
  words that are also the target word attending most to one of them, grown into the adjacent linked target words
  that attend to them about as much (`_target_words`); then their longest run, a gap of one word filled
  (`BRIDGED`): where the translation moves its words apart, the element goes around its main part rather than
  around words that are not its own. An element whose words no link reaches goes around the target word that
  attends most to them; an element covers what its children cover, so the output nests as the input did, and
  where the translation makes two elements cross, the later one is closed and reopened: the output is always
  well formed, and no element, link or attribute is lost.
- an element with no words (``<img>``, ``<a id="x"></a>``), a comment or a stray end tag is put after the target
  word aligned with the source word whose end it touches (``word<a id="x"></a>``), else before the target word
  aligned with the source word after it.
- content kept as written: ``<script>``, ``<style>``, ``<pre>``, ``<textarea>``, ``<template>``, ``<svg>``,
  ``<math>`` (never translated) and, when inline, ``<code>``, ``<kbd>``, ``<samp>``, ``<var>`` and any element
  marked ``translate="no"`` or ``class="notranslate"`` (HTML's and Google's do-not-translate marks): its words are
  translated with the sentence so the model reads them in context, then the target words aligned with them are
  replaced by the element as written.

`TagRules` adds to these rules the caller's own tag names (DeepL's ``splitting_tags``, ``non_splitting_tags`` and
``ignore_tags``): elements that always end a segment, elements that never do, elements kept as written.

Tags, attributes, comments and declarations come out as written (attributes such as ``alt`` and ``title`` are not
translated); text is escaped for HTML. Engines that return no attention (ONNX) place tags by relative position
(`proportional_alignment`), which suits short inline elements in languages of similar word order only.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from html.parser import HTMLParser
from typing import TYPE_CHECKING

import regex

from .alignment import WordAlignment, word_spans

if TYPE_CHECKING:
    import numpy as np

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
# the widest gap between two target words of one element that the element spans (`_bridged`)
BRIDGED = 1
# a word's leading punctuation, its core, its trailing punctuation
_PUNCTUATED = regex.compile(r"(\p{P}*)(.*?)(\p{P}*)", regex.DOTALL)
_PUNCTUATION = regex.compile(r"\p{P}+")
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


def _end_tag(document: str, events: list[_Event], start: int, close: int) -> str:
    """The end tag of the element at ``start`` as written, or one written for an element closed implicitly."""
    if close < len(events) and events[close].kind == "end" and events[close].name == events[start].name:
        return document[events[close].begin : events[close].end]
    return f"</{_tag_name(document[events[start].begin : events[start].end])}>"


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


def _tag_name(raw: str) -> str:
    """The element name as written in a start tag (XML keeps its case)."""
    found = re.match(r"<\s*([^\s/>]+)", raw)
    return found[1] if found else ""


@dataclass(eq=False)
class _Element:
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
    parent: _Element | None = None


@dataclass
class _Item:
    """Markup with no words of its own (a void element, an element holding no words, a comment, a stray end tag),
    at character ``offset`` of the segment's text, inside the inline ``elements`` open there."""

    markup: str
    offset: int
    elements: tuple[_Element, ...]


@dataclass
class Segment:
    """A run of text between block boundaries: ``text``, to translate (whitespace collapsed, stripped), the
    inline markup in it, and the document's characters it came from (written back as they are when the text is
    empty)."""

    text: str
    elements: list[_Element]
    items: list[_Item]
    raw: str
    leading: str
    trailing: str

    @property
    def has_markup(self) -> bool:
        """Whether rendering the translation needs a word alignment (the text holds inline markup)."""
        return bool(self.elements or self.items)


class _Builder:
    """Collects one segment's text (whitespace collapsed as it comes), elements and items."""

    def __init__(self, begin: int) -> None:
        self.begin = begin
        self.text = ""
        self.plain = ""
        self.elements: list[_Element] = []
        self.items: list[_Item] = []
        self.open: list[_Element] = []

    def add_text(self, text: str, kept: bool = False) -> None:
        """Add a text node, or the text of an element kept as written (written back with it, so no whitespace
        of its own goes around the segment)."""
        self.plain += "\ufffc" if kept else text
        collapsed = SPACE.sub(" ", text)
        if collapsed.startswith(" ") and (not self.text or self.text.endswith(" ")):
            collapsed = collapsed[1:]
        self.text += collapsed

    def segment(self, document: str, end: int) -> Segment:
        """The segment, offsets moved for the stripped text."""
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
        return Segment(text, self.elements, self.items, document[self.begin : end], leading, trailing)


@dataclass
class Document:
    """A document cut by `split_document`: its ``parts`` in order, markup written as it is (str) and `Segment`s
    to translate."""

    parts: list[str | Segment]

    @property
    def segments(self) -> list[Segment]:
        """The segments whose text is to be translated, in order."""
        return [part for part in self.parts if isinstance(part, Segment) and part.text]

    def render(self, translations: Sequence[str], alignments: Sequence[WordAlignment | None]) -> str:
        """The document with segment k (of `segments`) replaced by ``translations[k]``, its inline markup placed by
        ``alignments[k]`` (None for a segment without markup, `Segment.has_markup`; `proportional_alignment`
        where the engine has none)."""
        if len(translations) != len(self.segments) or len(alignments) != len(translations):
            raise ValueError(
                f"got {len(translations)} translations and {len(alignments)} alignments for "
                f"{len(self.segments)} segments: one each"
            )
        done = iter(zip(translations, alignments))
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            elif not part.text:
                out.append(part.raw)
            else:
                out.append(render_segment(part, *next(done)))
        return "".join(out)


def split_document(document: str, rules: TagRules | None = None) -> Document:
    """``document`` (HTML or XML, parsed by the standard library's `html.parser`) as markup and segments (module
    docstring), tags classed by ``rules`` where they name them."""
    rules = rules or TagRules()
    events = _events(document)
    closes = _match(events)
    holds_block = _holding_blocks(events, closes, rules)
    parts: list[str | Segment] = []
    builder: _Builder | None = None

    def flush(at: int) -> None:
        nonlocal builder
        if builder is not None:
            parts.append(builder.segment(document, at))
            builder = None

    def raw(begin: int, end: int) -> None:
        flush(begin)
        parts.append(document[begin:end])

    k = 0
    while k < len(events):
        event = events[k]
        close = closes.get(k, k)
        span_end = events[close].end if close < len(events) else len(document)
        kept = rules.kept(event)
        if event.kind == "start" and (
            event.name in VERBATIM or (kept and (holds_block.get(k, False) or rules.block(event.name)))
        ):
            raw(event.begin, span_end)
            k = close + 1
            continue
        if event.kind in ("start", "end", "void") and (rules.block(event.name) or holds_block.get(k, False)):
            # a block tag itself is markup between segments; what it holds is walked on
            raw(event.begin, event.end)
            k += 1
            continue
        if builder is None:
            builder = _Builder(event.begin)
        offset = len(builder.text)
        if event.kind == "text":
            builder.add_text(event.text)
        elif event.kind == "start" and _has_words(events, k, close):
            element = _Element(
                document[event.begin : event.end],
                _end_tag(document, events, k, close),
                len(builder.open),
                len(builder.elements),
                close,
                offset,
                parent=builder.open[-1] if builder.open else None,
            )
            builder.elements.append(element)
            if kept:
                element.kept = document[event.begin : span_end]
                builder.add_text(
                    "".join(e.text for e in events[k + 1 : close] if e.kind == "text"), kept=True
                )
                element.end = len(builder.text)
                k = close + 1
                continue
            builder.open.append(element)
        elif event.kind == "start":
            builder.items.append(_Item(document[event.begin : span_end], offset, tuple(builder.open)))
            k = close + 1
            continue
        elif event.kind == "end":
            while builder.open and builder.open[-1].close == k:
                builder.open.pop().end = len(builder.text)
        else:
            builder.items.append(_Item(document[event.begin : event.end], offset, tuple(builder.open)))
        k += 1
    flush(len(document))
    return Document(parts)


def proportional_alignment(source_words: int, target_words: int) -> WordAlignment:
    """An alignment by relative position alone (target word j to the source word at the same share of the
    sentence), for engines whose runtime returns no attention."""
    import numpy as np

    links = [
        (min(source_words - 1, (2 * j + 1) * source_words // (2 * target_words)), j)
        for j in range(target_words)
    ]
    rows = (np.arange(target_words, dtype=np.float32)[:, None] + 0.5) / max(target_words, 1)
    columns = (np.arange(source_words, dtype=np.float32)[None, :] + 0.5) / max(source_words, 1)
    return WordAlignment(links if source_words else [], 1.0 - np.abs(rows - columns))


def _target_words(words: list[int], linked: dict[int, set[int]], weights: np.ndarray, count: int) -> set[int]:
    """The target words of an element holding source ``words``, symmetrised as grow-diag does: the core is the
    target words linked to them that are also the target word attending most to one of them (both directions
    agree), grown into the adjacent linked target words that attend to them at least half as much as the core's
    best; all the linked target words where the directions never agree; the one target word that attends most to
    them where no link reaches them; none without target words."""
    import numpy as np

    found = set().union(*(linked.get(i, set()) for i in words))
    columns = [i for i in words if i < weights.shape[1]]
    if not columns or not count or len(weights) < count:
        return found
    attention = weights[:count, columns].max(axis=1)
    if not found:
        return {int(np.argmax(attention))}
    core = found & {int(np.argmax(weights[:count, i])) for i in columns}
    if not core:
        return found
    floor = 0.5 * max(attention[j] for j in core)
    grown = set(core)
    frontier = sorted(core)
    while frontier:
        j = frontier.pop()
        for near in (j - 1, j + 1):
            if near in found and near not in grown and attention[near] >= floor:
                grown.add(near)
                frontier.append(near)
    return grown


def _bridged(words: set[int]) -> set[int]:
    """``words`` with the gaps of at most `BRIDGED` words between two of them filled (the unaligned words inside
    an element's translation); wider gaps are left."""
    ordered = sorted(words)
    filled = set(words)
    for low, high in zip(ordered, ordered[1:]):
        if high - low - 1 <= BRIDGED:
            filled.update(range(low, high))
    return filled


def _trims(text: str, words: list[tuple[int, int]], element: _Element) -> tuple[bool, bool]:
    """Whether ``element`` starts inside a word after nothing but punctuation (``"<b>Hi``), and whether it ends
    inside a word before nothing but punctuation (``run</b>.``)."""
    starts = [
        begin < element.begin < end and bool(_PUNCTUATION.fullmatch(text[begin : element.begin]))
        for begin, end in words
    ]
    ends = [
        begin < element.end < end and bool(_PUNCTUATION.fullmatch(text[element.end : end]))
        for begin, end in words
    ]
    return any(starts), any(ends)


def _longest_run(words: set[int]) -> tuple[int, int]:
    """The first and last of the longest run of consecutive ``words`` (the first such run on a tie)."""
    runs: list[tuple[int, int]] = []
    for word in sorted(words):
        if runs and word == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], word)
        else:
            runs.append((word, word))
    return max(runs, key=lambda run: (run[1] - run[0], -run[0]))


def render_segment(segment: Segment, translation: str, alignment: WordAlignment | None) -> str:
    """``translation`` of ``segment`` with the segment's inline markup placed by ``alignment`` (module docstring),
    escaped for HTML, between the segment's leading and trailing whitespace."""
    target = translation.strip()
    spans = word_spans(target)
    if not segment.has_markup:
        return segment.leading + escape(target, quote=False) + segment.trailing
    source = word_spans(segment.text)
    if alignment is None:
        alignment = proportional_alignment(len(source), len(spans))
    linked: dict[int, set[int]] = {}
    for i, j in alignment.links:
        if j < len(spans):
            linked.setdefault(i, set()).add(j)

    # each element's target words, first and last; an element covers its children
    ranges: dict[int, tuple[int, int]] = {}
    for element in segment.elements:
        words = [i for i, (begin, end) in enumerate(source) if begin < element.end and element.begin < end]
        found = _target_words(words, linked, alignment.weights, len(spans))
        if found:
            ranges[element.order] = _longest_run(_bridged(found))
    for element in sorted(segment.elements, key=lambda e: -e.depth):
        parent = element.parent
        if element.order in ranges and parent is not None:
            low, high = ranges[element.order]
            parent_low, parent_high = ranges.get(parent.order, (low, high))
            ranges[parent.order] = (min(low, parent_low), max(high, parent_high))

    # whether each element leaves out the punctuation at the start, and at the end, of its first and last words
    trimmed = {e.order: _trims(segment.text, source, e) for e in segment.elements}

    # an element kept as written replaces its target words, which are not written
    kept_at: dict[int, list[_Element]] = {}
    covered: set[int] = set()
    for element in segment.elements:
        if element.kept is not None and element.order in ranges:
            low, high = ranges[element.order]
            kept_at.setdefault(low, []).append(element)
            covered.update(range(low + 1, high + 1))
    # an element all of whose words an element kept as written replaces has no word of its own left
    shown = set(range(len(spans))) - covered - set(kept_at)
    for element in segment.elements:
        if element.kept is None and element.order in ranges:
            low, high = ranges[element.order]
            if not shown.intersection(range(low, high + 1)):
                del ranges[element.order]
    # markup without words, and elements no target word was found for, go after the target word aligned with the
    # source word they touch the end of, else before the target word aligned with the source word after them
    items = list(segment.items)
    for element in segment.elements:
        if element.order not in ranges:
            items.append(_Item(element.kept or element.start_tag + element.end_tag, element.begin, ()))
    starts = [begin for begin, _ in source]
    ends = {end: i for i, (_, end) in enumerate(source)}
    items_at: dict[int, list[_Item]] = {}
    items_after: dict[int, list[_Item]] = {}
    for item in sorted(items, key=lambda item: item.offset):
        touched = ends.get(item.offset)
        if touched is not None and touched in linked:
            items_after.setdefault(max(linked[touched]), []).append(item)
            continue
        following = bisect.bisect_left(starts, item.offset)
        reached = [min(linked[i]) for i in range(following, len(source)) if i in linked]
        position = reached[0] if reached else len(spans)
        while position in covered:
            position += 1
        items_at.setdefault(position, []).append(item)

    def stack(j: int) -> list[_Element]:
        return sorted(
            (
                e
                for e in segment.elements
                if e.kept is None and e.order in ranges and ranges[e.order][0] <= j <= ranges[e.order][1]
            ),
            key=lambda e: (e.depth, e.order),
        )

    out = [segment.leading]
    current: list[_Element] = []

    def move(wanted: list[_Element]) -> None:
        common = 0
        while common < min(len(current), len(wanted)) and current[common] is wanted[common]:
            common += 1
        out.extend(element.end_tag for element in reversed(current[common:]))
        del current[common:]
        out.extend(element.start_tag for element in wanted[common:])
        current.extend(wanted[common:])

    def within(elements: list[_Element], allowed: Sequence[_Element]) -> list[_Element]:
        """The longest prefix of ``elements`` that ``allowed`` holds."""
        inside = []
        for element in elements:
            if element not in allowed:
                break
            inside.append(element)
        return inside

    def place(items: list[_Item], elements: list[_Element]) -> None:
        """Write ``items``, each inside the prefix of ``elements`` that it was inside in the source."""
        for item in items:
            move(within(elements, item.elements))
            out.append(item.markup)

    def write_kept(elements: list[_Element]) -> None:
        nonlocal written
        for element in elements:
            out.append(element.kept or "")
            written = max(written, spans[ranges[element.order][1]][1])

    written = 0
    for j in range(len(spans) + 1):
        if j == len(spans):
            place(items_at.get(j, []), current)
            move([])
            break
        if j in covered:
            write_kept(kept_at.get(j, []))
            place(items_after.get(j, []), current)
            continue
        wanted = stack(j)
        move(within(current, wanted))
        if j:
            out.append(escape(target[written : spans[j][0]], quote=False))
        place(items_at.get(j, []), wanted)
        move(wanted)
        if j in kept_at:
            write_kept(kept_at[j])
        else:
            begin, end = spans[j]
            lead, core, trail = _PUNCTUATED.fullmatch(target[begin:end]).groups()  # type: ignore[union-attr]
            # an element that left out its word's punctuation in the source leaves it out here too
            if lead and core:
                move([e for e in wanted if not (trimmed[e.order][0] and ranges[e.order][0] == j)])
                out.append(escape(lead, quote=False))
                move(wanted)
            out.append(escape(core or lead, quote=False))
            if trail and core:
                move([e for e in wanted if not (trimmed[e.order][1] and ranges[e.order][1] == j)])
            out.append(escape(trail, quote=False))
            written = end
        place(items_after.get(j, []), current)
    out.append(segment.trailing)
    return "".join(out)
