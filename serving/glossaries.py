"""DeepL's glossary API on the translation server, for the ``deepl`` SDKs' ``create_glossary``, ``list_glossaries``,
``get_glossary``, ``get_glossary_entries``, ``delete_glossary`` and ``translate_text(..., glossary=...)``.

    POST   /v2/glossaries                  JSON or form: ``name``, ``source_lang``, ``target_lang``, ``entries``,
                                           ``entries_format`` (tsv | csv) -> 201 and the glossary's information:
                                           {"glossary_id", "name", "ready", "source_lang", "target_lang",
                                           "creation_time", "entry_count"}
    GET    /v2/glossaries                  {"glossaries": [information, ...]}
    GET    /v2/glossaries/{id}             the glossary's information
    GET    /v2/glossaries/{id}/entries     its entries as TSV (``text/tab-separated-values``)
    DELETE /v2/glossaries/{id}             204
    GET    /v2/glossary-language-pairs     {"supported_languages": [{"source_lang", "target_lang"}, ...]}: the
                                           language pairs of the served models

A glossary's entries are its source -> target terms (`inference.glossary.Glossary`): TSV ``source<TAB>target`` or
CSV ``source,target`` (DeepL's optional third and fourth columns, the languages, must name the glossary's), one
per line. ``glossary_id`` on /v2/translate (`serving.glossary_store.glossary_for`, for /v2/document too) translates with its terms
by the lexically constrained beam search (`inference.constraints`): each target term whose source term occurs in
a text comes out in its translation; the server's own glossary (serve --glossary) applies beneath it.

Glossaries are kept in the server's memory, per API key, and bounded (`serving.glossary_store`, where their rules
are).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from .deepl_api import model_language
from .dialects import dialect_router, first, read_fields
from .errors import error_reply
from .glossary_store import ENTRY_FORMATS, owner_of, parse_entries
from .options import RequestError
from .state import Server


def _error(err: RequestError) -> JSONResponse:
    return error_reply("deepl", err.status, err.message)


def _language(fields: dict[str, Any], name: str, form: bool) -> str:
    """A language field of a create request as a model's code (``EN-US`` -> ``en``); `RequestError` (400)."""
    value = first(fields, name, form)
    if not value or not isinstance(value, str):
        raise RequestError(400, f"Value for '{name}' not provided: send a language code")
    return model_language(value)


async def create(request: Request, state: Server) -> Any:
    try:
        fields, form = await read_fields(request)
        name, entries = first(fields, "name", form), first(fields, "entries", form)
        entries_format = first(fields, "entries_format", form) or "tsv"
        if not name or not isinstance(name, str):
            raise RequestError(400, "Value for 'name' not provided: name the glossary")
        if not isinstance(entries, str):
            raise RequestError(400, "Value for 'entries' not provided: send the entries as TSV or CSV")
        if entries_format not in ENTRY_FORMATS:
            raise RequestError(
                400, f"Value for 'entries_format' not supported: {entries_format!r} (tsv or csv)"
            )
        languages = (_language(fields, "source_lang", form), _language(fields, "target_lang", form))
        if languages not in state.lanes.pairs:
            served = ", ".join(f"{s}->{t}" for s, t in state.lanes.pairs)
            raise RequestError(
                400,
                f"Unsupported glossary source and target language pair {languages}: the server has {served}",
            )
        glossary = parse_entries(entries, entries_format, languages)
        stored = state.glossaries.add(await owner_of(request, state.glossaries), name, languages, glossary)
    except RequestError as err:
        return _error(err)
    return JSONResponse(stored.info(), status_code=201)


async def listed(request: Request, state: Server) -> Any:
    return {
        "glossaries": [g.info() for g in state.glossaries.listed(await owner_of(request, state.glossaries))]
    }


async def information(glossary_id: str, request: Request, state: Server) -> Any:
    try:
        return state.glossaries.get(await owner_of(request, state.glossaries), glossary_id).info()
    except RequestError as err:
        return _error(err)


async def entries(glossary_id: str, request: Request, state: Server) -> Any:
    try:
        stored = state.glossaries.get(await owner_of(request, state.glossaries), glossary_id)
    except RequestError as err:
        return _error(err)
    return Response(stored.tsv(), media_type="text/tab-separated-values; charset=utf-8")


async def delete(glossary_id: str, request: Request, state: Server) -> Any:
    try:
        state.glossaries.remove(await owner_of(request, state.glossaries), glossary_id)
    except RequestError as err:
        return _error(err)
    return Response(status_code=204)


async def language_pairs(state: Server) -> Any:
    return {"supported_languages": [{"source_lang": s, "target_lang": t} for s, t in state.lanes.pairs]}


router = dialect_router(
    "DeepL",
    [
        ("/v2/glossaries", create, ["POST"]),
        ("/v2/glossaries", listed, ["GET"]),
        ("/v2/glossaries/{glossary_id}", information, ["GET"]),
        ("/v2/glossaries/{glossary_id}/entries", entries, ["GET"]),
        ("/v2/glossaries/{glossary_id}", delete, ["DELETE"]),
        ("/v2/glossary-language-pairs", language_pairs, ["GET"]),
    ],
)
