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

With ``protect`` (the default), the spans that must come out as written (URLs, e-mail addresses, @mentions,
#hashtags, inline code, numbers with units, placeholders; in markup also ``<code>`` and ``translate="no"``:
`inference.protected`) are: a document's as elements kept as written of its segments, a plain text's by the
alignment of each sentence that holds one with its translation (`TranslatedDocument.guard_pairs`,
`TranslatedDocument.guarded`); a span the model copies more than once is kept once.

Nothing here translates or aligns: the caller runs the model on what the plan hands out, synchronously
(`inference.markup.translate_document`) or through the server's batcher (`serving.documents`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .alignment import WordAlignment, joined_alignments
from .markup import MAX_DEPTH, Document, Segment, TagRules, split_document
from .protected import guard, keep_once, kept_texts, protect_segment, render_guarded, split_protected
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
    # for each of `sentences`: the texts of its protected spans, and (of a plain text) its `protected.guard`
    kept: tuple[tuple[str, ...], ...] = ()
    guards: tuple[Segment | None, ...] = ()

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
        protect: bool = True,
    ) -> DocumentPlan:
        """The plan of ``text`` (module docstring): with ``markup`` an HTML or XML document whose segments are
        cut by ``tags``; with ``split_sentences`` each piece cut into its sentences by the rules of ``language``
        (``newlines`` False: a line break is a space); with ``protect`` its protected spans kept as written.
        `inference.markup.MarkupTooDeep` for a document nesting more than ``max_depth`` elements."""
        document = split_document(text, tags, max_depth) if markup else None
        if document is not None and protect:
            document = Document(
                [protect_segment(p) if isinstance(p, Segment) and p.text else p for p in document.parts]
            )
        pieces = tuple(segment.text for segment in document.segments) if document is not None else (text,)
        if split_sentences:
            cut = split_protected if protect else split_text
            splits = tuple(cut(piece, language, newlines) for piece in pieces)
        else:
            splits = tuple(SplitText((piece,), (None,)) for piece in pieces)
        if not protect:
            return cls(pieces, splits, document)
        if document is not None:
            kept = tuple(
                tuple(t for t in kept_texts(segment) if t in sentence)
                for segment, split in zip(document.segments, splits)
                for sentence in split.sentences
            )
            return cls(pieces, splits, document, kept)
        guards = tuple(guard(sentence) for split in splits for sentence in split.sentences)
        kept = tuple(tuple(kept_texts(found)) if found is not None else () for found in guards)
        return cls(pieces, splits, document, kept, guards)

    @property
    def sentences(self) -> list[str]:
        """What the model translates, in order: every sentence of every piece."""
        return [sentence for split in self.splits for sentence in split.sentences]

    def translated(self, nbest: Sequence[Sequence[str]]) -> TranslatedDocument:
        """The plan with the n-best list of each of its `sentences` (in their order). `ValueError` for a number
        of lists that is not the number of sentences."""
        if len(nbest) != len(self.sentences):
            raise ValueError(f"{len(nbest)} n-best lists for {len(self.sentences)} sentences")
        if self.kept:
            nbest = [[keep_once(hyp, kept) for hyp in hyps] for hyps, kept in zip(nbest, self.kept)]
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

    def _guarded(self) -> list[tuple[int, int, int, Segment]]:
        """(piece, sentence, hypothesis, guard) of each hypothesis of each sentence of a plain text that holds a
        protected span."""
        guards = iter(self.plan.guards)
        found = []
        for p, nbest in enumerate(self.nbest):
            for s, hyps in enumerate(nbest):
                sentence_guard = next(guards, None)
                if sentence_guard is not None:
                    found += [(p, s, k, sentence_guard) for k in range(len(hyps))]
        return found

    def guard_pairs(self) -> list[tuple[str, str]]:
        """The (sentence, translation) pairs whose word alignments `guarded` takes: every hypothesis of each
        sentence of a plain text that holds a protected span (none for a document, or without protection)."""
        return [(found.text, self.nbest[p][s][k]) for p, s, k, found in self._guarded()]

    def guarded(self, alignments: Sequence[WordAlignment] | None = None) -> TranslatedDocument:
        """The plain text's translations with their protected spans written as they are, placed by
        ``alignments`` (those of `guard_pairs`, in order; None: by relative position)."""
        wanted = self._guarded()
        if alignments is not None and len(alignments) != len(wanted):
            raise ValueError(f"{len(alignments)} alignments for {len(wanted)} guarded translations")
        nbest = [[list(hyps) for hyps in piece] for piece in self.nbest]
        for n, (p, s, k, found) in enumerate(wanted):
            nbest[p][s][k] = render_guarded(found, nbest[p][s][k], alignments[n] if alignments else None)
        return TranslatedDocument(self.plan, tuple(tuple(piece) for piece in nbest))

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


def translate_texts(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    batch_size: int = 32,
    split_sentences: bool = False,
    language: str | None = None,
    protect: bool = True,
    **generate_kwargs: Any,
) -> list[list[str]]:
    """The n-best list of each plain text, driven through its `DocumentPlan` (as the server's APIs do): with
    ``split_sentences`` translated sentence by sentence (`inference.sentences.split_text` with ``language``), with
    ``protect`` its protected spans written as they are, placed by the alignment of each sentence that holds one
    with its translation (by relative position where the engine returns no attention); ``generate_kwargs`` as
    `inference.translate.translate_hypotheses`'."""
    from .translate import translate_hypotheses

    plans = [
        DocumentPlan.of(text, split_sentences=split_sentences, language=language, protect=protect)
        for text in texts
    ]
    flat = [sentence for plan in plans for sentence in plan.sentences]
    found = iter(translate_hypotheses(model, tokenizer, flat, batch_size, scores=False, **generate_kwargs))
    translated = [plan.translated([[h.text for h in next(found)] for _ in plan.sentences]) for plan in plans]
    pairs = [document.guard_pairs() for document in translated]
    aligned = _aligned(
        model, tokenizer, [pair for own in pairs for pair in own], batch_size, _alignable(model)
    )
    links = iter(aligned or [])
    done = []
    for document, own in zip(translated, pairs):
        if own:
            document = document.guarded([next(links) for _ in own] if aligned is not None else None)
        done.append(document.render())
    return done


def _alignable(model: PreTrainedModel | ModelStandIn) -> bool:
    """Whether ``model``'s engine returns attention weights for word alignments
    (`inference.alignment.check_alignable`)."""
    from .alignment import check_alignable

    try:
        check_alignable(model)
    except ValueError:
        return False
    return True


def _aligned(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    pairs: Sequence[tuple[str, str]],
    batch_size: int,
    alignable: bool,
) -> list[WordAlignment] | None:
    """The word alignments of (sentence, translation) ``pairs`` (`inference.alignment.align_words`); None where
    the engine returns no attention (``alignable`` false, `_alignable`), or for no pairs."""
    from .alignment import align_words

    if not alignable or not pairs:
        return None
    return align_words(model, tokenizer, [p[0] for p in pairs], [p[1] for p in pairs], batch_size)


def translate_document(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    document: str,
    batch_size: int = 32,
    split_sentences: bool = False,
    language: str | None = None,
    max_depth: int = MAX_DEPTH,
    protect: bool = True,
    **generate_kwargs: Any,
) -> str:
    """``document`` (HTML or XML) translated with its markup (`inference.markup`), driven through its
    `DocumentPlan` (`translate_plans`; with ``split_sentences``, sentence by sentence by the rules of
    ``language``; with ``protect``, its protected spans kept as written, `inference.protected`).
    `inference.markup.MarkupTooDeep` for a document nesting more than ``max_depth`` elements."""
    plan = DocumentPlan.of(
        document,
        markup=True,
        split_sentences=split_sentences,
        language=language,
        max_depth=max_depth,
        protect=protect,
    )
    return translate_plans(model, tokenizer, [plan], batch_size, **generate_kwargs)[0]


def translate_plans(
    model: PreTrainedModel | ModelStandIn,
    tokenizer: PreTrainedTokenizerBase,
    plans: Sequence[DocumentPlan],
    batch_size: int = 32,
    progress: Callable[[int, int], None] | None = None,
    kept: Callable[[str], bool] | None = None,
    **generate_kwargs: Any,
) -> list[str]:
    """The documents of ``plans`` (of markup) translated: their sentences batched through
    `inference.translate.translate_hypotheses` (``generate_kwargs`` as there; the best hypothesis of each), the
    sentences of the segments that hold inline markup aligned with their translations
    (`inference.alignment.align_words`; by relative position where the engine returns no attention), in groups of
    plans of about 8 batches of sentences; ``progress(pieces done, pieces)`` after each group. A sentence for which
    ``kept`` is true is its own translation (it does not go to the model)."""
    from .translate import translate_hypotheses

    alignable = _alignable(model)
    total = sum(len(plan.pieces) for plan in plans)
    done = 0
    rendered: list[str] = []
    for group in _groups(plans, 8 * batch_size):
        sentences = [sentence for plan in group for sentence in plan.sentences]
        wanted = [s for s in sentences if kept is None or not kept(s)]
        found = translate_hypotheses(model, tokenizer, wanted, batch_size, scores=False, **generate_kwargs)
        best = iter([hyps[0].text] for hyps in found)
        translated = [
            plan.translated([[s] if kept is not None and kept(s) else next(best) for s in plan.sentences])
            for plan in group
        ]
        pairs = [document.pairs() for document in translated]
        aligned = _aligned(
            model, tokenizer, [pair for found in pairs for pair in found], batch_size, alignable
        )
        links = iter(aligned or [])
        for document, found in zip(translated, pairs):
            rendered.append(document.render([next(links) for _ in found] if aligned is not None else None)[0])
        done += sum(len(plan.pieces) for plan in group)
        if progress is not None:
            progress(done, total)
    return rendered


def _groups(plans: Sequence[DocumentPlan], sentences: int) -> list[list[DocumentPlan]]:
    """``plans`` in consecutive groups of about ``sentences`` sentences (a plan is never cut)."""
    groups: list[list[DocumentPlan]] = [[]]
    size = 0
    for plan in plans:
        if size >= sentences:
            groups.append([])
            size = 0
        groups[-1].append(plan)
        size += len(plan.sentences)
    return [group for group in groups if group]
