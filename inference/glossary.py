"""Glossaries: the source -> target terms that `translate --glossary`, `serve --glossary` and a request's
``glossary`` field give, which lexically constrained beam search (`inference.constraints`) makes come out.

A `Glossary` maps source terms to target terms; a term whose target is empty or equal to it is do-not-translate
(it must come out as written). `Glossary.terms_for(text)` are the target terms that apply to one source text: those
whose source term occurs in it (case-sensitive; a term that starts or ends with a letter or digit of a script
written with spaces must start or end at a word boundary, a Han or kana term matches anywhere; where two
occurrences overlap, the longer term wins). `read_glossary` reads a TSV file (source term<TAB>target term).
`term_ids` are the target terms' token ids (the phrases the search is given), and `word_pieces` the target tokens
that would continue a completed term's last word (which the search blocks after it).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Han ideographs (with extensions and compatibility forms) and kana: scripts written without spaces, where a term
# matches inside a longer run of letters
_NO_SPACE_SCRIPTS = (
    (0x3040, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0x20000, 0x2FA1F),
)


def _word_edge(char: str) -> bool:
    """Whether a term's first or last character ``char`` must sit at a word boundary."""
    return char.isalnum() and not any(low <= ord(char) <= high for low, high in _NO_SPACE_SCRIPTS)


@dataclass(frozen=True)
class Glossary:
    """Source term -> target term pairs (a do-not-translate term maps to itself), in file order."""

    entries: tuple[tuple[str, str], ...]

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]]) -> Glossary:
        """A glossary of (source term, target term) pairs (a mapping's ``items()``); an empty target (or the source
        term) keeps the term as is. `ValueError` for an empty source term or a term given two targets."""
        entries: dict[str, str] = {}
        for source, target in pairs:
            source, target = source.strip(), target.strip()
            if not source:
                raise ValueError(
                    f"glossary entry with target {target!r} has an empty source term: give the source term"
                )
            target = target or source
            if entries.get(source, target) != target:
                raise ValueError(
                    f"glossary term {source!r} has two targets, {entries[source]!r} and {target!r}: keep one"
                )
            entries[source] = target
        return cls(tuple(entries.items()))

    def __len__(self) -> int:
        return len(self.entries)

    def terms_for(self, text: str) -> list[str]:
        """The target terms that apply to the source ``text`` (module docstring), each once, in the order of
        their first occurrence."""
        found: list[tuple[int, int, str]] = []
        for source, target in self.entries:
            pattern = re.escape(source)
            if _word_edge(source[0]):
                pattern = r"(?<!\w)" + pattern
            if _word_edge(source[-1]):
                pattern += r"(?!\w)"
            found += [(m.start(), m.end(), target) for m in re.finditer(pattern, text)]
        # the longer of two overlapping occurrences wins
        kept: list[tuple[int, int, str]] = []
        for start, end, target in sorted(found, key=lambda f: (f[0] - f[1], f[0])):
            if all(end <= s or start >= e for s, e, _ in kept):
                kept.append((start, end, target))
        terms: list[str] = []
        for _, _, target in sorted(kept):
            if target not in terms:
                terms.append(target)
        return terms


def read_glossary(path: str | Path) -> Glossary:
    """The glossary in the UTF-8 TSV file ``path``: one ``source term<TAB>target term`` per line (an empty target,
    or no tab at all, keeps the term as is: do-not-translate); blank lines and lines starting with ``#`` are
    skipped. `ValueError` naming the file and line for a line with more than two columns, an empty source term or
    a term given two targets, and for a file that cannot be read or holds no term."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"--glossary {str(path)!r} cannot be read ({err}): give a UTF-8 TSV file") from None
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        columns = line.split("\t")
        if len(columns) > 2:
            raise ValueError(
                f"--glossary {str(path)!r} line {number} has {len(columns)} tab-separated columns: expected "
                "source term<TAB>target term"
            )
        try:
            pairs.append(
                Glossary.from_pairs([(columns[0], columns[-1] if len(columns) == 2 else "")]).entries[0]
            )
        except ValueError as err:
            raise ValueError(f"--glossary {str(path)!r} line {number}: {err}") from None
    if not pairs:
        raise ValueError(f"--glossary {str(path)!r} holds no term: one source term<TAB>target term per line")
    try:
        return Glossary.from_pairs(pairs)
    except ValueError as err:
        raise ValueError(f"--glossary {str(path)!r}: {err}") from None


def term_ids(tokenizer: Any, terms: Sequence[str]) -> list[list[int]]:
    """The target-side token ids of each term as it reads inside a sentence (no special tokens)."""
    if not terms:
        return []
    encoded = tokenizer(text_target=list(terms), add_special_tokens=False)["input_ids"]
    return [list(ids) for ids in encoded if len(ids)]


_WORD_PIECES: weakref.WeakKeyDictionary[Any, frozenset[int]] = weakref.WeakKeyDictionary()


def word_pieces(tokenizer: Any) -> frozenset[int]:
    """The target-side token ids that continue the word before them: decoded after a whole word, they join it
    with a letter or digit of a script written with spaces (a sentencepiece or byte-level piece without its
    word-start mark, a WordPiece ``##`` piece; none with ``@@``-suffix BPE, where the piece before says it goes
    on). Found by decoding each token after the token of "a", once per tokenizer."""
    if tokenizer in _WORD_PIECES:
        return _WORD_PIECES[tokenizer]
    word = tokenizer(text_target=["a"], add_special_tokens=False)["input_ids"][0]
    if not word:
        # nothing to decode after: no token is known to continue a word
        _WORD_PIECES[tokenizer] = frozenset()
        return frozenset()
    base = tokenizer.decode(word)
    special = set(tokenizer.all_special_ids)
    ids = [i for i in range(len(tokenizer)) if i not in special]
    texts = tokenizer.batch_decode([[*word, i] for i in ids])
    pieces = frozenset(
        i
        for i, text in zip(ids, texts)
        if text.startswith(base) and len(text) > len(base) and _word_edge(text[len(base)])
    )
    _WORD_PIECES[tokenizer] = pieces
    return pieces
