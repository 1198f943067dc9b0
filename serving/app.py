"""The translation server: a FastAPI app over one loaded model or several, one per language pair (any engine of
`inference.engines`; each model with its own batcher, `Lane`).

    POST /translate         {"text": "..." | ["...", ...], decoding options}  -> {"translations": [...]}
                            (with num_return_sequences > 1 also "nbest": one list of hypotheses per text; with
                            "scores": true also "scores": one record per text, as `vanilla-transformer translate
                            --output_format jsonl` writes it, `inference.translation_record`; with "alignments":
                            true also "alignments": ["0-0 1-1", ...], Pharaoh word alignments; with "format":
                            "html" each text is an HTML document translated with its markup, `inference.markup`)
    POST /translate/stream  {"text": "...", decoding options} -> server-sent events: "token" events with the
                            text each new token adds, then one "done" event with the whole translation
    POST /score             {"pairs": [["source", "target"], ...], "length_penalty": ...} -> {"scores": [{"score",
                            "log_prob", "length", "tokens", "token_log_probs"}, ...]}: given translations scored by
                            forced decoding (`inference.forced_decoding`), one at a time per model
    GET  /health            {"status": "ok", ..., "models": [...]} while every batching worker runs (503 otherwise)
    GET  /info              model, engine, languages, decoding defaults, accepted options, limits, counters (of the
                            first model; of each one in "models")
    GET  /metrics           the Prometheus metrics of `serving.metrics` (requests, latency, batches, tokens, queue)

A /translate or /translate/stream body's optional ``source`` and ``target`` pick the model; they are needed only
when several models match (422 naming the pairs served otherwise).

and the LibreTranslate, Hugging Face Inference and DeepL APIs over the same translate path (`serving.apis`).

/translate requests go through the `serving.batcher.Batcher` (dynamic batching). Refusals are JSON
``{"detail": message}``: 413 for a body over ``max_request_bytes`` or more than ``max_texts`` texts, 411 for a
body without Content-Length, 408 for a body not complete within ``body_timeout_s``, 422 for malformed JSON,
unknown options (named), values that break their rule (`modeling.DECODING_OPTIONS`, the message of the command
line's option), texts that are not valid Unicode, counts over their limit (`serving.options.Limits`), a source over
``max_source_tokens``, options the engine cannot run; 429 when ``max_streams`` streams already run; 503 while
shutting down. A client that disconnects mid-stream cancels its generation, which frees its stream slot; one that
disconnects while its /translate request is queued cancels the request, which the batcher then drops.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
from collections.abc import Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from vanilla_transformer.inference.alignment import WordAlignment
from vanilla_transformer.inference.constraints import Glossary
from vanilla_transformer.inference.translate import Hypothesis, translation_record
from vanilla_transformer.modeling import max_source_length, position_limit

from . import deepl_api, hf_inference_api, libretranslate_api
from .apis import AlignTexts, Api, ApiGate, Route, error_reply, language_pair, request_api, routed_path
from .batcher import Batcher
from .metrics import METRICS_PATH, Metrics
from .options import (
    DECODING_FIELDS,
    TRANSLATE_FIELDS,
    DecodingRequest,
    Limits,
    RequestError,
    ScoreRequest,
    StreamRequest,
    TranslateRequest,
    bounded_kwargs,
    check_request,
    generate_kwargs,
    request_glossary,
    source_lengths,
    validation_message,
    work_rows,
)
from .ratelimit import RateLimiter
from .streaming import TokenStream

logger = logging.getLogger(__name__)


@dataclass
class ServedModel:
    """What the server translates with: ``model`` and ``tokenizer`` as `inference.engines.load_engine` returns
    them, the ``engine`` name, the ``name`` to report (the folder or Hub id), the languages of its card,
    the seconds it took to load (None: not measured) and its ``shortlist`` (None: decoding over the whole
    vocabulary)."""

    model: Any
    tokenizer: Any
    engine: str
    name: str
    languages: list[str] = field(default_factory=list)
    load_seconds: float | None = None
    # serve --shortlist: the model's vocabulary shortlist, which every batch of POST /translate and the other
    # APIs decodes over (`inference.shortlist`; streaming decodes over the whole vocabulary)
    shortlist: Any = None

    @property
    def pair(self) -> tuple[str, str] | None:
        """(source, target) of the card's languages (`serving.apis.language_pair`); None when it names no two."""
        return language_pair(self.languages)


def check_pairs(models: Sequence[tuple[str, tuple[str, str] | None]]) -> None:
    """`ValueError` for the (name, pair) of the models to serve when several are served and one names no pair,
    or when two name the same pair: the server routes each request to its pair's one model."""
    seen: dict[tuple[str, str], str] = {}
    for name, pair in models:
        if pair is None:
            if len(models) > 1:
                raise ValueError(
                    f"{name} names no language pair and several models are served: pass --model SRC-TGT={name} "
                    "or add `language: [SOURCE, TARGET]` to its model card"
                )
            continue
        if pair in seen:
            raise ValueError(
                f"{pair[0]}-{pair[1]} is served twice ({seen[pair]} and {name}): serve one model per pair"
            )
        seen[pair] = name


def effective_limits(served: ServedModel, limits: Limits) -> Limits:
    """``limits`` with ``max_source_tokens`` lowered to what the model and tokenizer accept."""
    model_limit = max_source_length(served.model.config, served.tokenizer)
    wanted = [x for x in (limits.max_source_tokens, model_limit) if x is not None]
    return Limits(**{**limits.as_dict(), "max_source_tokens": min(wanted) if wanted else None})


class BodyLimit:
    """ASGI middleware: reads a POST body whole before the app sees it, and refuses a body over ``limits``'s
    ``max_request_bytes`` (413, by its Content-Length before reading it, or by what arrives), a POST body without
    Content-Length (411), and a body still incomplete ``body_timeout_s`` seconds after its headers (408, and the
    connection is closed); once `begin_shutdown` is called, a body still arriving gets 503 at once (a stalled
    client does not hold the server's drain). A client that disconnects while sending its body gets nothing. The
    app then sees the body as one message, and the connection's later messages (its ``http.disconnect``) as they
    come. With ``metrics``, every request, its refusals here included, is counted as its reply ends
    (`serving.metrics.RequestTimer`)."""

    def __init__(self, app, limits: Limits, metrics: Metrics | None = None):
        self.app = app
        self.limits = limits
        self.metrics = metrics
        self.closing = asyncio.Event()

    def begin_shutdown(self) -> None:
        """The server stops accepting requests (call in the server's event loop)."""
        self.closing.set()

    async def __call__(self, scope, receive, send):
        timer = self.metrics.timer(scope, send) if self.metrics is not None else None
        send = send if timer is None else timer.send
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        limit = self.limits.max_request_bytes
        length = dict(scope["headers"]).get(b"content-length")
        if length is None:
            return await _send_json(scope, send, 411, "a request body needs a Content-Length header")
        if not length.isdigit() or int(length) > limit:
            return await _send_json(scope, send, 413, _too_large(length.decode(errors="replace"), limit))
        read = asyncio.ensure_future(_read_body(receive, limit))
        closing = asyncio.ensure_future(self.closing.wait())
        await asyncio.wait(
            (read, closing), timeout=self.limits.body_timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        closing.cancel()
        if not read.done():
            read.cancel()
            if self.closing.is_set():
                return await _send_json(scope, send, 503, "the server is shutting down", close=True)
            return await _send_json(
                scope,
                send,
                408,
                f"the request body did not arrive within the server's limit body_timeout_s="
                f"{self.limits.body_timeout_s:g}: send the whole body at once",
                close=True,
            )
        body = read.result()
        if body is None:
            return None
        if timer is not None:
            timer.read(scope, body)
        if len(body) > limit:
            return await _send_json(
                scope, send, 413, _too_large(str(len(body)), limit), body=body, close=True
            )
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _too_large(size: str, limit: int) -> str:
    return (
        f"the request body has {size} bytes, more than the server's limit max_request_bytes={limit}: "
        "send fewer or shorter texts"
    )


async def _read_body(receive, limit: int) -> bytes | None:
    """The request body, read until its end or until it is over ``limit`` bytes; None if the client left."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if not message.get("more_body", False) or size > limit:
            return b"".join(chunks)


async def _send_json(
    scope, send, status: int, detail: str, *, body: bytes = b"", close: bool = False
) -> None:
    """Refuse the request of ``scope`` in its API's error shape (`serving.apis.error_reply`; ``body``: what
    arrived of it, which tells the APIs of POST /translate apart)."""
    reply = error_reply(request_api(routed_path(scope, body)), status, detail, close=close)

    async def nothing():
        return {"type": "http.disconnect"}

    await reply(scope, nothing, send)


async def _client_left(request: Request) -> None:
    """Return once the client of ``request`` (whose body has been read) disconnects."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def register_apis(
    app: FastAPI,
    api: Api,
    *,
    api_keys: frozenset[str] = frozenset(),
    cors_origins: Sequence[str] = (),
    rate_limiter: RateLimiter | None = None,
) -> None:
    """Add the LibreTranslate, Hugging Face Inference and DeepL APIs over ``api``'s models to ``app`` (module
    docstring); with ``api_keys``, every API's translations need one of them (`ApiGate`); with ``rate_limiter``, a
    key (a client address) sending requests faster gets 429; with ``cors_origins``, browsers on those origins ("*":
    any) may call the server (Starlette's `CORSMiddleware`)."""
    from starlette.middleware.cors import CORSMiddleware

    libretranslate_api.register(app, api)
    hf_inference_api.register(app, api)
    deepl_api.register(app, api)
    app.add_middleware(ApiGate, keys=frozenset(api_keys), limiter=rate_limiter)
    if cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )


class Lane:
    """One served model's translate path: its ``served`` model, its ``limits`` (`effective_limits`) and its
    ``batcher``."""

    def __init__(
        self, served: ServedModel, limits: Limits, batcher: Batcher, glossary: Glossary | None = None
    ):
        self.served = served
        self.limits = limits
        self.batcher = batcher
        self.glossary = glossary
        self.generation_config = served.model.generation_config
        # one scoring request at a time (each is one forward pass over up to max_texts pairs)
        self.scoring = asyncio.Semaphore(1)

    def prepare(self, request: DecodingRequest, texts: list[str]) -> tuple[dict[str, Any], int]:
        """The generate kwargs of ``request`` and its work in tokens x rows; `RequestError` (422) for options
        or texts over the rules and limits."""
        kwargs = generate_kwargs(request)
        glossary = request_glossary(self.glossary, getattr(request, "glossary", None))
        if glossary is not None:
            kwargs["glossary"] = glossary
        check_request(
            kwargs,
            request.seed,
            engine=self.served.engine,
            generation_config=self.generation_config,
            limits=self.limits,
        )
        lengths = source_lengths(self.served.tokenizer, texts, self.limits.max_source_tokens)
        kwargs = bounded_kwargs(kwargs, self.generation_config, self.limits)
        return kwargs, sum(lengths) * work_rows(kwargs, self.generation_config)

    async def translate(
        self, texts: list[str], options: DecodingRequest, connection: Request, *, scores: bool = False
    ) -> list[list[Hypothesis]]:
        """The n-best lists of ``texts`` decoded with ``options`` through the batcher (with ``scores``, each
        hypothesis with its sequence score and per-token log-probabilities): the one translate path of every
        API. `RequestError` for a refusal (the module docstring's 413 and 422), 499 when the client left while its
        request waited, 500 when the engine failed on its batch, 503 while shutting down."""
        limits = self.limits
        if not texts:
            raise RequestError(422, "text is an empty list: send at least one text")
        if len(texts) > limits.max_texts:
            raise RequestError(
                413,
                f"the request has {len(texts)} texts, more than the server's limit max_texts={limits.max_texts}: "
                "split it",
            )
        kwargs, tokens = self.prepare(options, texts)
        if self.served.shortlist is not None:
            kwargs["shortlist"] = self.served.shortlist
        try:
            future = self.batcher.submit(texts, kwargs, tokens, options.seed, scores=scores)
        except RuntimeError as err:
            raise RequestError(503, str(err)) from err
        # a request whose client leaves while it waits is cancelled: the batcher drops it unless it already runs
        answer, left = asyncio.wrap_future(future), asyncio.ensure_future(_client_left(connection))
        await asyncio.wait((answer, left), return_when=asyncio.FIRST_COMPLETED)
        if not answer.done():
            future.cancel()
            answer.cancel()
            raise RequestError(499, "the client closed the connection")
        left.cancel()
        try:
            return answer.result()
        except Exception as err:  # noqa: BLE001 - the engine failed on this batch; the server keeps serving
            raise RequestError(500, f"translation failed: {type(err).__name__}: {err}") from err

    async def translate_texts(
        self, texts: list[str], options: DecodingRequest, connection: Request
    ) -> list[list[str]]:
        """The texts of `translate`'s n-best lists: the translate path of the other APIs (`serving.apis.Route`)."""
        nbest = await self.translate(texts, options, connection)
        return [[hypothesis.text for hypothesis in hypotheses] for hypotheses in nbest]

    async def score(self, pairs: list[list[str]], length_penalty: float | None) -> list[dict[str, Any]]:
        """The `inference.forced_decoding.score_record` of each (source, target) pair, scored in a worker thread,
        one request at a time per model; `RequestError` for no pairs, more than ``max_texts`` (413), a source over
        ``max_source_tokens`` or a target over the decoder's positions (422)."""
        from vanilla_transformer.inference.forced_decoding import (
            default_length_penalty,
            score_pairs,
            score_record,
        )

        if not pairs:
            raise RequestError(422, "pairs is an empty list: send at least one [source, target] pair")
        if len(pairs) > self.limits.max_texts:
            raise RequestError(
                413,
                f"the request has {len(pairs)} pairs, more than the server's limit max_texts={self.limits.max_texts}: "
                "split it",
            )
        sources, targets = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
        source_lengths(self.served.tokenizer, sources, self.limits.max_source_tokens)
        if length_penalty is None:
            length_penalty = default_length_penalty(self.generation_config)
        async with self.scoring:
            try:
                scores = await asyncio.to_thread(
                    score_pairs, self.served.model, self.served.tokenizer, sources, targets
                )
            except ValueError as err:
                raise RequestError(422, str(err)) from err
        return [score_record(scored, self.served.tokenizer, length_penalty) for scored in scores]

    def check_alignable(self) -> None:
        """`RequestError` (422) when this model's engine cannot return attention weights."""
        from vanilla_transformer.inference.alignment import check_alignable

        try:
            check_alignable(self.served.model)
        except ValueError as err:
            raise RequestError(422, f"alignments: {err}") from err

    async def align(self, sources: list[str], translations: list[str]) -> list[str]:
        """The Pharaoh word alignment of each translation with its source (`align_words`)."""
        from vanilla_transformer.inference.alignment import pharaoh

        return [pharaoh(found.links) for found in await self.align_words(sources, translations)]

    async def align_words(self, sources: list[str], translations: list[str]) -> list[WordAlignment]:
        """The word alignment of each translation with its source (`inference.alignment.align_words`), computed
        in a worker thread, one forced-decoding request at a time per model."""
        from vanilla_transformer.inference.alignment import align_words

        async with self.scoring:
            try:
                return await asyncio.to_thread(
                    align_words, self.served.model, self.served.tokenizer, sources, translations
                )
            except ValueError as err:
                raise RequestError(500, f"alignments failed: {err}") from err

    def aligner(self) -> AlignTexts | None:
        """`align_words` for the APIs' markup, or None when this model's engine returns no attention."""
        try:
            self.check_alignable()
        except RequestError:
            return None
        return self.align_words

    def info(self, batching: dict[str, Any]) -> dict[str, Any]:
        """What /info says of this model."""
        from vanilla_transformer.inference.engines import ENGINES

        served = self.served
        options = [*TRANSLATE_FIELDS, *DECODING_FIELDS]
        if served.engine in ENGINES:
            options = [*TRANSLATE_FIELDS, *ENGINES[served.engine].options]
        return {
            "model": served.name,
            "engine": served.engine,
            "languages": served.languages,
            "defaults": {
                name: getattr(self.generation_config, name, None)
                for name in ("num_beams", "length_penalty", "max_new_tokens")
            },
            "options": options,
            "streaming": served.engine == "torch",
            "limits": self.limits.as_dict(),
            "batching": batching,
            "stats": {**self.batcher.stats, "queued": self.batcher.queued},
        }


def create_app(
    served: ServedModel | Sequence[ServedModel],
    limits: Limits | None = None,
    *,
    max_wait_ms: float = 10.0,
    max_batch_tokens: int = 8192,
    batching: bool = True,
    api_keys: frozenset[str] = frozenset(),
    cors_origins: tuple[str, ...] = (),
    rate_limiter: RateLimiter | None = None,
    glossary: Glossary | None = None,
) -> BodyLimit:
    """The server's ASGI app over one model or several (each with its own batcher; several need distinct
    language pairs, `check_pairs`, else `ValueError`); the batching workers start with the app (lifespan) and,
    when the app shuts down, translate what is queued and stop. The FastAPI app is the returned object's ``app``
    attribute. With ``api_keys`` every API's translations need a key; ``cors_origins``: the browser origins
    allowed; ``rate_limiter``: the requests a key may send (`register_apis`); ``glossary``: the terminology every
    request of every API translates with (a /translate request's own ``glossary`` entries over it). Its metrics
    (`serving.metrics`) are its own, at GET /metrics."""
    models = [served] if isinstance(served, ServedModel) else list(served)
    if not models:
        raise ValueError("no model to serve: pass at least one")
    check_pairs([(model.name, model.pair) for model in models])
    limits = limits or Limits()
    metrics = Metrics()
    lanes = [
        Lane(
            model,
            effective_limits(model, limits),
            Batcher(
                model.model,
                model.tokenizer,
                max_wait_s=max_wait_ms / 1000,
                max_batch_tokens=max_batch_tokens,
                batching=batching,
                on_batch=functools.partial(metrics.observe_batch, model.tokenizer),
            ),
            glossary,
        )
        for model in models
    ]
    for lane in lanes:
        metrics.describe_model(
            lane.served.name, lane.served.engine, lane.served.languages, lane.served.load_seconds
        )
    metrics.watch_queue(lambda: sum(lane.batcher.queued for lane in lanes))
    api = Api(
        [Route(lane.served, lane.translate_texts, lane.aligner()) for lane in lanes],
        limits,
        keyed=bool(api_keys),
    )
    streams = {"active": 0, "served": 0, "cancelled": 0}
    streams_lock = threading.Lock()
    batching_info = {"enabled": batching, "max_wait_ms": max_wait_ms, "max_batch_tokens": max_batch_tokens}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        for lane in lanes:
            lane.batcher.start()
        yield
        await asyncio.gather(*(asyncio.to_thread(lane.batcher.close) for lane in lanes))

    app = FastAPI(title="vanilla-transformer translation server", lifespan=lifespan)
    app.state.batcher = lanes[0].batcher
    app.state.batchers = [lane.batcher for lane in lanes]

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        return JSONResponse({"detail": validation_message(exc.errors())}, status_code=422)

    @app.exception_handler(RequestError)
    async def refused(request: Request, exc: RequestError):
        return JSONResponse({"detail": exc.message}, status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        # an unknown path or method, in the error shape of the API the path belongs to
        reply = error_reply(request_api(request.url.path), exc.status_code, str(exc.detail))
        reply.headers.update(exc.headers or {})
        return reply

    def lane_of(source: str | None, target: str | None) -> Lane:
        try:
            route = api.route(source, target)
        except RequestError as err:
            raise RequestError(422, err.message) from err
        return lanes[api.routes.index(route)]

    @app.post(
        "/translate",
        summary="Translate texts",
        description="Each text is translated with the decoding options given (the model's generation config for "
        "the others). The reply's `translations` hold the best hypothesis per text; with num_return_sequences > 1, "
        "`nbest` holds the hypotheses per text, best first (sorted by their sequence score; samples in the order "
        "drawn). With `scores`: true, "
        "`scores` holds one record per text, the one `vanilla-transformer translate --output_format jsonl` writes: "
        "`translation`, `score` (the sequence score decoding ranked the hypotheses by: with beams log_prob / "
        "length ** length_penalty, greedy log_prob, sampling the sum under the sampling distribution), `log_prob`, "
        "`length`, `tokens` and `token_log_probs` (the output's tokens, its </s> included, and the log-probability "
        "of each by forced decoding of the output, the numbers POST /score gives the pair), and with "
        "num_return_sequences > 1 `nbest`: those records for every hypothesis, best first. An empty text gets null "
        "scores and no tokens.",
    )
    async def translate(request: TranslateRequest, connection: Request) -> Any:
        lane = lane_of(request.source, request.target)
        texts = [request.text] if isinstance(request.text, str) else list(request.text)
        if request.format == "html" or request.split_sentences:
            return await translate_documents(lane, texts, request, connection)
        if request.alignments:
            lane.check_alignable()
        nbest = await lane.translate(texts, request, connection, scores=request.scores)
        reply: dict[str, Any] = {"translations": [hyps[0].text for hyps in nbest]}
        if generate_kwargs(request).get("num_return_sequences", 1) > 1:
            reply["nbest"] = [[hypothesis.text for hypothesis in hyps] for hyps in nbest]
        if request.scores:
            tokenizer = lane.served.tokenizer
            reply["scores"] = [translation_record(hyps, tokenizer) for hyps in nbest]
        if request.alignments:
            reply["alignments"] = await lane.align(texts, reply["translations"])
        return reply

    async def translate_documents(
        lane: Lane, texts: list[str], request: TranslateRequest, connection: Request
    ) -> dict[str, Any]:
        """POST /translate with format html (each text a document translated with its markup) or split_sentences
        (each text translated sentence by sentence): the other APIs' path, `serving.apis.Api.translate_markup`."""
        if not texts:
            raise RequestError(422, "text is an empty list: send at least one text")
        html = request.format == "html"
        way = "format html" if html else "split_sentences"
        for wanted, name in ((request.scores, "scores"), (request.alignments and html, "alignments")):
            if wanted:
                raise RequestError(
                    422,
                    f"{way} puts translations together from pieces; {name} of the whole has no meaning there: "
                    "drop one of the two",
                )
        route = api.routes[lanes.index(lane)]
        if not html:
            return await translate_sentences(lane, route, texts, request, connection)
        documents = await api.translate_markup(
            texts,
            [route] * len(texts),
            lambda _: request,
            connection,
            markup=True,
            split_sentences=request.split_sentences,
        )
        reply: dict[str, Any] = {"translations": [found[0] for found in documents]}
        if generate_kwargs(request).get("num_return_sequences", 1) > 1:
            reply["nbest"] = documents
        return reply

    async def translate_sentences(
        lane: Lane, route: Route, texts: list[str], request: TranslateRequest, connection: Request
    ) -> dict[str, Any]:
        """POST /translate with split_sentences: each text translated sentence by sentence and joined; with
        alignments, each sentence aligned with its translation and the links numbered over the whole text
        (`inference.alignment.joined_alignment`)."""
        from vanilla_transformer.inference.alignment import joined_alignments, pharaoh

        if request.alignments:
            lane.check_alignable()
        splits, units = await api.translate_sentences(
            [[text] for text in texts], [route] * len(texts), lambda _: request, connection, True
        )
        nbest = [splits[i][0].join_nbest(units[i][0]) for i in range(len(texts))]
        reply: dict[str, Any] = {"translations": [hyps[0] for hyps in nbest]}
        if generate_kwargs(request).get("num_return_sequences", 1) > 1:
            reply["nbest"] = nbest
        if request.alignments:
            # the best hypothesis of each text: its sentences, each aligned with its translation
            wholes = [
                (text, translation, splits[i][0].hypotheses(units[i][0])[0])
                for i, (text, translation) in enumerate(zip(texts, reply["translations"]))
            ]
            pairs = [pair for _, _, found in wholes for pair in found]
            found = await lane.align_words([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else []
            reply["alignments"] = [pharaoh(whole.links) for whole in joined_alignments(wholes, found)]
        return reply

    @app.post(
        "/score",
        summary="Score given translations (forced decoding)",
        description="Each target is scored as a translation of its source without decoding: the log-probability "
        "of each of its tokens (its </s> included) from the model's raw logits, their sum (log_prob) and score = "
        "log_prob / length ** length_penalty, how beam search ranks finished hypotheses (higher: likelier). For "
        "n-best reranking, filtering a corpus, or checking a human translation. Same numbers as "
        "`vanilla-transformer score`.",
    )
    async def score(request: ScoreRequest) -> dict:
        lane = lane_of(request.source, request.target)
        return {"scores": await lane.score(request.pairs, request.length_penalty)}

    @app.post("/translate/stream")
    async def translate_stream(request: StreamRequest):
        lane = lane_of(request.source, request.target)
        served = lane.served
        if served.engine != "torch":
            raise RequestError(
                422, f"streaming needs --engine torch; this server runs --engine {served.engine}"
            )
        kwargs, _ = lane.prepare(request, [request.text])
        glossary = kwargs.pop("glossary", None)
        if glossary is not None and glossary.terms_for(request.text):
            raise RequestError(
                422,
                "the server's glossary has terms for this text, which streaming (greedy, token by token) cannot "
                "put in: use POST /translate",
            )
        kwargs.setdefault("num_beams", 1)
        kwargs.pop("length_penalty", None)  # a beam-search option, as in inference.translate
        if kwargs["num_beams"] != 1 or kwargs.get("num_return_sequences", 1) != 1:
            raise RequestError(
                422, "streaming decodes greedily or samples: use num_beams=1 and num_return_sequences=1"
            )
        new_tokens = kwargs.get("max_new_tokens", lane.generation_config.max_new_tokens)
        cap = position_limit(served.model.config)
        if new_tokens is not None and cap is not None:
            kwargs["max_new_tokens"] = min(new_tokens, cap)
        with streams_lock:
            if streams["active"] >= limits.max_streams:
                raise RequestError(
                    429, f"max_streams={limits.max_streams} streams are running: retry in a moment"
                )
            streams["active"] += 1

        def release(stream: TokenStream | None = None):
            with streams_lock:
                streams["active"] -= 1
                streams["served"] += 1
                streams["cancelled"] += bool(stream is not None and stream.stopped_early)

        stream = TokenStream(
            served.model,
            served.tokenizer,
            request.text,
            kwargs,
            on_done=release,
            seed=request.seed,
            sampling_lock=lane.batcher.sampling_lock,
        )
        if not request.text.strip():
            release()
            return StreamingResponse(_events(None), media_type="text/event-stream")
        return StreamingResponse(_events(stream.start()), media_type="text/event-stream")

    @app.get("/health")
    async def health():
        ok = all(lane.batcher.alive for lane in lanes)
        body = {
            "status": "ok" if ok else "unavailable",
            "queued": sum(lane.batcher.queued for lane in lanes),
            "streams": streams["active"],
            "models": [
                {
                    "model": lane.served.name,
                    "languages": lane.served.languages,
                    "status": "ok" if lane.batcher.alive else "unavailable",
                    "queued": lane.batcher.queued,
                }
                for lane in lanes
            ],
        }
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/info")
    async def info() -> dict:
        described = [lane.info(batching_info) for lane in lanes]
        stream_stats = {f"streams_{k}": v for k, v in streams.items()}
        # the first model's description at the top (the model of a request that names no languages on a server
        # of one), then every model's
        first = described[0]
        return {**first, "stats": {**first["stats"], **stream_stats}, "models": described}

    @app.get(METRICS_PATH)
    async def metrics_text() -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    register_apis(app, api, api_keys=api_keys, cors_origins=cors_origins, rate_limiter=rate_limiter)
    return BodyLimit(app, limits, metrics)


async def _events(stream: TokenStream | None):
    """The server-sent events of one stream; cancels the generation when the client goes away."""
    if stream is None:
        yield _event("done", {"translation": ""})
        return
    try:
        async for piece in stream:
            yield _event("token", {"text": piece})
        if stream.error is not None:
            yield _event("error", {"detail": f"{type(stream.error).__name__}: {stream.error}"})
        else:
            yield _event("done", {"translation": stream.text})
    finally:
        stream.cancel()


def _event(name: str, data: dict) -> str:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
