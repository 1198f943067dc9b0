"""The models a server translates with, by language pair: each served model (`ServedModel`) on its own `Lane`
(its batcher, its limits, its translate, score and align paths), and `Lanes`, which picks the lane of a request's
languages.

A model translates between the languages of its model card (`ServedModel.languages`, the card's ``language``
metadata, or the pair named on the command line): two languages make it a translator from the first to the second
(`language_pair`). A multilingual model (its tokenizer has language codes: NLLB-200, M2M100, OPUS-MT multi-target,
`inference.languages`) translates every pair of its languages, named by their ISO 639 codes (``fr``, ``zh``; the
model's own codes, ``fra_Latn``, are accepted too); an OPUS-MT multi-target model reads the first language of its
card, or any source when its card names none. Each API picks the model by its own language fields
(`Lanes.select`, `Lanes.route`, `Lanes.detect`); a pair not served is the API's own error naming what is served.
When two models translate a requested pair, the model of that one pair wins over a multilingual one, and among
models of the same kind the one given first. A lone model whose card names no pair and whose tokenizer has no
language codes is served, but the APIs that route by language (LibreTranslate, DeepL) refuse its requests with a
message saying how to name the languages.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from vanilla_transformer.inference.alignment import WordAlignment
from vanilla_transformer.inference.glossary import Glossary
from vanilla_transformer.inference.languages import iso_language, model_languages, shown_codes
from vanilla_transformer.inference.markup import MAX_DEPTH, TagRules
from vanilla_transformer.inference.translate import Hypothesis
from vanilla_transformer.modeling import max_source_length, position_limit

from .batcher import Batcher
from .options import (
    DECODING_FIELDS,
    TRANSLATE_FIELDS,
    DecodingRequest,
    Limits,
    RequestError,
    bounded_kwargs,
    check_request,
    generate_kwargs,
    request_glossary,
    source_lengths,
    work_rows,
)


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
        """(source, target) of the card's languages (`language_pair`); None when it names no two."""
        return language_pair(self.languages)


def language_pair(languages: Sequence[str]) -> tuple[str, str] | None:
    """(source, target) of a model card's ``language`` list: its two languages in order; None otherwise."""
    return (languages[0], languages[1]) if len(languages) == 2 else None


def no_pair_message() -> str:
    return (
        "the model card names no language pair: add `language: [SOURCE, TARGET]` (ISO 639 codes, source first) "
        "to the metadata of the model folder's README.md (a trained model's card names the languages of its "
        "training data: --source_lang/--target_lang or the data file's name)"
    )


def check_pairs(
    models: Sequence[tuple[str, tuple[str, str] | None]], multilingual: Collection[str] = ()
) -> None:
    """`ValueError` for the (name, pair) of the models to serve when several are served and one names no pair (the
    ``multilingual`` models, by name, name none and need none), or when two name the same pair: the server routes
    each request to its pair's one model."""
    seen: dict[tuple[str, str], str] = {}
    for name, pair in models:
        if pair is None and name in multilingual:
            continue
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


def read_share(tokenizer: Any, text: str) -> float:
    """The share of ``text``'s tokens, in percent, that ``tokenizer``'s vocabulary holds (not the unknown token):
    how much of the text a model can read (100 for a text without tokens)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    unknown = getattr(tokenizer, "unk_token_id", None)
    if not ids:
        return 100.0
    return round(100.0 * sum(i != unknown for i in ids) / len(ids), 1)


async def _client_left(request: Request) -> None:
    """Return once the client of ``request`` (whose body has been read) disconnects."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class Lane:
    """One served model's translate path: its ``served`` model, its ``limits`` (`effective_limits`), its
    ``batcher`` and the server's ``glossary``."""

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
        self.multilingual = model_languages(served.tokenizer)
        # a multilingual lane bound to one request (`for_languages`): its languages as the request named them, and
        # as the model's codes (None: the tokenizer's own)
        self.request_languages: tuple[str | None, str | None] = (None, None)
        self.model_codes: tuple[str | None, str | None] = (None, None)

    @property
    def pair(self) -> tuple[str, str] | None:
        """(source, target) language codes of the model, or None when its card does not name two; of a multilingual
        lane, the pair of the request it is bound to (None before, and while its source is unknown)."""
        if self.multilingual is None:
            return self.served.pair
        source, target = self.request_languages
        return (source, target) if source is not None and target is not None else None

    @property
    def languages(self) -> list[str]:
        """The ISO 639 codes of a multilingual model's languages, sorted (none for a model of one pair)."""
        if self.multilingual is None:
            return []
        return sorted({iso_language(code) for code in self.multilingual.codes})

    def sources(self) -> list[str]:
        """The source languages this model reads (empty: any, for an OPUS-MT multi-target model whose card names
        no language; none for a model whose card names no pair)."""
        if self.multilingual is None:
            return [self.served.pair[0]] if self.served.pair else []
        return self.languages if self.multilingual.marks_source else self.served.languages[:1]

    def targets(self) -> list[str]:
        """The target languages this model translates into."""
        if self.multilingual is None:
            return [self.served.pair[1]] if self.served.pair else []
        return self.languages

    def translates(self, source: str | None, target: str | None) -> bool:
        """Whether this model translates ``source`` (None or "auto": any) into ``target`` (None: any)."""
        any_source = source in (None, "auto")
        if self.multilingual is None:
            pair = self.served.pair
            return (
                pair is not None
                and (any_source or pair[0] == source)
                and (target is None or pair[1] == target)
            )
        languages = self.multilingual
        if any_source:
            source_ok = True
        elif languages.marks_source:
            source_ok = languages.code(str(source)) is not None
        else:
            source_ok = not self.sources() or source in self.sources()
        return source_ok and (target is None or languages.code(target) is not None) and source != target

    def for_languages(self, source: str | None, target: str | None) -> Lane:
        """This lane for a request from ``source`` (None or "auto": unknown) into ``target``: a multilingual lane's
        copy bound to them (`prepare` puts them into the decoding options), any other lane itself."""
        if self.multilingual is None:
            return self
        bound = copy.copy(self)
        known = source if source not in (None, "auto") else None
        bound.request_languages = (known, target)
        marks = self.multilingual.marks_source
        bound.model_codes = (
            self.multilingual.code(known) if known is not None and marks else None,
            self.multilingual.code(target) if target is not None else None,
        )
        return bound

    def read_share(self, text: str) -> float:
        """`read_share` of this model's tokenizer."""
        return read_share(self.served.tokenizer, text)

    def prepare(self, request: DecodingRequest, texts: list[str]) -> tuple[dict[str, Any], int]:
        """The generate kwargs of ``request`` and its work in tokens x rows; `RequestError` (422) for options
        or texts over the rules and limits."""
        kwargs = generate_kwargs(request)
        glossary = request_glossary(
            self.glossary,
            getattr(request, "glossary", None),
            self.served.tokenizer,
            position_limit(getattr(self.served.model, "config", None)),
        )
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
        if self.multilingual is not None:
            kwargs["src_lang"], kwargs["tgt_lang"] = self.request_codes()
        return kwargs, sum(lengths) * work_rows(kwargs, self.generation_config)

    def request_codes(self) -> tuple[str | None, str | None]:
        """The model's codes of the request's (source, target) languages (None: none, or the tokenizer's own
        source); `RequestError` (422) for a multilingual model without a target language."""
        if self.multilingual is not None and self.model_codes[1] is None:
            raise RequestError(
                422,
                f"{self.served.name} translates into {len(self.languages)} languages: send the target language "
                f"({shown_codes(self.languages)})",
            )
        return self.model_codes

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
        """The texts of `translate`'s n-best lists: the translate path of the other APIs and of documents."""
        nbest = await self.translate(texts, options, connection)
        return [[hypothesis.text for hypothesis in hypotheses] for hypotheses in nbest]

    async def score(self, pairs: list[list[str]], length_penalty: float | None) -> list[dict[str, Any]]:
        """The `inference.forced_decoding.score_record` of each (source, target) pair, scored in a worker thread
        (a multilingual model's in the request's languages), one request at a time per model; `RequestError` for no
        pairs, more than ``max_texts`` (413), a source over ``max_source_tokens`` or a target over the decoder's
        positions (422)."""
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
        try:
            scores = await self.forced_decoding(score_pairs, sources, targets)
        except ValueError as err:
            raise RequestError(422, str(err)) from err
        return [score_record(scored, self.served.tokenizer, length_penalty) for scored in scores]

    async def forced_decoding(self, function: Any, sources: list[str], targets: list[str]) -> Any:
        """``function(model, tokenizer, sources, targets, src_lang=, tgt_lang=)`` (scores, alignments: forced
        decoding) in the request's languages, in a worker thread, one forced-decoding request at a time per model."""
        src_lang, tgt_lang = self.request_codes()
        async with self.scoring:
            return await asyncio.to_thread(
                function,
                self.served.model,
                self.served.tokenizer,
                sources,
                targets,
                src_lang=src_lang,
                tgt_lang=tgt_lang,
            )

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
        """The word alignment of each translation with its source (`inference.alignment.align_words`; a multilingual
        model's in the request's languages), computed in a worker thread, one forced-decoding request at a time per
        model."""
        from vanilla_transformer.inference.alignment import align_words

        try:
            return await self.forced_decoding(align_words, sources, translations)
        except ValueError as err:
            raise RequestError(500, f"alignments failed: {err}") from err

    @property
    def alignable(self) -> bool:
        """Whether this model's engine returns attention weights (word alignments place a document's markup;
        without them, markup is placed by relative position)."""
        try:
            self.check_alignable()
        except RequestError:
            return False
        return True

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
            "languages": self.languages or served.languages,
            "defaults": {
                name: getattr(self.generation_config, name, None)
                for name in ("num_beams", "length_penalty", "max_new_tokens")
            },
            "options": options,
            "streaming": served.engine == "torch",
            "limits": self.limits.as_dict(),
            "batching": {**batching, "scheduling": self.batcher.mode if batching["enabled"] else "none"},
            "stats": {**self.batcher.stats, "queued": self.batcher.queued},
        }


class Lanes:
    """The served models' lanes (in the order they were given) and which one translates a request's languages."""

    def __init__(self, lanes: Sequence[Lane]):
        self.lanes = list(lanes)

    def __iter__(self):
        return iter(self.lanes)

    def __len__(self) -> int:
        return len(self.lanes)

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """The (source, target) pairs served, in order (a multilingual model's: every pair of its languages)."""
        pairs = dict.fromkeys(lane.pair for lane in self.lanes if lane.pair is not None)
        for lane in self.lanes:
            if lane.multilingual is not None:
                pairs.update(dict.fromkeys((s, t) for s in lane.sources() for t in lane.targets() if s != t))
        return list(pairs)

    def served_text(self) -> str:
        """What the server translates, for messages: "this server translates zh to en and de to en"."""
        pairs = [f"{lane.pair[0]} to {lane.pair[1]}" for lane in self.lanes if lane.pair is not None]
        pairs += [
            f"between {len(lane.languages)} languages ({shown_codes(lane.languages)})"
            if lane.multilingual.marks_source or not lane.sources()
            else f"{lane.sources()[0]} into {len(lane.languages)} languages ({shown_codes(lane.languages)})"
            for lane in self.lanes
            if lane.multilingual is not None
        ]
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
    ) -> list[Lane]:
        """The lanes that translate ``source`` (None or "auto": any) into ``target`` (None: any); ``names``
        are the API's names of the two fields, for the messages. `RequestError` (400) when no model does, naming
        the pairs served, and when the server's one model names no pair and ``need_pair`` (the APIs that route by
        language); without ``need_pair`` such a model serves every request, whatever languages it names."""
        if len(self.lanes) == 1 and self.lanes[0].pair is None and self.lanes[0].multilingual is None:
            if need_pair:
                raise RequestError(400, no_pair_message())
            return list(self.lanes)
        any_source = source in (None, "auto")
        if not any_source and not any(lane.translates(source, None) for lane in self.lanes):
            raise RequestError(400, f"{names[0]} {source} is not supported: {self.served_text()}")
        found = [lane for lane in self.lanes if lane.translates(source, target)]
        if not found:
            wanted = f"{names[1]} {target}" if any_source else f"{source} to {target}"
            raise RequestError(400, f"{wanted} is not supported: {self.served_text()}")
        # the models of the one pair first, then the multilingual ones, each in the order given (a stable sort)
        found.sort(key=lambda lane: lane.multilingual is not None)
        return [lane.for_languages(source, target) for lane in found]

    def route(
        self, source: str | None, target: str | None, names: tuple[str, str] = ("source", "target")
    ) -> Lane:
        """The one lane that translates ``source`` into ``target`` (`select`: the first by the module docstring's
        rule when both are named); `RequestError` (400) when several do and a language is left out, naming the
        fields to send."""
        found = self.select(source, target, names)
        if len(found) > 1 and (source in (None, "auto") or target is None):
            raise RequestError(
                400,
                f"several models translate this: send {names[0]} and {names[1]} ({self.served_text()})",
            )
        return found[0]

    @staticmethod
    def detect_source(text: str, lanes: Sequence[Lane]) -> tuple[Lane, float] | None:
        """The first lane of ``lanes`` that translates the source language `inference.languages.detect_language`
        finds for ``text`` among theirs (bound to it, for a multilingual lane), with its probability in percent;
        None when the detector knows none of their source languages."""
        from vanilla_transformer.inference.languages import detect_language

        sources = list(dict.fromkeys(source for lane in lanes for source in lane.sources()))
        for language, confidence in detect_language(text, sources)[:1]:
            for lane in lanes:
                target = lane.pair[1] if lane.pair is not None else lane.request_languages[1]
                if lane.translates(language, target):
                    return lane.for_languages(language, target), confidence
        return None

    def detect(
        self,
        text: str,
        lanes: Sequence[Lane],
        markup: bool = False,
        tags: TagRules | None = None,
        max_depth: int = MAX_DEPTH,
    ) -> tuple[Lane, float]:
        """The lane of ``lanes`` for the source language of ``text`` (with ``markup``, of the text of its segments,
        cut by ``tags``; `RequestError` 413 for markup nesting more than ``max_depth`` elements) and the confidence
        in percent: the language detector's (`detect_source`), else the lane whose vocabulary reads the largest
        share of the text (`Lane.read_share`), the first of them on a tie, and that share."""
        if markup:
            from vanilla_transformer.inference.markup import MarkupTooDeep, split_document

            try:
                segments = split_document(text, tags, max_depth).segments
            except MarkupTooDeep as err:
                raise RequestError(413, str(err)) from err
            text = " ".join(segment.text for segment in segments)
        detected = self.detect_source(text, lanes)
        if detected is not None:
            return detected
        shares = [lane.read_share(text) for lane in lanes]
        best = max(range(len(shares)), key=lambda i: (shares[i], -i))
        return lanes[best], shares[best]

    async def detect_each(
        self,
        texts: Sequence[str],
        lanes: Sequence[Lane],
        markup: bool = False,
        tags: TagRules | None = None,
        max_depth: int = MAX_DEPTH,
    ) -> list[tuple[Lane, float]]:
        """`detect` of each of ``texts``, in order, run in a worker thread (`asyncio.to_thread`): parsing markup
        and detecting languages leave the event loop free for the other clients."""
        return await asyncio.to_thread(
            lambda: [self.detect(text, lanes, markup, tags, max_depth) for text in texts]
        )
