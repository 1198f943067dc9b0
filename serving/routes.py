"""The server's own API (`serving.app` lists it), on an `APIRouter`: each route gets the server's state as a
dependency (`serving.state.server_state`) and its model's lane by the body's ``source`` and ``target``."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from vanilla_transformer.inference.protected import protected_spans
from vanilla_transformer.inference.translate import translation_record
from vanilla_transformer.modeling import position_limit

from .documents import check_count, plan_documents, translate_documents, translate_plans
from .lanes import Lane
from .metrics import METRICS_PATH
from .options import (
    RequestError,
    ScoreRequest,
    StreamRequest,
    TranslateRequest,
    generate_kwargs,
)
from .state import Server, ServerState
from .streaming import TokenStream

router = APIRouter()

TRANSLATE_DESCRIPTION = (
    "Each text is translated with the decoding options given (the model's generation config for the others). The "
    "reply's `translations` hold the best hypothesis per text; with num_return_sequences > 1, `nbest` holds the "
    "hypotheses per text, best first (sorted by their sequence score; samples in the order drawn). With `scores`: "
    "true, `scores` holds one record per text, the one `vanilla-transformer translate --output_format jsonl` "
    "writes: `translation`, `score` (the sequence score decoding ranked the hypotheses by: with beams log_prob / "
    "length ** length_penalty, greedy log_prob, sampling the sum under the sampling distribution), `log_prob`, "
    "`length`, `tokens` and `token_log_probs` (the output's tokens, its </s> included, and the log-probability of "
    "each by forced decoding of the output, the numbers POST /score gives the pair), and with "
    "num_return_sequences > 1 `nbest`: those records for every hypothesis, best first. An empty text gets null "
    "scores and no tokens."
)
SCORE_DESCRIPTION = (
    "Each target is scored as a translation of its source without decoding: the log-probability of each of its "
    "tokens (its </s> included) from the model's raw logits, their sum (log_prob) and score = log_prob / length ** "
    "length_penalty, how beam search ranks finished hypotheses (higher: likelier). For n-best reranking, filtering "
    "a corpus, or checking a human translation. Same numbers as `vanilla-transformer score`."
)


def lane_of(state: ServerState, source: str | None, target: str | None) -> Lane:
    """The lane of a request's ``source`` and ``target``; `RequestError` (422) naming the pairs served."""
    try:
        return state.lanes.route(source, target)
    except RequestError as err:
        raise RequestError(422, err.message) from err


@router.post("/translate", summary="Translate texts", description=TRANSLATE_DESCRIPTION)
async def translate(request: TranslateRequest, connection: Request, state: Server) -> Any:
    lane = lane_of(state, request.source, request.target)
    texts = [request.text] if isinstance(request.text, str) else list(request.text)
    protected = (
        request.protect and not (request.scores or request.alignments) and any(map(protected_spans, texts))
    )
    if request.format == "html" or request.split_sentences or protected:
        return await translate_as_documents(state, lane, texts, request, connection)
    if request.alignments:
        lane.check_alignable()
    nbest = await lane.translate(texts, request, connection, scores=request.scores)
    reply: dict[str, Any] = {"translations": [hyps[0].text for hyps in nbest]}
    if generate_kwargs(request).get("num_return_sequences", 1) > 1:
        reply["nbest"] = [[hypothesis.text for hypothesis in hyps] for hyps in nbest]
    if request.scores:
        reply["scores"] = [translation_record(hyps, lane.served.tokenizer) for hyps in nbest]
    if request.alignments:
        reply["alignments"] = await lane.align(texts, reply["translations"])
    return reply


async def translate_as_documents(
    state: ServerState, lane: Lane, texts: list[str], request: TranslateRequest, connection: Request
) -> dict[str, Any]:
    """POST /translate with format html (each text a document translated with its markup) or split_sentences
    (each text translated sentence by sentence): the other APIs' path, `serving.documents`; with alignments (of
    a text translated sentence by sentence), each sentence aligned with its translation and the links numbered
    over the whole text (`inference.alignment.joined_alignment`)."""
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
    if request.alignments:
        return await aligned_sentences(state, lane, texts, request, connection)
    nbest = await translate_documents(
        texts,
        [lane] * len(texts),
        lambda _: request,
        connection,
        max_texts=state.limits.max_texts,
        max_depth=state.limits.max_markup_depth,
        markup=html,
        split_sentences=request.split_sentences,
        protect=request.protect,
    )
    reply: dict[str, Any] = {"translations": [found[0] for found in nbest]}
    if generate_kwargs(request).get("num_return_sequences", 1) > 1:
        reply["nbest"] = nbest
    return reply


async def aligned_sentences(
    state: ServerState, lane: Lane, texts: list[str], request: TranslateRequest, connection: Request
) -> dict[str, Any]:
    """POST /translate with split_sentences and alignments: the translations, and the Pharaoh word alignment of
    each best one, its sentences aligned one by one and put together over the text."""
    from vanilla_transformer.inference.alignment import pharaoh

    lane.check_alignable()
    plans = await plan_documents(
        texts, [lane] * len(texts), markup=False, split_sentences=True, protect=request.protect
    )
    check_count(plans, state.limits.max_texts)
    translated = await translate_plans(
        plans, [lane] * len(texts), lambda _: request, connection, state.limits.max_texts
    )
    nbest = [document.render() for document in translated]
    reply: dict[str, Any] = {"translations": [hyps[0] for hyps in nbest]}
    if generate_kwargs(request).get("num_return_sequences", 1) > 1:
        reply["nbest"] = nbest
    pairs = [document.pairs(best_only=True) for document in translated]
    flat = [pair for found in pairs for pair in found]
    found = iter(await lane.align_words([p[0] for p in flat], [p[1] for p in flat]) if flat else [])
    reply["alignments"] = [
        pharaoh(document.alignment([next(found) for _ in own]).links)
        for document, own in zip(translated, pairs)
    ]
    return reply


@router.post("/score", summary="Score given translations (forced decoding)", description=SCORE_DESCRIPTION)
async def score(request: ScoreRequest, state: Server) -> dict:
    lane = lane_of(state, request.source, request.target)
    return {"scores": await lane.score(request.pairs, request.length_penalty)}


@router.post("/translate/stream")
async def translate_stream(request: StreamRequest, state: Server):
    lane = lane_of(state, request.source, request.target)
    kwargs = stream_kwargs(lane, request)
    state.streams.take()
    if not request.text.strip():
        state.streams.release()
        return StreamingResponse(_events(None), media_type="text/event-stream")
    served = lane.served
    stream = TokenStream(
        served.model,
        served.tokenizer,
        request.text,
        kwargs,
        on_done=lambda stream: state.streams.release(stream is not None and stream.stopped_early),
        seed=request.seed,
        sampling_lock=lane.batcher.sampling_lock,
    )
    return StreamingResponse(_events(stream.start(lane.batcher)), media_type="text/event-stream")


def stream_kwargs(lane: Lane, request: StreamRequest) -> dict[str, Any]:
    """The generate kwargs of a stream: greedy or sampling with one sequence, ``max_new_tokens`` within the
    decoder's positions (and a multilingual model's languages); `RequestError` (422) for an engine other than torch,
    a glossary with terms for the text, beams or several sequences."""
    served = lane.served
    if served.engine != "torch":
        raise RequestError(422, f"streaming needs --engine torch; this server runs --engine {served.engine}")
    kwargs, _ = lane.prepare(request, [request.text])
    glossary = kwargs.pop("glossary", None)
    if glossary is not None and glossary.terms_for(request.text):
        raise RequestError(
            422,
            "the server's glossary has terms for this text, which streaming (greedy, token by token) cannot "
            "put in: use POST /translate",
        )
    kwargs.setdefault("num_beams", 1)
    # a beam-search option, as in inference.translate
    kwargs.pop("length_penalty", None)
    if kwargs["num_beams"] != 1 or kwargs.get("num_return_sequences", 1) != 1:
        raise RequestError(
            422, "streaming decodes greedily or samples: use num_beams=1 and num_return_sequences=1"
        )
    new_tokens = kwargs.get("max_new_tokens", lane.generation_config.max_new_tokens)
    cap = position_limit(served.model.config)
    if new_tokens is not None and cap is not None:
        kwargs["max_new_tokens"] = min(new_tokens, cap)
    return kwargs


@router.get("/health")
async def health(state: Server):
    lanes = list(state.lanes)
    ok = all(lane.batcher.alive for lane in lanes)
    body = {
        "status": "ok" if ok else "unavailable",
        "queued": sum(lane.batcher.queued for lane in lanes),
        "streams": state.streams.active,
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


@router.get("/info")
async def info(state: Server) -> dict:
    described = [lane.info(state.batching) for lane in state.lanes]
    # the first model's description at the top (the model of a request that names no languages on a server of
    # one), then every model's
    first = described[0]
    return {**first, "stats": {**first["stats"], **state.streams.stats()}, "models": described}


@router.get(METRICS_PATH)
async def metrics_text(state: Server) -> Response:
    body, content_type = state.metrics.exposition()
    return Response(body, media_type=content_type)


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
