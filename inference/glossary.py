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
from functools import cached_property
from pathlib import Path
from typing import Any

# a character that continues a word (as a regular expression's \w)
_WORD = re.compile(r"\w")
# where a source term ends in `Glossary._trie` (no character of a term is the empty string)
_TERM = ""
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

    @cached_property
    def _trie(self) -> dict[str, Any]:
        """The source terms in a trie of characters, built once: a node maps each next character to its node,
        and `_TERM` to (target term, whether the term starts at a word boundary, whether it ends at one) where a
        source term ends."""
        root: dict[str, Any] = {}
        for source, target in self.entries:
            node = root
            for char in source:
                node = node.setdefault(char, {})
            node[_TERM] = (target, _word_edge(source[0]), _word_edge(source[-1]))
        return root

    def _occurrences(self, text: str) -> list[tuple[int, int, str]]:
        """Every occurrence of a source term in ``text`` (overlapping ones too) as (start, end, target term), in one
        walk of `_trie` from each character: time linear in the text times the longest term matched, whatever the
        glossary's size."""
        found: list[tuple[int, int, str]] = []
        root = self._trie
        for start in range(len(text)):
            node = root.get(text[start])
            end = start + 1
            while node is not None:
                term = node.get(_TERM)
                if (
                    term is not None
                    and not (term[1] and start and _WORD.match(text[start - 1]))
                    and not (term[2] and end < len(text) and _WORD.match(text[end]))
                ):
                    found.append((start, end, term[0]))
                node = node.get(text[end]) if end < len(text) else None
                end += 1
        return found

    def terms_for(self, text: str) -> list[str]:
        """The target terms that apply to the source ``text`` (module docstring), each once, in the order of
        their first occurrence."""
        found = self._occurrences(text)
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


def _shown(term: str, most: int = 40) -> str:
    """A term as an error message shows it: quoted, cut after ``most`` characters."""
    return repr(term if len(term) <= most else term[:most] + "...")


def check_terms(tokenizer: Any, glossary: Glossary, positions: int | None) -> None:
    """`ValueError` naming the target terms of ``glossary`` that the model cannot write, which constrained beam
    search could only drop: a term the tokenizer writes with the unknown token (characters its vocabulary lacks)
    or with no token at all, and a term of more tokens than the decoder's ``positions`` leave room for (its start
    and end tokens aside; None: no limit). Each target term is tokenized once."""
    targets = list(dict.fromkeys(target for _, target in glossary.entries))
    encoded = tokenizer(text_target=targets, add_special_tokens=False)["input_ids"]
    unknown = getattr(tokenizer, "unk_token_id", None)
    room = None if positions is None else positions - 2
    problems = []
    for term, ids in zip(targets, encoded):
        if not ids:
            problems.append(f"{_shown(term)} (the tokenizer writes it with no token)")
        elif unknown is not None and unknown in ids:
            problems.append(
                f"{_shown(term)} (the tokenizer writes it with the unknown token: its vocabulary lacks a character)"
            )
        elif room is not None and len(ids) > room:
            problems.append(
                f"{_shown(term)} ({len(ids)} tokens, more than the {room} the decoder's positions hold)"
            )
    if problems:
        more = f" and {len(problems) - 5} more" if len(problems) > 5 else ""
        raise ValueError(
            f"the glossary has {len(problems)} target term(s) the model cannot write: {'; '.join(problems[:5])}"
            f"{more}: correct or remove them"
        )


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
