"""Texts translated as documents through the server's lanes: each text's `inference.documents.DocumentPlan` (an
HTML or XML document cut into segments, with ``split_sentences`` each piece cut into sentences) driven through the
batcher, the same plan `vanilla-transformer translate --format html` drives synchronously
(`inference.documents.translate_document`), so both give the same output for the same document.

The sentences of the texts of each model go to its lane at once, in slices of the server's ``max_texts`` (which
sentences do not count toward), the models at once; the sentences of the segments that hold inline markup are
then aligned with their translations, each model's at once (markup placed by relative position where its engine
returns no attention).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from fastapi import Request

from vanilla_transformer.inference.alignment import WordAlignment
from vanilla_transformer.inference.documents import DocumentPlan, TranslatedDocument
from vanilla_transformer.inference.markup import MAX_DEPTH, MarkupTooDeep, TagRules

from .lanes import Lane
from .options import DecodingRequest, RequestError


async def translate_documents(
    texts: list[str],
    lanes: Sequence[Lane],
    options: Callable[[Lane], DecodingRequest],
    connection: Request,
    *,
    max_texts: int,
    markup: bool,
    split_sentences: bool = False,
    newlines: bool = True,
    tags: TagRules | None = None,
    max_depth: int = MAX_DEPTH,
) -> list[list[str]]:
    """The n-best lists of ``texts``, text i by ``lanes[i]`` with ``options(lane)``: with ``markup`` each text is
    HTML or XML translated by segments with its inline markup put back (`inference.markup`; ``tags``: the caller's
    `TagRules`); with ``split_sentences`` each text (each segment) is translated sentence by sentence and put back
    together (`inference.sentences`; ``newlines`` False: line breaks are spaces), hypothesis k of the whole made of
    hypothesis k of each sentence (its last when it has fewer). Every text, and with ``markup`` every segment,
    counts toward ``max_texts`` (`RequestError` 413); sentences do not. A document nesting more than ``max_depth``
    elements is refused (`RequestError` 413). Parsing and rendering run in a worker thread, never on the event
    loop."""
    plans = await plan_documents(
        texts,
        lanes,
        markup=markup,
        split_sentences=split_sentences,
        newlines=newlines,
        tags=tags,
        max_depth=max_depth,
    )
    check_count(plans, max_texts)
    translated = await translate_plans(plans, lanes, options, connection, max_texts)
    if not markup:
        return [document.render() for document in translated]
    aligned = await align_pairs([document.pairs() for document in translated], lanes)
    return await asyncio.to_thread(
        lambda: [document.render(found) for document, found in zip(translated, aligned)]
    )


def check_count(plans: Sequence[DocumentPlan], max_texts: int) -> None:
    """`RequestError` (413) when the plans have more pieces (texts, or the segments of documents) than
    ``max_texts``."""
    count = sum(len(plan.pieces) for plan in plans)
    if count > max_texts:
        markup = any(plan.document is not None for plan in plans)
        what = "text segments in its markup (text between block elements)" if markup else "texts"
        raise RequestError(
            413,
            f"the request has {count} {what}, more than the server's limit max_texts={max_texts}: split it",
        )


async def plan_documents(
    texts: list[str],
    lanes: Sequence[Lane],
    *,
    markup: bool,
    split_sentences: bool,
    newlines: bool = True,
    tags: TagRules | None = None,
    max_depth: int = MAX_DEPTH,
) -> list[DocumentPlan]:
    """The `DocumentPlan` of each text, its sentences cut by the rules of its lane's source language, in a worker
    thread (linear in the texts' length, but up to a few hundred milliseconds for a request at
    max_request_bytes); `RequestError` (413) for a document nesting more than ``max_depth`` elements."""

    def plans() -> list[DocumentPlan]:
        return [
            DocumentPlan.of(
                text,
                markup=markup,
                tags=tags,
                split_sentences=split_sentences,
                language=lane.pair[0] if lane.pair else None,
                newlines=newlines,
                max_depth=max_depth,
            )
            for text, lane in zip(texts, lanes)
        ]

    try:
        return await asyncio.to_thread(plans) if split_sentences or markup else plans()
    except MarkupTooDeep as err:
        raise RequestError(413, str(err)) from err


async def translate_plans(
    plans: Sequence[DocumentPlan],
    lanes: Sequence[Lane],
    options: Callable[[Lane], DecodingRequest],
    connection: Request,
    max_texts: int,
) -> list[TranslatedDocument]:
    """Each plan with the n-best lists of its sentences, plan i by ``lanes[i]`` (`Lane.translate_texts` with
    ``options(lane)``): the sentences of each lane's plans in slices of at most ``max_texts``, every slice of
    every lane submitted at once."""
    groups = _groups(lanes)
    jobs = []
    for members in groups.values():
        lane = lanes[members[0]]
        sentences = [sentence for i in members for sentence in plans[i].sentences]
        slices = [sentences[s : s + max_texts] for s in range(0, len(sentences), max_texts)]
        jobs.append(
            asyncio.gather(*(lane.translate_texts(part, options(lane), connection) for part in slices))
        )
    done = await asyncio.gather(*jobs)
    translated: dict[int, TranslatedDocument] = {}
    for members, parts in zip(groups.values(), done):
        nbest = iter(hyps for part in parts for hyps in part)
        for i in members:
            translated[i] = plans[i].translated([next(nbest) for _ in plans[i].sentences])
    return [translated[i] for i in range(len(plans))]


async def align_pairs(
    pairs: Sequence[list[tuple[str, str]]], lanes: Sequence[Lane]
) -> list[list[WordAlignment] | None]:
    """The word alignments of the (source, translation) ``pairs`` of each text by its lane (`Lane.align_words`),
    each lane's at once; None for the texts of a lane whose engine returns no attention."""
    aligned: list[list[WordAlignment] | None] = [None] * len(pairs)
    for members in _groups(lanes).values():
        lane = lanes[members[0]]
        wanted = [pair for i in members for pair in pairs[i]]
        if not wanted or not lane.alignable:
            continue
        found = iter(await lane.align_words([p[0] for p in wanted], [p[1] for p in wanted]))
        for i in members:
            aligned[i] = [next(found) for _ in pairs[i]]
    return aligned


def _groups(lanes: Sequence[Lane]) -> dict[int, list[int]]:
    """The indices of the texts of each lane (by its identity), in order."""
    groups: dict[int, list[int]] = {}
    for i, lane in enumerate(lanes):
        groups.setdefault(id(lane), []).append(i)
    return groups
