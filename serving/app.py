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

and the LibreTranslate, Hugging Face Inference and DeepL APIs over the same translate path
(`serving.libretranslate_api`, `serving.hf_inference_api`, `serving.deepl_api`, with its glossaries:
`serving.glossaries`).

/translate requests go through the lane's batcher: with the torch engine, by default, continuous batching
(`serving.continuous`: requests join and leave the running batch at every decoding step); with
``scheduling="request"``, and always for the exported engines, which have no step control, request-level dynamic
batching (`serving.batcher.Batcher`). Refusals are JSON
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
from collections.abc import Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from vanilla_transformer.inference.glossary import Glossary
from vanilla_transformer.inference.languages import model_languages

from . import deepl_api, glossaries, hf_inference_api, libretranslate_api, routes
from .continuous import make_batcher
from .dialects import request_api
from .errors import error_reply
from .lanes import Lane, Lanes, ServedModel, check_pairs, effective_limits
from .metrics import Metrics
from .middleware import ApiGate, BodyLimit
from .options import Limits, RequestError, validation_message
from .ratelimit import RateLimiter
from .state import ServerState


def create_app(
    served: ServedModel | Sequence[ServedModel],
    limits: Limits | None = None,
    *,
    max_wait_ms: float = 10.0,
    max_batch_tokens: int = 8192,
    batching: bool = True,
    scheduling: str = "continuous",
    api_keys: frozenset[str] = frozenset(),
    cors_origins: tuple[str, ...] = (),
    rate_limiter: RateLimiter | None = None,
    glossary: Glossary | None = None,
) -> FastAPI:
    """The server's FastAPI app over one model or several (each on its own lane, with its own batcher: continuous
    with ``scheduling="continuous"`` where the engine allows it, request-level with "request"; several
    need distinct language pairs, `check_pairs`, else `ValueError`); the batching workers start with the app
    (lifespan) and, when the app shuts down, translate what is queued and stop. With ``api_keys`` every API's
    translations need a key (`serving.middleware.ApiGate`); ``cors_origins``: the browser origins allowed ("*":
    any; Starlette's `CORSMiddleware`); ``rate_limiter``: the requests a key (a client address, without keys) may
    send to those routes; ``glossary``: the terminology every request of every API translates with (a /translate
    request's own ``glossary`` entries over it). Its metrics (`serving.metrics`) are its own, at GET /metrics. The
    app's state holds the `serving.state.ServerState` (``server``), the ``limits``, the first lane's ``batcher``
    and every lane's (``batchers``), and ``closing``, the event that `serving.server` sets as the server begins
    shutting down (a body still arriving then gets 503)."""
    models = [served] if isinstance(served, ServedModel) else list(served)
    if not models:
        raise ValueError("no model to serve: pass at least one")
    check_pairs(
        [(model.name, model.pair) for model in models],
        multilingual=[model.name for model in models if model_languages(model.tokenizer) is not None],
    )
    limits = limits or Limits()
    metrics = Metrics()
    lanes = [
        Lane(
            model,
            effective_limits(model, limits),
            make_batcher(
                model,
                scheduling if batching else "none",
                max_wait_s=max_wait_ms / 1000,
                max_batch_tokens=max_batch_tokens,
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
    metrics.watch_rows(lambda: sum(lane.batcher.rows for lane in lanes))
    batching_info = {
        "enabled": batching,
        "scheduling": scheduling if batching else "none",
        "max_wait_ms": max_wait_ms,
        "max_batch_tokens": max_batch_tokens,
    }
    app = FastAPI(title="vanilla-transformer translation server", lifespan=_lifespan)
    app.state.server = ServerState(Lanes(lanes), limits, metrics, batching_info, keyed=bool(api_keys))
    app.state.limits = limits
    app.state.batcher = lanes[0].batcher
    app.state.batchers = [lane.batcher for lane in lanes]
    app.state.closing = asyncio.Event()
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(RequestError, _refused)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for module in (routes, libretranslate_api, hf_inference_api, deepl_api, glossaries):
        app.include_router(module.router)
    _add_middleware(app, limits, metrics, api_keys, cors_origins, rate_limiter)
    return app


def _add_middleware(
    app: FastAPI,
    limits: Limits,
    metrics: Metrics,
    api_keys: frozenset[str],
    cors_origins: Sequence[str],
    rate_limiter: RateLimiter | None,
) -> None:
    """From the outside in: `BodyLimit`, CORS (with ``cors_origins``), `ApiGate` (the last added runs first)."""
    from starlette.middleware.cors import CORSMiddleware

    app.add_middleware(ApiGate, keys=frozenset(api_keys), limiter=rate_limiter)
    if cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(BodyLimit, limits=limits, closing=app.state.closing, metrics=metrics)


@asynccontextmanager
async def _lifespan(app: FastAPI):
    """Start every lane's batching worker; on shutdown, translate what is queued and stop them."""
    lanes = list(app.state.server.lanes)
    for lane in lanes:
        lane.batcher.start()
    yield
    await app.state.server.files.close()
    await asyncio.gather(*(asyncio.to_thread(lane.batcher.close) for lane in lanes))


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": validation_message(exc.errors())}, status_code=422)


async def _refused(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestError)
    return JSONResponse({"detail": exc.message}, status_code=exc.status)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """An unknown path or method, in the error shape of the API the path belongs to."""
    assert isinstance(exc, StarletteHTTPException)
    reply = error_reply(request_api(request.url.path), exc.status_code, str(exc.detail))
    reply.headers.update(exc.headers or {})
    return reply
