"""The server's Prometheus metrics (``GET /metrics``, the text format of `prometheus_client`).

Each app has its own `prometheus_client.CollectorRegistry` (never the process-wide one), so several apps in one
process, and the tests, count apart. The metrics, all prefixed ``vanilla_transformer_``:

    requests_total{api, status}           HTTP requests answered, by API (own, libretranslate, deepl,
                                          huggingface; `serving.dialects.request_api`) and status code
    request_seconds{api}                  histogram of the time from a request's arrival to its reply's last part
    batch_texts                           histogram of the texts in one engine call (request-level batching;
                                          with continuous batching, of one request, counted as it ends)
    batch_tokens                          histogram of the source tokens in one engine call
    tokens_in_total, tokens_out_total     source tokens translated (special tokens included) and tokens of the
                                          hypotheses returned (n-best lists included, without special tokens),
                                          both counted with the model's tokenizer, of the batched requests
    queue_length                          requests waiting for an engine call (all models)
    batch_rows                            rows the engine decodes now (sentences x beams, all models): with
                                          continuous batching it changes at every step, as sentences join and
                                          leave (finished, or their client gone)
    model_info{model, engine, languages}  each model served; model_load_seconds{model}: the time it took to load

Every HTTP request answered is counted, refusals included, except the scrapes of ``/metrics`` itself. Streams
(/translate/stream) are counted as requests; their tokens are not in the token counters. Nothing that a request
carries (texts, keys) is a label.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from .dialects import request_api, routed_path
from .options import source_lengths

PREFIX = "vanilla_transformer_"
# the path of the metrics, which answers anyone and is not counted
METRICS_PATH = "/metrics"
# texts per engine call: a request holds at most max_texts (64 by default), a batch a few requests' worth
TEXT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
TOKEN_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The metrics of one app (module docstring), in their own ``registry``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.requests = Counter(
            PREFIX + "requests",
            "HTTP requests answered, by API and status",
            ["api", "status"],
            registry=registry,
        )
        self.seconds = Histogram(
            PREFIX + "request_seconds",
            "time from a request's arrival to the last byte of its reply, by API",
            ["api"],
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.batch_texts = Histogram(
            PREFIX + "batch_texts", "texts per engine call", buckets=TEXT_BUCKETS, registry=registry
        )
        self.batch_tokens = Histogram(
            PREFIX + "batch_tokens", "source tokens per engine call", buckets=TOKEN_BUCKETS, registry=registry
        )
        self.tokens_in = Counter(PREFIX + "tokens_in", "source tokens translated", registry=registry)
        self.tokens_out = Counter(
            PREFIX + "tokens_out", "tokens of the hypotheses returned", registry=registry
        )
        self.queue_length = Gauge(
            PREFIX + "queue_length", "requests waiting for an engine call", registry=registry
        )
        self.batch_rows = Gauge(
            PREFIX + "batch_rows", "rows (sentences x beams) the engine decodes now", registry=registry
        )
        self.model = Info(PREFIX + "model", "the models served", ["model"], registry=registry)
        self.load_seconds = Gauge(
            PREFIX + "model_load_seconds", "seconds each model took to load", ["model"], registry=registry
        )

    def describe_model(
        self, name: str, engine: str, languages: Sequence[str], load_seconds: float | None = None
    ) -> None:
        """Add a served model's info (and its load time, when known)."""
        self.model.labels(model=name).info({"engine": engine, "languages": ",".join(languages)})
        if load_seconds is not None:
            self.load_seconds.labels(model=name).set(load_seconds)

    def watch_queue(self, length: Callable[[], int]) -> None:
        """Read the queue length from ``length()`` at each scrape."""
        self.queue_length.set_function(length)

    def watch_rows(self, rows: Callable[[], int]) -> None:
        """Read the rows decoded now from ``rows()`` at each scrape."""
        self.batch_rows.set_function(rows)

    def observe_batch(self, tokenizer: Any, texts: list[str], nbest: list[list[str]]) -> None:
        """Count one engine call of the model whose tokenizer is ``tokenizer``: its ``texts`` and the n-best lists it
        returned (called by `serving.Batcher`)."""
        source = sum(source_lengths(tokenizer, texts, None))
        hypotheses = [hyp for hyps in nbest for hyp in hyps if hyp]
        out = tokenizer(hypotheses, add_special_tokens=False)["input_ids"] if hypotheses else []
        self.batch_texts.observe(len(texts))
        self.batch_tokens.observe(source)
        self.tokens_in.inc(source)
        self.tokens_out.inc(sum(len(ids) for ids in out))

    def observe_request(self, api: str, status: int, seconds: float) -> None:
        self.requests.labels(api=api, status=str(status)).inc()
        self.seconds.labels(api=api).observe(seconds)

    def exposition(self) -> tuple[bytes, str]:
        """The text format of every metric, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def timer(self, scope: dict, send: Callable[[dict], Awaitable[None]]) -> RequestTimer | None:
        """A `RequestTimer` for an HTTP request, None for a scrape of /metrics (not counted)."""
        if scope["type"] != "http" or scope["path"] == METRICS_PATH:
            return None
        return RequestTimer(self, scope, send)


class RequestTimer:
    """Counts one request as the last part of its reply is sent (`send`, the ASGI send to call instead of the
    server's): its API (by its path until `read` sees its body), its status and its time."""

    def __init__(self, metrics: Metrics, scope: dict, send: Callable[[dict], Awaitable[None]]) -> None:
        self.metrics, self._send = metrics, send
        self.api = request_api(scope["path"])
        self.status = 500
        self.start = time.perf_counter()

    def read(self, scope: dict, body: bytes) -> None:
        """The request's body was read: its API is the one of the path that serves it (`routed_path`)."""
        self.api = request_api(routed_path(scope, body))

    async def send(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        # counted before the last byte goes out, so that a client that has its reply finds it counted
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.metrics.observe_request(self.api, self.status, time.perf_counter() - self.start)
        await self._send(message)
