"""LibreTranslate's API on the translation server (its contract: LibreTranslate's ``app.py``), for Mastodon,
Weblate, Discourse, ``libretranslatepy`` and the other clients that speak it.

    POST /translate        {"q": "..." | [...], "source": CODE | "auto", "target": CODE, "format": "text" | "html",
                           "alternatives": N, "api_key": ...} as JSON or as a form -> {"translatedText": ... (a list
                           for a list)}, with "alternatives" (N more hypotheses, a list per text for a list) when
                           N > 0 and "detectedLanguage" ({"language", "confidence"}, a list for a list) for "auto"
    POST /detect           {"q": "..."} -> [{"language": SOURCE, "confidence": PERCENT}]
    GET  /languages        [{"code", "name", "targets"}]: the model's source language and its target
    GET  /frontend/settings  the settings LibreTranslate's web page reads

POST /translate is LibreTranslate's when its body is a form or a JSON object with ``q`` (`serving.apis`); the same
routes are also under /libretranslate. Texts are decoded with the model's defaults (greedy or its beams), so a
reply equals the server's own /translate; ``alternatives`` asks for n-best lists (at least N + 1 beams).
``format=html`` translates the text nodes of the HTML and keeps its markup (`serving.apis.split_markup`).
``api_key`` is checked when the server has keys (`serving.apis.ApiGate`). Errors are ``{"error": message}``: 400 for a request the server
refuses (a missing field, a language it does not serve, a limit), 500 when translating fails, 503 while shutting
down.

Detection is honest about what one model can do: the server translates from one language only, so /detect and
``source=auto`` always answer the model's source language, with as confidence the share (in percent) of the
text's tokens that the model's vocabulary holds: how much of the text the model can read, not a language
identification.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from .apis import LIBRETRANSLATE_PREFIX, Api, add_routes, first, no_pair_message, read_fields
from .options import DecodingRequest, RequestError


def _error(err: RequestError) -> JSONResponse:
    # LibreTranslate answers 400 for every request it refuses
    status = 400 if err.status in (411, 413, 422) else err.status
    return JSONResponse({"error": err.message}, status_code=status)


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


def _options(api: Api, alternatives: int) -> DecodingRequest:
    """The model's defaults; with ``alternatives``, n-best lists of ``alternatives`` + 1 from at least as many
    beams."""
    if not alternatives:
        return DecodingRequest()
    wanted = alternatives + 1
    beams = api.generation_config.num_beams or 1
    return DecodingRequest(num_return_sequences=wanted, num_beams=max(beams, wanted))


def _check_languages(api: Api, source: str, target: str) -> str:
    """The source language of the request (the model's for "auto"); `RequestError` (400) for a pair the model
    does not translate."""
    pair = api.pair
    if pair is None:
        raise RequestError(400, no_pair_message())
    if source not in ("auto", pair[0]):
        raise RequestError(400, f"{source} is not supported: this server translates {pair[0]} to {pair[1]}")
    if target != pair[1]:
        raise RequestError(400, f"{target} is not supported: this server translates {pair[0]} to {pair[1]}")
    return pair[0]


def _language_entry(code: str, targets: list[str]) -> dict[str, Any]:
    return {"code": code, "name": code, "targets": targets}


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
            detected = _check_languages(api, str(source), str(target))
            texts = [q] if isinstance(q, str) else list(q)
            nbest = await api.translate_markup(
                texts, _options(api, alternatives), request, markup=text_format == "html"
            )
        except RequestError as err:
            return _error(err)
        reply: dict[str, Any] = {"translatedText": [hyps[0] for hyps in nbest]}
        if alternatives:
            reply["alternatives"] = [hyps[1 : alternatives + 1] for hyps in nbest]
        if source == "auto":
            reply["detectedLanguage"] = [
                {"confidence": api.read_share(text), "language": detected} for text in texts
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
            pair = api.pair
            if pair is None:
                raise RequestError(400, no_pair_message())
        except RequestError as err:
            return _error(err)
        return [{"confidence": api.read_share(q), "language": pair[0]}]

    async def languages() -> Any:
        pair = api.pair
        if pair is None:
            return []
        return [_language_entry(pair[0], [pair[1]]), _language_entry(pair[1], [])]

    async def frontend_settings() -> Any:
        pair = api.pair or ("auto", "auto")
        return {
            "charLimit": -1,
            "frontendTimeout": 500,
            "apiKeys": api.keyed,
            "keyRequired": api.keyed,
            "suggestions": False,
            "filesTranslation": False,
            "supportedFilesFormat": [],
            "language": {
                "source": {"code": pair[0], "name": pair[0]},
                "target": {"code": pair[1], "name": pair[1]},
            },
        }

    routes = [
        ("/detect", detect, ["POST"]),
        ("/languages", languages, ["GET", "POST"]),
        ("/frontend/settings", frontend_settings, ["GET"]),
    ]
    add_routes(app, "LibreTranslate", [("/translate", translate, ["POST"]), *routes], LIBRETRANSLATE_PREFIX)
    add_routes(app, "LibreTranslate", routes)
