"""The DeepL glossaries of each API key, kept in the server's memory (`GlossaryStore`, on the server's state), their
entries read from DeepL's TSV or CSV (`parse_entries`), and `glossary_for`, which turns a request's ``glossary_id``
into the decoding options that translate with its terms (/v2/translate, /v2/document). The routes of DeepL's
glossary API are `serving.glossaries`.

A key sees, uses and deletes only its own glossaries (a server without keys has one set, shared by every client):
an id of another key's glossary is not found (404). At most ``max_glossaries`` per key (400 past it: delete one) of
at most ``max_glossary_entries`` entries each (413), each as large as a request body may be (``max_request_bytes``).
They are gone when the server restarts.
"""

from __future__ import annotations

import csv
import hashlib
import io
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from fastapi import Request

from vanilla_transformer.inference.glossary import Glossary

from .keys import request_key
from .options import DecodingRequest, RequestError

# the formats of a glossary's entries that DeepL takes
ENTRY_FORMATS = ("tsv", "csv")


class GlossaryOptions(DecodingRequest):
    """The decoding options of a request that translates with a glossary's ``glossary`` terms (source -> target),
    the server's own glossary beneath them (`serving.options.request_glossary`)."""

    glossary: dict[str, str] | None = None


@dataclass(frozen=True)
class StoredGlossary:
    """A glossary of one key: its id, name, languages (lower case, as the model's), creation time (DeepL's
    ISO 8601) and terms."""

    glossary_id: str
    name: str
    source_lang: str
    target_lang: str
    creation_time: str
    glossary: Glossary

    def info(self) -> dict[str, Any]:
        """DeepL's glossary information."""
        return {
            "glossary_id": self.glossary_id,
            "name": self.name,
            "ready": True,
            "source_lang": self.source_lang,
            "target_lang": self.target_lang,
            "creation_time": self.creation_time,
            "entry_count": len(self.glossary),
        }

    def tsv(self) -> str:
        """Its entries as DeepL's TSV."""
        return "".join(f"{source}\t{target}\n" for source, target in self.glossary.entries)


class GlossaryStore:
    """The glossaries of each key (by a hash of it; one set for all on a server without keys, ``keyed`` False), in
    memory: at most ``max_glossaries`` per key, each of at most ``max_entries`` entries (thread-safe)."""

    def __init__(self, max_glossaries: int, max_entries: int, keyed: bool) -> None:
        self.max_glossaries = max_glossaries
        self.max_entries = max_entries
        self.keyed = keyed
        self.owned: dict[str, dict[str, StoredGlossary]] = {}
        self.lock = threading.Lock()

    def add(self, owner: str, name: str, languages: tuple[str, str], glossary: Glossary) -> StoredGlossary:
        """Keep ``glossary`` for ``owner``; `RequestError` 413 for one over ``max_entries``, 400 when the owner
        has ``max_glossaries`` already."""
        if len(glossary) > self.max_entries:
            raise RequestError(
                413,
                f"Glossary has {len(glossary)} entries, more than the server's limit max_glossary_entries="
                f"{self.max_entries}: split it",
            )
        created = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        stored = StoredGlossary(str(uuid.uuid4()), name, *languages, created, glossary)
        with self.lock:
            own = self.owned.setdefault(owner, {})
            if len(own) >= self.max_glossaries:
                raise RequestError(
                    400,
                    f"Too many glossaries: this key has {len(own)}, the server's limit max_glossaries: delete one "
                    "(DELETE /v2/glossaries/{glossary_id})",
                )
            own[stored.glossary_id] = stored
        return stored

    def listed(self, owner: str) -> list[StoredGlossary]:
        """The owner's glossaries, oldest first."""
        with self.lock:
            return list(self.owned.get(owner, {}).values())

    def get(self, owner: str, glossary_id: str) -> StoredGlossary:
        """The owner's glossary ``glossary_id``; `RequestError` 404 for none (another key's among them)."""
        with self.lock:
            found = self.owned.get(owner, {}).get(glossary_id)
        if found is None:
            raise RequestError(404, f"Glossary {glossary_id!r} not found: list yours with GET /v2/glossaries")
        return found

    def remove(self, owner: str, glossary_id: str) -> None:
        """Delete the owner's glossary ``glossary_id``; `RequestError` 404 for none."""
        self.get(owner, glossary_id)
        with self.lock:
            self.owned.get(owner, {}).pop(glossary_id, None)


def parse_entries(entries: str, entries_format: str, languages: tuple[str, str]) -> Glossary:
    """The glossary of DeepL's ``entries`` in ``entries_format`` (module docstring); `RequestError` (400) naming
    the line for a malformed one, an empty term, a term given two targets, or no entry at all."""
    if entries_format == "tsv":
        rows = [(number, line.split("\t")) for number, line in enumerate(entries.splitlines(), 1)]
        width = "source<TAB>target"
    else:
        rows = list(enumerate(csv.reader(io.StringIO(entries)), 1))
        width = "source,target (and optionally source_lang,target_lang)"
    pairs = []
    for number, columns in rows:
        if not any(column.strip() for column in columns):
            continue
        if entries_format == "csv" and len(columns) == 4:
            if tuple(column.strip().lower() for column in columns[2:]) != languages:
                raise RequestError(
                    400,
                    f"Invalid glossary entries provided: line {number} names languages {columns[2:]}, not the "
                    f"glossary's {list(languages)}",
                )
            columns = columns[:2]
        if len(columns) != 2 or not columns[0].strip() or not columns[1].strip():
            raise RequestError(400, f"Invalid glossary entries provided: line {number} is not {width}")
        pairs.append((columns[0], columns[1]))
    if not pairs:
        raise RequestError(400, "Invalid glossary entries provided: no entry; send one per line")
    try:
        return Glossary.from_pairs(pairs)
    except ValueError as err:
        raise RequestError(400, f"Invalid glossary entries provided: {err}") from err


async def owner_of(request: Request, store: GlossaryStore) -> str:
    """Whose glossaries of ``store`` a request sees: a hash of its API key on a server with keys (which `ApiGate`
    checked), one owner for all on a server without."""
    if not store.keyed:
        return ""
    key = await request_key("deepl", dict(request.scope), await request.body())
    return hashlib.sha256((key or "").encode()).hexdigest()


async def glossary_for(
    request: Request, store: GlossaryStore, glossary_id: Any, source: str | None, target: str
) -> GlossaryOptions:
    """The decoding options of a DeepL request that names ``glossary_id`` (a glossary of its key) translating from
    ``source`` into ``target`` (model language codes); `RequestError` 400 for a request without ``source_lang``,
    for languages other than the glossary's, 404 for a glossary the key does not have."""
    if not isinstance(glossary_id, str) or not glossary_id:
        raise RequestError(
            400, "Value for 'glossary_id' not supported: send the id of one of your glossaries"
        )
    if source is None:
        raise RequestError(400, "Value for 'source_lang' not provided: a glossary needs source_lang")
    stored = store.get(await owner_of(request, store), glossary_id)
    if (stored.source_lang, stored.target_lang) != (source, target):
        raise RequestError(
            400,
            f"Glossary {glossary_id!r} is {stored.source_lang} -> {stored.target_lang}, the request "
            f"{source} -> {target}: use a glossary of the request's languages",
        )
    return GlossaryOptions(glossary=dict(stored.glossary.entries))
