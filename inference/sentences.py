"""Sentence splitting: a long text translated sentence by sentence, then put back together.

A model trained on sentences (the shipped corpora: verses of one to a few sentences) translates a paragraph of
many sentences worse than each of them, and a text over the model's length limit cannot be translated at all.
`split_text(text, language)` cuts a text into the sentences to translate: at its line breaks (kept as written in
the output), and inside each line by pySBD's rules for ``language`` (Golden Rules Set: abbreviations, decimals,
ellipses, quotations; English rules for a language pySBD does not know; without a language, Chinese rules for a
line mostly in Han characters or kana and English rules otherwise), with a closing quotation mark or bracket that
the rules left at the start of the next sentence ("你们要彼此相爱。” 门徒...") moved back to the sentence it
closes. ``newlines=False`` treats a line break as a space (DeepL's ``split_sentences=nonewlines``).

`SplitText.join` writes the translations of the sentences back in the text's layout: sentences of one line joined
by a space, or by nothing between two written in Chinese or Japanese characters (the one before ends in one, the
next starts with one, quotation marks and brackets aside), the text's line breaks between lines.

`split_alignments` is the word alignment of such a translation: each sentence's own, numbered over the whole text.

`translate --split_sentences` and the server (LibreTranslate's API always, as LibreTranslate does; DeepL's
``split_sentences``; the server's own ``split_sentences``) translate this way.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import regex

_LINE_BREAK = re.compile(r"\s*\n\s*")
# characters pySBD reads at once beyond the sentence left open (`_segmented`), and the longest sentence it may leave
# open (far beyond what a model reads in one input)
WINDOW = 400
LONGEST = 1000
# characters of writing without spaces between sentences: Han, kana, CJK punctuation, full-width forms
_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\u3000-\u303f\uff00-\uffef]")
# where a window may end: after a space, or after a Chinese or Japanese character
_WINDOW_EDGE = regex.compile(r"\s+|[\p{Han}\p{Hiragana}\p{Katakana}\u3000-\u303f\uff00-\uffef]")


def _base(language: str) -> str:
    """The language of a code with a region ("pt-BR", "zh_Hant" -> "pt", "zh")."""
    return language.replace("_", "-").split("-")[0].lower()


def _closing(char: str) -> bool:
    """Whether ``char`` closes a quotation or a bracket (a sentence's end, not the next one's start)."""
    return unicodedata.category(char) in ("Pe", "Pf") or char in "\"'"


@lru_cache(maxsize=32)
def _segmenter(language: str) -> Any:
    import pysbd
    from pysbd.languages import LANGUAGE_CODES

    return pysbd.Segmenter(language=language if language in LANGUAGE_CODES else "en", clean=False)


def _cjk_edge(text: str, last: bool) -> bool:
    """Whether ``text`` ends (``last``) or starts with a Chinese or Japanese character, quotation marks and
    brackets aside."""
    for char in reversed(text) if last else text:
        if unicodedata.category(char) in ("Ps", "Pe", "Pi", "Pf") or char in "\"'":
            continue
        return bool(_CJK.match(char))
    return False


def _joiner(before: str, after: str) -> str:
    """What goes between two sentences of one line: nothing between Chinese or Japanese ones, else a space."""
    return "" if _cjk_edge(before, last=True) and _cjk_edge(after, last=False) else " "


def sentences_of(line: str, language: str | None = None) -> list[str]:
    """The sentences of one ``line`` of ``language`` text (module docstring), stripped, none empty."""
    line = line.strip()
    if not line:
        return []
    if language is None:
        cjk = len(_CJK.findall(line))
        language = "zh" if cjk * 2 > len(regex.findall(r"\w", line)) else "en"
    found = _segmented(_segmenter(_base(language)), line)
    sentences: list[str] = []
    for piece in found:
        stripped = piece.strip()
        if sentences and stripped and _closing(stripped[0]) and not _opens(stripped):
            # a closing mark the rules left at the start of the next sentence goes back to the one it closes
            cut = 1
            while cut < len(stripped) and _closing(stripped[cut]):
                cut += 1
            sentences[-1] += stripped[:cut]
            stripped = stripped[cut:].strip()
        if stripped:
            sentences.append(stripped)
    return sentences


def _segmented(segmenter: Any, line: str) -> list[str]:
    """pySBD's sentences of ``line``, read a window at a time: its rules take time that grows with the square of
    the text they read (a 54 KB line of "1. 2. 3. ..." takes minutes whole), so each call reads the sentence left
    open by the previous window and the next `WINDOW` characters (cut after a space or a Chinese or Japanese
    character where there is one), and a sentence still open after `LONGEST` characters is cut there. The pieces
    join back to ``line``."""
    found: list[str] = []
    carry, rest = "", line
    while rest:
        cut = len(rest)
        if cut > WINDOW:
            edges = [m.end() for m in _WINDOW_EDGE.finditer(rest, 0, WINDOW)]
            cut = edges[-1] if edges else WINDOW
        piece, rest = carry + rest[:cut], rest[cut:]
        pieces = segmenter.segment(piece)
        if "".join(pieces) != piece:
            # pySBD changed the text (it should not with clean=False): keep it whole rather than lose any of it
            pieces = [piece]
        carry = pieces.pop() if rest else ""
        found += pieces
        if len(carry) > LONGEST:
            found.append(carry)
            carry = ""
    return found + ([carry] if carry else [])


def _opens(sentence: str) -> bool:
    """Whether a sentence starting with a straight quote opens a quotation there (its quotes pair up)."""
    return sentence[0] in "\"'" and sentence.count(sentence[0]) % 2 == 0


@dataclass(frozen=True)
class SplitText:
    """A text cut into ``sentences``; ``lines[i]`` is the line break written before sentence ``i`` ("" within a
    line, None before the first)."""

    sentences: tuple[str, ...]
    lines: tuple[str | None, ...]

    def join(self, translations: Sequence[str]) -> str:
        """The translations of `sentences` (one each) in the text's layout (module docstring)."""
        if len(translations) != len(self.sentences):
            raise ValueError(f"{len(translations)} translations for {len(self.sentences)} sentences")
        out = ""
        for before, translation in zip(self.lines, translations):
            translation = translation.strip()
            if before:
                out += before + translation
            elif translation:
                out += (_joiner(out, translation) if out and not out.endswith("\n") else "") + translation
        return out

    def hypotheses(self, nbest: Sequence[Sequence[str]]) -> list[list[tuple[str, str]]]:
        """For each hypothesis k of the text, its (sentence, translation) pairs, from the n-best list of each
        sentence: hypothesis k of each sentence (its last when it has fewer); one hypothesis without pairs for a
        text without sentences."""
        if len(nbest) != len(self.sentences):
            raise ValueError(f"{len(nbest)} n-best lists for {len(self.sentences)} sentences")
        count = max((len(hyps) for hyps in nbest), default=1)
        return [
            [(sentence, hyps[min(k, len(hyps) - 1)]) for sentence, hyps in zip(self.sentences, nbest)]
            for k in range(count)
        ]

    def join_nbest(self, nbest: Sequence[Sequence[str]]) -> list[str]:
        """The n-best list of the text from the n-best list of each of its sentences (`hypotheses`, joined)."""
        return [self.join([target for _, target in pairs]) for pairs in self.hypotheses(nbest)]


def split_text(text: str, language: str | None = None, newlines: bool = True) -> SplitText:
    """``text`` cut into its sentences (module docstring): ``language`` is the source language's code (ISO 639-1;
    a region such as "pt-BR" is dropped; None: by script); with ``newlines`` False, a line break is a space. A
    text without any sentence gives no sentences."""
    sentences: list[str] = []
    lines: list[str | None] = []
    parts = _LINE_BREAK.split(text) if newlines else [" ".join(text.split())]
    breaks = [m.group(0) for m in _LINE_BREAK.finditer(text)] if newlines else []
    pending: str | None = None
    for index, part in enumerate(parts):
        if index:
            # the break as written, without the spaces around it (a blank line stays a blank line)
            written = "\n" * breaks[index - 1].count("\n")
            pending = written if pending is None else pending + written
        for position, sentence in enumerate(sentences_of(part, language)):
            lines.append(None if not sentences else (pending or "") if position == 0 else "")
            sentences.append(sentence)
            pending = None
    return SplitText(tuple(sentences), tuple(lines))


def translate_sentences(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    language: str | None = None,
    newlines: bool = True,
    batch_size: int = 32,
    **generate_kwargs: Any,
) -> list[tuple[SplitText, list[list[str]]]]:
    """Each of ``texts`` cut into sentences (`split_text` with ``language`` and ``newlines``) and the n-best list
    of each of its sentences: the sentences of all texts batched through `inference.translate_nbest`
    (``generate_kwargs`` as there)."""
    from .translate import translate_nbest

    splits = [split_text(text, language, newlines) for text in texts]
    flat = [sentence for split in splits for sentence in split.sentences]
    found = iter(translate_nbest(model, tokenizer, flat, batch_size, **generate_kwargs) if flat else [])
    return [(split, [next(found) for _ in split.sentences]) for split in splits]


def translate_split(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    language: str | None = None,
    newlines: bool = True,
    batch_size: int = 32,
    **generate_kwargs: Any,
) -> list[list[str]]:
    """The n-best list of each of ``texts``, translated sentence by sentence (`translate_sentences`) and joined
    (`SplitText.join_nbest`)."""
    translated = translate_sentences(
        model, tokenizer, texts, language, newlines, batch_size, **generate_kwargs
    )
    return [split.join_nbest(nbest) for split, nbest in translated]


def split_alignments(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    translated: Sequence[tuple[SplitText, list[list[str]]]],
    batch_size: int = 32,
) -> list[list[str]]:
    """The Pharaoh word alignment of each hypothesis of each text translated sentence by sentence (``translated``
    from `translate_sentences`): each sentence aligned with its hypothesis (`inference.alignment.align_words`),
    the alignments put together over the text and its joined translation (`inference.alignment.joined_alignment`)."""
    from .alignment import align_words, joined_alignments, pharaoh

    # per text, per hypothesis: (the text, its joined translation, its (sentence, translation) pairs)
    wholes = [
        [(text, split.join([target for _, target in pairs]), pairs) for pairs in split.hypotheses(nbest)]
        for text, (split, nbest) in zip(texts, translated)
    ]
    pairs = [pair for found in wholes for _, _, pairs in found for pair in pairs]
    aligned = iter(
        joined_alignments(
            [whole for found in wholes for whole in found],
            align_words(model, tokenizer, [p[0] for p in pairs], [p[1] for p in pairs], batch_size),
        )
    )
    return [[pharaoh(next(aligned).links) for _ in found] for found in wholes]
