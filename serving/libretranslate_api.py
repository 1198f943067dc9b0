"""LibreTranslate's API on the translation server (its contract: LibreTranslate's ``app.py``), for Mastodon,
Weblate, Discourse, ``libretranslatepy`` and the other clients that speak it.

    POST /translate        {"q": "..." | [...], "source": CODE | "auto", "target": CODE, "format": "text" | "html",
                           "alternatives": N, "api_key": ...} as JSON or as a form -> {"translatedText": ... (a list
                           for a list)}, with "alternatives" (N more hypotheses, a list per text for a list) when
                           N > 0 and "detectedLanguage" ({"language", "confidence"}, a list for a list) for "auto"
    POST /detect           {"q": "..."} -> [{"language": SOURCE, "confidence": PERCENT}, ...], most confident first
    GET  /languages        [{"code", "name", "targets"}]: every language served, with the targets it translates into
    GET  /frontend/settings  the settings LibreTranslate's web page reads

POST /translate is LibreTranslate's when its body is a form or a JSON object with ``q`` (`serving.apis`); the same
routes are also under /libretranslate. As LibreTranslate does, each text is translated sentence by sentence, its
line breaks kept (`inference.sentences`), decoded with the model's defaults (greedy or its beams), so a reply
equals the server's own /translate with ``split_sentences``; ``alternatives`` asks for n-best lists (at least
N + 1 beams), the hypotheses after the first in the order of their sequence scores (alternative k joins
hypothesis k + 1 of each sentence). LibreTranslate's API has no field for scores
(the server's own /translate gives them with ``scores``).
``format=html`` translates the text between block elements whole and puts the inline markup (links, emphasis)
back where the word alignments say (`inference.markup`); with ``alternatives``, each alternative is the document
with its markup placed in that hypothesis.
``api_key`` is checked when the server has keys (`serving.apis.ApiGate`). Errors are ``{"error": message}``: 400 for a request the server
refuses (a missing field, a language it does not serve, a limit), 500 when translating fails, 503 while shutting
down.

``source`` and ``target`` pick the model (`serving.apis.Api.select`). Detection is honest about what the served
models can do: it only tells which of the served source languages a text is in, by the share (in percent) of the
text's tokens that each model's vocabulary holds (`serving.apis.Route.read_share`): how much of the text the
model can read, not a language identification. /detect lists each source language with its best share;
``source=auto`` sends each text to the model, among those into ``target``, that reads most of it.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from .apis import (
    LIBRETRANSLATE_PREFIX,
    Api,
    Route,
    add_routes,
    error_reply,
    first,
    read_fields,
)
from .options import DecodingRequest, RequestError


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


def _options(route: Route, alternatives: int) -> DecodingRequest:
    """The model's defaults; with ``alternatives``, n-best lists of ``alternatives`` + 1 from at least as many
    beams."""
    if not alternatives:
        return DecodingRequest()
    wanted = alternatives + 1
    beams = route.generation_config.num_beams or 1
    return DecodingRequest(num_return_sequences=wanted, num_beams=max(beams, wanted))


def languages_served(api: Api) -> list[dict[str, Any]]:
    """LibreTranslate's language list: every language served, in order, each with the targets it translates
    into."""
    targets: dict[str, list[str]] = {}
    for source, target in api.pairs:
        targets.setdefault(source, []).append(target)
        targets.setdefault(target, [])
    return [{"code": code, "name": code, "targets": found} for code, found in targets.items()]


def detect_languages(api: Api, text: str) -> list[dict[str, Any]]:
    """/detect: each source language served with the largest share of ``text`` a model from it reads
    (`serving.apis.Route.read_share`), most confident first."""
    confidence: dict[str, float] = {}
    for route in api.routes:
        if route.pair is not None:
            share = route.read_share(text)
            confidence[route.pair[0]] = max(share, confidence.get(route.pair[0], share))
    ranked = sorted(confidence.items(), key=lambda item: -item[1])
    return [{"confidence": share, "language": code} for code, share in ranked]


def register(app: FastAPI, api: Api) -> None:
    """Add LibreTranslate's routes to ``app``: at the root, and under /libretranslate (module docstring)."""

    async def translate(request: Request) -> Any:
        try:
            fields, form = await read_fields(request)
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
            texts = [q] if isinstance(q, str) else list(q)
            found = api.select(str(source), str(target), need_pair=True)
            # source=auto: each text goes to the model, among those into the target, that reads most of it
            html = text_format == "html"
            chosen = [
                api.detect(text, found, html) if source == "auto" else (found[0], 100.0) for text in texts
            ]
            nbest = await api.translate_markup(
                texts,
                [route for route, _ in chosen],
                lambda route: _options(route, alternatives),
                request,
                markup=html,
                split_sentences=True,
            )
        except RequestError as err:
            return _error(err)
        reply: dict[str, Any] = {"translatedText": [hyps[0] for hyps in nbest]}
        if alternatives:
            reply["alternatives"] = [hyps[1 : alternatives + 1] for hyps in nbest]
        if source == "auto":
            reply["detectedLanguage"] = [
                {"confidence": share, "language": route.pair[0] if route.pair else source}
                for route, share in chosen
            ]
        if isinstance(q, str):
            reply = {name: value[0] for name, value in reply.items()}
        return reply

    async def detect(request: Request) -> Any:
        try:
            fields, form = await read_fields(request)
            q = first(fields, "q", form)
            if not q or not isinstance(q, str):
                raise _missing("q")
            api.select(None, None, need_pair=True)
        except RequestError as err:
            return _error(err)
        return detect_languages(api, q)

    async def languages() -> Any:
        return languages_served(api)

    async def frontend_settings() -> Any:
        source, target = api.pairs[0] if api.pairs else ("auto", "auto")
        return {
            "charLimit": -1,
            "frontendTimeout": 500,
            "apiKeys": api.keyed,
            "keyRequired": api.keyed,
            "suggestions": False,
            "filesTranslation": False,
            "supportedFilesFormat": [],
            "language": {
                "source": {"code": source, "name": source},
                "target": {"code": target, "name": target},
            },
        }

    routes = [
        ("/detect", detect, ["POST"]),
        ("/languages", languages, ["GET", "POST"]),
        ("/frontend/settings", frontend_settings, ["GET"]),
    ]
    add_routes(app, "LibreTranslate", [("/translate", translate, ["POST"]), *routes], LIBRETRANSLATE_PREFIX)
    add_routes(app, "LibreTranslate", routes)
