"""One document's translation as a plan without I/O, shared by `vanilla-transformer translate` and the server.

A `DocumentPlan` is built from one text: an HTML or XML document (``markup``), cut into its segments (the text
between block boundaries, `inference.markup.split_document` with the caller's `inference.markup.TagRules`), or a
plain text, one piece; with ``split_sentences`` each piece is cut into its sentences (`inference.sentences.split_text`
with the source ``language``), else each piece is one sentence. The plan hands out the `DocumentPlan.sentences` to
translate; `DocumentPlan.translated` takes their n-best lists and returns a `TranslatedDocument`, which hands out the
(sentence, translation) pairs whose word alignments place the inline markup (`TranslatedDocument.pairs`) and puts
the document together from their alignments (`TranslatedDocument.render`): hypothesis k of the document is made of
hypothesis k of each sentence (its last when it has fewer), the sentences of a piece joined in its layout
(`inference.sentences.SplitText.join`), each segment's markup placed by the alignments of its sentences put
together over the segment (`inference.alignment.joined_alignment`; by relative position without alignments).

Nothing here translates or aligns: the caller runs the model on what the plan hands out, synchronously
(`inference.markup.translate_document`) or through the server's batcher (`serving.documents`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .alignment import WordAlignment, joined_alignments
from .markup import MAX_DEPTH, Document, TagRules, split_document
from .sentences import SplitText, split_text

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from .loading import ModelStandIn


@dataclass(frozen=True)
class DocumentPlan:
    """One text cut into what the model translates: its ``pieces`` (the segments of a ``document``, or the text
    whole when ``document`` is None), each cut into its sentences."""

    pieces: tuple[str, ...]
    splits: tuple[SplitText, ...]
    document: Document | None = None

    @classmethod
    def of(
        cls,
        text: str,
        *,
        markup: bool = False,
        tags: TagRules | None = None,
        split_sentences: bool = False,
        language: str | None = None,
        newlines: bool = True,
        max_depth: int = MAX_DEPTH,
    ) -> DocumentPlan:
        """The plan of ``text`` (module docstring): with ``markup`` an HTML or XML document whose segments are
        cut by ``tags``; with ``split_sentences`` each piece cut into its sentences by the rules of ``language``
        (``newlines`` False: a line break is a space). `inference.markup.MarkupTooDeep` for a document nesting
        more than ``max_depth`` elements."""
        document = split_document(text, tags, max_depth) if markup else None
        pieces = tuple(segment.text for segment in document.segments) if document is not None else (text,)
        if split_sentences:
            splits = tuple(split_text(piece, language, newlines) for piece in pieces)
        else:
            splits = tuple(SplitText((piece,), (None,)) for piece in pieces)
        return cls(pieces, splits, document)

    @property
    def sentences(self) -> list[str]:
        """What the model translates, in order: every sentence of every piece."""
        return [sentence for split in self.splits for sentence in split.sentences]

    def translated(self, nbest: Sequence[Sequence[str]]) -> TranslatedDocument:
        """The plan with the n-best list of each of its `sentences` (in their order). `ValueError` for a number
        of lists that is not the number of sentences."""
        if len(nbest) != len(self.sentences):
            raise ValueError(f"{len(nbest)} n-best lists for {len(self.sentences)} sentences")
        found = iter(nbest)
        per_piece = tuple(tuple(list(next(found)) for _ in split.sentences) for split in self.splits)
        return TranslatedDocument(self, per_piece)


@dataclass(frozen=True)
class TranslatedDocument:
    """A `DocumentPlan` with the n-best list of each sentence of each piece (``nbest[p][s]``)."""

    plan: DocumentPlan
    nbest: tuple[tuple[list[str], ...], ...]

    @property
    def piece_nbest(self) -> list[list[str]]:
        """The n-best list of each piece: its sentences' hypotheses k joined (`SplitText.join_nbest`)."""
        return [split.join_nbest(nbest) for split, nbest in zip(self.plan.splits, self.nbest)]

    def _wholes(self, best_only: bool) -> dict[tuple[int, int], tuple[str, str, list[tuple[str, str]]]]:
        """By (piece p, hypothesis k): (piece, its hypothesis k, its (sentence, translation) pairs), for each
        hypothesis to align: of the segments holding inline markup (a document), or of the text (a plain text);
        only the best with ``best_only``."""
        plan, joined = self.plan, self.piece_nbest
        aligned = range(len(plan.pieces))
        if plan.document is not None:
            aligned = [p for p, segment in enumerate(plan.document.segments) if segment.has_markup]
        wholes = {}
        for p in aligned:
            hypotheses = plan.splits[p].hypotheses(self.nbest[p])
            for k, pairs in enumerate(hypotheses[:1] if best_only else hypotheses):
                wholes[(p, k)] = (plan.pieces[p], joined[p][k], pairs)
        return wholes

    def pairs(self, best_only: bool = False) -> list[tuple[str, str]]:
        """The (sentence, translation) pairs whose word alignments `render` (of a document) or `alignment` (of a
        plain text, ``best_only``) takes, in order: those of every hypothesis of each segment that holds inline
        markup (none for a document without any), or of each hypothesis of a plain text; only of the best
        hypothesis with ``best_only``."""
        return [pair for _, _, pairs in self._wholes(best_only).values() for pair in pairs]

    def render(self, alignments: Sequence[WordAlignment] | None = None) -> list[str]:
        """The n-best list of the text: of a document, hypothesis k with hypothesis k of each segment (its last
        when it has fewer) written in place, its markup placed by ``alignments`` (those of `pairs`, in order;
        None: by relative position, for an engine that returns no attention); of a plain text, its joined
        hypotheses."""
        joined = self.piece_nbest
        document = self.plan.document
        if document is None:
            return joined[0]
        keyed: dict[tuple[int, int], WordAlignment] = {}
        if alignments is not None:
            keyed = self._joined(self._wholes(best_only=False), alignments)
        count = max((len(hyps) for hyps in joined), default=1)
        rendered = []
        for k in range(count):
            chosen = [min(k, len(hyps) - 1) for hyps in joined]
            rendered.append(
                document.render(
                    [hyps[c] for hyps, c in zip(joined, chosen)],
                    [keyed.get((p, c)) for p, c in enumerate(chosen)],
                )
            )
        return rendered

    def alignment(self, alignments: Sequence[WordAlignment]) -> WordAlignment:
        """The word alignment of a plain text's best hypothesis with the text, from ``alignments`` (those of
        ``pairs(best_only=True)``, in order), put together over the text (`inference.alignment.joined_alignment`)."""
        if self.plan.document is not None:
            raise ValueError("a document's alignments place its markup: call render")
        return next(iter(self._joined(self._wholes(best_only=True), alignments).values()))

    @staticmethod
    def _joined(
        wholes: dict[tuple[int, int], tuple[str, str, list[tuple[str, str]]]],
        alignments: Sequence[WordAlignment],
    ) -> dict[tuple[int, int], WordAlignment]:
        """Each whole's alignment, by its key, put together from the alignments of its pairs (in order)."""
        count = sum(len(pairs) for _, _, pairs in wholes.values())
        if len(alignments) != count:
            raise ValueError(f"{len(alignments)} alignments for {count} (sentence, translation) pairs")
        return dict(zip(wholes, joined_alignments(list(wholes.values()), alignments)))


def translate_document(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    document: str,
    batch_size: int = 32,
    split_sentences: bool = False,
    language: str | None = None,
    max_depth: int = MAX_DEPTH,
    **generate_kwargs: Any,
) -> str:
    """``document`` (HTML or XML) translated with its markup (`inference.markup`), driven through its
    `DocumentPlan`: its segments (with ``split_sentences``, their sentences,
    `inference.sentences.split_text` with ``language``) batched through `inference.translate.translate_hypotheses`
    (``generate_kwargs`` as there; the best hypothesis of each), the sentences of the segments that hold inline
    markup aligned with their translations (`inference.alignment.align_words`; by relative position where the
    engine returns no attention). `inference.markup.MarkupTooDeep` for a document nesting more than ``max_depth``
    elements."""
    from .alignment import align_words, check_alignable
    from .translate import translate_hypotheses

    plan = DocumentPlan.of(
        document, markup=True, split_sentences=split_sentences, language=language, max_depth=max_depth
    )
    nbest = translate_hypotheses(
        model, tokenizer, plan.sentences, batch_size, scores=False, **generate_kwargs
    )
    translated = plan.translated([[hyps[0].text] for hyps in nbest])
    try:
        check_alignable(model)
        pairs = translated.pairs()
    except ValueError:
        pairs = []
    if not pairs:
        return translated.render()[0]
    found = align_words(model, tokenizer, [p[0] for p in pairs], [p[1] for p in pairs], batch_size)
    return translated.render(found)[0]
