"""Placing a segment's inline markup (`inference.markup_project`) reads each source word's weights once however deep
the nesting, and places and writes (`inference.markup_render`) every element as the direct computations do
(`_direct`: each element's target words found from all its source words at once, the elements holding each
element without target words walked up one by one, each word's elements listed element by element, the elements
open compared one by one)."""

from __future__ import annotations

import bisect
import random
from functools import cached_property

import numpy as np
import pytest

from vanilla_transformer.inference import markup_project, markup_render
from vanilla_transformer.inference.alignment import WordAlignment, word_spans
from vanilla_transformer.inference.markup import split_document
from vanilla_transformer.inference.markup_parse import Element, Item
from vanilla_transformer.inference.markup_project import BRIDGED, Projection, project
from vanilla_transformer.inference.markup_render import render_segment
from vanilla_transformer.inference.protected import guard, protect_segment, render_guarded


def _reference_target_words(words, linked, weights, count):
    found = set().union(*(linked.get(i, set()) for i in words))
    columns = [i for i in words if i < weights.shape[1]]
    if not columns or not count or len(weights) < count:
        return found
    reached = weights[:count, columns]
    attention = reached.max(axis=1)
    if not found:
        return {int(np.argmax(attention))}
    core = found & set(np.argmax(reached, axis=0).tolist())
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


def _reference_bridged(words):
    ordered = sorted(words)
    filled = set(words)
    for low, high in zip(ordered, ordered[1:]):
        if high - low - 1 <= BRIDGED:
            filled.update(range(low, high))
    return filled


def _reference_longest_run(words):
    runs = []
    for word in sorted(words):
        if runs and word == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], word)
        else:
            runs.append((word, word))
    return max(runs, key=lambda run: (run[1] - run[0], -run[0]))


def _reference_element_ranges(elements, source, linked, weights, count):
    """Each element's target words computed from all of its source words, then each range widened to its
    children's, deepest first."""
    ranges = {}
    for element in elements:
        first = bisect.bisect_right(source, element.begin, key=lambda span: span[1])
        last = bisect.bisect_left(source, element.end, key=lambda span: span[0])
        found = _reference_target_words(list(range(first, last)), linked, weights, count)
        if found:
            ranges[element.order] = _reference_longest_run(_reference_bridged(found))
    for element in sorted(elements, key=lambda e: -e.depth):
        parent = element.parent
        if element.order in ranges and parent is not None:
            low, high = ranges[element.order]
            parent_low, parent_high = ranges.get(parent.order, (low, high))
            ranges[parent.order] = (min(low, parent_low), max(high, parent_high))
    return ranges


def _reference_unplaced(elements, ranges):
    """Each unplaced element whose parent is placed, written with its unplaced descendants (recursively), inside
    the chain of its parents walked up one by one."""
    unplaced = [e for e in elements if e.order not in ranges]

    def markup(element):
        if element.kept is not None:
            return element.kept
        children = [e for e in unplaced if e.parent is element]
        return element.start_tag + "".join(markup(e) for e in children) + element.end_tag

    items = []
    for element in unplaced:
        if element.parent is None or element.parent.order in ranges:
            held = []
            parent = element.parent
            while parent is not None:
                held.insert(0, parent)
                parent = parent.parent
            items.append(Item(markup(element), element.begin, tuple(held)))
    return items


def _reference_switch(opened, wanted):
    common = 0
    while common < min(len(opened), len(wanted)) and opened[common] is wanted[common]:
        common += 1
    return [e.end_tag for e in reversed(opened[common:])] + [e.start_tag for e in wanted[common:]]


def _reference_within(elements, allowed):
    inside = []
    held = {id(element) for element in allowed}
    for element in elements:
        if id(element) not in held:
            break
        inside.append(element)
    return tuple(inside)


def _reference_stacks(self):
    stacks = [[] for _ in self.spans]
    for element in self.around:
        low, high = self.ranges[element.order]
        for j in range(low, min(high + 1, len(stacks))):
            stacks[j].append(element)
    return [tuple(stack) for stack in stacks]


def _direct(patched: pytest.MonkeyPatch) -> None:
    """The direct computations in place of the placement's and the rendering's own."""
    patched.setattr(markup_project, "_element_ranges", _reference_element_ranges)
    patched.setattr(markup_project, "_unplaced", _reference_unplaced)
    patched.setattr(markup_render, "_switch", _reference_switch)
    patched.setattr(markup_render, "_within", _reference_within)
    stacks = cached_property(_reference_stacks)
    stacks.__set_name__(Projection, "_stacks")
    patched.setattr(Projection, "_stacks", stacks)


_INLINE = ["b", "i", "a href='x'", "span translate='no'", "code", "em class='notranslate'", "u"]
_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "起初",
    "x.",
    "(y)",
    "https://a.example/p",
    "me@b.example",
    "v1.2.3",
    "42",
]


def _document(rng: random.Random, depth: int, deepest: int) -> str:
    out = []
    for _ in range(rng.randint(0, 4)):
        r = rng.random()
        if r < 0.45:
            out.append(rng.choice(_WORDS) + rng.choice([" ", " ", ""]))
        elif r < 0.9 and depth < deepest:
            tag = rng.choice(_INLINE)
            out.append(f"<{tag}>{_document(rng, depth + 1, deepest)}</{tag.split()[0]}>")
        else:
            out.append(rng.choice(["<img src='y'>", "<br>", "<!-- c -->", "<a id='z'></a>"]))
    return "".join(out)


def _translation(rng: random.Random, text: str) -> str:
    words = text.split()
    rng.shuffle(words)
    words = [w for w in words if rng.random() < 0.85] + [rng.choice(_WORDS) for _ in range(rng.randint(0, 2))]
    rng.shuffle(words)
    return " ".join(words)


def _alignment(rng: random.Random, sources: int, targets: int) -> WordAlignment | None:
    """None (relative position), or random links and weights: few distinct values (ties), sometimes fewer rows or
    columns than words."""
    if rng.random() < 0.1:
        return None
    links = sorted(
        {(rng.randrange(sources), rng.randrange(targets)) for _ in range(rng.randint(0, 2 * targets))}
        if sources and targets
        else set()
    )
    rows = targets if rng.random() < 0.9 else rng.randint(0, targets)
    columns = sources if rng.random() < 0.9 else rng.randint(0, sources)
    weights = np.array(
        [[rng.randint(0, 4) / 4 for _ in range(columns)] for _ in range(rows)], dtype=np.float32
    )
    return WordAlignment(links, weights.reshape(rows, columns))


def _cases(seed: int, count: int):
    rng = random.Random(seed)
    made = 0
    while made < count:
        document = "<p>" + _document(rng, 0, rng.choice([2, 4, 8])) + "</p>"
        for segment in split_document(document).segments:
            if rng.random() < 0.5:
                segment = protect_segment(segment)
            target = _translation(rng, segment.text)
            alignment = _alignment(rng, len(word_spans(segment.text)), len(word_spans(target)))
            yield segment, target, alignment
            made += 1


def test_placement_equals_the_direct_computation_per_element(monkeypatch):
    compared = kept = unplaced = 0
    for segment, target, alignment in _cases(0, 3000):
        projection = project(segment, target, alignment)
        unplaced += any(e.order not in projection.ranges for e in segment.elements)
        rendered = render_segment(segment, target, alignment)
        with monkeypatch.context() as patched:
            _direct(patched)
            assert project(segment, target, alignment) == projection, (segment, target, alignment)
            assert render_segment(segment, target, alignment) == rendered
        compared += 1
        kept += any(e.kept is not None for e in segment.elements)
    assert compared == 3000 and kept > 500 and unplaced > 100


def test_guarded_sentences_place_their_spans_as_the_direct_computation(monkeypatch):
    rng = random.Random(1)
    for _ in range(300):
        sentence = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 8)))
        segment = guard(sentence)
        if segment is None:
            continue
        target = _translation(rng, sentence)
        alignment = _alignment(rng, len(word_spans(sentence)), len(word_spans(target)))
        written = render_guarded(segment, target, alignment)
        with monkeypatch.context() as patched:
            _direct(patched)
            assert render_guarded(segment, target, alignment) == written


class _CountedReads(np.ndarray):
    """An array that counts the values that indexing it reads while it is (target words, source words)."""

    read = 0

    def __getitem__(self, key):
        value = super().__getitem__(key)
        if self.ndim == 2:
            _CountedReads.read += int(np.size(value))
        return value


@pytest.mark.parametrize("depth", [64, 256])
def test_each_source_word_is_read_once_however_deep_the_nesting(depth):
    """A word at every level of ``depth`` nested elements: the weights read stay within a few times target words
    by source words (each element reading all its source words would read about depth / 2 times that)."""
    document = "<p>" + "<b>w " * depth + "</b>" * depth + "</p>"
    (segment,) = split_document(document, max_depth=depth + 2).segments
    target = " ".join(["mot"] * depth)
    alignment = markup_project.proportional_alignment(depth, depth)
    counted = WordAlignment(alignment.links, alignment.weights.view(_CountedReads))
    _CountedReads.read = 0
    projection = project(segment, target, counted)
    assert _CountedReads.read <= 3 * depth * depth
    # each element goes around its words, the outermost around all of them
    assert projection.ranges[segment.elements[0].order] == (0, depth - 1)
    assert projection.ranges[segment.elements[-1].order] == (depth - 1, depth - 1)


class _CountedParent(Element):
    """An element that counts the reads of its ``parent``."""

    reads = 0

    @property
    def parent(self):
        _CountedParent.reads += 1
        return self.__dict__["parent"]

    @parent.setter
    def parent(self, value):
        self.__dict__["parent"] = value


@pytest.mark.parametrize("depth", [64, 256])
def test_elements_without_target_words_are_placed_in_one_walk_however_deep_the_nesting(depth):
    """``depth`` nested elements, each holding a word and an element whose word no link reaches (and no weights:
    it gets no target word): the parents read stay within a few times ``depth`` (walking up the parents of each
    element without target words reads about depth**2 / 2)."""
    document = "<p>" + "<b>w <i>x</i> " * depth + "</b>" * depth + "</p>"
    (segment,) = split_document(document, max_depth=depth + 2).segments
    target = " ".join(["mot"] * depth)
    alignment = WordAlignment([(2 * k, k) for k in range(depth)], np.zeros((0, 0), dtype=np.float32))
    for element in segment.elements:
        element.__class__ = _CountedParent
    _CountedParent.reads = 0
    projection = project(segment, target, alignment)
    assert _CountedParent.reads <= 12 * depth
    items = [
        item
        for at in (projection.items_at, projection.items_after)
        for found in at.values()
        for item in found
    ]
    assert sorted(item.markup for item in items) == ["<i></i>"] * depth
    # each <i> stays inside the <b> elements that held it
    assert sorted(len(item.elements) for item in items) == list(range(1, depth + 1))
