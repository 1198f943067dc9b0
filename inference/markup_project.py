"""A segment's inline markup projected onto its translation by a word alignment (`inference.alignment.WordAlignment`),
for markup transfer (`inference.markup`): which target words each inline element goes around, and where the markup
without words goes (a `Projection`, which `inference.markup_render` writes out).

- an element's target words are found as grow-diag symmetrises alignments: the target words linked to its source
  words that are also the target word attending most to one of them, grown into the adjacent linked target words
  that attend to them about as much (`_target_words`); then their longest run, a gap of one word filled
  (`BRIDGED`): where the translation moves its words apart, the element goes around its main part rather than
  around words that are not its own. An element whose words no link reaches goes around the target word that
  attends most to them; an element covers what its children cover, so the output nests as the input did.
- an element with no words (``<img>``, ``<a id="x"></a>``), a comment or a stray end tag is put after the target
  word aligned with the source word whose end it touches (``word<a id="x"></a>``), else before the target word
  aligned with the source word after it.
- an element kept as written replaces the target words aligned with its words (the words where the target writes
  its text verbatim, when it does so once); an element all of whose target words it replaces goes where markup
  without words goes, unless it holds it; an element without target words goes there too, with those of its
  descendants that have none written inside it.

Engines that return no attention (ONNX) place tags by relative position (`proportional_alignment`), which suits
short inline elements in languages of similar word order only.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import regex

from .alignment import WordAlignment, word_spans
from .markup_parse import Element, Item, Segment

if TYPE_CHECKING:
    import numpy as np

# the widest gap between two target words of one element that the element spans (`_bridged`)
BRIDGED = 1
_PUNCTUATION = regex.compile(r"\p{P}+")


@dataclass(frozen=True)
class Projection:
    """Where a segment's inline markup goes in its translation ``target`` (its words at ``spans``, `word_spans`):

    - ``ranges``: the first and last target word of each element placed around words (by `Element.order`);
    - ``around``: the elements placed around words and not kept as written, by depth, then order;
    - ``trimmed``: whether each element leaves out the punctuation at the start, and at the end, of its first and
      last words (`_trims`);
    - ``kept_at``: the elements kept as written, by their first target word, which they replace; ``covered``: the
      other target words they replace;
    - ``items_at``, ``items_after``: the markup without words (elements without target words among it) written
      before, and after, a target word (``items_at[len(spans)]``: at the end)."""

    target: str
    spans: list[tuple[int, int]]
    ranges: dict[int, tuple[int, int]]
    around: tuple[Element, ...]
    trimmed: dict[int, tuple[bool, bool]]
    kept_at: dict[int, list[Element]]
    covered: frozenset[int]
    items_at: dict[int, list[Item]]
    items_after: dict[int, list[Item]]

    def stack(self, j: int) -> tuple[Element, ...]:
        """The elements (not kept as written) that go around target word ``j``, outermost first."""
        return self._stacks[j] if j < len(self._stacks) else ()

    @cached_property
    def _stacks(self) -> list[tuple[Element, ...]]:
        """`stack` of each target word, in one sweep over the words: each element joins the elements open (kept in
        the order of ``around``) at its first word and leaves after its last."""
        rank = {id(element): k for k, element in enumerate(self.around)}
        starting: dict[int, list[Element]] = {}
        ending: dict[int, list[Element]] = {}
        for element in self.around:
            low, high = self.ranges[element.order]
            if low < len(self.spans) and low <= high:
                starting.setdefault(low, []).append(element)
                ending.setdefault(min(high, len(self.spans) - 1), []).append(element)
        stacks: list[tuple[Element, ...]] = []
        open_: list[Element] = []
        for j in range(len(self.spans)):
            for element in starting.get(j, []):
                bisect.insort(open_, element, key=lambda e: rank[id(e)])
            stacks.append(tuple(open_))
            for element in ending.get(j, []):
                open_.remove(element)
        return stacks


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


def _word_bounds(source: list[tuple[int, int]], element: Element) -> tuple[int, int]:
    """The first source word (of the word spans ``source``, in order, apart) that ``element``'s characters reach,
    and the one after the last."""
    first = bisect.bisect_right(source, element.begin, key=lambda span: span[1])
    return first, max(first, bisect.bisect_left(source, element.end, key=lambda span: span[0]))


def _source_words(source: list[tuple[int, int]], element: Element) -> list[int]:
    """The source words (of the word spans ``source``, in order, apart) that ``element``'s characters reach."""
    return list(range(*_word_bounds(source, element)))


@dataclass
class _Reach:
    """What an element's source words reach (`_element_ranges`): the target words linked to them (``found``), the
    target word attending most to each of them (``tops``), and the most each target word attends to one of them
    (``attention``; None where none of them has weights); and the ``run`` of target words they give."""

    found: set[int]
    tops: set[int]
    attention: np.ndarray | None
    # the first and last target word they give (`_grown`, `_spanned_run`; None for none)
    run: tuple[int, int] | None = None


def _grown(reach: _Reach) -> set[int]:
    """The target words of an element whose source words reach ``reach``, symmetrised as grow-diag does: the core
    is the target words linked to them that are also the target word attending most to one of them (both
    directions agree), grown into the adjacent linked target words that attend to them at least half as much as
    the core's best; all the linked target words where the directions never agree; the one target word that
    attends most to them where no link reaches them; none without target words."""
    import numpy as np

    found, attention = reach.found, reach.attention
    if attention is None:
        return found
    if not found:
        return {int(np.argmax(attention))}
    core = found & reach.tops
    if not core:
        return found
    core_words = np.fromiter(core, dtype=np.int64, count=len(core))
    floor = 0.5 * attention[core_words].max()
    # the linked target words that are in the core or attend at least ``floor``, in runs of adjacent words: those
    # of the runs holding a core word
    words = np.fromiter(found, dtype=np.int64, count=len(found))
    words.sort()
    in_core = np.isin(words, core_words)
    chosen = in_core | (attention[words] >= floor)
    words, in_core = words[chosen], in_core[chosen]
    runs = np.concatenate(([0], np.cumsum(np.diff(words) != 1)))
    grown = np.zeros(runs[-1] + 1, dtype=bool)
    grown[runs[in_core]] = True
    return set(words[grown[runs]].tolist())


def _spanned_run(words: set[int]) -> tuple[int, int]:
    """The first and last of the longest run (the first on a tie) of ``words`` once the gaps of at most `BRIDGED`
    words between two of them are filled (the unaligned words inside an element's translation); wider gaps
    split runs."""
    import numpy as np

    ordered = np.fromiter(words, dtype=np.int64, count=len(words))
    ordered.sort()
    breaks = np.flatnonzero(np.diff(ordered) > BRIDGED + 1)
    starts = np.concatenate(([0], breaks + 1))
    ends = np.concatenate((breaks, [len(ordered) - 1]))
    longest = int(np.argmax(ordered[ends] - ordered[starts]))
    return int(ordered[starts[longest]]), int(ordered[ends[longest]])


def _post_order(elements: Sequence[Element]) -> tuple[list[Element], dict[int, list[Element]]]:
    """``elements``, each after its children, and the children of each (by ``id``)."""
    present = {id(element) for element in elements}
    children: dict[int, list[Element]] = {}
    roots = []
    for element in elements:
        if element.parent is not None and id(element.parent) in present:
            children.setdefault(id(element.parent), []).append(element)
        else:
            roots.append(element)
    ordered: list[Element] = []
    pending: list[tuple[Element, bool]] = [(root, False) for root in reversed(roots)]
    while pending:
        element, expanded = pending.pop()
        if expanded:
            ordered.append(element)
            continue
        pending.append((element, True))
        pending += [(child, False) for child in reversed(children.get(id(element), []))]
    return ordered, children


def _merged(sets: list[set[int]]) -> set[int]:
    """The union of ``sets``, built in the largest of them (which it changes): each element of a set is copied
    at most once per doubling of the set it goes into."""
    merged = max(sets, key=len, default=set())
    for other in sets:
        if other is not merged:
            merged |= other
    return merged


def _gathered(
    parts: list[_Reach],
    own: list[int],
    linked: dict[int, set[int]],
    block: np.ndarray | None,
    best: list[int],
) -> _Reach:
    """The `_Reach` of the source words of ``parts`` (which it takes over) and the source words ``own`` (``block``:
    the weights of the source words that have any, ``best``: the target word attending most to each)."""
    import numpy as np

    found = _merged([part.found for part in parts])
    for i in own:
        if i in linked:
            found |= linked[i]
    tops = _merged([part.tops for part in parts])
    columns = [i for i in own if i < len(best)]
    tops.update(best[i] for i in columns)
    attention = None
    vectors = [part.attention for part in parts]
    if columns:
        vectors.append(block[:, columns].max(axis=1))  # type: ignore[index]
    for vector in vectors:
        if vector is not None:
            attention = vector if attention is None else np.maximum(attention, vector, out=attention)
    return _Reach(found, tops, attention)


def _element_ranges(
    elements: Sequence[Element],
    source: list[tuple[int, int]],
    linked: dict[int, set[int]],
    weights: np.ndarray,
    count: int,
) -> dict[int, tuple[int, int]]:
    """The first and last target word (of ``count``) of each element that has any (``source``: the segment's
    word spans; `_grown`, then `_spanned_run`), an element covering its children.

    The elements are taken children first, each one's `_Reach` gathered from those of its children and from its
    own words outside them (the union of the sets, the maximum of the attention), so that each source word is
    read once, by the innermost element holding it, however deep the nesting."""
    import numpy as np

    width = weights.shape[1] if count and len(weights) >= count and source else 0
    block = weights[:count, :width] if width else None
    # the target word attending most to each source word with weights
    best = np.argmax(block, axis=0).tolist() if block is not None else []
    ordered, children = _post_order(elements)
    bounds = {id(element): _word_bounds(source, element) for element in elements}
    reaches: dict[int, _Reach] = {}
    ranges: dict[int, tuple[int, int]] = {}
    for element in ordered:
        first, last = bounds[id(element)]
        kids = children.get(id(element), [])
        inner = sorted(
            (child for child in kids if first <= bounds[id(child)][0] and bounds[id(child)][1] <= last),
            key=lambda child: bounds[id(child)],
        )
        own: list[int] = []
        position = first
        for child in inner:
            own += range(position, bounds[id(child)][0])
            position = max(position, bounds[id(child)][1])
        own += range(position, last)
        parts = [reaches.pop(id(child)) for child in inner]
        if not own and len(parts) == 1:
            # the source words of its one child: its target words
            reach = parts[0]
        else:
            reach = _gathered(parts, own, linked, block, best)
            words = _grown(reach)
            reach.run = _spanned_run(words) if words else None
        reaches[id(element)] = reach
        spans = [ranges[child.order] for child in kids if child.order in ranges]
        if reach.run is not None:
            spans.append(reach.run)
        if spans:
            ranges[element.order] = (min(low for low, _ in spans), max(high for _, high in spans))
    return ranges


def _trims(text: str, words: list[tuple[int, int]], element: Element) -> tuple[bool, bool]:
    """Whether ``element`` starts inside a word after nothing but punctuation (``"<b>Hi``), and whether it ends
    inside a word before nothing but punctuation (``run</b>.``)."""

    def inside(offset: int) -> tuple[int, int] | None:
        k = bisect.bisect_right(words, offset, key=lambda span: span[0]) - 1
        return words[k] if k >= 0 and words[k][0] < offset < words[k][1] else None

    start, end = inside(element.begin), inside(element.end)
    return (
        start is not None and bool(_PUNCTUATION.fullmatch(text[start[0] : element.begin])),
        end is not None and bool(_PUNCTUATION.fullmatch(text[element.end : end[1]])),
    )


def _linked(alignment: WordAlignment, count: int) -> dict[int, set[int]]:
    """The target words (of ``count``) linked to each source word."""
    linked: dict[int, set[int]] = {}
    for i, j in alignment.links:
        if j < count:
            linked.setdefault(i, set()).add(j)
    return linked


def _kept_words(
    elements: Sequence[Element], ranges: dict[int, tuple[int, int]]
) -> tuple[dict[int, list[Element]], frozenset[int]]:
    """The elements kept as written by the first target word they replace, and the other target words they
    replace (which are not written)."""
    kept_at: dict[int, list[Element]] = {}
    covered: set[int] = set()
    for element in elements:
        if element.kept is not None and element.order in ranges:
            low, high = ranges[element.order]
            kept_at.setdefault(low, []).append(element)
            covered.update(range(low + 1, high + 1))
    return kept_at, frozenset(covered)


def _with_words_shown(
    elements: Sequence[Element], ranges: dict[int, tuple[int, int]], replaced: frozenset[int], count: int
) -> dict[int, tuple[int, int]]:
    """``ranges`` without the elements (not kept as written) all of whose target words (of ``count``) are
    ``replaced`` by elements kept as written: they have no word of their own left (an element that holds one of
    those elements kept as written stays around it)."""
    holding = {e.parent.order for e in elements if e.kept is not None and e.order in ranges and e.parent}
    for element in sorted(elements, key=lambda e: -e.depth):
        if element.order in holding and element.parent is not None:
            holding.add(element.parent.order)
    # how many of the target words before each are shown
    shown_before = [0]
    for j in range(count):
        shown_before.append(shown_before[-1] + (j not in replaced))
    hidden = {
        element.order
        for element in elements
        if element.kept is None
        and element.order in ranges
        and element.order not in holding
        and shown_before[min(ranges[element.order][1] + 1, count)]
        == shown_before[min(ranges[element.order][0], count)]
    }
    return {order: words for order, words in ranges.items() if order not in hidden}


def _anchored_items(
    items: list[Item],
    source: list[tuple[int, int]],
    linked: dict[int, set[int]],
    covered: frozenset[int],
    count: int,
) -> tuple[dict[int, list[Item]], dict[int, list[Item]]]:
    """Markup without words, by the target word (of ``count``) it goes after: the one aligned with the source word
    whose end it touches; and by the target word it goes before, for the rest: the first one aligned with the
    source word after it, past the words ``covered`` by an element kept as written (``count``: at the end)."""
    starts = [begin for begin, _ in source]
    ends = {end: i for i, (_, end) in enumerate(source)}
    # the first target word aligned with each source word or the first linked one after it (``count``: none)
    reached = [count] * (len(source) + 1)
    for i in reversed(range(len(source))):
        reached[i] = min(linked[i]) if i in linked else reached[i + 1]
    items_at: dict[int, list[Item]] = {}
    items_after: dict[int, list[Item]] = {}
    for item in sorted(items, key=lambda item: item.offset):
        touched = ends.get(item.offset)
        if touched is not None and touched in linked:
            items_after.setdefault(max(linked[touched]), []).append(item)
            continue
        position = reached[bisect.bisect_left(starts, item.offset)]
        while position in covered:
            position += 1
        items_at.setdefault(position, []).append(item)
    return items_at, items_after


def _unplaced(elements: Sequence[Element], ranges: dict[int, tuple[int, int]]) -> list[Item]:
    """The elements no target word was found for, as markup without words: each with those of its descendants
    that have none either written inside it (`_written`), inside the elements that held it (`_holders`)."""
    inner: dict[int, list[Element]] = {}
    outermost = []
    for element in elements:
        if element.order in ranges:
            continue
        parent = element.parent
        if parent is not None and parent.order not in ranges:
            inner.setdefault(parent.order, []).append(element)
        else:
            outermost.append(element)
    holders = _holders(outermost)
    return [Item(_written(element, inner), element.begin, holders[id(element)]) for element in outermost]


def _holders(elements: Sequence[Element]) -> dict[int, tuple[Element, ...]]:
    """The elements holding each of ``elements`` and of their ancestors (by ``id``), outermost first: each
    element's parent is read once, a walk up the parents stopping at the first element whose holders are known."""
    holders: dict[int, tuple[Element, ...]] = {}
    for element in elements:
        path = []
        above: Element | None = element
        while above is not None and id(above) not in holders:
            path.append(above)
            above = above.parent
        chain = () if above is None else (*holders[id(above)], above)
        for known in reversed(path):
            holders[id(known)] = chain
            chain = (*chain, known)
    return holders


def _written(element: Element, inner: dict[int, list[Element]]) -> str:
    """``element`` as markup without words: as written where it is kept as written, else its tags around those of
    its children without target words (``inner``, by their parent's order), in the same way."""
    parts: list[str] = []
    pending: list[Element | str] = [element]
    while pending:
        top = pending.pop()
        if isinstance(top, str):
            parts.append(top)
        elif top.kept is not None:
            parts.append(top.kept)
        else:
            parts.append(top.start_tag)
            pending.append(top.end_tag)
            pending += reversed(inner.get(top.order, []))
    return "".join(parts)


def _copied_kept(
    segment: Segment,
    target: str,
    spans: list[tuple[int, int]],
    source: list[tuple[int, int]],
    alignment: WordAlignment,
) -> WordAlignment:
    """``alignment`` with each element kept as written whose text ``target`` writes verbatim once, on whole words,
    linked to those words alone (and no other source word linked to them)."""
    import numpy as np

    links, weights = list(alignment.links), np.array(alignment.weights, dtype=np.float32, copy=True)
    changed = False
    for element in segment.elements:
        if element.kept is None:
            continue
        text = segment.text[element.begin : element.end]
        if not text.strip() or target.count(text) != 1:
            continue
        begin = target.index(text)
        words = [j for j, (b, e) in enumerate(spans) if b < begin + len(text) and begin < e]
        columns = _source_words(source, element)
        if not words or not columns or weights.shape[0] < len(spans) or weights.shape[1] < len(source):
            continue
        links = [(i, j) for i, j in links if i not in columns and j not in words]
        links += [(i, j) for i in columns for j in words]
        weights[:, columns] = 0.0
        weights[words, :] = 0.0
        weights[np.ix_(words, columns)] = 1.0
        changed = True
    return WordAlignment(sorted(links), weights) if changed else alignment


def project(segment: Segment, target: str, alignment: WordAlignment | None) -> Projection:
    """Where ``segment``'s inline markup goes in its translation ``target`` (stripped), by ``alignment`` (by
    relative position where None: `proportional_alignment`)."""
    spans = word_spans(target)
    source = word_spans(segment.text)
    if alignment is None:
        alignment = proportional_alignment(len(source), len(spans))
    alignment = _copied_kept(segment, target, spans, source, alignment)
    linked = _linked(alignment, len(spans))
    ranges = _element_ranges(segment.elements, source, linked, alignment.weights, len(spans))
    kept_at, covered = _kept_words(segment.elements, ranges)
    ranges = _with_words_shown(segment.elements, ranges, covered | frozenset(kept_at), len(spans))
    unplaced = _unplaced(segment.elements, ranges)
    items_at, items_after = _anchored_items([*segment.items, *unplaced], source, linked, covered, len(spans))
    around = sorted(
        (e for e in segment.elements if e.kept is None and e.order in ranges),
        key=lambda e: (e.depth, e.order),
    )
    return Projection(
        target,
        spans,
        ranges,
        tuple(around),
        {e.order: _trims(segment.text, source, e) for e in segment.elements},
        kept_at,
        covered,
        items_at,
        items_after,
    )
