"""What the routes of every API share, built once by `serving.app.create_app` and kept on the app
(``app.state.server``); a route gets it as a FastAPI dependency (`server_state`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request

from .files import FileJobs
from .glossary_store import GlossaryStore
from .lanes import Lanes
from .metrics import Metrics
from .options import Limits, RequestError


class StreamSlots:
    """The streams of POST /translate/stream: at most ``limit`` at once, and counters of those served and
    cancelled (thread-safe)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.active = self.served = self.cancelled = 0
        self.lock = threading.Lock()

    def take(self) -> None:
        """Take a slot; `RequestError` (429) when ``limit`` streams already run."""
        with self.lock:
            if self.active >= self.limit:
                raise RequestError(429, f"max_streams={self.limit} streams are running: retry in a moment")
            self.active += 1

    def release(self, cancelled: bool = False) -> None:
        """Give a slot back once its stream ended (``cancelled``: stopped before its end)."""
        with self.lock:
            self.active -= 1
            self.served += 1
            self.cancelled += cancelled

    def stats(self) -> dict[str, int]:
        return {
            "streams_active": self.active,
            "streams_served": self.served,
            "streams_cancelled": self.cancelled,
        }


class CharacterCount:
    """The characters translated since the server started (DeepL's /v2/usage; thread-safe)."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def add(self, characters: int) -> None:
        with self.lock:
            self.count += characters


@dataclass
class ServerState:
    """The served models' ``lanes``, the server's ``limits`` and ``metrics``, its batching settings (as /info
    reports them), whether it needs API keys (``keyed``), its streams, the characters DeepL's API translated, the
    DeepL glossaries of each key (`serving.glossary_store`) and the document ``files`` uploaded to it
    (`serving.files.FileJobs`)."""

    lanes: Lanes
    limits: Limits
    metrics: Metrics
    batching: dict[str, Any]
    keyed: bool = False
    streams: StreamSlots = field(init=False)
    characters: CharacterCount = field(default_factory=CharacterCount)
    glossaries: GlossaryStore = field(init=False)
    files: FileJobs = field(default_factory=FileJobs)

    def __post_init__(self) -> None:
        self.streams = StreamSlots(self.limits.max_streams)
        self.glossaries = GlossaryStore(
            self.limits.max_glossaries, self.limits.max_glossary_entries, self.keyed
        )


def server_state(request: Request) -> ServerState:
    """The `ServerState` of the app serving ``request`` (a FastAPI dependency)."""
    return request.app.state.server


# a route's parameter that FastAPI fills with the `ServerState`
Server = Annotated[ServerState, Depends(server_state)]
