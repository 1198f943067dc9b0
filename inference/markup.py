"""Translating HTML (and XML): whole sentences go to the model, and the inline markup is put back where the word
alignments say (the approach of Bergamot's HTML mode and Marian's ``--alignment``-based tag projection).

The work is done in three steps, one module each:

- **parse** (`inference.markup_parse`): `split_document` cuts a document into **segments**, the runs of text between
  block boundaries (block elements, ``<br>``, ``<hr>``, elements whose content is kept as written), each with the
  inline elements (``<b>``, ``<a href=...>``, ``<span>``, elements this module does not know) and the markup without
  words in it; `TagRules` adds the caller's own tag names. A segment's text, its whitespace collapsed as a browser
  shows it, is translated as one sentence.
- **project** (`inference.markup_project`): for each segment, the target words each inline element goes around,
  found from the word alignment (`inference.alignment.WordAlignment`) as grow-diag symmetrises alignments, and
  where the markup without words goes; by relative position where the engine returns no attention
  (`proportional_alignment`).
- **render** (`inference.markup_render`): `Document.render` writes each translation back in place, each word
  inside the elements that go around it (`render_segment`); where the translation makes two elements cross, the
  later one is closed and reopened: the output is always well formed, and no element, link or attribute is lost.

Content kept as written: ``<script>``, ``<style>``, ``<pre>``, ``<textarea>``, ``<template>``, ``<svg>``,
``<math>`` (never translated) and, when inline, ``<code>``, ``<kbd>``, ``<samp>``, ``<var>`` and any element
marked ``translate="no"`` or ``class="notranslate"``: its words are translated with the sentence so the model reads
them in context, then the target words aligned with them are replaced by the element as written.

Tags, attributes, comments and declarations come out as written (attributes such as ``alt`` and ``title`` are not
translated); text is escaped for HTML. `inference.documents.translate_document` does all of it with a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .alignment import WordAlignment
from .markup_parse import (
    BLOCK,
    KEPT_INLINE,
    MAX_DEPTH,
    SPACE,
    VERBATIM,
    VOID,
    MarkupTooDeep,
    Segment,
    TagRules,
    parse_parts,
)
from .markup_project import BRIDGED, proportional_alignment
from .markup_render import render_segment

__all__ = [
    "BLOCK",
    "BRIDGED",
    "KEPT_INLINE",
    "MAX_DEPTH",
    "SPACE",
    "VERBATIM",
    "VOID",
    "Document",
    "MarkupTooDeep",
    "Segment",
    "TagRules",
    "proportional_alignment",
    "render_segment",
    "split_document",
]


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


def split_document(document: str, rules: TagRules | None = None, max_depth: int = MAX_DEPTH) -> Document:
    """``document`` (HTML or XML) as markup and segments (`inference.markup_parse`), tags classed by ``rules``
    where they name them; `MarkupTooDeep` (a `ValueError`) where more than ``max_depth`` elements are open at
    once."""
    return Document(parse_parts(document, rules or TagRules(), max_depth))
