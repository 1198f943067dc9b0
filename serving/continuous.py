"""Continuous (iteration-level) batching for the torch engine: a scheduler that batches at every decoding step.

`ContinuousBatcher` is a `serving.batcher.Batcher` (the same ``submit`` of /translate requests, the same futures,
statistics and ``close``) whose worker does not run one engine call per group of requests: it keeps one running
`inference.decoding.ContinuousBatch` per set of decoding options and, between two decoding steps, lets the waiting
requests join (their sources encoded, their cross-attention keys and values and their self-attention rows added)
while the source tokens x beams of the requests decoding stay within ``max_batch_tokens`` (a request larger than
that runs when nothing else does), and takes out the sentences that are done: a request's reply is sent as soon as
its last sentence ends, whatever the others in the batch still decode. Streams (`serving.streaming.TokenStream`)
join the same loop and get each token as its step ends. A request whose client went away (its future cancelled,
its stream cancelled) leaves the batch at the next step.

Each sentence decodes at its own step count and positions, with its own length limit (computed as
`inference.translate_hypotheses` computes it for that request alone: ``max_len_a`` times the longest source of its
batch there, plus ``max_len_b``), its beams' stopping rules and length penalty applied to it alone: its reply is the
one it gets alone (same options, same engine). Greedy search and beam search join the running batch, n-best lists
and sequence scores included (token scores by forced decoding when the request ends). What cannot join goes to
request-level batching (a `Batcher` of its own, beside the loop): sampling and seeded requests (`generate()`
draws from torch's one global generator, `serving.batcher.random_draws`), a glossary with terms for one of the
request's texts (lexically constrained beam search), ``serve --shortlist`` (a batch's shortlist is the union over
its sources), the ``generate`` decoder (`inference.decoding.chosen_decoder`) and the generation settings the
decoding loop does not implement (`inference.decoding.unsupported`). A multilingual model's requests join like the
others, whatever their languages: their sources are marked as `inference.translate` marks them, and each sentence
decodes with its own forced target-language token.

Between two steps, every request waiting joins (within the token budget): the sources of those that join together
are tokenized in one call per language pair and encoded in one encoder call per set of decoding options, and their
rows are written into the running batch's buffers, which keep room to spare (`inference.decoding.ContinuousBatch`),
so that joining and leaving copy no whole buffer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from .batcher import SCHEDULING, Batcher, Pending, samples

logger = logging.getLogger(__name__)

# sets of request options whose planned decoding options are kept: clients choose the options, so the plans kept are
# bounded (past the bound they are planned afresh)
MAX_PLANS = 256
_UNPLANNED = object()


@dataclass
class _Job:
    """One request (or stream) decoding in the loop: its batch's ``key``, its sentences' source ids and length
    limits by text index (`ContinuousBatcher._encode` fills them for a request), the n-best lists of its empty
    texts, and what its finished sentences gave."""

    item: Any
    key: str
    options: dict[str, Any]
    sources: dict[int, list[int]]
    new_tokens: dict[int, int | None]
    hypotheses: list[Any]
    results: dict[int, Any] = field(default_factory=dict)
    # a multilingual model's languages as `inference.languages.resolve_languages` returns them, and the options
    # they add (`inference.languages.target_options`: the forced first token of the target language)
    languages: tuple[str | None, str | None] = (None, None)
    language_options: dict[str, Any] = field(default_factory=dict)
    # the first token decoding forces (scored as `inference.translate` scores it: log-probability 0)
    forced_token_id: int | None = None

    @property
    def cancelled(self) -> bool:
        return self.item.cancelled if isinstance(self.item, StreamJob) else self.item.future.cancelled()


@dataclass
class StreamJob:
    """A stream (`serving.streaming.TokenStream`) queued for the loop, with its `generate()` options and its
    source's token ids."""

    stream: Any
    kwargs: dict[str, Any]
    ids: list[int]

    @property
    def tokens(self) -> int:
        return len(self.ids)

    @property
    def cancelled(self) -> bool:
        return self.stream.cancelled


class ContinuousBatcher(Batcher):
    """The loop of the module docstring for ``model`` (this project's PyTorch encoder-decoder) and ``tokenizer``.
    ``on_step(rows)`` is called in the worker after each round of steps with the rows decoded (sentences x beams,
    all batches; 0 once the loop is idle). The other arguments are `Batcher`'s, also given to the request-level
    batcher of what cannot join (``fallback``)."""

    mode = "continuous"

    def __init__(
        self, model: Any, tokenizer: Any, *, on_step: Callable[[int], None] | None = None, **options: Any
    ):
        super().__init__(model, tokenizer, **options)
        self.fallback = Batcher(model, tokenizer, **{**options, "sampling_lock": self.sampling_lock})
        self.on_step = on_step
        # decoding steps run, sentences that left a batch because their client went away, requests sent to the
        # request-level batcher
        self.stats.update(steps=0, left=0, fallback=0)
        self._batches: dict[str, Any] = {}
        self._jobs: dict[int, _Job] = {}
        self._active_tokens = 0
        self._next_id = 0
        # the planned decoding options (and hypotheses per text) of each set of request options; None: cannot join
        self._plans: dict[str, tuple[dict[str, Any], int] | None] = {}

    def start(self) -> ContinuousBatcher:
        self.fallback.start()
        super().start()
        return self

    @property
    def alive(self) -> bool:
        return super().alive and self.fallback.alive

    @property
    def queued(self) -> int:
        return super().queued + self.fallback.queued

    @property
    def rows(self) -> int:
        """The rows decoded at each step now (sentences x beams of every running batch, and the request-level
        batcher's)."""
        return sum(batch.row_count for batch in list(self._batches.values())) + self.fallback.rows

    def close(self, timeout: float | None = None) -> None:
        super().close(timeout)
        self.fallback.close(timeout)

    def stream(self, stream: Any) -> bool:
        """Queue ``stream`` (a `serving.streaming.TokenStream` of one text, started) to decode in the loop with its
        options; False (nothing queued) when it cannot join (module docstring): it then generates on its own."""
        if self._plan_options(stream.kwargs, stream.seed) is None:
            return False
        self.enqueue(StreamJob(stream, stream.kwargs, stream.source_ids()))
        return True

    def _plan_options(self, kwargs: dict[str, Any], seed: int | None) -> tuple[dict[str, Any], int] | None:
        """The decoding options of a request that can join the loop (its glossary and languages left out) and its
        hypotheses per text (`inference.translate.decoding_options`, worked out once per set of options), or None
        (options that cannot join, or that the request-level batcher refuses with their error)."""
        from vanilla_transformer.inference.decoding import chosen_decoder, unsupported
        from vanilla_transformer.inference.translate import decoding_options

        if seed is not None or chosen_decoder() != "loop":
            return None
        options = {k: v for k, v in kwargs.items() if k not in ("glossary", "src_lang", "tgt_lang")}
        key = _key(options)
        # read once: the event loop (streams) and the worker plan side by side
        found = self._plans.get(key, _UNPLANNED)
        if found is not _UNPLANNED:
            planned = cast("tuple[dict[str, Any], int] | None", found)
        else:
            if len(self._plans) >= MAX_PLANS:
                self._plans.clear()
            planned = None
            if not samples(options, self.model.generation_config) and "shortlist" not in options:
                if unsupported(self.model, options) is None:
                    try:
                        planned = decoding_options(self.model, self.tokenizer, options)
                    except ValueError:
                        planned = None
            self._plans[key] = planned
        return None if planned is None else (dict(planned[0]), planned[1])

    def _plan(self, item: Any) -> _Job | None:
        """The `_Job` of a queued request or stream (a request's sources not encoded yet), or None when it cannot
        join (module docstring)."""
        from vanilla_transformer.inference.forced_decoding import pair_languages
        from vanilla_transformer.inference.languages import target_options
        from vanilla_transformer.inference.translate import Hypothesis, capped_max_new_tokens

        if isinstance(item, StreamJob):
            options = dict(item.kwargs)
            new_tokens = options.pop("max_new_tokens", None)
            language_options = item.stream.language_options()
            sources, limits = {0: item.ids}, {0: new_tokens}
            return _Job(
                item, _key(options), options, sources, limits, [None], language_options=language_options
            )
        glossary = item.kwargs.get("glossary")
        if glossary is not None and any(glossary.terms_for(text) for text in item.texts):
            return None
        planned = self._plan_options(item.kwargs, item.seed)
        if planned is None:
            return None
        options, n = planned
        src_lang, tgt_lang, forced_token_id = pair_languages(
            self.model, self.tokenizer, item.kwargs.get("src_lang"), item.kwargs.get("tgt_lang")
        )
        language_options = target_options(self.tokenizer, self.model.generation_config, tgt_lang)
        # the length limit before the sources' widths lower it (`_encode`)
        wanted = capped_max_new_tokens(self.model, options)
        options.pop("max_new_tokens", None)
        todo = [i for i, text in enumerate(item.texts) if text.strip()]
        hypotheses = [[Hypothesis("")] * n if i not in todo else None for i in range(len(item.texts))]
        sources, new_tokens = dict.fromkeys(todo, []), dict.fromkeys(todo, wanted)
        return _Job(
            item,
            _key(options),
            options,
            sources,
            new_tokens,
            hypotheses,
            languages=(src_lang, tgt_lang),
            language_options=language_options,
            forced_token_id=forced_token_id,
        )

    def _encode(self, jobs: list[_Job]) -> None:
        """Encode the sources of the requests of ``jobs`` (one tokenizer call for those of the same languages) and
        set each sentence's length limit: ``max_len_a`` times the longest source of its batch as
        `inference.translate_hypotheses` batches that request alone, plus ``max_len_b``, within its
        ``max_new_tokens``."""
        from vanilla_transformer.inference.sources import encode_sources
        from vanilla_transformer.inference.translate import MAX_TOKENS, batch_max_new_tokens, source_widths
        from vanilla_transformer.modeling import position_limit

        requests = [job for job in jobs if not isinstance(job.item, StreamJob) and job.sources]
        if not requests:
            return
        model = self.model
        by_languages: dict[tuple[str | None, str | None], list[_Job]] = {}
        for job in requests:
            by_languages.setdefault(job.languages, []).append(job)
        for (src_lang, tgt_lang), group in by_languages.items():
            texts = [job.item.texts[i] for job in group for i in job.sources]
            encoded = iter(encode_sources(model, self.tokenizer, texts, src_lang, tgt_lang))
            for job in group:
                job.sources = {i: next(encoded) for i in job.sources}
        positions = position_limit(model.config)
        for job in requests:
            lengths = [len(ids) for ids in job.sources.values()]
            widths = source_widths(lengths, max(1, len(job.item.texts)), MAX_TOKENS)
            for i, width in zip(job.sources, widths):
                wanted = job.new_tokens[i]
                cap = batch_max_new_tokens(wanted, width, positions)
                job.new_tokens[i] = cap if cap is not None else wanted

    def _take_work(self) -> tuple[list[Any], bool]:
        """The queued work that joins now (in arrival order, within the token budget), and False once closing
        with nothing queued or decoding."""
        with self._cond:
            while not self._pending and not self._jobs:
                if self._closing:
                    return [], False
                self._cond.wait()
            taken = []
            for item in list(self._pending):
                if self._active_tokens and self._active_tokens + item.tokens > self.max_batch_tokens:
                    break
                taken.append(item)
                self._pending.remove(item)
                self._active_tokens += item.tokens
            return taken, True

    def _run(self) -> None:
        while True:
            taken, running = self._take_work()
            if not running:
                return
            started = [job for job in map(self._start, taken) if job is not None]
            try:
                self._encode([job for _, job in started])
            except Exception as err:  # noqa: BLE001 - the tokenizer's error fails these requests, not the server
                logger.exception("the sources of %d requests could not be encoded", len(started))
                self._fail([job_id for job_id, _ in started], err)
                started = []
            joining: dict[str, list[tuple[int, _Job]]] = {}
            for job_id, job in started:
                joining.setdefault(job.key, []).append((job_id, job))
            for key, jobs in joining.items():
                self._join(key, jobs)
            self._leave_cancelled()
            for key in list(self._batches):
                self._step(key)
            if self.on_step is not None:
                self.on_step(self.rows)

    def _start(self, item: Any) -> tuple[int, _Job] | None:
        """Start a queued request or stream: its job (and id) when it joins a batch; else it is sent to the
        request-level batcher (a stream generates on its own), dropped (its client left) or answered at once."""
        if isinstance(item, Pending) and item.future.cancelled():
            self.stats["dropped"] += 1
            self._active_tokens -= item.tokens
            return None
        try:
            job = self._plan(item)
        except Exception as err:  # noqa: BLE001 - the request's error, as the request-level batcher reports it
            job = None
            logger.debug("a request cannot join the running batch: %s", err)
        if job is None:
            self._active_tokens -= item.tokens
            if isinstance(item, StreamJob):
                item.stream.start_thread()
                return None
            self.stats["fallback"] += 1
            try:
                self.fallback.enqueue(item)
            except RuntimeError as err:
                item.future.set_exception(err)
            return None
        job_id = self._next_id
        self._next_id += 1
        self._jobs[job_id] = job
        if not job.sources:
            self._finish(job_id)
            return None
        return job_id, job

    def _join(self, key: str, jobs: list[tuple[int, _Job]]) -> None:
        """Add the sentences of ``jobs`` (all of the batch ``key``) to their batch, encoded together."""
        from vanilla_transformer.inference.decoding import ContinuousBatch

        try:
            batch = self._batches.get(key)
            if batch is None:
                batch = self._batches[key] = ContinuousBatch(self.model, jobs[0][1].options)
            batch.add(
                [
                    ((job_id, i), ids, job.new_tokens[i], job.language_options.get("forced_bos_token_id"))
                    for job_id, job in jobs
                    for i, ids in job.sources.items()
                ]
            )
        except Exception as err:  # noqa: BLE001 - an engine error fails the requests, not the server
            logger.exception("requests could not join the running batch")
            if key in self._batches and not len(self._batches[key]):
                del self._batches[key]
            self._fail([job_id for job_id, _ in jobs], err)

    def _leave_cancelled(self) -> None:
        """Take the sentences of requests whose client went away out of their batches."""
        for job_id, job in list(self._jobs.items()):
            if not job.cancelled:
                continue
            batch = self._batches.get(job.key)
            if batch is not None:
                batch.remove([(job_id, i) for i in job.sources])
                if not len(batch):
                    del self._batches[job.key]
            self.stats["left"] += len(job.sources) - len(job.results)
            self._end(job_id)
            if isinstance(job.item, StreamJob):
                job.item.stream.finish()

    def _step(self, key: str) -> None:
        """One decoding step of the batch of ``key``: tokens to the streams, replies of the finished requests."""
        batch = self._batches[key]
        try:
            stepped = batch.step()
        except Exception as err:  # noqa: BLE001 - an engine error fails this batch's requests, not the server
            logger.exception("a decoding step of %d sentences failed", len(batch))
            self.stats["failed_batches"] += 1
            del self._batches[key]
            self._fail(sorted({job_id for job_id, _ in batch.keys}), err)
            return
        self.stats["steps"] += 1
        self.stats["largest_batch"] = max(self.stats["largest_batch"], len(batch) + len(stepped.finished))
        for (job_id, _), token in stepped.tokens:
            job = self._jobs.get(job_id)
            if job is not None and isinstance(job.item, StreamJob):
                job.item.stream.emit([token], job.language_options.get("forced_bos_token_id"))
        for finished in stepped.finished:
            job_id, index = finished.key
            job = self._jobs[job_id]
            job.results[index] = finished
            if len(job.results) == len(job.sources):
                self._finish(job_id)
        if not len(batch):
            del self._batches[key]

    def _end(self, job_id: int) -> _Job:
        job = self._jobs.pop(job_id)
        self._active_tokens -= job.item.tokens
        return job

    def _fail(self, job_ids: list[int], err: BaseException) -> None:
        for job_id in job_ids:
            job = self._end(job_id)
            if isinstance(job.item, StreamJob):
                job.item.stream.finish(err)
            elif job.item.future.set_running_or_notify_cancel():
                job.item.future.set_exception(err)

    def _finish(self, job_id: int) -> None:
        """Send the reply of a request whose sentences are all done (a stream's end)."""
        from vanilla_transformer.inference.languages import without_target_token
        from vanilla_transformer.inference.translate import output_hypotheses

        job = self._end(job_id)
        if isinstance(job.item, StreamJob):
            job.item.stream.finish()
            return
        item, model, tokenizer = job.item, self.model, self.tokenizer
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else model.config.pad_token_id
        try:
            for i, finished in job.results.items():
                rows = len(finished.sequences)
                scores = [float(s) for s in finished.sequences_scores] if item.scores else [None] * rows
                sources = [job.sources[i]] * rows if item.scores else None
                text_ids = without_target_token(finished.sequences, job.language_options, pad_id)
                job.hypotheses[i] = output_hypotheses(
                    model,
                    tokenizer,
                    finished.sequences,
                    scores,
                    sources,
                    pad_id,
                    text_ids=text_ids,
                    forced_token_id=job.forced_token_id,
                )
        except Exception as err:  # noqa: BLE001 - scoring failed: this request's error
            logger.exception("scoring a finished request failed")
            if item.future.set_running_or_notify_cancel():
                item.future.set_exception(err)
            return
        self.stats["requests"] += 1
        self.stats["batches"] += 1
        self.stats["texts"] += len(item.texts)
        if self.on_batch is not None:
            try:
                self.on_batch(item.texts, [[h.text for h in hyps] for hyps in job.hypotheses])
            except Exception:  # noqa: BLE001 - the reply goes out whatever happens to the count
                logger.exception("on_batch failed for a request of %d texts", len(item.texts))
        if item.future.set_running_or_notify_cancel():
            item.future.set_result(job.hypotheses)


def make_batcher(
    served: Any,
    scheduling: str,
    *,
    max_wait_s: float,
    max_batch_tokens: int,
    on_batch: Callable[[list[str], list[list[str]]], None] | None = None,
) -> Batcher:
    """The batcher of a served model (`serving.lanes.ServedModel`): a `ContinuousBatcher` for ``scheduling``
    "continuous" and this project's PyTorch encoder-decoder (the other engines, with no step control, and other
    PyTorch models batch by request), a request-level `Batcher` for "request", one engine call per request for
    "none". `ValueError` for another value."""
    from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

    if scheduling not in (*SCHEDULING, "none"):
        raise ValueError(
            f"scheduling={scheduling!r} is invalid: expected one of {', '.join(SCHEDULING)} or none"
        )
    model, tokenizer = served.model, served.tokenizer
    if scheduling == "continuous" and isinstance(model, VanillaTransformerForConditionalGeneration):
        return ContinuousBatcher(
            model, tokenizer, max_wait_s=max_wait_s, max_batch_tokens=max_batch_tokens, on_batch=on_batch
        )
    return Batcher(
        model,
        tokenizer,
        max_wait_s=max_wait_s,
        max_batch_tokens=max_batch_tokens,
        batching=scheduling != "none",
        on_batch=on_batch,
    )


def _key(options: dict[str, Any]) -> str:
    """The batch of a set of decoding options (sentences with equal options decode in one batch)."""
    return repr(sorted(options.items()))
