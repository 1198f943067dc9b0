"""What a client sends to the translation server and what the server allows: the request bodies (pydantic models
built from `modeling.DECODING_OPTIONS` that refuse unknown fields), the server's limits and timeouts, and the
checks that turn a request into the keyword arguments of `inference.translate_nbest` or a `RequestError` (an HTTP
status and a message naming the option or limit).

The decoding options are `vanilla-transformer translate`'s and mean the same: options left out come from the
model's generation config; ``do_sample`` without ``num_beams`` samples with one beam; an exported engine takes
only the options of its registry entry (`inference.engines.ENGINES`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator

from vanilla_transformer.inference.markup_parse import MAX_DEPTH
from vanilla_transformer.modeling import DECODING_OPTIONS

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


def _check_option(value: Any, info: ValidationInfo) -> Any:
    """A request field's value against its rule in `modeling.DECODING_OPTIONS` (None: not given)."""
    # set for a field validator (pydantic types it as optional for model validators)
    assert info.field_name is not None
    if value is not None:
        DECODING_OPTIONS[info.field_name].check(value)
    return value


def _check_text(value: str | list[str]) -> str | list[str]:
    """Texts must be valid Unicode: JSON allows lone surrogate escapes ("\\ud800") that no tokenizer can encode."""
    for i, text in enumerate([value] if isinstance(value, str) else value):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            where = "text" if isinstance(value, str) else f"text {i}"
            raise ValueError(
                f"{where} holds a lone surrogate {text[err.start]!r} at character {err.start}, which is not "
                "valid Unicode: send UTF-8 text (a \\ud800-\\udfff escape in JSON only as part of a pair)"
            ) from None
    return value


def _decoding_request() -> type[BaseModel]:
    """The decoding fields of a request, built from their rules (`modeling.DECODING_OPTIONS`): each optional, of
    its option's kind (strict: no strings for numbers, no numbers for booleans), checked by its rule."""
    declared: dict[str, Any] = {
        name: (DECODING_OPTIONS[name].kind | None, Field(None, description=DECODING_OPTIONS[name].help))
        for name in DECODING_FIELDS
    }
    validators = {
        "check_option": field_validator(*DECODING_FIELDS)(_check_option),
        # the text field of the requests built on this one
        "check_text": field_validator("text", check_fields=False)(_check_text),
    }
    return create_model(
        "DecodingRequest",
        __config__=ConfigDict(extra="forbid", strict=True),
        __doc__="The decoding options of a request; any other field is refused (422 naming it).",
        __validators__=validators,
        **declared,
    )


if TYPE_CHECKING:
    from vanilla_transformer.inference.glossary import Glossary

    class DecodingRequest(BaseModel):
        """What static tools see of the generated model: the field the server reads by name (`generate_kwargs`
        reads the others), built from any of `DECODING_FIELDS` as keywords."""

        seed: int | None = None

        def __init__(self, **options: Any) -> None: ...

else:
    DecodingRequest = _decoding_request()


# the fields that pick the model when a server has several (`serving.lanes.Lanes.route`)
LANGUAGE_FIELDS = ("source", "target")
# the fields of POST /translate besides its decoding options
TRANSLATE_FIELDS = (
    "text",
    *LANGUAGE_FIELDS,
    "scores",
    "glossary",
    "alignments",
    "format",
    "split_sentences",
    "protect",
)
# the field that turns off protected spans, in every API (`inference.protected`)
PROTECT_HELP = (
    "true (the default): URLs, e-mail addresses, @mentions, #hashtags, inline code (backticks; <code> in html), "
    'numbers with units, placeholders ({name}, {0}, %s, %(name)s, {{var}}) and translate="no" content come out '
    "exactly as written, placed by the word alignment (docs/control.md, Protected spans); false: the model's raw "
    "translation"
)


GLOSSARY_HELP = (
    "terminology: source term -> target term (an empty target, or the term itself, keeps the term as written: "
    "do-not-translate). Each target term whose source term occurs in a text comes out in its translation, its "
    "words contiguous (lexically constrained beam search); texts without one translate as without it. Merged over "
    "the server's own glossary (serve --glossary), these entries winning. Needs beam search and --engine torch."
)


class TranslateRequest(DecodingRequest):
    """POST /translate: one text or a list of texts, and the languages when the server has several models."""

    text: str | list[str] = Field(..., description="a source text, or a list of them")
    source: str | None = Field(None, description="the source language (needed when several models match)")
    target: str | None = Field(None, description="the target language (needed when several models match)")
    scores: bool = Field(
        False,
        description="true: the reply's scores hold, per text, the sequence score, log_prob, length, tokens and "
        "token_log_probs of its translation (and of each n-best hypothesis): the records of `vanilla-transformer "
        "translate --output_format jsonl`",
    )
    glossary: dict[str, str] | None = Field(None, description=GLOSSARY_HELP)
    alignments: bool = Field(
        False,
        description="also return `alignments`: for each translation, its word alignment with the source in Pharaoh "
        "format ('i-j': source word i, target word j, from 0; words are space-separated, each Chinese character one "
        "word), from the cross-attention of the model's alignment_layer/alignment_heads; for markup transfer and "
        "highlighting (torch and ct2 engines)",
    )
    format: Literal["text", "html"] = Field(
        "text",
        description="html: each text is an HTML (or XML) document, translated with its markup kept: the text "
        "between block elements is translated whole and the inline elements (links, emphasis) go around the target "
        'words the word alignment links to their words; script, style, pre, code and translate="no" content is '
        "kept as written (docs/control.md, Markup). Each segment counts toward max_texts; not with scores or "
        "alignments",
    )
    split_sentences: bool = Field(
        False,
        description="true: each text (each segment, with format html) is cut into its sentences (at line breaks, "
        "kept in the output, and by the source language's sentence rules), each sentence is translated, and the "
        "translations are joined in the text's layout; the n-best hypothesis k joins hypothesis k of each sentence. "
        "A model trained on sentences translates a long paragraph far better this way (docs/control.md, Long "
        "texts), and a text over max_source_tokens can be translated when each sentence is within it. With "
        "alignments, each sentence is aligned with its translation and the links are numbered over the whole text. "
        "Not with scores",
    )
    protect: bool = Field(
        True,
        description=PROTECT_HELP + "; a text translated with scores or alignments (without split_sentences) "
        "is the raw translation, which they describe",
    )


class StreamRequest(DecodingRequest):
    """POST /translate/stream: one text, decoded greedily or by sampling."""

    text: str
    source: str | None = Field(None, description="the source language (needed when several models match)")
    target: str | None = Field(None, description="the target language (needed when several models match)")


class ScoreRequest(BaseModel):
    """POST /score: (source, target) pairs to score by forced decoding (`inference.forced_decoding`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    pairs: list[Annotated[list[str], Field(min_length=2, max_length=2)]] = Field(
        ..., description="[source, target] pairs: each target is scored as a translation of its source"
    )
    length_penalty: float | None = Field(
        None,
        description="the exponent of the length that `score` divides the log-probability by (default: the "
        "model's generation config's), as beam search ranks finished hypotheses",
    )
    source: str | None = Field(
        None,
        description="the source language (needed when several models match; a multilingual model marks the "
        "sources with it)",
    )
    target: str | None = Field(
        None,
        description="the target language (needed when several models match, and by a multilingual model: the "
        "targets are scored as translations into it, its language token first)",
    )

    @field_validator("pairs")
    @classmethod
    def check_pairs(cls, value: list[list[str]]) -> list[list[str]]:
        _check_text([text for pair in value for text in pair])
        return value

    @field_validator("length_penalty")
    @classmethod
    def check_length_penalty(cls, value: float | None) -> float | None:
        if value is not None:
            DECODING_OPTIONS["length_penalty"].check(value)
        return value


def _limit(default: Any, help_text: str) -> Any:
    return field(default=default, metadata={"help": help_text})


@dataclass(frozen=True)
class Limits:
    """What one request may ask of the server and how long a connection may keep it waiting; each field is the
    `vanilla-transformer serve` option of its name (``max_new_tokens``: --max_new_tokens_limit) and shows in
    /info. ``max_source_tokens`` None: the model's own maximum."""

    max_request_bytes: int = _limit(65536, "largest request body in bytes (64 KiB)")
    max_texts: int = _limit(64, "most texts per request")
    max_source_tokens: int | None = _limit(None, "longest source in tokens (default: the model's maximum)")
    max_new_tokens: int = _limit(
        256, "largest max_new_tokens; a request without one gets the model's default, lowered to this"
    )
    max_num_beams: int = _limit(8, "largest num_beams")
    max_num_return_sequences: int = _limit(8, "largest num_return_sequences (n-best or samples per text)")
    max_streams: int = _limit(4, "streams decoding at once")
    max_markup_depth: int = _limit(
        MAX_DEPTH, "most elements open at once in an HTML or XML text (format html, tag_handling), else 413"
    )
    max_glossaries: int = _limit(100, "DeepL glossaries kept per API key, in memory (/v2/glossaries)")
    max_glossary_entries: int = _limit(10000, "entries of one DeepL glossary")
    max_file_bytes: int = _limit(
        20 * 2**20, "largest document file in bytes (POST /translate_file, /v2/document; 20 MiB)"
    )
    max_file_unzipped_bytes: int = _limit(
        200 * 2**20,
        "most bytes a zipped document file (docx, pptx, xlsx, odt, odp, epub) may unzip to (200 MiB)",
    )
    max_file_paragraphs: int = _limit(20_000, "most paragraphs in a document file")
    body_timeout_s: float = _limit(30.0, "seconds a request body may take to arrive (then 408)")
    idle_timeout_s: float = _limit(5.0, "seconds an idle keep-alive connection is kept open")

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and not value > 0:
                raise ValueError(
                    f"{f.name}={value!r} is invalid: expected a number > 0 ({f.metadata['help']})"
                )

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


def request_glossary(
    server: Glossary | None, given: dict[str, str] | None, tokenizer: Any, positions: int | None
) -> Glossary | None:
    """The glossary a request translates with: the server's, with the request's entries over it (None: neither);
    `RequestError` (422) for an entry without a source term, and for target terms of the request that the model
    cannot write (`inference.glossary.check_terms` with ``tokenizer`` and the decoder's ``positions``; the
    server's own terms are checked when it starts)."""
    if not given:
        return server
    from vanilla_transformer.inference.glossary import Glossary, check_terms

    try:
        check_terms(tokenizer, Glossary.from_pairs(given.items()), positions)
        return Glossary.from_pairs({**dict(server.entries if server else ()), **given}.items())
    except ValueError as err:
        raise RequestError(422, str(err)) from err


def check_request(
    kwargs: dict[str, Any],
    seed: int | None,
    *,
    engine: str,
    generation_config: Any,
    limits: Limits,
) -> None:
    """Raise `RequestError` (422) for options out of range, beyond the server's limits, or that the engine does not
    take (`inference.engines.check_engine_options`), and for a ``glossary`` that cannot be honoured
    (`inference.constraints.check_glossary_decoding`)."""
    from vanilla_transformer.inference.constraints import check_glossary_decoding
    from vanilla_transformer.inference.engines import check_engine_options
    from vanilla_transformer.modeling import check_generation_arguments

    try:
        options = {name: value for name, value in kwargs.items() if name != "glossary"}
        check_generation_arguments(options, generation_config)
        if kwargs.get("glossary") is not None:
            check_glossary_decoding(kwargs.get("do_sample", getattr(generation_config, "do_sample", False)))
        if engine != "torch":
            check_engine_options(engine, {**options, "seed": seed, "glossary": kwargs.get("glossary")})
    except ValueError as err:
        raise RequestError(422, str(err).replace("--", "")) from err
    asked = {
        "num_beams": kwargs.get("num_beams", generation_config.num_beams) or 1,
        "num_return_sequences": kwargs.get("num_return_sequences"),
        "max_new_tokens": kwargs.get("max_new_tokens"),
    }
    for name, limit_name in (
        ("num_beams", "max_num_beams"),
        ("num_return_sequences", "max_num_return_sequences"),
        ("max_new_tokens", "max_new_tokens"),
    ):
        value, limit = asked[name], getattr(limits, limit_name)
        if value is not None and value > limit:
            raise RequestError(
                422,
                f"{name}={value} exceeds the server's limit {limit_name}={limit}: ask for at most {limit}",
            )


def bounded_kwargs(kwargs: dict[str, Any], generation_config: Any, limits: Limits) -> dict[str, Any]:
    """``kwargs`` (checked by `check_request`) with ``max_new_tokens`` set to the server's limit when the request
    leaves it to a model default above the limit (or to none)."""
    default = getattr(generation_config, "max_new_tokens", None)
    if "max_new_tokens" in kwargs or (default is not None and default <= limits.max_new_tokens):
        return kwargs
    return {**kwargs, "max_new_tokens": limits.max_new_tokens}


def work_rows(kwargs: dict[str, Any], generation_config: Any) -> int:
    """The rows one source text becomes in `generate()`: its beams, or its samples when it samples more
    sequences than beams."""
    beams = kwargs.get("num_beams", generation_config.num_beams) or 1
    return max(beams, kwargs.get("num_return_sequences", 1))


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


def validation_message(errors: Sequence[dict]) -> str:
    """One line for a request's validation errors: unknown options named with the known ones, malformed JSON,
    else each rule's own message (at most five)."""
    unknown = [str(e["loc"][-1]) for e in errors if e.get("type") == "extra_forbidden"]
    if unknown:
        return (
            f"unknown option(s) {', '.join(repr(u) for u in unknown)}; the options are "
            f"{', '.join((*TRANSLATE_FIELDS, *DECODING_FIELDS))}"
        )
    if any(e.get("type") == "json_invalid" for e in errors):
        return f"malformed JSON: {errors[0].get('ctx', {}).get('error', errors[0].get('msg'))}"
    # a rule's own message names the option and the fix (`modeling.DECODING_OPTIONS`, the texts' check)
    return "; ".join(
        str(e["ctx"]["error"])
        if e.get("type") == "value_error"
        else f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e.get('msg')}"
        for e in errors[:5]
    )
