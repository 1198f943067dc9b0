"""Document files translated by the server (LibreTranslate's /translate_file, DeepL's /v2/document): the jobs,
each translated in the background, kept in memory (never written to disk) for a bounded time.

`FileJobs` holds at most ``max_jobs`` documents at once, of which at most ``max_running`` translate at a time
(the rest wait their turn); a document is deleted once downloaded or ``keep_s`` seconds after it was uploaded,
whichever comes first. Each job belongs to the key that uploaded it (a hash of it; "" on a server without keys):
another key sees no such document. ``seconds_remaining`` is an estimate from the characters left and the
characters per second of the documents translated so far.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fastapi.responses import Response

from .options import RequestError


def owner_of(key: str | None) -> str:
    """The owner of a job uploaded with ``key``: a hash of it (keys are never kept), "" for none."""
    return hashlib.sha256(key.encode()).hexdigest() if key else ""


@dataclass
class FileJob:
    """One document: its ``id``, the ``key`` that reads it, its ``owner``, its file ``name`` and ``media_type``,
    the ``characters`` it bills, its ``status`` (queued, translating, done, error) and its ``result`` or
    ``error``."""

    id: str
    key: str
    owner: str
    name: str
    media_type: str
    characters: int
    created: float = field(default_factory=time.monotonic)
    status: str = "queued"
    result: bytes | None = None
    error: str | None = None
    task: asyncio.Task | None = None


class FileJobs:
    """The documents of one server (module docstring)."""

    def __init__(self, max_jobs: int = 32, max_running: int = 2, keep_s: float = 900.0) -> None:
        self.max_jobs = max_jobs
        self.keep_s = keep_s
        self.jobs: dict[str, FileJob] = {}
        self.running = asyncio.Semaphore(max_running)
        # characters per second of the documents translated so far (an estimate to start from)
        self.rate = 500.0

    def purge(self) -> None:
        """Delete the documents older than ``keep_s`` (a running one is cancelled)."""
        now = time.monotonic()
        for job in [j for j in self.jobs.values() if now - j.created > self.keep_s]:
            self._delete(job)

    def _delete(self, job: FileJob) -> None:
        self.jobs.pop(job.id, None)
        if job.task is not None and not job.task.done():
            job.task.cancel()

    def _new(self, owner: str, name: str, media_type: str, characters: int) -> FileJob:
        self.purge()
        if len(self.jobs) >= self.max_jobs:
            raise RequestError(
                429, f"the server holds {self.max_jobs} documents, its limit: download yours or retry later"
            )
        job = FileJob(secrets.token_hex(16), secrets.token_hex(32), owner, name, media_type, characters)
        self.jobs[job.id] = job
        return job

    def submit(
        self, owner: str, name: str, media_type: str, characters: int, work: Callable[[], Awaitable[bytes]]
    ) -> FileJob:
        """A new job that translates by awaiting ``work`` in the background; `RequestError` (429) when the server
        holds ``max_jobs`` documents."""
        job = self._new(owner, name, media_type, characters)
        job.task = asyncio.get_running_loop().create_task(self._run(job, work))
        return job

    def done(self, owner: str, name: str, media_type: str, result: bytes) -> FileJob:
        """A job already translated (LibreTranslate's, translated while its request waited), to download by its
        id alone (its key is empty: the id, 128 random bits, is the secret of its URL)."""
        job = self._new(owner, name, media_type, 0)
        job.key, job.status, job.result = "", "done", result
        return job

    async def _run(self, job: FileJob, work: Callable[[], Awaitable[bytes]]) -> None:
        async with self.running:
            job.status = "translating"
            started = time.monotonic()
            try:
                job.result = await work()
            except RequestError as err:
                job.status, job.error = "error", err.message
                return
            except Exception as err:  # noqa: BLE001 - the job fails, the server keeps serving
                job.status, job.error = "error", f"translation failed: {type(err).__name__}: {err}"
                return
            job.status = "done"
            spent = max(time.monotonic() - started, 1e-3)
            if job.characters:
                self.rate = 0.5 * self.rate + 0.5 * job.characters / spent

    def find(self, job_id: str, key: str | None, owner: str) -> FileJob:
        """The job ``job_id`` of ``owner`` read with ``key``; `RequestError` (404) for none (unknown, expired,
        downloaded, another key's, a wrong key)."""
        self.purge()
        job = self.jobs.get(job_id)
        if job is None or job.owner != owner or not secrets.compare_digest(job.key, key or ""):
            raise RequestError(404, "Document not found: it is unknown, expired or already downloaded")
        return job

    def download(self, job: FileJob) -> Response:
        """A done job's file, as an attachment named after it; the job is deleted."""
        self._delete(job)
        return Response(
            job.result or b"",
            media_type=job.media_type,
            headers={"Content-Disposition": f'attachment; filename="{job.name}"'},
        )

    def seconds_remaining(self, job: FileJob) -> int:
        """An estimate of the seconds until ``job`` is done (module docstring)."""
        ahead = sum(
            j.characters
            for j in self.jobs.values()
            if j.status in ("queued", "translating") and j.created <= job.created
        )
        return max(1, round(ahead / self.rate))

    async def close(self) -> None:
        """Cancel the jobs still translating (the server shuts down) and delete every document."""
        tasks = [job.task for job in self.jobs.values() if job.task is not None and not job.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.jobs.clear()
