"""What a client sends to the translation server and what the server allows: the request bodies (pydantic models
that refuse unknown fields), the server's limits, and the checks that turn a request into the keyword arguments of
`inference.translate_nbest` or a `RequestError` (an HTTP status and a message naming the option or limit).

The decoding options are `vanilla-transformer translate`'s and mean the same: options left out come from the
model's generation config; ``do_sample`` without ``num_beams`` samples with one beam; an exported engine takes
only the options of its registry entry (`inference.engines.ENGINES`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DECODING_FIELDS = (
    "num_beams",
    "length_penalty",
    "max_new_tokens",
    "num_return_sequences",
    "do_sample",
    "temperature",
    "top_k",
    "top_p",
    "seed",
)


class RequestError(Exception):
    """A request the server refuses: ``status`` (413 or 422) and ``message`` (the option or limit, and the fix)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class DecodingRequest(BaseModel):
    """The decoding options of a request; any other field is refused (422 naming it)."""

    model_config = ConfigDict(extra="forbid")

    num_beams: int | None = Field(None, description="1 = greedy (default: the model's generation config)")
    length_penalty: float | None = Field(None, description="beam score = log p / length**alpha")
    max_new_tokens: int | None = Field(None, description="cap on generated tokens")
    num_return_sequences: int | None = Field(
        None, description="n-best: hypotheses per text, at most num_beams"
    )
    do_sample: bool | None = Field(None, description="sample instead of searching (engine torch)")
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = Field(None, description="makes sampling reproducible (the request then runs alone)")


class TranslateRequest(DecodingRequest):
    """POST /translate: one text or a list of texts."""

    text: str | list[str] = Field(..., description="a source text, or a list of them")


class StreamRequest(DecodingRequest):
    """POST /translate/stream: one text, decoded greedily or by sampling."""

    text: str


@dataclass(frozen=True)
class Limits:
    """What one request may ask of the server. ``max_source_tokens`` None: the model's own maximum."""

    max_request_bytes: int = 65536
    max_texts: int = 64
    max_source_tokens: int | None = None
    max_new_tokens: int = 256
    max_num_beams: int = 8
    max_streams: int = 4

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def generate_kwargs(request: DecodingRequest) -> dict[str, Any]:
    """The request's decoding options as `translate_nbest` keyword arguments (given ones only), with
    `vanilla-transformer translate`'s rule that sampling without ``num_beams`` uses one beam."""
    values = {name: getattr(request, name) for name in DECODING_FIELDS if name != "seed"}
    if values["do_sample"] and values["num_beams"] is None:
        values["num_beams"] = 1
    if values["do_sample"] is False:
        values["do_sample"] = None
    return {name: value for name, value in values.items() if value is not None}


def check_request(
    kwargs: dict[str, Any],
    seed: int | None,
    *,
    engine: str,
    generation_config: Any,
    limits: Limits,
) -> None:
    """Raise `RequestError` (422) for options out of range, beyond the server's limits, or that the engine does not
    take (`inference.engines.check_engine_options`)."""
    from vanilla_transformer.inference.engines import check_engine_options
    from vanilla_transformer.modeling import check_generation_arguments

    try:
        check_generation_arguments(kwargs, generation_config)
        if engine != "torch":
            check_engine_options(engine, {**kwargs, "seed": seed})
    except ValueError as err:
        raise RequestError(422, str(err).replace("--", "")) from err
    beams = kwargs.get("num_beams", generation_config.num_beams) or 1
    if beams > limits.max_num_beams:
        raise RequestError(
            422, f"num_beams={beams} exceeds the server's limit max_num_beams={limits.max_num_beams}"
        )
    new_tokens = kwargs.get("max_new_tokens")
    if new_tokens is not None and new_tokens > limits.max_new_tokens:
        raise RequestError(
            422,
            f"max_new_tokens={new_tokens} exceeds the server's limit max_new_tokens={limits.max_new_tokens}",
        )


def source_lengths(tokenizer: Any, texts: list[str], limit: int | None) -> list[int]:
    """The token count of each text (special tokens included; 0 for an empty text, which is not translated);
    `RequestError` (422) naming the first text longer than ``limit`` tokens."""
    todo = [i for i, text in enumerate(texts) if text.strip()]
    lengths = [0] * len(texts)
    if todo:
        encoded = tokenizer([texts[i] for i in todo], add_special_tokens=True)["input_ids"]
        for i, ids in zip(todo, encoded):
            lengths[i] = len(ids)
    for i, length in enumerate(lengths):
        if limit is not None and length > limit:
            raise RequestError(
                422,
                f"text {i} has {length} tokens, more than the server's limit max_source_tokens={limit}: "
                "shorten or split it",
            )
    return lengths
