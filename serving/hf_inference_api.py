"""The Hugging Face Inference API's translation task on the translation server, for
``huggingface_hub.InferenceClient(model=URL).translation(...)`` and the clients of Inference Endpoints.

    POST /   {"inputs": "..." | [...], "parameters": {"src_lang", "tgt_lang", "generate_parameters": {...},
             "clean_up_tokenization_spaces", "truncation"}} -> [{"translation_text": "..."}, ...]

The same body is accepted on POST /translate (`serving.dialects`). ``generate_parameters`` are the server's decoding
options (those of POST /translate, checked by the same rules and limits); ``src_lang`` and ``tgt_lang`` pick the
model (each optional; both needed only when several models match, else 422 naming the pairs served); ``clean_up_tokenization_spaces``, ``truncation`` and the body's ``options``
(``wait_for_model``, ``use_cache``) are accepted and have no effect (the tokenizer decodes as it was saved; a source over the server's limit is refused, never truncated). The
reply has one ``translation_text`` per input, or, with ``num_return_sequences`` > 1, that many per input (a list
per input for a list of inputs). URLs, e-mail addresses, mentions, hashtags, inline code, numbers with units and
placeholders come out as written (`inference.protected`); ``parameters.protect`` false asks for the raw
translation. The task's output schema has no field for a score, so none is added (the
server's own /translate gives them with ``scores``). Errors are ``{"error": message}`` with the server's own
status codes.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from pydantic import ValidationError

from .dialects import dialect_router, protect_field, read_fields
from .documents import translate_documents
from .errors import error_reply
from .lanes import Lane, Lanes
from .options import DecodingRequest, RequestError, generate_kwargs, validation_message
from .state import Server

PARAMETERS = (
    "src_lang",
    "tgt_lang",
    "generate_parameters",
    "clean_up_tokenization_spaces",
    "truncation",
    "protect",
)


def _options(generate_parameters: Any) -> DecodingRequest:

    if generate_parameters is None:
        return DecodingRequest()
    if not isinstance(generate_parameters, dict):
        raise RequestError(422, "parameters.generate_parameters must be a JSON object of decoding options")
    try:
        return DecodingRequest.model_validate(generate_parameters)
    except ValidationError as err:
        message = validation_message([dict(e) for e in err.errors()]).replace(
            "the options are text, source, target, scores, ", "the options are "
        )
        raise RequestError(422, f"generate_parameters: {message}") from err


def _lane(lanes: Lanes, parameters: dict[str, Any]) -> Lane:
    """The model of ``src_lang`` / ``tgt_lang`` (each optional, both needed only when several models match);
    `RequestError` (422) for languages the server does not translate."""
    languages = []
    for name in ("src_lang", "tgt_lang"):
        value = parameters.get(name)
        if value is not None and not isinstance(value, str):
            raise RequestError(422, f"parameters.{name} must be a language code")
        languages.append(value)
    try:
        return lanes.route(languages[0], languages[1], ("src_lang", "tgt_lang"))
    except RequestError as err:
        raise RequestError(422, err.message) from err


def _inputs(fields: dict[str, Any], form: bool) -> tuple[str | list[str], dict[str, Any]]:
    """(inputs, parameters) of a request; `RequestError` (422) for a form, unknown fields, or malformed ones."""
    if form:
        raise RequestError(422, 'send a JSON body: {"inputs": "...", "parameters": {...}}')
    inputs, parameters = fields.get("inputs"), fields.get("parameters") or {}
    unknown = sorted(set(fields) - {"inputs", "parameters", "options"})
    if unknown:
        raise RequestError(422, f"unknown field(s) {', '.join(unknown)}: send inputs and parameters")
    if not (
        isinstance(inputs, str) or (isinstance(inputs, list) and all(isinstance(t, str) for t in inputs))
    ):
        raise RequestError(422, "inputs must be a string or a list of strings")
    if not isinstance(parameters, dict) or set(parameters) - set(PARAMETERS):
        raise RequestError(
            422,
            f"parameters must be a JSON object of {', '.join(PARAMETERS)} (given: {parameters!r})",
        )
    return inputs, parameters


async def task(request: Request, state: Server) -> Any:
    try:
        inputs, parameters = _inputs(*await read_fields(request))
        lane = _lane(state.lanes, parameters)
        options = _options(parameters.get("generate_parameters"))
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        nbest = await translate_documents(
            texts,
            [lane] * len(texts),
            lambda _: options,
            request,
            max_texts=state.limits.max_texts,
            markup=False,
            protect=protect_field(parameters.get("protect")),
        )
    except RequestError as err:
        return error_reply("huggingface", err.status, err.message)
    replies = [[{"translation_text": hyp} for hyp in hyps] for hyps in nbest]
    if isinstance(inputs, str):
        return replies[0]
    if generate_kwargs(options).get("num_return_sequences", 1) > 1:
        return replies
    return [hyps[0] for hyps in replies]


router = dialect_router("Hugging Face Inference", [("/", task, ["POST"])])
