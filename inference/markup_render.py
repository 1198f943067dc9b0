"""One segment's translation written with its inline markup where `inference.markup_project` puts it, for markup
transfer (`inference.markup`).

The translation is written word by word, each inside the elements that go around it (`Projection.stack`): between
two words, the elements the next word is not inside are closed and those it is inside are opened, so where the
translation makes two elements cross, the later one is closed and reopened: the output is always well formed, and
no element, link or attribute is lost. Markup without words is written inside the elements it was inside in the
source, as far as they are open there; an element kept as written is written in place of its target words; an
element that leaves out the punctuation of its first or last word in the source leaves it out here too. Text is
escaped for HTML; tags, attributes and comments come out as written.
"""

from __future__ import annotations

from html import escape
from typing import NamedTuple

import regex

from .alignment import WordAlignment
from .markup_parse import Element, Item, Segment
from .markup_project import Projection, project

# a word's leading punctuation, its core, its trailing punctuation
_PUNCTUATED = regex.compile(r"(\p{P}*)(.*?)(\p{P}*)", regex.DOTALL)


class _Cursor(NamedTuple):
    """Where the writing stands: the elements open (outermost first) and the end of the target's text written."""

    opened: tuple[Element, ...]
    written: int


def _common(first: tuple[Element, ...], second: tuple[Element, ...]) -> int:
    """The length of the longest common start of ``first`` and ``second`` (elements compare by identity),
    found by comparing whole slices at once."""
    low, high = 0, min(len(first), len(second))
    if first[:high] == second[:high]:
        return high
    # first[:low] == second[:low] and first[:high] != second[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if first[low:middle] == second[low:middle]:
            low = middle
        else:
            high = middle
    return low


def _switch(opened: tuple[Element, ...], wanted: tuple[Element, ...]) -> list[str]:
    """The end tags and start tags that turn the elements ``opened`` into ``wanted`` (outermost first): those after
    their common start closed, innermost first, then ``wanted``'s after it opened."""
    common = _common(opened, wanted)
    return [e.end_tag for e in reversed(opened[common:])] + [e.start_tag for e in wanted[common:]]


def _within(elements: tuple[Element, ...], allowed: tuple[Element, ...]) -> tuple[Element, ...]:
    """The longest prefix of ``elements`` that ``allowed`` holds."""
    inside = _common(elements, allowed)
    if inside < len(elements):
        held = set(map(id, allowed))
        while inside < len(elements) and id(elements[inside]) in held:
            inside += 1
    return tuple(elements[:inside])


def _place(
    items: list[Item], opened: tuple[Element, ...], around: tuple[Element, ...] | None
) -> tuple[list[str], tuple[Element, ...]]:
    """``items`` written in order, each inside the longest prefix of ``around`` that it was inside in the source
    (of the elements open before it where ``around`` is None: elements are closed for it, never opened), and
    the elements open after them."""
    out: list[str] = []
    for item in items:
        wanted = _within(opened if around is None else around, item.elements)
        out += _switch(opened, wanted)
        out.append(item.markup)
        opened = wanted
    return out, opened


def _write_kept(projection: Projection, elements: list[Element], written: int) -> tuple[list[str], int]:
    """``elements`` kept as written, and the end of the target's text they replace."""
    for element in elements:
        written = max(written, projection.spans[projection.ranges[element.order][1]][1])
    return [element.kept or "" for element in elements], written


def _write_word(
    projection: Projection, j: int, wanted: tuple[Element, ...]
) -> tuple[list[str], tuple[Element, ...]]:
    """Target word ``j`` written inside the open elements ``wanted``, an element that starts (ends) at it outside
    the word's leading (trailing) punctuation where it left that punctuation out in the source; and the elements
    open after it."""
    begin, end = projection.spans[j]
    match = _PUNCTUATED.fullmatch(projection.target[begin:end])
    lead, core, trail = match.groups()  # type: ignore[union-attr]
    trimmed, ranges = projection.trimmed, projection.ranges
    out: list[str] = []
    if lead and core:
        starting = tuple(e for e in wanted if not (trimmed[e.order][0] and ranges[e.order][0] == j))
        out += [*_switch(wanted, starting), escape(lead, quote=False), *_switch(starting, wanted)]
    out.append(escape(core or lead, quote=False))
    opened = wanted
    if trail and core:
        opened = tuple(e for e in wanted if not (trimmed[e.order][1] and ranges[e.order][1] == j))
        out += _switch(wanted, opened)
    out.append(escape(trail, quote=False))
    return out, opened


def _write_covered(projection: Projection, j: int, cursor: _Cursor) -> tuple[list[str], _Cursor]:
    """Target word ``j``, one that an element kept as written replaces: the elements kept as written that start
    there, and the markup that goes after it."""
    out, written = _write_kept(projection, projection.kept_at.get(j, []), cursor.written)
    after, opened = _place(projection.items_after.get(j, []), cursor.opened, None)
    return out + after, _Cursor(opened, written)


def _write_step(projection: Projection, j: int, cursor: _Cursor) -> tuple[list[str], _Cursor]:
    """Target word ``j`` (or the elements kept as written that replace it) with the text before it and the
    markup that goes before and after it, and where the writing stands after it."""
    if j in projection.covered:
        return _write_covered(projection, j, cursor)
    wanted = projection.stack(j)
    # the elements word j is not inside closed before the text that leads to it
    opened = _within(cursor.opened, wanted)
    out = _switch(cursor.opened, opened)
    if j:
        out.append(escape(projection.target[cursor.written : projection.spans[j][0]], quote=False))
    # the markup that goes before it, then its elements opened
    placed, opened = _place(projection.items_at.get(j, []), opened, wanted)
    out += placed + _switch(opened, wanted)
    if j in projection.kept_at:
        word, written = _write_kept(projection, projection.kept_at[j], cursor.written)
        opened = wanted
    else:
        word, opened = _write_word(projection, j, wanted)
        written = projection.spans[j][1]
    after, opened = _place(projection.items_after.get(j, []), opened, None)
    return out + word + after, _Cursor(opened, written)


def render_segment(segment: Segment, translation: str, alignment: WordAlignment | None) -> str:
    """``translation`` of ``segment`` with the segment's inline markup placed by ``alignment`` (module docstring;
    `inference.markup_project.project`), escaped for HTML, between the segment's leading and trailing
    whitespace."""
    target = translation.strip()
    if not segment.has_markup:
        return segment.leading + escape(target, quote=False) + segment.trailing
    projection = project(segment, target, alignment)
    out = [segment.leading]
    cursor = _Cursor((), 0)
    for j in range(len(projection.spans)):
        pieces, cursor = _write_step(projection, j, cursor)
        out += pieces
    last, opened = _place(projection.items_at.get(len(projection.spans), []), cursor.opened, None)
    out += [*last, *_switch(opened, ()), segment.trailing]
    return "".join(out)
