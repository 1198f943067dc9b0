"""Dynamic batching: requests that arrive close together are translated in one engine call.

A `Batcher` owns one worker thread, the only one that calls the engine for /translate. `Batcher.submit` queues a
request (its texts, its decoding options, whether it wants scores, its size in tokens) and returns a
`concurrent.futures.Future` of its n-best lists of `inference.Hypothesis`. The worker takes the oldest waiting
request and groups it with the later ones that have *identical* decoding options and the same wish for scores, in
arrival order, while the group's tokens (source tokens x beams) stay within ``max_batch_tokens``; it waits at most
``max_wait_s`` after the oldest request arrived for the group to fill. One group is one
`inference.translate_hypotheses` call (with scores: sequence scores and per-token log-probabilities by forced
decoding) with ``batch_size`` = its number of texts, which sorts the
texts by length, pads them into one batch and puts the outputs back in order, so a reply equals what the request
would get alone (the model masks padding; greedy and beam search decode each row on its own). Requests with a
``seed`` (sampling made reproducible) always run alone.

Sampling draws from torch's one global random generator, which `generate()` offers no way to replace. So every
engine call that samples, here and in the streams of `serving.streaming`, holds one `sampling_lock` for its whole
generation (`random_draws`), and a seeded call sets its seed once it holds it: no other generation draws between
the seed and the last token, and a seeded reply equals what the request gets alone, whatever runs beside it.
Greedy and beam search draw nothing and never wait for the lock.

A request whose future was cancelled (its client went away) before its group ran is dropped. An engine error
fails the futures of that group only; the worker keeps running. `Batcher.close` lets the worker translate every
request already queued, then stops it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .options import work_rows

logger = logging.getLogger(__name__)

# how requests are batched: "request" (this module: a group of requests is one engine call) or "continuous"
# (`serving.continuous`: sentences join and leave the running batch at every decoding step)
SCHEDULING = ("continuous", "request")


@dataclass
class Pending:
    """One queued request."""

    texts: list[str]
    kwargs: dict[str, Any]
    tokens: int
    seed: int | None = None
    scores: bool = False
    arrival: float = field(default_factory=time.monotonic)
    future: Future = field(default_factory=Future)

    @property
    def key(self) -> tuple:
        """Requests group only with equal keys: the same decoding options and wish for scores, and no seed."""
        options = (tuple(sorted(self.kwargs.items())), self.scores)
        return options if self.seed is None else (options, "seed", id(self))


def samples(kwargs: dict[str, Any], generation_config: Any) -> bool:
    """Whether `generate()` with ``kwargs`` samples (``do_sample`` there, or else in ``generation_config``)."""
    return bool(kwargs.get("do_sample", getattr(generation_config, "do_sample", False)))


@contextmanager
def random_draws(lock: threading.Lock, sampling: bool, seed: int | None) -> Iterator[None]:
    """Run a generation's random draws alone (module docstring): with ``sampling`` or a ``seed``, hold ``lock``
    for the block and set ``seed`` (transformers' `set_seed`) once it is held; otherwise hold nothing."""
    if not sampling and seed is None:
        yield
        return
    with lock:
        if seed is not None:
            from transformers import set_seed

            set_seed(seed)
        yield


# the counters of /info and /health: requests and texts answered, engine calls, the most requests in one call,
# engine calls that failed, requests dropped because their client had left
STATS = ("requests", "texts", "batches", "largest_batch", "failed_batches", "dropped")


class Batcher:
    """Request-level batching: the request queue and its worker thread (module docstring). ``model`` and ``tokenizer`` as
    `inference.translate_hypotheses` takes them (a PyTorch model or an exported engine's `EngineModel`). With
    ``batching=False`` every request is its own engine call (one-at-a-time serving, for comparison).
    ``sampling_lock`` is the lock of `random_draws` that every sampling generation of the server shares;
    ``on_batch(texts, nbest)`` (the n-best lists' texts) is called in the worker after each engine call that
    succeeded (the metrics)."""

    # how it schedules (`SCHEDULING`), as /info reports it
    mode = "request"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_wait_s: float = 0.01,
        max_batch_tokens: int = 8192,
        batching: bool = True,
        sampling_lock: threading.Lock | None = None,
        on_batch: Callable[[list[str], list[list[str]]], None] | None = None,
    ):
        self.model, self.tokenizer = model, tokenizer
        self.sampling_lock = sampling_lock or threading.Lock()
        self.max_wait_s, self.max_batch_tokens, self.batching = max_wait_s, max_batch_tokens, batching
        self.stats: dict[str, int] = dict.fromkeys(STATS, 0)
        self.on_batch = on_batch
        self._pending: list[Any] = []
        self._rows = 0
        self._cond = threading.Condition()
        self._closing = False
        self._thread: threading.Thread | None = None

    def start(self) -> Batcher:
        """Start the worker thread (requests submitted before wait for it)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="translation-batcher", daemon=True)
            self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._pending)

    def submit(
        self,
        texts: Sequence[str],
        kwargs: dict[str, Any],
        tokens: int,
        seed: int | None = None,
        *,
        scores: bool = False,
    ) -> Future:
        """Queue ``texts`` for translation with ``kwargs``; the future's result is one n-best list of
        `inference.Hypothesis` per text, with ``scores`` their sequence scores and per-token log-probabilities.
        Raises `RuntimeError` once the batcher is closing."""
        item = Pending(list(texts), dict(kwargs), tokens, seed, scores)
        self.enqueue(item)
        return item.future

    def enqueue(self, item: Any) -> None:
        """Queue a `Pending` request (or another kind of work this batcher's worker takes); `RuntimeError` once
        the batcher is closing."""
        with self._cond:
            if self._closing:
                raise RuntimeError("the server is shutting down")
            self._pending.append(item)
            self._cond.notify_all()

    @property
    def rows(self) -> int:
        """The rows the engine decodes now (texts x beams of the running call; 0 between calls)."""
        return self._rows

    def close(self, timeout: float | None = None) -> None:
        """Translate what is queued, then stop the worker (waits up to ``timeout`` seconds for it)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def _take(self) -> list[Pending] | None:
        """Wait for the next group and remove it from the queue; None when closing with nothing left."""
        with self._cond:
            while not self._pending:
                if self._closing:
                    return None
                self._cond.wait()
            first = self._pending[0]
            deadline = first.arrival + self.max_wait_s
            while self.batching and first.seed is None and not self._closing:
                group_tokens = sum(p.tokens for p in self._pending if p.key == first.key)
                remaining = deadline - time.monotonic()
                if group_tokens >= self.max_batch_tokens or remaining <= 0:
                    break
                self._cond.wait(remaining)
            group, tokens = [first], first.tokens
            if self.batching and first.seed is None:
                for item in self._pending[1:]:
                    if item.key == first.key and tokens + item.tokens <= self.max_batch_tokens:
                        group.append(item)
                        tokens += item.tokens
            taken = {id(item) for item in group}
            self._pending = [item for item in self._pending if id(item) not in taken]
            return group

    def _run(self) -> None:
        while True:
            group = self._take()
            if group is None:
                return
            live = [item for item in group if item.future.set_running_or_notify_cancel()]
            self.stats["dropped"] += len(group) - len(live)
            if live:
                self._translate(live)

    def _translate(self, group: list[Pending]) -> None:
        from vanilla_transformer.inference import translate_hypotheses

        texts = [text for item in group for text in item.texts]
        kwargs, seed, scores = group[0].kwargs, group[0].seed, group[0].scores
        generation_config = getattr(self.model, "generation_config", None)
        sampling = samples(kwargs, generation_config)
        if generation_config is not None:
            self._rows = len(texts) * work_rows(kwargs, generation_config)
        try:
            with random_draws(self.sampling_lock, sampling, seed):
                nbest = translate_hypotheses(
                    self.model,
                    self.tokenizer,
                    texts,
                    batch_size=max(1, len(texts)),
                    scores=scores,
                    token_scores=scores,
                    **kwargs,
                )
        except Exception as err:  # noqa: BLE001 - an engine error fails this group's requests, not the server
            logger.exception("translating a batch of %d requests failed", len(group))
            self.stats["failed_batches"] += 1
            for item in group:
                item.future.set_exception(err)
            return
        finally:
            self._rows = 0
        self.stats["batches"] += 1
        self.stats["requests"] += len(group)
        self.stats["texts"] += len(texts)
        self.stats["largest_batch"] = max(self.stats["largest_batch"], len(group))
        # counted before the replies go out, so that a client that has its reply finds it counted
        if self.on_batch is not None:
            try:
                self.on_batch(texts, [[hypothesis.text for hypothesis in hyps] for hyps in nbest])
            except Exception:  # noqa: BLE001 - the replies go out whatever happens to the count
                logger.exception("on_batch failed for a batch of %d texts", len(texts))
        start = 0
        for item in group:
            item.future.set_result(nbest[start : start + len(item.texts)])
            start += len(item.texts)
