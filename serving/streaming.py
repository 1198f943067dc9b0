"""Streaming one translation token by token (engine torch): `model.generate` runs in its own thread with a
streamer that hands each new token to the event loop, and a stopping criterion that ends the generation as soon
as the client is gone.

`TokenStream` is one such generation. Iterating it (``async for piece in stream``) yields the text each new
token adds (the tokenizer's decoding of all tokens so far, minus what was already sent); `TokenStream.text` is
the whole translation with whitespace runs made one space, as `inference.translate` returns it. On a server with
continuous batching (`serving.continuous`) a greedy stream decodes in the server's decoding loop, beside the
other requests, and gets each token as its step ends; otherwise it generates in its own thread. `cancel()` stops
the generation after the current step (`TokenStream.stopped_early` then says so). Greedy decoding and sampling
only (``num_beams=1``, one hypothesis): a beam's best hypothesis is not known until it ends. A stream that samples
takes its turn at torch's random generator with the server's other sampling generations
(`serving.batcher.random_draws`), and sets its ``seed`` in that turn.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

from .batcher import random_draws, samples

_END = object()


class TokenStream:
    """One streamed generation of ``text`` with ``kwargs`` (`generate()` options, and a multilingual model's
    ``src_lang`` and ``tgt_lang``) and, when it samples, ``seed`` (None: unseeded) under ``sampling_lock``
    (`random_draws`; default: a lock of its own). ``on_done(stream)`` is called in the generation thread when it
    ends, however it ends."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        text: str,
        kwargs: dict[str, Any],
        on_done=None,
        *,
        seed: int | None = None,
        sampling_lock: threading.Lock | None = None,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.source = text
        # (src_lang, tgt_lang) as `inference.languages.resolve_languages` returns them (None, None: one pair)
        self.languages = (kwargs.get("src_lang"), kwargs.get("tgt_lang"))
        # the generate() options
        self.kwargs = {k: v for k, v in kwargs.items() if k not in ("src_lang", "tgt_lang")}
        self.on_done = on_done
        self.seed = seed
        self.sampling_lock = sampling_lock or threading.Lock()
        self.error: BaseException | None = None
        self.stopped_early = False
        self._ids: list[int] = []
        self._emitted = False
        self._sent = ""
        self._cancelled = threading.Event()
        self._queue: asyncio.Queue | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def text(self) -> str:
        return " ".join(self._decode().split())

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        """Whether `cancel` was called (the client went away)."""
        return self._cancelled.is_set()

    def source_ids(self) -> list[int]:
        """The source's token ids as `inference.translate` encodes them (`inference.sources.encode_sources`)."""
        from vanilla_transformer.inference.sources import encode_sources

        return encode_sources(self.model, self.tokenizer, [self.source], *self.languages)[0]

    def language_options(self) -> dict[str, Any]:
        """The `generate()` options of the target language (`inference.languages.target_options`: a multilingual
        model's forced first token)."""
        from vanilla_transformer.inference.languages import resolve_languages, target_options

        languages = resolve_languages(self.tokenizer, *self.languages)
        return target_options(self.tokenizer, self.model.generation_config, languages[1])

    def emit(self, ids: list[int], forced: int | None = None) -> None:
        """Hand new token ids to the stream's reader (from the thread that generates); the first one is left out
        when it is ``forced``, the target-language token a multilingual model is forced to begin with."""
        ids = list(ids)
        if not self._emitted and ids and forced is not None and ids[0] == forced:
            ids = ids[1:]
        self._emitted = True
        self._push(ids)

    def finish(self, error: BaseException | None = None) -> None:
        """End the stream (from the thread that generates): with ``error``, reported to the client."""
        if error is not None:
            self.error = error
        self.stopped_early = self._cancelled.is_set()
        self._push(_END)
        if self.on_done is not None:
            self.on_done(self)

    def _decode(self) -> str:
        return self.tokenizer.decode(self._ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def _push(self, item: Any) -> None:
        # set by start(), which runs before the thread that pushes
        assert self._loop is not None and self._queue is not None
        self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def _generate(self) -> None:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList
        from transformers.generation.streamers import BaseStreamer

        stream = self

        class Streamer(BaseStreamer):
            first = True

            def put(self, value):
                if self.first:  # the decoder start token, sent before the first step
                    self.first = False
                    return
                stream.emit(value.reshape(-1).tolist(), forced)

            def end(self):
                pass

        class Cancelled(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                return torch.full((input_ids.shape[0],), stream._cancelled.is_set(), dtype=torch.bool)

        sampling = samples(self.kwargs, self.model.generation_config)
        forced = None
        try:
            language_options = self.language_options()
            forced = language_options.get("forced_bos_token_id")
            input_ids = torch.tensor([self.source_ids()], device=self.model.device)
            with random_draws(self.sampling_lock, sampling, self.seed), torch.no_grad():
                self.model.generate(
                    input_ids=input_ids,
                    attention_mask=torch.ones_like(input_ids),
                    streamer=Streamer(),
                    stopping_criteria=StoppingCriteriaList([Cancelled()]),
                    **self.kwargs,
                    **language_options,
                )
        except Exception as err:  # noqa: BLE001 - reported to the client as an error event
            self.finish(err)
            return
        self.finish()

    def start(self, batcher: Any = None) -> TokenStream:
        """Start generating (call from the event loop that will iterate the stream): in the decoding loop of
        ``batcher`` when it is a `serving.continuous.ContinuousBatcher` that can take it, else in a thread of
        its own (`start_thread`)."""
        from .continuous import ContinuousBatcher

        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        if not isinstance(batcher, ContinuousBatcher) or not batcher.stream(self):
            self.start_thread()
        return self

    def start_thread(self) -> None:
        """Generate with `generate()` in a thread of this stream's own."""
        self._thread = threading.Thread(target=self._generate, name="translation-stream", daemon=True)
        self._thread.start()

    async def __aiter__(self) -> AsyncIterator[str]:
        # made by start(), which runs before the stream is iterated
        assert self._queue is not None
        special = set(self.tokenizer.all_special_ids)
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            self._ids.extend(i for i in item if i not in special)
            decoded = self._decode()
            if decoded.startswith(self._sent) and len(decoded) > len(self._sent):
                piece, self._sent = decoded[len(self._sent) :], decoded
                yield piece
