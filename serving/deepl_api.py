"""DeepL's API v2 on the translation server, for the ``deepl`` SDKs (``deepl.Translator(key, server_url=URL)``)
and the tools that speak DeepL.

    POST /v2/translate   JSON or form: ``text`` (repeated in a form), ``target_lang``, ``source_lang``,
                         ``tag_handling`` (html | xml) -> {"translations": [{"detected_source_language", "text",
                         "billed_characters"}]}
    GET  /v2/languages   ``type`` source | target (query string or body) -> [{"language", "name"}]
                         (targets with "supports_formality")
    GET  /v2/usage       {"character_count": characters translated since the server started,
                         "character_limit": 1000000000000 (no limit)}
    POST /v2/document    multipart ``file`` (``filename``), ``target_lang``, ``source_lang``, ``output_format``,
                         ``glossary_id``
                         -> {"document_id", "document_key"}: the file (`inference.formats`) is read at once (a
                         file that cannot be read is refused here) and translated in the background
    GET|POST /v2/document/{document_id}         ``document_key`` -> {"document_id", "status": queued |
                         translating | done | error, "seconds_remaining" (an estimate), "billed_characters",
                         "error_message"}; it waits up to a few seconds for a document about to be done
    GET|POST /v2/document/{document_id}/result  ``document_key`` -> the translated file (503 until it is done);
                         the document is then deleted

Documents (`serving.files.FileJobs`) are kept in memory, for the key that uploaded them only, until downloaded or
expired; ``output_format`` is the format's own (a file is written in the format it came in), for a PDF ``docx``
(the default) or ``txt`` (its extracted text translated, `inference.formats.pdf`).

DeepL's codes name the model's languages by their first part, in any case: ``EN-US`` and ``EN-GB`` are ``en``,
``ZH`` and ``ZH-HANS`` are ``zh``. ``source_lang`` and ``target_lang`` pick the model; without ``source_lang``,
each text goes to the model, among those into ``target_lang``, of its detected language (`serving.lanes.Lanes.detect`). ``tag_handling``
translates the text between block elements whole and puts the inline markup back where the word alignments say
(`inference.markup`). ``split_sentences`` is DeepL's: "1" (the default, but with ``tag_handling=html``) translates
sentence by sentence, cut at punctuation and line breaks (kept), "nonewlines" (the default with
``tag_handling=html``) at punctuation only, "0" each text (each segment) whole (`inference.sentences`). With ``tag_handling``, ``splitting_tags`` name
elements that end a segment, ``non_splitting_tags`` elements that never do, and ``ignore_tags`` elements kept as
written (`inference.markup.TagRules`; comma-separated names). ``glossary_id`` (with ``source_lang``) translates
with the terms of one of the key's glossaries (`serving.glossary_store`; `serving.glossaries` serves /v2/glossaries). URLs, e-mail
addresses, mentions, hashtags, inline code, numbers with units, placeholders and ``translate="no"`` content come out
as written (`inference.protected`); the extra field ``protect`` false asks for the raw translation. DeepL's other
options (formality, context, outline_detection...) are accepted and have no effect. Texts are decoded with the model's defaults, so a reply equals the
server's own /translate (with ``split_sentences``); DeepL's reply has no field for a score, and gets
none (the server's own /translate gives them with ``scores``). The ``Authorization: DeepL-Auth-Key KEY`` header
(or the legacy ``auth_key`` field, in the query string or the body) is checked when the server has keys
(`serving.middleware.ApiGate`). Errors are DeepL's ``{"message": ...}``: 400 for a request the server refuses
(413 for one over its size limits), 500 when translating fails, 503 while shutting down.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import PurePath
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from vanilla_transformer.inference.formats import FORMATS, DocumentError, file_format
from vanilla_transformer.inference.markup import MAX_DEPTH, TagRules

from .dialects import dialect_router, first, protect_field, read_fields
from .documents import (
    detached,
    plan_document,
    read_document,
    translate_documents,
    translate_file,
    uploaded_file,
)
from .errors import error_reply
from .files import FileJob, owner_of
from .glossary_store import glossary_for
from .keys import request_key
from .lanes import Lane, Lanes
from .options import DecodingRequest, RequestError
from .state import Server

# what /v2/usage reports as the limit: DeepL's figure for an account without one
NO_CHARACTER_LIMIT = 10**12
# the regional variants DeepL lists (and its SDKs require) for a target language
TARGET_VARIANTS = {"en": ("EN-GB", "EN-US"), "pt": ("PT-BR", "PT-PT")}
NAMES = ("source_lang", "target_lang")


def _error(err: RequestError) -> JSONResponse:
    return error_reply("deepl", err.status, err.message)


def model_language(code: str) -> str:
    """The model's language code of a DeepL language code: its first part, lower case (``EN-US`` -> ``en``)."""
    return code.split("-")[0].strip().lower()


def _tag_names(fields: dict[str, Any], name: str) -> list[str]:
    """The tag names of the field ``name``: comma-separated, in one value or several (a form's repeated field, a
    JSON list). `RequestError` (400) for anything else."""
    value = fields.get(name)
    values = [] if value is None else value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in values):
        raise RequestError(400, f"Value for '{name}' not supported: send comma-separated tag names")
    return [tag for v in values for tag in v.split(",")]


async def _lanes(
    lanes: Lanes,
    texts: list[str],
    source: Any,
    target: Any,
    markup: bool,
    tags: TagRules | None = None,
    max_depth: int = MAX_DEPTH,
) -> list[Lane]:
    """The model of each text: the one from ``source_lang`` into ``target_lang``; without ``source_lang``, the
    one among the models into ``target_lang`` that reads most of the text (`serving.lanes.Lanes.detect_each`, in a
    worker thread).
    `RequestError` (400) for languages the server does not translate, (413) for markup nesting more than
    ``max_depth`` elements."""
    if not target or not isinstance(target, str):
        raise RequestError(400, "Value for 'target_lang' not supported or missing: send target_lang")
    if source is not None and not isinstance(source, str):
        raise RequestError(400, "Value for 'source_lang' not supported: send a language code")
    wanted = model_language(source) if source else None
    found = lanes.select(wanted, model_language(target), NAMES, need_pair=True)
    if len(found) == 1:
        return [found[0]] * len(texts)
    return [lane for lane, _ in await lanes.detect_each(texts, found, markup, tags, max_depth)]


def _request(fields: dict[str, Any], form: bool) -> tuple[list[str], Any, str, TagRules]:
    """(texts, tag_handling, split_sentences, tag rules) of a translate request; `RequestError` (400) for a
    missing or malformed field."""
    texts = fields.get("text")
    texts = [texts] if isinstance(texts, str) else texts
    if not texts or not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise RequestError(400, "Value for 'text' not provided: send one or more texts")
    tags = first(fields, "tag_handling", form)
    if tags not in (None, "", "html", "xml"):
        raise RequestError(400, f"Value for 'tag_handling' not supported: {tags!r} (use html or xml)")
    split = first(fields, "split_sentences", form)
    split = str(split) if split is not None else ("nonewlines" if tags == "html" else "1")
    if split not in ("0", "1", "nonewlines"):
        raise RequestError(
            400, f"Value for 'split_sentences' not supported: {split!r} (use 0, 1 or nonewlines)"
        )
    rules = TagRules.of(
        *(_tag_names(fields, name) for name in ("splitting_tags", "non_splitting_tags", "ignore_tags"))
    )
    return texts, tags, split, rules


async def translate(request: Request, state: Server) -> Any:
    try:
        fields, form = await read_fields(request)
        texts, tags, split, rules = _request(fields, form)
        source, target = first(fields, "source_lang", form), first(fields, "target_lang", form)
        lanes = await _lanes(
            state.lanes, texts, source, target, bool(tags), rules, state.limits.max_markup_depth
        )
        glossary_id = first(fields, "glossary_id", form)
        options = DecodingRequest()
        if glossary_id is not None:
            options = await glossary_for(
                request,
                state.glossaries,
                glossary_id,
                model_language(source) if source else None,
                model_language(target),
            )
        nbest = await translate_documents(
            texts,
            lanes,
            lambda lane: options,
            request,
            max_texts=state.limits.max_texts,
            max_depth=state.limits.max_markup_depth,
            markup=bool(tags),
            split_sentences=split != "0",
            newlines=split == "1",
            tags=rules,
            protect=protect_field(first(fields, "protect", form)),
        )
    except RequestError as err:
        return _error(err)
    state.characters.add(sum(len(text) for text in texts))
    return {
        "translations": [
            {
                "detected_source_language": lane.pair[0].upper() if lane.pair else "",
                "text": hyps[0],
                "billed_characters": len(text),
            }
            for text, hyps, lane in zip(texts, nbest, lanes)
        ]
    }


async def languages(request: Request, state: Server) -> Any:
    kind = request.query_params.get("type")
    if kind is None and (request.method == "POST" or request.headers.get("content-type")):
        try:
            fields, form = await read_fields(request)
        except RequestError as err:
            return _error(err)
        kind = first(fields, "type", form)
    kind = kind or "source"
    if kind not in ("source", "target"):
        return _error(RequestError(400, f"Value for 'type' not supported: {kind!r} (use source or target)"))
    if kind == "source":
        sources = dict.fromkeys(source for source, _ in state.lanes.pairs)
        return [{"language": code.upper(), "name": code} for code in sources]
    targets = dict.fromkeys(target for _, target in state.lanes.pairs)
    return [
        {"language": code, "name": target, "supports_formality": False}
        for target in targets
        for code in TARGET_VARIANTS.get(target, (target.upper(),))
    ]


async def usage(state: Server) -> Any:
    return {"character_count": state.characters.count, "character_limit": NO_CHARACTER_LIMIT}


# how long a status request waits for a document about to be done (the SDKs poll every 5 s)
STATUS_WAIT_S = 3.0


def _missing_field(name: str) -> RequestError:
    return RequestError(400, f"Value for '{name}' not provided: send it with the file")


async def _owner(request: Request) -> str:
    """The owner of the request's documents: its key's (read before its form, the body kept for it)."""
    return owner_of(await request_key("deepl", dict(request.scope), await request.body()))


async def upload_document(request: Request, state: Server) -> Any:
    try:
        owner = await _owner(request)
        fields, name, data = await uploaded_file(request, _missing_field)
        name = fields.get("filename") or name
        try:
            fmt = file_format(name, data=data)
        except DocumentError as err:
            raise RequestError(400, str(err)) from None
        document = await read_document(data, fmt, state.limits, fields.get("output_format") or None)
        text = " ".join(document.texts[:32])
        source, target = fields.get("source_lang"), fields.get("target_lang")
        limit = state.limits.max_markup_depth
        (lane,) = await _lanes(state.lanes, [text], source, target, True, max_depth=limit)
        glossary_id = fields.get("glossary_id")
        options = DecodingRequest()
        if glossary_id is not None:
            source = fields.get("source_lang")
            options = await glossary_for(
                request,
                state.glossaries,
                glossary_id,
                model_language(source) if source else None,
                model_language(fields.get("target_lang") or ""),
            )
        plans = await plan_document(document, lane, state.limits)
        characters = sum(len(piece) for plan in plans for piece in plan.pieces)
        limits = state.limits

        async def work() -> bytes:
            return await translate_file(document, plans, lane, detached(), limits.max_texts, options)

        stem = PurePath(name).stem or "document"
        out = document.output_format
        job = state.files.submit(owner, f"{stem}.{out}", FORMATS[out][1], characters, work)
    except RequestError as err:
        return _error(err)
    state.characters.add(characters)
    return {"document_id": job.id, "document_key": job.key}


async def _job(request: Request, state: Server, document_id: str) -> FileJob:
    """The job ``document_id`` of the request's key, read with its ``document_key`` (body or query string)."""
    owner = await _owner(request)
    key = request.query_params.get("document_key")
    if key is None and request.method == "POST":
        fields, form = await read_fields(request)
        key = first(fields, "document_key", form)
    if not isinstance(key, str) or not key:
        raise RequestError(400, "Value for 'document_key' not provided: send the key /v2/document returned")
    return state.files.find(document_id, key, owner)


async def document_status(document_id: str, request: Request, state: Server) -> Any:
    try:
        job = await _job(request, state, document_id)
    except RequestError as err:
        return _error(err)
    deadline = time.monotonic() + STATUS_WAIT_S
    while job.status in ("queued", "translating") and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    reply: dict[str, Any] = {"document_id": job.id, "status": job.status}
    if job.status in ("queued", "translating"):
        reply["seconds_remaining"] = state.files.seconds_remaining(job)
    elif job.status == "done":
        reply["billed_characters"] = job.characters
    else:
        reply["error_message"] = job.error
    return reply


async def document_result(document_id: str, request: Request, state: Server) -> Any:
    try:
        job = await _job(request, state, document_id)
        if job.status != "done":
            raise RequestError(503, f"Document not ready: its status is {job.status}")
    except RequestError as err:
        return _error(err)
    return state.files.download(job)


router = dialect_router(
    "DeepL",
    [
        ("/v2/translate", translate, ["POST"]),
        ("/v2/languages", languages, ["GET", "POST"]),
        ("/v2/usage", usage, ["GET", "POST"]),
        ("/v2/document", upload_document, ["POST"]),
        ("/v2/document/{document_id}", document_status, ["GET", "POST"]),
        ("/v2/document/{document_id}/result", document_result, ["GET", "POST"]),
    ],
)
