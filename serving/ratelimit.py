"""A per-client rate limit in memory (``serve --rate_limit N``): N requests a minute per API key, or per client
address on a server without keys.

Each client has a token bucket of N tokens that refills at N a minute: N requests in a burst pass, the next one
waits until a token is back (60 / N seconds), and a client idle for a minute has its N again. At most
``max_clients`` buckets are kept; a new client beyond that evicts the least recently seen one, whose bucket is
most likely full already (an evicted client starts again with N). `serving.middleware.ApiGate` asks the limiter before
a translation and answers 429 with ``Retry-After`` in the API's own error shape.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable


class RateLimiter:
    """``per_minute`` requests a minute per client (module docstring); ``clock``: seconds, monotonic."""

    def __init__(
        self, per_minute: int, *, clock: Callable[[], float] = time.monotonic, max_clients: int = 100_000
    ) -> None:
        if per_minute < 1 or max_clients < 1:
            raise ValueError(
                f"rate limit {per_minute} a minute for {max_clients} clients is invalid: expected integers >= 1"
            )
        self.per_minute, self.clock, self.max_clients = per_minute, clock, max_clients
        # client -> (tokens left, when they were counted), least recently seen first
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def acquire(self, client: str) -> int | None:
        """Take one request from ``client``'s bucket: None when it may go, else the whole seconds to wait."""
        now = self.clock()
        with self._lock:
            tokens, then = self._buckets.pop(client, (float(self.per_minute), now))
            tokens = min(float(self.per_minute), tokens + (now - then) * self.per_minute / 60.0)
            allowed = tokens >= 1.0
            self._buckets[client] = (tokens - allowed, now)
            while len(self._buckets) > self.max_clients:
                self._buckets.popitem(last=False)
        return None if allowed else max(1, math.ceil((1.0 - tokens) * 60.0 / self.per_minute))

    def __len__(self) -> int:
        """How many clients are tracked."""
        return len(self._buckets)
