"""LibreTranslate's API on the translation server (its contract: LibreTranslate's ``app.py``), for Mastodon,
Weblate, Discourse, ``libretranslatepy`` and the other clients that speak it.

    POST /translate        {"q": "..." | [...], "source": CODE | "auto", "target": CODE, "format": "text" | "html",
                           "alternatives": N, "api_key": ...} as JSON or as a form -> {"translatedText": ... (a list
                           for a list)}, with "alternatives" (N more hypotheses, a list per text for a list) when
                           N > 0 and "detectedLanguage" ({"language", "confidence"}, a list for a list) for "auto"
    POST /detect           {"q": "..."} -> [{"language": SOURCE, "confidence": PERCENT}, ...], most confident first
    GET  /languages        [{"code", "name", "targets"}]: every language served, with the targets it translates into
    GET  /frontend/settings  the settings LibreTranslate's web page reads (with the file formats it may upload)
    POST /translate_file   multipart ``file``, ``source``, ``target``, ``api_key`` -> {"translatedFileUrl": URL}: the
                           file translated with its formatting kept (`inference.formats`), to download once from
                           URL (GET /download_file/NAME) within the server's keep time

POST /translate is LibreTranslate's when its body is a form or a JSON object with ``q`` (`serving.dialects`); the same
routes are also under /libretranslate. As LibreTranslate does, each text is translated sentence by sentence, its
line breaks kept (`inference.sentences`), decoded with the model's defaults (greedy or its beams), so a reply
equals the server's own /translate with ``split_sentences``; ``alternatives`` asks for n-best lists (at least
N + 1 beams), the hypotheses after the first in the order of their sequence scores (alternative k joins
hypothesis k + 1 of each sentence). LibreTranslate's API has no field for scores
(the server's own /translate gives them with ``scores``).
``format=html`` translates the text between block elements whole and puts the inline markup (links, emphasis)
back where the word alignments say (`inference.markup`); with ``alternatives``, each alternative is the document
with its markup placed in that hypothesis. URLs, e-mail addresses, @mentions, #hashtags, inline code, numbers
with units, placeholders and ``translate="no"`` content come out as written (`inference.protected`); the extra
field ``"protect": false`` asks for the raw translation.
``api_key`` is checked when the server has keys (`serving.middleware.ApiGate`). Errors are ``{"error": message}``: 400 for a request the server
refuses (a missing field, a language it does not serve, a limit), 500 when translating fails, 503 while shutting
down.

``source`` and ``target`` pick the model (`serving.lanes.Lanes.select`). Detection only tells which of the served
source languages a text is in: py3langid's probabilities restricted to them (`inference.languages.detect_language`,
offline, its model in its wheel); where py3langid knows none of them, the share (in percent) of the text's tokens
that each model's vocabulary holds (`serving.lanes.Lane.read_share`). ``source=auto`` sends each text to the model,
among those into ``target``, of the language detected (a multilingual model reads it as that language).
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from vanilla_transformer.inference.formats import FORMATS, DocumentError, file_format, supported

from .dialects import LIBRETRANSLATE_PREFIX, dialect_router, first, protect_field, read_fields
from .documents import plan_document, read_document, translate_documents, translate_file, uploaded_file
from .errors import error_reply
from .lanes import Lane, Lanes
from .options import DecodingRequest, RequestError
from .state import Server


def _error(err: RequestError) -> JSONResponse:
    return error_reply("libretranslate", err.status, err.message)


def _missing(name: str) -> RequestError:
    return RequestError(400, f"Invalid request: missing {name} parameter")


def _alternatives(value: Any) -> int:
    try:
        count = int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else -1
    except ValueError:
        count = -1
    if count < 0:
        raise RequestError(400, f"alternatives={value!r} is invalid: expected an integer >= 0")
    return count


def _options(lane: Lane, alternatives: int) -> DecodingRequest:
    """The model's defaults; with ``alternatives``, n-best lists of ``alternatives`` + 1 from at least as many
    beams."""
    if not alternatives:
        return DecodingRequest()
    wanted = alternatives + 1
    beams = lane.generation_config.num_beams or 1
    return DecodingRequest(num_return_sequences=wanted, num_beams=max(beams, wanted))


def languages_served(lanes: Lanes) -> list[dict[str, Any]]:
    """LibreTranslate's language list: every language served, in order, each with the targets it translates
    into."""
    targets: dict[str, list[str]] = {}
    for source, target in lanes.pairs:
        targets.setdefault(source, []).append(target)
        targets.setdefault(target, [])
    return [{"code": code, "name": code, "targets": found} for code, found in targets.items()]


def detect_languages(lanes: Lanes, text: str) -> list[dict[str, Any]]:
    """/detect: the source languages served, most likely first, with the language detector's probability in percent
    (`inference.languages.detect_language`); where it knows none of them, each with the largest share of ``text``
    a model from it reads (`serving.lanes.Lane.read_share`)."""
    from vanilla_transformer.inference.languages import detect_language

    sources = list(dict.fromkeys(source for lane in lanes for source in lane.sources()))
    detected = detect_language(text, sources)
    if detected:
        return [{"confidence": share, "language": code} for code, share in detected]
    confidence: dict[str, float] = {}
    for lane in lanes:
        if lane.pair is not None:
            share = lane.read_share(text)
            confidence[lane.pair[0]] = max(share, confidence.get(lane.pair[0], share))
    ranked = sorted(confidence.items(), key=lambda item: -item[1])
    return [{"confidence": share, "language": code} for code, share in ranked]


def _texts(fields: dict[str, Any], form: bool) -> tuple[Any, Any, Any, bool, int]:
    """(q, source, target, whether the format is html, alternatives) of a translate request; `RequestError`
    (400) for a missing or malformed field."""
    q = first(fields, "q", form)
    source = first(fields, "source", form)
    target = first(fields, "target", form)
    text_format = first(fields, "format", form) or "text"
    alternatives = _alternatives(first(fields, "alternatives", form) or 0)
    for name, value in (("q", q), ("source", source), ("target", target)):
        if not value:
            raise _missing(name)
    if not (isinstance(q, str) or (isinstance(q, list) and all(isinstance(t, str) for t in q))):
        raise RequestError(400, "Invalid request: q must be a string or a list of strings")
    if text_format not in ("text", "html"):
        raise RequestError(400, f"{text_format} format is not supported: use text or html")
    return q, source, target, text_format == "html", alternatives


async def translate(request: Request, state: Server) -> Any:
    try:
        fields, form = await read_fields(request)
        q, source, target, html, alternatives = _texts(fields, form)
        texts = [q] if isinstance(q, str) else list(q)
        found = state.lanes.select(str(source), str(target), need_pair=True)
        # source=auto: each text goes to the model, among those into the target, that reads most of it
        chosen = (
            await state.lanes.detect_each(texts, found, html, max_depth=state.limits.max_markup_depth)
            if source == "auto"
            else [(found[0], 100.0)] * len(texts)
        )
        nbest = await translate_documents(
            texts,
            [lane for lane, _ in chosen],
            lambda lane: _options(lane, alternatives),
            request,
            max_texts=state.limits.max_texts,
            max_depth=state.limits.max_markup_depth,
            markup=html,
            split_sentences=True,
            protect=protect_field(first(fields, "protect", form)),
        )
    except RequestError as err:
        return _error(err)
    reply: dict[str, Any] = {"translatedText": [hyps[0] for hyps in nbest]}
    if alternatives:
        reply["alternatives"] = [hyps[1 : alternatives + 1] for hyps in nbest]
    if source == "auto":
        reply["detectedLanguage"] = [
            {"confidence": share, "language": lane.pair[0] if lane.pair else source} for lane, share in chosen
        ]
    if isinstance(q, str):
        reply = {name: value[0] for name, value in reply.items()}
    return reply


async def detect(request: Request, state: Server) -> Any:
    try:
        fields, form = await read_fields(request)
        q = first(fields, "q", form)
        if not q or not isinstance(q, str):
            raise _missing("q")
        state.lanes.select(None, None, need_pair=True)
    except RequestError as err:
        return _error(err)
    return detect_languages(state.lanes, q)


async def languages(state: Server) -> Any:
    return languages_served(state.lanes)


async def frontend_settings(state: Server) -> Any:
    source, target = state.lanes.pairs[0] if state.lanes.pairs else ("auto", "auto")
    return {
        "charLimit": -1,
        "frontendTimeout": 500,
        "apiKeys": state.keyed,
        "keyRequired": state.keyed,
        "suggestions": False,
        "filesTranslation": True,
        "supportedFilesFormat": supported(),
        "language": {
            "source": {"code": source, "name": source},
            "target": {"code": target, "name": target},
        },
    }


async def translate_a_file(request: Request, state: Server) -> Any:
    try:
        fields, name, data = await uploaded_file(request, _missing)
        source, target = fields.get("source"), fields.get("target")
        for field_name, value in (("source", source), ("target", target)):
            if not value:
                raise _missing(field_name)
        try:
            fmt = file_format(name, data=data)
        except DocumentError as err:
            raise RequestError(400, str(err)) from None
        document = await read_document(data, fmt, state.limits)
        found = state.lanes.select(str(source), str(target), need_pair=True)
        text = " ".join(document.texts[:32])
        lane = (
            (await state.lanes.detect_each([text], found, True, max_depth=state.limits.max_markup_depth))[0][
                0
            ]
            if source == "auto"
            else found[0]
        )
        plans = await plan_document(document, lane, state.limits)
        translated = await translate_file(document, plans, lane, request, state.limits.max_texts)
    except RequestError as err:
        return _error(err)
    stem = re.sub(r"[^\w-]+", "_", PurePath(name).stem) or "document"
    job = state.files.done(
        "", f"{stem}.{target}.{document.output_format}", FORMATS[document.output_format][1], translated
    )
    return {"translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{job.id}.{job.name}"}


async def download_file(name: str, state: Server) -> Any:
    try:
        job = state.files.find(name.split(".")[0], "", "")
    except RequestError as err:
        return _error(err)
    return state.files.download(job)


# the routes served at the root and under /libretranslate; LibreTranslate's POST /translate only there (the root's
# POST /translate is shared, `serving.dialects.body_api`)
_shared = dialect_router(
    "LibreTranslate",
    [
        ("/detect", detect, ["POST"]),
        ("/languages", languages, ["GET", "POST"]),
        ("/frontend/settings", frontend_settings, ["GET"]),
        ("/translate_file", translate_a_file, ["POST"]),
        ("/download_file/{name}", download_file, ["GET"]),
    ],
)
router = dialect_router("LibreTranslate", [(f"{LIBRETRANSLATE_PREFIX}/translate", translate, ["POST"])])
router.include_router(_shared, prefix=LIBRETRANSLATE_PREFIX)
router.include_router(_shared)
