"""DeepL's API v2 on the translation server, for the ``deepl`` SDKs (``deepl.Translator(key, server_url=URL)``)
and the tools that speak DeepL.

    POST /v2/translate   JSON or form: ``text`` (repeated in a form), ``target_lang``, ``source_lang``,
                         ``tag_handling`` (html | xml) -> {"translations": [{"detected_source_language", "text",
                         "billed_characters"}]}
    GET  /v2/languages   ``type`` source | target (query string or body) -> [{"language", "name"}]
                         (targets with "supports_formality")
    GET  /v2/usage       {"character_count": characters translated since the server started,
                         "character_limit": 1000000000000 (no limit)}

DeepL's codes name the model's languages by their first part, in any case: ``EN-US`` and ``EN-GB`` are ``en``,
``ZH`` and ``ZH-HANS`` are ``zh``. ``source_lang`` and ``target_lang`` pick the model; without ``source_lang``,
each text goes to the model, among those into ``target_lang``, of its detected language (`serving.lanes.Lanes.detect`). ``tag_handling``
translates the text between block elements whole and puts the inline markup back where the word alignments say
(`inference.markup`). ``split_sentences`` is DeepL's: "1" (the default, but with ``tag_handling=html``) translates
sentence by sentence, cut at punctuation and line breaks (kept), "nonewlines" (the default with
``tag_handling=html``) at punctuation only, "0" each text (each segment) whole (`inference.sentences`). With ``tag_handling``, ``splitting_tags`` name
elements that end a segment, ``non_splitting_tags`` elements that never do, and ``ignore_tags`` elements kept as
written (`inference.markup.TagRules`; comma-separated names). DeepL's other options (formality, context,
glossaries, outline_detection...) are accepted and have no effect. Texts are decoded with the model's defaults, so a reply equals the
server's own /translate (with ``split_sentences``); DeepL's reply has no field for a score, and gets
none (the server's own /translate gives them with ``scores``). The ``Authorization: DeepL-Auth-Key KEY`` header
(or the legacy ``auth_key`` field, in the query string or the body) is checked when the server has keys
(`serving.middleware.ApiGate`). Errors are DeepL's ``{"message": ...}``: 400 for a request the server refuses
(413 for one over its size limits), 500 when translating fails, 503 while shutting down.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from vanilla_transformer.inference.markup import MAX_DEPTH, TagRules

from .dialects import dialect_router, first, read_fields
from .documents import translate_documents
from .errors import error_reply
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


def _lanes(
    lanes: Lanes,
    texts: list[str],
    source: Any,
    target: Any,
    markup: bool,
    tags: TagRules | None = None,
    max_depth: int = MAX_DEPTH,
) -> list[Lane]:
    """The model of each text: the one from ``source_lang`` into ``target_lang``; without ``source_lang``, the
    one among the models into ``target_lang`` that reads most of the text (`serving.lanes.Lanes.detect`).
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
    return [lanes.detect(text, found, markup, tags, max_depth)[0] for text in texts]


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
        lanes = _lanes(state.lanes, texts, source, target, bool(tags), rules, state.limits.max_markup_depth)
        nbest = await translate_documents(
            texts,
            lanes,
            lambda lane: DecodingRequest(),
            request,
            max_texts=state.limits.max_texts,
            max_depth=state.limits.max_markup_depth,
            markup=bool(tags),
            split_sentences=split != "0",
            newlines=split == "1",
            tags=rules,
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


router = dialect_router(
    "DeepL",
    [
        ("/v2/translate", translate, ["POST"]),
        ("/v2/languages", languages, ["GET", "POST"]),
        ("/v2/usage", usage, ["GET", "POST"]),
    ],
)
