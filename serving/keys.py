"""API keys: where they come from (`load_api_keys`: ``serve --api_keys FILE`` or the environment variable
``VANILLA_TRANSFORMER_API_KEYS``), which routes need one (`GUARDED`, every DeepL route), and how each API presents
one (`request_key`). `serving.middleware.ApiGate` checks them; keys are compared in constant time (`known_key`)
and never logged nor echoed."""

from __future__ import annotations

import hmac
import os
import re
from collections.abc import Mapping
from urllib.parse import parse_qs

from .dialects import LIBRETRANSLATE_PREFIX, first, read_fields
from .options import RequestError

# the routes whose requests need a key when the server has keys, by API; the other routes (languages, settings,
# health, info, the schema) answer anyone; DeepL guards every /v2 route
GUARDED = {
    "own": ("/translate", "/translate/stream", "/score"),
    "huggingface": ("/",),
    "libretranslate": (
        "/detect",
        f"{LIBRETRANSLATE_PREFIX}/translate",
        f"{LIBRETRANSLATE_PREFIX}/detect",
        "/translate_file",
        f"{LIBRETRANSLATE_PREFIX}/translate_file",
    ),
}
# the environment variable of `load_api_keys`
API_KEYS_ENV = "VANILLA_TRANSFORMER_API_KEYS"
# what a refused request is told to send, by API
KEY_HOW = {
    "own": "send the header Authorization: Bearer KEY",
    "huggingface": "send the header Authorization: Bearer KEY (InferenceClient(token=KEY))",
    "libretranslate": "send the field api_key",
    "deepl": "send the header Authorization: DeepL-Auth-Key KEY",
}


def guarded(api: str, method: str, path: str) -> bool:
    """Whether a request needs a key on a server with keys (and counts toward the rate limit)."""
    return method != "OPTIONS" and (api == "deepl" or path in GUARDED.get(api, ()))


def load_api_keys(path: str | None = None, environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The keys of the file ``path`` (one a line; blank lines and lines starting with # skipped) and of the
    environment variable ``VANILLA_TRANSFORMER_API_KEYS`` (separated by commas or whitespace); `ValueError` for a
    file that cannot be read or holds no key."""
    listed = (os.environ if environ is None else environ).get(API_KEYS_ENV, "")
    keys = set(re.split(r"[\s,]+", listed.strip())) - {""}
    if path is not None:
        try:
            lines = open(path, encoding="utf-8").read().splitlines()
        except OSError as err:
            raise ValueError(f"--api_keys {path}: {err.strerror}: pass a file of keys, one a line") from None
        found = {line.strip() for line in lines if line.strip() and not line.strip().startswith("#")}
        if not found:
            raise ValueError(f"--api_keys {path} holds no key: write one key a line")
        keys |= found
    return frozenset(keys)


def known_key(keys: frozenset[str], key: str | None) -> str | None:
    """The key of ``keys`` that ``key`` is (compared in constant time), or None."""
    if key is None:
        return None
    known = [k for k in keys if hmac.compare_digest(key.encode(), k.encode())]
    return known[0] if known else None


async def _body_field(scope: dict, body: bytes, name: str) -> str | None:
    """The string value of field ``name`` of a request body (JSON or form); None when absent or unreadable."""
    from starlette.requests import Request

    async def once():
        return {"type": "http.request", "body": body, "more_body": False}

    try:
        fields, form = await read_fields(Request(scope, once))
    except RequestError:
        return None
    value = first(fields, name, form)
    return value if isinstance(value, str) else None


async def request_key(api: str, scope: dict, body: bytes) -> str | None:
    """The key a request presents in its API's way: LibreTranslate's ``api_key`` field (JSON or form), DeepL's
    ``Authorization: DeepL-Auth-Key KEY`` header or else its legacy ``auth_key`` field (query string or body),
    ``Authorization: Bearer KEY`` for the others."""
    if api == "libretranslate":
        return await _body_field(scope, body, "api_key")
    headers = dict(scope["headers"])
    scheme, _, key = headers.get(b"authorization", b"").decode("latin-1").strip().partition(" ")
    wanted = "deepl-auth-key" if api == "deepl" else "bearer"
    if scheme.lower() == wanted:
        return key.strip()
    if api == "deepl" and not scheme:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("auth_key")
        return query[0] if query else await _body_field(scope, body, "auth_key")
    return None
