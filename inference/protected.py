"""Protected spans: the parts of a text that must come out exactly as written, whatever the model makes of them.

A span is protected when it is one of (`KINDS`, found by `protected_spans`): a URL, an e-mail address, an @mention
(``@alice``, ``@alice@example.social``), a #hashtag, inline code between backticks, a number with a unit
(``5 km``, ``3.5 GB``, ``20 %``, ``$12``), or a placeholder of the syntaxes message catalogues use (``{name}``,
``{0}``, ``{}``, ``{{var}}``, ``%s``, ``%d``, ``%(name)s``, ``%1$s``). In HTML the elements kept as written
(``<code>``, ``translate="no"``, ``class="notranslate"``: `inference.markup_parse`) are protected too.

Each span becomes an element kept as written (`inference.markup_parse.Element.kept`) of its segment (of its sentence,
for a plain text): its words are translated with the sentence, so the model reads them in context, and the target
words aligned with them (the words where the translation repeats it verbatim, when it does so once) are replaced
by the span as written (`inference.markup_project`). The span is written exactly once, inside the elements that
held it, whatever the model outputs: where no target word is aligned with it, it goes where markup without words
goes; a copy the model writes more than once is kept once (`keep_once`). In HTML, an element that holds exactly the
span (Discourse's ``<a class="mention">@name</a>``, Mastodon's ``<span class="h-card"><a ...>@<span>alice</span>
</a></span>``) is kept as written whole, its own markup with it; a span that only part of an element crosses is
left to the model.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace
from html import escape

import regex

from .alignment import WordAlignment
from .markup_parse import Element, Segment
from .markup_project import project
from .sentences import SplitText, split_text

# what a protected span is, by kind (`protected_spans` takes the leftmost, then the longest, of overlapping ones)
KINDS = {
    "url": regex.compile(r"(?:\b(?:https?|ftp|wss?)://|\bwww\.|\bmailto:)[^\s<>\"'`]+"),
    "email": regex.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    "mention": regex.compile(r"(?<![\w@/])@[\w][\w.-]*(?:@[\w-]+(?:\.[\w-]+)+)?"),
    "hashtag": regex.compile(r"(?<![\w&#/])#(?=[\p{N}_]*\p{L})[\p{L}\p{M}\p{N}_]+"),
    "code": regex.compile(r"(?<!`)(`+)(?!`)[^\n]+?(?<!`)\1(?!`)"),
    "placeholder": regex.compile(
        r"\{\{[^{}\n]*\}\}|\{[\w.\[\]]*(?:![rsa])?(?::[^{}\n]*)?\}|"
        r"%(?:\d+\$|\([\w.]+\))?[-+#0]*(?:\d+|\*)?(?:\.\d+)?[hlLqjzt]*[diouxXeEfFgGcrsa@]"
    ),
    "number": regex.compile(
        r"(?<![\w.,])(?:[$€£¥]\s?(?>\d+(?:[.,]\d+)*)|(?>\d+(?:[.,]\d+)*)\s?"
        r"(?:km/h|m/s|kWh|mAh|[kMGT]?Hz|[kMGTP]i?B|[kmcµn]?[mgslLVWAJ]|min|mph|ms|µs|ns|px|pt|rem|em|°[CF]|%|‰|[€$£¥]))"
        r"(?![\w])"
    ),
}
# the private-use characters that stand for the spans while a text is cut into sentences (`split_protected`)
_MARKS = (0xE000, 0xF8FF)
_MARK = regex.compile("[\ue000-\uf8ff]")
# trailing punctuation a URL does not end with (a sentence's full stop, a closing bracket it sits in)
_URL_TAIL = regex.compile(r"[.,;:!?'\")\]}>]+$")


@dataclass(frozen=True)
class Span:
    """A protected span: its ``kind`` (a key of `KINDS`) and its characters [``begin``, ``end``) in the text."""

    kind: str
    begin: int
    end: int


def protected_spans(text: str) -> list[Span]:
    """The protected spans of ``text`` (module docstring), in order, none overlapping another."""
    found = []
    for kind, pattern in KINDS.items():
        for match in pattern.finditer(text):
            begin, end = match.span()
            if kind == "url":
                tail = _URL_TAIL.search(text, begin, end)
                # a closing bracket the URL itself opened stays with it
                while tail and text[tail.start()] == ")" and _opened(text[begin : tail.start()]):
                    tail = _URL_TAIL.search(text, tail.start() + 1, end)
                end = tail.start() if tail else end
            if end > begin:
                found.append(Span(kind, begin, end))
    spans: list[Span] = []
    for span in sorted(found, key=lambda s: (s.begin, -s.end)):
        if not spans or span.begin >= spans[-1].end:
            spans.append(span)
    return spans


def _opened(url: str) -> bool:
    """Whether ``url`` leaves a bracket open (which a ``)`` after it closes)."""
    return url.count("(") > url.count(")")


def split_protected(text: str, language: str | None = None, newlines: bool = True) -> SplitText:
    """``text`` cut into its sentences as `inference.sentences.split_text` cuts it, never inside a protected span
    (a URL's ``?`` or ``.``, a number's decimal point): each span stands as one private-use character while the
    text is cut (a text that holds such characters itself is cut as it is)."""
    spans = protected_spans(text)[: _MARKS[1] - _MARKS[0] + 1]
    if not spans or _MARK.search(text):
        return split_text(text, language, newlines)
    pieces, last = [], 0
    for k, span in enumerate(spans):
        pieces += [text[last : span.begin], chr(_MARKS[0] + k)]
        last = span.end
    split = split_text("".join(pieces) + text[last:], language, newlines)

    def restored(sentence: str) -> str:
        return _MARK.sub(
            lambda m: text[spans[ord(m[0]) - _MARKS[0]].begin : spans[ord(m[0]) - _MARKS[0]].end], sentence
        )

    return SplitText(tuple(restored(s) for s in split.sentences), split.lines)


def _crosses(element: Element, begin: int, end: int) -> bool:
    """Whether ``element`` holds part of [begin, end) and part of what is outside it."""
    overlaps = element.begin < end and begin < element.end
    inside = begin <= element.begin and element.end <= end
    around = element.begin <= begin and end <= element.end
    return overlaps and not inside and not around


def protect_segment(segment: Segment) -> Segment:
    """``segment`` (of an HTML or XML document) with its protected spans kept as written (module docstring): the
    outermost element that holds exactly a span, its own markup with it, or the span's text alone where no element
    does; a span that overlaps an element kept as written, or that only part of an element or a markup without
    words crosses, is left as it is. The spans and the elements are swept once, in order."""
    spans = protected_spans(segment.text)
    if not spans:
        return segment
    ordered = sorted(segment.elements, key=lambda e: (e.begin, e.depth))
    offsets = sorted(item.offset for item in segment.items)
    upgraded: dict[int, Element] = {}
    added: list[Element] = []
    # the elements that start before the current span's end and end after its start
    active: list[Element] = []
    k = 0
    for span in spans:
        begin, end = span.begin, span.end
        while k < len(ordered) and ordered[k].begin < end:
            active.append(ordered[k])
            k += 1
        active = [e for e in active if e.end > begin]
        if any(e.kept is not None or _crosses(e, begin, end) for e in active):
            continue
        exact = [e for e in active if e.begin == begin and e.end == end and e.written is not None]
        if exact:
            kept = min(exact, key=lambda e: e.depth)
            upgraded[id(kept)] = kept
            continue
        after = bisect.bisect_right(offsets, begin)
        if any(begin <= e.begin for e in active) or (after < len(offsets) and offsets[after] < end):
            continue
        parent = max(active, key=lambda e: e.depth) if active else None
        depth = parent.depth + 1 if parent is not None else 0
        text = escape(segment.text[begin:end], quote=False)
        added.append(Element("", "", depth, -1, -1, begin, end, kept=text, parent=parent))
    for kept in upgraded.values():
        start, stop = kept.written  # type: ignore[misc]
        kept.kept = segment.raw[start:stop]
    elements = [e for e in segment.elements if not _inside_any(e, upgraded)] + added
    items = [item for item in segment.items if not any(id(e) in upgraded for e in item.elements)]
    elements.sort(key=lambda e: (e.begin, e.depth))
    for order, element in enumerate(elements):
        element.order = order
    return replace(segment, elements=elements, items=items)


def _inside_any(element: Element, ancestors: dict[int, Element]) -> bool:
    """Whether one of ``element``'s ancestors is among ``ancestors`` (by identity)."""
    parent = element.parent
    while parent is not None:
        if id(parent) in ancestors:
            return True
        parent = parent.parent
    return False


def guard(sentence: str) -> Segment | None:
    """A plain-text sentence as a segment whose protected spans are kept as written (None where it has none), for
    `render_guarded`."""
    text = sentence.strip()
    spans = protected_spans(text)
    if not spans:
        return None
    elements = [
        Element("", "", 0, k, -1, s.begin, s.end, kept=text[s.begin : s.end]) for k, s in enumerate(spans)
    ]
    return Segment(text, elements, [], sentence, "", "")


def kept_texts(segment: Segment) -> list[str]:
    """The text of each element of ``segment`` kept as written, as the model reads it."""
    return [segment.text[e.begin : e.end] for e in segment.elements if e.kept is not None]


def keep_once(translation: str, texts: Sequence[str]) -> str:
    """``translation`` with each of ``texts`` that it repeats verbatim more than once left only where it first
    writes it (the spans are written once, `inference.markup_project` placing them where it writes them)."""
    for text in dict.fromkeys(t for t in texts if t.strip()):
        first = translation.find(text)
        if first < 0:
            continue
        head, tail = translation[: first + len(text)], translation[first + len(text) :]
        if text in tail:
            translation = head + regex.sub(r"[ \t]{2,}", " ", tail.replace(text, ""))
    return translation


def render_guarded(segment: Segment, translation: str, alignment: WordAlignment | None) -> str:
    """The plain ``translation`` of a sentence `guard` made into ``segment``, its protected spans written as they
    are in place of the target words ``alignment`` places them on (by relative position where None)."""
    projection = project(segment, translation.strip(), alignment)
    target, spans = projection.target, projection.spans
    out: list[str] = []
    written = 0
    for j, (begin, end) in enumerate(spans):
        placed = [item.markup for item in projection.items_at.get(j, [])]
        kept = projection.kept_at.get(j, [])
        if j in projection.covered and not kept:
            out += placed
        elif kept:
            out += [target[written:begin], *placed, " ".join(e.kept or "" for e in kept)]
            written = max(written, *(spans[projection.ranges[e.order][1]][1] for e in kept))
        else:
            out += [target[written:begin], *placed, target[begin:end]]
            written = end
        out += [item.markup for item in projection.items_after.get(j, [])]
    last = " ".join(item.markup for item in projection.items_at.get(len(spans), []))
    out += [target[written:], " " if last and target else "", last]
    return "".join(out)
