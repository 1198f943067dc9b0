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
from vanilla_transformer.inference.formats import (
    DocumentError,
    FileDocument,
    FileLimits,
    TooLarge,
    plan_file,
    read_file,
    untranslatable,
)
from vanilla_transformer.inference.markup import MAX_DEPTH, MarkupTooDeep, TagRules

from .lanes import Lane
from .options import DecodingRequest, Limits, RequestError


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
    protect: bool = True,
) -> list[list[str]]:
    """The n-best lists of ``texts``, text i by ``lanes[i]`` with ``options(lane)``: with ``markup`` each text is
    HTML or XML translated by segments with its inline markup put back (`inference.markup`; ``tags``: the caller's
    `TagRules`); with ``split_sentences`` each text (each segment) is translated sentence by sentence and put back
    together (`inference.sentences`; ``newlines`` False: line breaks are spaces), hypothesis k of the whole made of
    hypothesis k of each sentence (its last when it has fewer). Every text, and with ``markup`` every segment,
    counts toward ``max_texts`` (`RequestError` 413); sentences do not. A document nesting more than ``max_depth``
    elements is refused (`RequestError` 413). With ``protect``, the spans that must not be translated (URLs, e-mail
    addresses, mentions, hashtags, inline code, numbers with units, placeholders, ``translate="no"``) come out as
    written (`inference.protected`). Parsing and rendering run in a worker thread, never on the event loop."""
    plans = await plan_documents(
        texts,
        lanes,
        markup=markup,
        split_sentences=split_sentences,
        newlines=newlines,
        tags=tags,
        max_depth=max_depth,
        protect=protect,
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
    protect: bool = True,
) -> list[DocumentPlan]:
    """The `DocumentPlan` of each text, its sentences cut by the rules of its lane's source language, its protected
    spans kept with ``protect``, in a worker thread (up to a few seconds for a request at max_request_bytes);
    `RequestError` (413) for a document nesting more than ``max_depth`` elements."""

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
                protect=protect,
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
    kept: Callable[[str], bool] | None = None,
) -> list[TranslatedDocument]:
    """Each plan with the n-best lists of its sentences, plan i by ``lanes[i]`` (`Lane.translate_texts` with
    ``options(lane)``): the sentences of each lane's plans in slices of at most ``max_texts``, every slice of
    every lane submitted at once; a sentence for which ``kept`` is true is its own translation; the protected spans
    of a plain text then placed by the alignment of its sentences that hold one
    (`inference.documents.TranslatedDocument.guarded`)."""
    groups = _groups(lanes)
    jobs = []
    for members in groups.values():
        lane = lanes[members[0]]
        sentences = [s for i in members for s in plans[i].sentences if kept is None or not kept(s)]
        slices = [sentences[s : s + max_texts] for s in range(0, len(sentences), max_texts)]
        jobs.append(
            asyncio.gather(*(lane.translate_texts(part, options(lane), connection) for part in slices))
        )
    done = await asyncio.gather(*jobs)
    translated: dict[int, TranslatedDocument] = {}
    for members, parts in zip(groups.values(), done):
        nbest = iter(hyps for part in parts for hyps in part)
        for i in members:
            translated[i] = plans[i].translated(
                [[s] if kept is not None and kept(s) else next(nbest) for s in plans[i].sentences]
            )
    found = [translated[i] for i in range(len(plans))]
    guarded = [document.guard_pairs() for document in found]
    if not any(guarded):
        return found
    aligned = await align_pairs(guarded, lanes)
    return [
        document.guarded(alignments) if pairs else document
        for document, pairs, alignments in zip(found, guarded, aligned)
    ]


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


def file_limits(limits: Limits) -> FileLimits:
    """The bounds of a document file on a server with ``limits``: its ``max_file_bytes``,
    ``max_file_unzipped_bytes`` and ``max_file_paragraphs``."""
    return FileLimits(
        max_bytes=limits.max_file_bytes,
        max_unzipped_bytes=limits.max_file_unzipped_bytes,
        max_paragraphs=limits.max_file_paragraphs,
    )


async def read_document(
    data: bytes, fmt: str, limits: Limits, output_format: str | None = None
) -> FileDocument:
    """A file read by its format (`inference.formats.read_file`) in a worker thread; `RequestError` 413 for one
    over the limits, 400 for one its reader cannot read."""
    try:
        return await asyncio.to_thread(read_file, data, fmt, file_limits(limits), output_format)
    except TooLarge as err:
        raise RequestError(413, str(err)) from None
    except DocumentError as err:
        raise RequestError(400, str(err)) from None


async def plan_document(document: FileDocument, lane: Lane, limits: Limits) -> list[DocumentPlan]:
    """The plans of a document's texts (`inference.formats.plan_file`, sentences by the rules of the lane's
    source language) in a worker thread; `RequestError` 413 for more paragraphs than the limit."""
    language = lane.pair[0] if lane.pair else None
    try:
        return await asyncio.to_thread(plan_file, document, file_limits(limits), True, language)
    except (TooLarge, MarkupTooDeep) as err:
        raise RequestError(413, str(err)) from None


async def translate_file(
    document: FileDocument,
    plans: list[DocumentPlan],
    lane: Lane,
    connection: Request,
    max_texts: int,
    options: DecodingRequest | None = None,
) -> bytes:
    """The document of ``plans`` translated by ``lane`` with ``options`` (default: the model's defaults; a DeepL
    glossary's terms, `serving.glossary_store.glossary_for`), its markup placed by the word alignments, written as
    its file (in a worker thread)."""
    lanes = [lane] * len(plans)
    wanted = options if options is not None else DecodingRequest()
    translated = await translate_plans(
        plans, lanes, lambda lane: wanted, connection, max_texts, kept=untranslatable
    )
    aligned = await align_pairs([done.pairs() for done in translated], lanes)

    def written() -> bytes:
        return document.write([found.render(alignments)[0] for found, alignments in zip(translated, aligned)])

    return await asyncio.to_thread(written)


def detached() -> Request:
    """The connection of a document translated in the background: no client waits on it, so none can leave."""

    async def never() -> dict:
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    return Request({"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""}, never)


async def uploaded_file(
    request: Request, missing: Callable[[str], RequestError]
) -> tuple[dict[str, str], str, bytes]:
    """The string fields, the file name and the bytes of a multipart upload's ``file`` (the form is closed, its
    spooled copy gone); ``missing(name)`` for a body without a file."""
    from starlette.datastructures import UploadFile

    if not request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
        raise RequestError(400, "send the file as multipart/form-data with the field file")
    try:
        form = await request.form()
    except Exception as err:  # noqa: BLE001 - a malformed multipart body is the client's
        raise RequestError(400, f"malformed multipart body: {err}") from None
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise missing("file")
        fields = {name: value for name, value in form.items() if isinstance(value, str)}
        return fields, upload.filename or "", await upload.read()
    finally:
        await form.close()
