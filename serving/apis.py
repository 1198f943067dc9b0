"""What the other translation APIs of the server share (they are registered on the app by `serving.app`).

Beside its own API, the server speaks LibreTranslate's (`serving.libretranslate_api`), the Hugging Face Inference
translation task's (`serving.hf_inference_api`) and DeepL's v2 (`serving.deepl_api`). Each one only reshapes
requests and replies: every translation goes through the app's one translate path (its batcher, limits and
decoding rules), so a reply equals what POST /translate answers for the same texts and options (LibreTranslate's and
DeepL's translate sentence by sentence, as POST /translate does with ``split_sentences``).

POST /translate is shared by three APIs and told apart by its body (`BodyRouter`, `body_api`): a JSON object with
``text`` is the server's own; one with ``inputs`` the Hugging Face task's; one with ``q``, ``source`` or
``target``, or a form, LibreTranslate's; anything else the server's own (which names what is wrong).

The server serves one model or several (`Route`, one per model, each with its own translate path), each for the
languages of its model card (`ServedModel.languages`, the card's ``language`` metadata, or the pair named on the
command line): two languages make the model a translator from the first to the second (`language_pair`). Each
API picks the model by its own language fields (`Api.select`, `Api.route`, `Api.detect`); a pair not served is
the API's own error naming the pairs served. A lone model whose card names no pair is served, but the APIs that
route by language (LibreTranslate, DeepL) refuse its requests with a message saying how to name the languages.

With API keys (`load_api_keys`: ``serve --api_keys FILE`` or the environment variable
``VANILLA_TRANSFORMER_API_KEYS``), a translation needs one, presented in its API's own way (`ApiGate`), else
403 in that API's error shape. With a rate limit (``serve --rate_limit N``, `serving.ratelimit`), a key (a client
address, without keys) sending more than N requests a minute to those routes gets 429 in that API's error shape.
With CORS origins (``serve --cors_origins``), browsers on those origins may call the server.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from .options import DecodingRequest, Limits, RequestError
from .ratelimit import RateLimiter

# the translate path of `serving.create_app`: (texts, decoding options, connection) -> one n-best list per text
TranslateTexts = Callable[[list[str], DecodingRequest, Request], Awaitable[list[list[str]]]]
# a model's word aligner: (sources, translations) -> `inference.alignment.WordAlignment` of each pair
AlignTexts = Callable[[list[str], list[str]], Awaitable[list[Any]]]

# where LibreTranslate's own POST /translate is served when a body on the shared path is LibreTranslate's (and for
# a client that would rather name the API in the URL)
LIBRETRANSLATE_PREFIX = "/libretranslate"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


@dataclass
class Route:
    """One served model as the APIs see it: the ``served`` model (`serving.app.ServedModel`), its
    ``translate`` path (its own batcher and limits) and its word aligner (None when its engine returns no
    attention)."""

    served: Any
    translate: TranslateTexts
    align: AlignTexts | None = None

    @property
    def pair(self) -> tuple[str, str] | None:
        """(source, target) language codes of the model, or None when its card does not name two."""
        return language_pair(self.served.languages)

    @property
    def generation_config(self) -> Any:
        return self.served.model.generation_config

    def read_share(self, text: str) -> float:
        """The share of ``text``'s tokens, in percent, that the model's vocabulary holds (not the unknown token):
        how much of the text the model can read (100 for a text without tokens)."""
        tokenizer = self.served.tokenizer
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        unknown = getattr(tokenizer, "unk_token_id", None)
        if not ids:
            return 100.0
        return round(100.0 * sum(i != unknown for i in ids) / len(ids), 1)


@dataclass
class Api:
    """What an API's routes need: the served models (``routes``, in the order they were given), the server's
    ``limits`` and whether it needs API keys (``keyed``)."""

    routes: list[Route]
    limits: Limits
    keyed: bool = False

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """The (source, target) pairs served, in order."""
        return [route.pair for route in self.routes if route.pair is not None]

    def served_text(self) -> str:
        """What the server translates, for messages: "this server translates zh to en and de to en"."""
        pairs = [f"{source} to {target}" for source, target in self.pairs]
        if not pairs:
            return "this server's model names no language pair"
        listed = pairs[0] if len(pairs) == 1 else f"{', '.join(pairs[:-1])} and {pairs[-1]}"
        return f"this server translates {listed}"

    def select(
        self,
        source: str | None,
        target: str | None,
        names: tuple[str, str] = ("source", "target"),
        *,
        need_pair: bool = False,
    ) -> list[Route]:
        """The models that translate ``source`` (None or "auto": any) into ``target`` (None: any); ``names``
        are the API's names of the two fields, for the messages. `RequestError` (400) when no model does, naming
        the pairs served, and when the server's one model names no pair and ``need_pair`` (the APIs that route by
        language); without ``need_pair`` such a model serves every request, whatever languages it names."""
        if len(self.routes) == 1 and self.routes[0].pair is None:
            if need_pair:
                raise RequestError(400, no_pair_message())
            return list(self.routes)
        any_source = source in (None, "auto")
        sources = {pair[0] for pair in self.pairs}
        if not any_source and source not in sources:
            raise RequestError(400, f"{names[0]} {source} is not supported: {self.served_text()}")
        found = [
            route
            for route in self.routes
            if route.pair is not None
            and (any_source or route.pair[0] == source)
            and (target is None or route.pair[1] == target)
        ]
        if not found:
            wanted = f"{names[1]} {target}" if any_source else f"{source} to {target}"
            raise RequestError(400, f"{wanted} is not supported: {self.served_text()}")
        return found

    def route(
        self, source: str | None, target: str | None, names: tuple[str, str] = ("source", "target")
    ) -> Route:
        """The one model that translates ``source`` into ``target`` (`select`); `RequestError` (400) when several
        do, naming the fields to send."""
        found = self.select(source, target, names)
        if len(found) > 1:
            raise RequestError(
                400,
                f"several models translate this: send {names[0]} and {names[1]} ({self.served_text()})",
            )
        return found[0]

    def detect(
        self, text: str, routes: Sequence[Route], markup: bool = False, tags: Any = None
    ) -> tuple[Route, float]:
        """The model of ``routes`` whose vocabulary reads the largest share of ``text`` (`Route.read_share`; with
        ``markup``, of the text of its segments, ``tags`` the `inference.markup.TagRules`), the first of them on a
        tie, and that share."""
        if markup:
            from vanilla_transformer.inference.markup import split_document

            text = " ".join(segment.text for segment in split_document(text, tags).segments)
        shares = [route.read_share(text) for route in routes]
        best = max(range(len(shares)), key=lambda i: (shares[i], -i))
        return routes[best], shares[best]

    async def translate_markup(
        self,
        texts: list[str],
        routes: Sequence[Route],
        options: Callable[[Route], DecodingRequest],
        connection: Request,
        markup: bool,
        split_sentences: bool = False,
        newlines: bool = True,
        tags: Any = None,
    ) -> list[list[str]]:
        """The n-best lists of ``texts``, text i by the model ``routes[i]`` with ``options(route)``, the models
        at once; with ``markup`` each text is HTML or XML whose segments (the text between block boundaries) are
        translated whole and whose inline markup is put back by word alignment (`inference.markup`; by relative
        position where the model's engine returns no attention; ``tags``: the caller's `inference.markup.TagRules`).
        With ``split_sentences`` each text (each segment)
        is translated sentence by sentence and put back together (`inference.sentences`; ``newlines`` False: line
        breaks are spaces), hypothesis k of the whole made of hypothesis k of each sentence (its last when it has
        fewer). Every text, and with ``markup`` every segment, counts toward the server's ``max_texts``
        (`RequestError` 413); sentences do not."""
        from vanilla_transformer.inference.markup import split_document

        documents = [split_document(text, tags) for text in texts] if markup else []
        if markup:
            pieces = [[segment.text for segment in document.segments] for document in documents]
        else:
            pieces = [[text] for text in texts]
        count = sum(len(found) for found in pieces)
        if count > self.limits.max_texts:
            what = "text segments in its markup (text between block elements)" if markup else "texts"
            raise RequestError(
                413,
                f"the request has {count} {what}, more than the server's limit max_texts="
                f"{self.limits.max_texts}: split it",
            )
        splits, units = await self.translate_sentences(
            pieces, routes, options, connection, split_sentences, newlines
        )
        translated = {
            i: [split.join_nbest(sentences) for split, sentences in zip(splits[i], units[i])] for i in units
        }
        if not markup:
            return [translated[i][0] for i in range(len(texts))]
        aligned = await self._align_markup(documents, splits, units, translated, routes, _groups(routes))
        replies = []
        for i, document in enumerate(documents):
            # the document's hypothesis k puts hypothesis k of each segment in place (a segment's last when it has
            # fewer)
            hypotheses = translated[i]
            count = max((len(hyps) for hyps in hypotheses), default=1)
            replies.append(
                [
                    document.render(
                        [hyps[min(k, len(hyps) - 1)] for hyps in hypotheses],
                        [aligned.get((i, s, min(k, len(hyps) - 1))) for s, hyps in enumerate(hypotheses)],
                    )
                    for k in range(count)
                ]
            )
        return replies

    async def translate_sentences(
        self,
        pieces: list[list[str]],
        routes: Sequence[Route],
        options: Callable[[Route], DecodingRequest],
        connection: Request,
        split_sentences: bool,
        newlines: bool = True,
    ) -> tuple[list[list[Any]], dict[int, list[list[list[str]]]]]:
        """The pieces of text i (the text, or its segments) by the model ``routes[i]``: each piece's
        `inference.sentences.SplitText` (its sentences with ``split_sentences``, cut in a worker thread: up to a few
        seconds for a request at max_request_bytes; else the piece whole) and, per text, per piece, per sentence,
        its n-best list; the sentences of each model in slices of ``max_texts``, the models at once."""
        from vanilla_transformer.inference.sentences import SplitText, split_text

        if split_sentences:
            splits = await asyncio.to_thread(
                lambda: [
                    [split_text(piece, route.pair[0] if route.pair else None, newlines) for piece in found]
                    for found, route in zip(pieces, routes)
                ]
            )
        else:
            splits = [[SplitText((piece,), (None,)) for piece in found] for found in pieces]
        groups = _groups(routes)
        jobs = []
        for members in groups.values():
            route = routes[members[0]]
            todo = [sentence for i in members for split in splits[i] for sentence in split.sentences]
            jobs.append(_in_slices(route, todo, options(route), connection, self.limits.max_texts))
        done = await asyncio.gather(*jobs)
        units: dict[int, list[list[list[str]]]] = {}
        for members, nbest in zip(groups.values(), done):
            found = iter(nbest)
            for i in members:
                units[i] = [[next(found) for _ in split.sentences] for split in splits[i]]
        return splits, units

    async def _align_markup(
        self,
        documents: list[Any],
        splits: list[list[Any]],
        units: dict[int, list[list[list[str]]]],
        translated: dict[int, list[list[str]]],
        routes: Sequence[Route],
        groups: dict[int, list[int]],
    ) -> dict[tuple[int, int, int], Any]:
        """The word alignment of each hypothesis k of segment s of document i, by key (i, s, k), for the segments
        that hold inline markup, each route's pairs at once (none for a route without alignments): a segment
        translated sentence by sentence is aligned sentence by sentence (`inference.alignment.joined_alignment`)."""
        from vanilla_transformer.inference.alignment import joined_alignments

        aligned: dict[tuple[int, int, int], Any] = {}
        for members in groups.values():
            route = routes[members[0]]
            if route.align is None:
                continue
            # per key: the segment, its hypothesis, and the (sentence, translation) pairs that make it
            wholes: dict[tuple[int, int, int], tuple[str, str, list[tuple[str, str]]]] = {}
            for i in members:
                for s, segment in enumerate(documents[i].segments):
                    if segment.has_markup:
                        for k, pairs in enumerate(splits[i][s].hypotheses(units[i][s])):
                            wholes[(i, s, k)] = (segment.text, translated[i][s][k], pairs)
            pairs = [pair for _, _, found in wholes.values() for pair in found]
            if pairs:
                found = await route.align([p[0] for p in pairs], [p[1] for p in pairs])
                aligned.update(zip(wholes, joined_alignments(list(wholes.values()), found)))
        return aligned


def _groups(routes: Sequence[Route]) -> dict[int, list[int]]:
    """The indices of the texts of each model (by the route's identity), in order."""
    groups: dict[int, list[int]] = {}
    for i, route in enumerate(routes):
        groups.setdefault(id(route), []).append(i)
    return groups


async def _in_slices(
    route: Route, texts: list[str], options: DecodingRequest, connection: Request, size: int
) -> list[list[str]]:
    """``route.translate`` of ``texts`` in slices of at most ``size`` (the server's ``max_texts``, which the
    sentences of a text do not count toward), submitted at once."""
    slices = [texts[i : i + size] for i in range(0, len(texts), size)]
    done = await asyncio.gather(*(route.translate(part, options, connection) for part in slices))
    return [hyps for part in done for hyps in part]


def language_pair(languages: Sequence[str]) -> tuple[str, str] | None:
    """(source, target) of a model card's ``language`` list: its two languages in order; None otherwise."""
    return (languages[0], languages[1]) if len(languages) == 2 else None


def no_pair_message() -> str:
    return (
        "the model card names no language pair: add `language: [SOURCE, TARGET]` (ISO 639 codes, source first) "
        "to the metadata of the model folder's README.md (a trained model's card names the languages of its "
        "training data: --source_lang/--target_lang or the data file's name)"
    )


async def read_fields(request: Request) -> tuple[dict[str, Any], bool]:
    """The fields of a request body and whether it was a form: a JSON object as it is; a form (url-encoded or
    multipart) as lists of the values of each name. `RequestError` (400) for a body that is neither."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in FORM_TYPES:
        form = await request.form()
        return {name: [v for v in form.getlist(name) if isinstance(v, str)] for name in form}, True
    body = await request.body()
    if not body.strip():
        return {}, False
    try:
        fields = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RequestError(400, f"malformed JSON: {err}") from err
    if not isinstance(fields, dict):
        raise RequestError(400, "the body must be a JSON object")
    return fields, False


def first(fields: dict[str, Any], name: str, form: bool) -> Any:
    """The value of field ``name`` (a form's first value of that name); None when absent."""
    value = fields.get(name)
    return (value[0] if value else None) if form else value


def body_api(content_type: str, body: bytes) -> str | None:
    """The path that serves a POST /translate with this body: for a JSON object without ``text``, the Hugging
    Face task's (``/``) when it has ``inputs``, LibreTranslate's when it has ``q``, ``source`` or ``target``;
    LibreTranslate's for a form; None (the server's own) for anything else."""
    if content_type.split(";")[0].strip().lower() in FORM_TYPES:
        return f"{LIBRETRANSLATE_PREFIX}/translate"
    try:
        fields = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if isinstance(fields, dict) and "text" not in fields:
        if "inputs" in fields:
            return "/"
        if {"q", "source", "target"} & set(fields):
            return f"{LIBRETRANSLATE_PREFIX}/translate"
    return None


def routed_path(scope: dict, body: bytes) -> str:
    """The path that serves an HTTP request whose body is ``body``: a POST /translate in another API's body goes
    to that API's path (`body_api`); any other request to its own path."""
    path = scope["path"]
    if scope["method"] == "POST" and path == "/translate":
        content_type = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
        return body_api(content_type, body) or path
    return path


# the routes whose requests need a key when the server has keys (`ApiGate`), by API; the other routes (languages,
# settings, health, info, the schema) answer anyone
GUARDED = {
    "own": ("/translate", "/translate/stream", "/score"),
    "huggingface": ("/",),
    "libretranslate": (
        "/detect",
        f"{LIBRETRANSLATE_PREFIX}/translate",
        f"{LIBRETRANSLATE_PREFIX}/detect",
    ),
}
# the environment variable of `load_api_keys`
API_KEYS_ENV = "VANILLA_TRANSFORMER_API_KEYS"
# what a refused request is told to send, by API
KEY_HOW = {
    "own": "send the header Authorization: Bearer KEY",
    "huggingface": "send the header Authorization: Bearer KEY (InferenceClient(token=KEY))",
    "libretranslate": "send the field api_key",
    "deepl": "send the header Authorization: DeepL-Auth-Key KEY",
}
# how each API shapes an error (DeepL guards every /v2 route)
ERROR_FIELD = {"own": "detail", "huggingface": "error", "libretranslate": "error", "deepl": "message"}
# the status each API answers in place of the server's own: LibreTranslate refuses a request with 400, DeepL too
# but for a body over the size limit (413)
ERROR_STATUS = {"libretranslate": {411: 400, 413: 400, 422: 400}, "deepl": {411: 400, 422: 400}}


def error_reply(api: str, status: int, message: str, *, close: bool = False) -> JSONResponse:
    """A refusal in the error shape and with the status codes of ``api`` (own, huggingface, libretranslate or
    deepl): the one place every API's errors are shaped, in its handlers and before them (body limits, keys,
    unknown paths); with ``close``, the connection is closed after it."""
    headers = {"connection": "close"} if close else None
    status = ERROR_STATUS.get(api, {}).get(status, status)
    return JSONResponse({ERROR_FIELD[api]: message}, status_code=status, headers=headers)


def rate_limited(api: str, per_minute: int, retry_after: int) -> JSONResponse:
    """The 429 of a client over the rate limit, in its API's error shape (LibreTranslate's "Slowdown", DeepL's
    "Too many requests"), with ``Retry-After`` in seconds."""
    message = {
        "libretranslate": f"Slowdown: {per_minute} per 1 minute",
        "deepl": "Too many requests, please wait and resend your request",
    }.get(api, f"more than {per_minute} requests a minute: retry in {retry_after} s")
    return JSONResponse(
        {ERROR_FIELD[api]: message}, status_code=429, headers={"Retry-After": str(retry_after)}
    )


def request_api(path: str) -> str:
    """The API a request path (after `body_api`) belongs to: own, huggingface, libretranslate or deepl."""
    if path.startswith("/v2/"):
        return "deepl"
    if path == "/":
        return "huggingface"
    if path.startswith(f"{LIBRETRANSLATE_PREFIX}/") or path in (
        "/detect",
        "/languages",
        "/frontend/settings",
    ):
        return "libretranslate"
    return "own"


def load_api_keys(path: str | None = None, environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The keys of the file ``path`` (one a line; blank lines and lines starting with # skipped) and of the
    environment variable ``VANILLA_TRANSFORMER_API_KEYS`` (separated by commas or whitespace); `ValueError` for a
    file that cannot be read or holds no key."""
    import os

    listed = (os.environ if environ is None else environ).get(API_KEYS_ENV, "")
    keys = set(re.split(r"[\s,]+", listed.strip())) - {""}
    if path is not None:
        try:
            lines = open(path, encoding="utf-8").read().splitlines()
        except OSError as err:
            raise ValueError(f"--api_keys {path}: {err.strerror}: pass a file of keys, one a line") from None
        found = {line.strip() for line in lines if line.strip() and not line.strip().startswith("#")}
        if not found:
            raise ValueError(f"--api_keys {path} holds no key: write one key a line")
        keys |= found
    return frozenset(keys)


async def _body_field(scope: dict, body: bytes, name: str) -> str | None:
    """The string value of field ``name`` of a request body (JSON or form); None when absent or unreadable."""
    from starlette.requests import Request as StarletteRequest

    async def once():
        return {"type": "http.request", "body": body, "more_body": False}

    try:
        fields, form = await read_fields(StarletteRequest(scope, once))
    except RequestError:
        return None
    value = first(fields, name, form)
    return value if isinstance(value, str) else None


async def _request_key(api: str, headers: dict[bytes, bytes], scope: dict, body: bytes) -> str | None:
    """The key a request presents in its API's way: LibreTranslate's ``api_key`` field (JSON or form), DeepL's
    ``Authorization: DeepL-Auth-Key KEY`` header or else its legacy ``auth_key`` field (query string or body),
    ``Authorization: Bearer KEY`` for the others."""
    if api == "libretranslate":
        return await _body_field(scope, body, "api_key")
    scheme, _, key = headers.get(b"authorization", b"").decode("latin-1").strip().partition(" ")
    wanted = "deepl-auth-key" if api == "deepl" else "bearer"
    if scheme.lower() == wanted:
        return key.strip()
    if api == "deepl" and not scheme:
        from urllib.parse import parse_qs

        query = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("auth_key")
        return query[0] if query else await _body_field(scope, body, "auth_key")
    return None


class ApiGate:
    """ASGI middleware, the one place that tells which API a request speaks: a POST /translate whose body is
    another API's (`routed_path`) goes to that API's path; with ``keys``, a request to a guarded route (`GUARDED`,
    every DeepL route) without one of them gets 403 in its API's error shape; with a ``limiter``
    (`serving.ratelimit.RateLimiter`), a guarded request over the rate of its key (of its client address on a
    server without keys) gets 429 in its API's error shape (`rate_limited`). It reads a POST body's first
    message, which `serving.app.BodyLimit` makes the whole body. Keys are compared in constant time and never
    logged nor echoed."""

    def __init__(
        self, app: Any, keys: frozenset[str] = frozenset(), limiter: RateLimiter | None = None
    ) -> None:
        self.app = app
        self.keys = keys
        self.limiter = limiter

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        message: dict[str, Any] = {"type": "http.request", "body": b"", "more_body": False}
        if scope["method"] == "POST":
            message = await receive()
        body = message.get("body", b"") if message["type"] == "http.request" else b""
        path = routed_path(scope, body)
        if path != scope["path"]:
            scope = {**scope, "path": path, "raw_path": path.encode()}
        api = request_api(path)
        guarded = scope["method"] != "OPTIONS" and (api == "deepl" or path in GUARDED.get(api, ()))
        client = (scope.get("client") or ("unknown",))[0]
        if self.keys and guarded:
            key = await _request_key(api, headers, scope, body)
            known = [
                k for k in self.keys if key is not None and hmac.compare_digest(key.encode(), k.encode())
            ]
            if not known:
                reply = error_reply(api, 403, "a valid API key is needed: " + KEY_HOW[api])
                return await reply(scope, receive, send)
            client = "key:" + known[0]
        if self.limiter is not None and guarded:
            retry_after = self.limiter.acquire(client)
            if retry_after is not None:
                reply = rate_limited(api, self.limiter.per_minute, retry_after)
                return await reply(scope, receive, send)
        replayed = scope["method"] != "POST"

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return message

        await self.app(scope, replay, send)


def add_routes(
    app: FastAPI,
    api_name: str,
    routes: Iterable[tuple[str, Callable[..., Any], Sequence[str]]],
    prefix: str = "",
) -> None:
    """Add each (path, endpoint, methods) of ``routes`` to ``app`` under ``prefix``, tagged ``api_name`` in the
    OpenAPI schema, one operation per method."""
    for path, endpoint, methods in routes:
        for method in methods:
            operation = re.sub(r"\W+", "_", f"{api_name} {method} {prefix}{path}").strip("_").lower()
            app.add_api_route(
                prefix + path, endpoint, methods=[method], tags=[api_name], operation_id=operation
            )
