"""The server's ASGI middleware, around every route of every API: `BodyLimit` (a POST body read whole, within
the server's size and time limits) outside `ApiGate` (which API a request speaks, its key, its rate); both hand the
app the body they read through `replay`, the one piece that gives a read body back to the app."""

from __future__ import annotations

import asyncio
from typing import Any

from .dialects import FILE_UPLOADS, FORM_OVERHEAD, request_api, routed_path
from .errors import error_reply, rate_limited
from .keys import KEY_HOW, guarded, known_key, request_key
from .metrics import Metrics
from .options import Limits
from .ratelimit import RateLimiter


def replay(message: dict[str, Any], receive):
    """An ASGI ``receive`` that gives ``message`` (a body already read, as one ``http.request``) first, then the
    connection's later messages (its ``http.disconnect``) as ``receive`` gets them."""
    given = False

    async def replayed():
        nonlocal given
        if given:
            return await receive()
        given = True
        return message

    return replayed


class BodyLimit:
    """ASGI middleware: reads a POST body whole before the app sees it, and refuses a body over ``limits``'s
    ``max_request_bytes`` (on the routes that take a document file, `serving.dialects.FILE_UPLOADS`:
    ``max_file_bytes`` and a form's overhead) (413, by its Content-Length before reading it, or by what arrives), a POST body without
    Content-Length (411), and a body still incomplete ``body_timeout_s`` seconds after its headers (408, and the
    connection is closed); once ``closing`` is set (the server shuts down), a body still arriving gets 503 at once
    (a stalled client does not hold the server's drain). A client that disconnects while sending its body gets
    nothing. The app then sees the body as one message, and the connection's later messages as they come
    (`replay`). With ``metrics``, every request, its refusals here included, is counted as its reply ends
    (`serving.metrics.RequestTimer`). Refusals are in the error shape of the request's API
    (`serving.errors.error_reply`)."""

    def __init__(self, app, limits: Limits, closing: asyncio.Event, metrics: Metrics | None = None):
        self.app = app
        self.limits = limits
        self.metrics = metrics
        self.closing = closing

    async def __call__(self, scope, receive, send):
        timer = self.metrics.timer(scope, send) if self.metrics is not None else None
        send = send if timer is None else timer.send
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        limit = self.limits.max_request_bytes
        if scope["path"] in FILE_UPLOADS:
            limit = max(limit, self.limits.max_file_bytes + FORM_OVERHEAD)
        length = dict(scope["headers"]).get(b"content-length")
        if length is None:
            return await _refuse(scope, send, 411, "a request body needs a Content-Length header")
        if not length.isdigit() or int(length) > limit:
            return await _refuse(scope, send, 413, _too_large(length.decode(errors="replace"), limit))
        body = await self._read(receive, limit)
        if isinstance(body, tuple):
            return await _refuse(scope, send, *body, close=True)
        if body is None:
            return None
        if timer is not None:
            timer.read(scope, body)
        if len(body) > limit:
            return await _refuse(scope, send, 413, _too_large(str(len(body)), limit), body=body, close=True)
        await self.app(
            scope, replay({"type": "http.request", "body": body, "more_body": False}, receive), send
        )

    async def _read(self, receive, limit: int) -> bytes | tuple[int, str] | None:
        """The body (None if the client left), or the (status, message) of a body that did not arrive in time
        or while the server began shutting down."""
        read = asyncio.ensure_future(_read_body(receive, limit))
        closing = asyncio.ensure_future(self.closing.wait())
        await asyncio.wait(
            (read, closing), timeout=self.limits.body_timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        closing.cancel()
        if read.done():
            return read.result()
        read.cancel()
        if self.closing.is_set():
            return 503, "the server is shutting down"
        return (
            408,
            f"the request body did not arrive within the server's limit body_timeout_s="
            f"{self.limits.body_timeout_s:g}: send the whole body at once",
        )


def _too_large(size: str, limit: int) -> str:
    return (
        f"the request body has {size} bytes, more than the server's limit max_request_bytes={limit}: "
        "send fewer or shorter texts"
    )


async def _read_body(receive, limit: int) -> bytes | None:
    """The request body, read until its end or until it is over ``limit`` bytes; None if the client left."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if not message.get("more_body", False) or size > limit:
            return b"".join(chunks)


async def _refuse(scope, send, status: int, detail: str, *, body: bytes = b"", close: bool = False) -> None:
    """Refuse the request of ``scope`` in its API's error shape (``body``: what arrived of it, which tells the
    APIs of POST /translate apart)."""
    reply = error_reply(request_api(routed_path(scope, body)), status, detail, close=close)

    async def nothing():
        return {"type": "http.disconnect"}

    await reply(scope, nothing, send)


class ApiGate:
    """ASGI middleware, the one place that tells which API a request speaks: a POST /translate whose body is
    another API's (`serving.dialects.routed_path`) goes to that API's path; with ``keys``, a request to a guarded
    route (`serving.keys.GUARDED`, every DeepL route) without one of them gets 403 in its API's error shape; with
    a ``limiter`` (`serving.ratelimit.RateLimiter`), a guarded request over the rate of its key (of its client
    address on a server without keys) gets 429 in its API's error shape (`serving.errors.rate_limited`). It reads
    a POST body's first message, which `BodyLimit` makes the whole body, and gives it back to the app (`replay`).
    """

    def __init__(
        self, app: Any, keys: frozenset[str] = frozenset(), limiter: RateLimiter | None = None
    ) -> None:
        self.app = app
        self.keys = keys
        self.limiter = limiter

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["method"] != "POST":
            message: dict[str, Any] = {"type": "http.request", "body": b"", "more_body": False}
        else:
            message = await receive()
            receive = replay(message, receive)
        body = message.get("body", b"") if message["type"] == "http.request" else b""
        path = routed_path(scope, body)
        if path != scope["path"]:
            scope = {**scope, "path": path, "raw_path": path.encode()}
        api = request_api(path)
        refusal = await self._refusal(scope, api, body) if guarded(api, scope["method"], path) else None
        if refusal is not None:
            return await refusal(scope, receive, send)
        await self.app(scope, receive, send)

    async def _refusal(self, scope, api: str, body: bytes):
        """The 403 of a guarded request without a known key, the 429 of one over its rate, else None."""
        client = (scope.get("client") or ("unknown",))[0]
        if self.keys:
            key = known_key(self.keys, await request_key(api, scope, body))
            if key is None:
                return error_reply(api, 403, "a valid API key is needed: " + KEY_HOW[api])
            client = "key:" + key
        if self.limiter is not None:
            retry_after = self.limiter.acquire(client)
            if retry_after is not None:
                return rate_limited(api, self.limiter.per_minute, retry_after)
        return None
