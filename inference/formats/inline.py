"""A paragraph's inline formatting as markup around words, for the markup transfer (`inference.markup`), and back.

A format reader cuts a paragraph into `Run`s: text with a ``key`` that names its formatting in the reader's own
table (a Word run's properties and the link around it, a slide run's properties, an ODF span's style), and
``kept`` runs the model must not change (an image, a tab, a field, inline code: the reader's objects, whatever
text they show). `encode` writes the paragraph as an HTML fragment: the text of the paragraph's main formatting
(the one with the most characters) as text, every other run inside an ``<x-run k="KEY">`` element, every kept run
inside ``<x-run k="KEY" translate="no">`` (its words are read in context and the element comes back as written,
`inference.markup_parse`). The markup transfer translates the fragment and places each element around the target
words aligned with its words; `decode` reads the translated fragment back into (text, key) pieces in order, text
outside any element carrying the main formatting.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser

TAG = "x-run"
# a paragraph is translated only when it holds a letter: numbers, dates and punctuation stay as written
LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class Run:
    """Text with the key of its formatting; ``kept``: the reader's object, written back as it was."""

    text: str
    key: int
    kept: bool = False


@dataclass(frozen=True)
class Encoded:
    """A paragraph as an HTML fragment (`encode`) and the key of its main formatting (text outside elements)."""

    html: str
    base: int


def translatable(runs: list[Run]) -> bool:
    """Whether the runs' translatable text holds a letter (a paragraph without one is kept as written)."""
    return any(LETTER.search(run.text) for run in runs if not run.kept)


def encode(runs: list[Run]) -> Encoded:
    """The runs as an HTML fragment (module docstring), consecutive text runs of one key in one element."""
    joined: list[Run] = []
    for run in runs:
        if joined and not run.kept and not joined[-1].kept and joined[-1].key == run.key:
            joined[-1] = Run(joined[-1].text + run.text, run.key)
        else:
            joined.append(run)
    runs = joined
    sizes: dict[int, int] = {}
    for run in runs:
        if not run.kept:
            sizes[run.key] = sizes.get(run.key, 0) + len(run.text)
    base = max(sizes, key=lambda key: sizes[key]) if sizes else -1
    out = []
    for run in runs:
        text = html.escape(run.text, quote=False)
        if run.kept:
            out.append(f'<{TAG} k="{run.key}" translate="no">{text}</{TAG}>')
        elif run.key == base:
            out.append(text)
        else:
            out.append(f'<{TAG} k="{run.key}">{text}</{TAG}>')
    return Encoded("".join(out), base)


class _Pieces(HTMLParser):
    def __init__(self, base: int) -> None:
        super().__init__(convert_charrefs=True)
        self.keys = [base]
        self.pieces: list[tuple[str, int]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == TAG:
            key = dict(attrs).get("k")
            self.keys.append(int(key) if key and key.lstrip("-").isdigit() else self.keys[-1])
            # an element without text still says where its object goes
            self.pieces.append(("", self.keys[-1]))

    def handle_endtag(self, tag: str) -> None:
        if tag == TAG and len(self.keys) > 1:
            self.keys.pop()

    def handle_data(self, data: str) -> None:
        self.pieces.append((data, self.keys[-1]))


def decode(fragment: str, base: int) -> list[tuple[str, int]]:
    """The (text, key) pieces of a translated fragment of `encode`, in order, consecutive pieces of one key merged;
    a kept run's element gives a piece of its key (its first place, where its object goes)."""
    parser = _Pieces(base)
    parser.feed(fragment)
    parser.close()
    merged: list[tuple[str, int]] = []
    for text, key in parser.pieces:
        if merged and merged[-1][1] == key and (text or not merged[-1][0]):
            merged[-1] = (merged[-1][0] + text, key)
        else:
            merged.append((text, key))
    return merged


def written(fragment: str, base: int, kept: Sequence[bool]) -> list[tuple[str, int]]:
    """What a format writes back for a translated fragment of `encode`, in order: each text piece of `decode`
    with its key (a key the fragment invents: ``base``), empty ones left out; each run kept as written
    (``kept[key]``) once, at its first place, as ("", key); then, at the end, the kept runs the translation
    dropped."""
    out: list[tuple[str, int]] = []
    placed: set[int] = set()
    for text, key in decode(fragment, base):
        key = key if 0 <= key < len(kept) else base
        if key < 0:
            continue
        if kept[key]:
            if key not in placed:
                placed.add(key)
                out.append(("", key))
        elif text:
            out.append((text, key))
    return out + [("", key) for key, is_kept in enumerate(kept) if is_kept and key not in placed]


def plain(fragment: str) -> str:
    """The text of a translated fragment without its markup (a fragment encoded from one run)."""
    return "".join(text for text, _ in decode(fragment, -1))
