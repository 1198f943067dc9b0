"""Which API a request speaks, and reading the fields of the other APIs' bodies.

Beside its own API, the server speaks LibreTranslate's (`serving.libretranslate_api`), the Hugging Face Inference
translation task's (`serving.hf_inference_api`) and DeepL's v2 (`serving.deepl_api`). POST /translate is shared by
three of them and told apart by its body (`body_api`): a JSON object with ``text`` is the server's own; one with
``inputs`` the Hugging Face task's; one with ``q``, ``source`` or ``target``, or a form, LibreTranslate's; anything
else the server's own (which names what is wrong). `routed_path` sends such a request to its API's path and
`request_api` names the API of a path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.routing import APIRoute

from .options import RequestError

# where LibreTranslate's own POST /translate is served when a body on the shared path is LibreTranslate's (and for
# a client that would rather name the API in the URL)
LIBRETRANSLATE_PREFIX = "/libretranslate"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
# the routes that take a document file (their bodies may be up to the server's max_file_bytes)
FILE_UPLOADS = ("/translate_file", f"{LIBRETRANSLATE_PREFIX}/translate_file", "/v2/document")
# what a multipart body may hold beside its file: the form's other fields and its boundaries
FORM_OVERHEAD = 65536


def body_api(content_type: str, body: bytes) -> str | None:
    """The path that serves a POST /translate with this body: for a JSON object without ``text``, the Hugging
    Face task's (``/``) when it has ``inputs``, LibreTranslate's when it has ``q``, ``source`` or ``target``;
    LibreTranslate's for a form; None (the server's own) for anything else."""
    if content_type.split(";")[0].strip().lower() in FORM_TYPES:
        return f"{LIBRETRANSLATE_PREFIX}/translate"
    try:
        fields = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if isinstance(fields, dict) and "text" not in fields:
        if "inputs" in fields:
            return "/"
        if {"q", "source", "target"} & set(fields):
            return f"{LIBRETRANSLATE_PREFIX}/translate"
    return None


def routed_path(scope: dict, body: bytes) -> str:
    """The path that serves an HTTP request whose body is ``body``: a POST /translate in another API's body goes
    to that API's path (`body_api`); any other request to its own path."""
    path = scope["path"]
    if scope["method"] == "POST" and path == "/translate":
        content_type = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
        return body_api(content_type, body) or path
    return path


def request_api(path: str) -> str:
    """The API a request path (after `body_api`) belongs to: own, huggingface, libretranslate or deepl."""
    if path.startswith("/v2/"):
        return "deepl"
    if path == "/":
        return "huggingface"
    if path.startswith((f"{LIBRETRANSLATE_PREFIX}/", "/download_file/")) or path in (
        "/detect",
        "/languages",
        "/frontend/settings",
        "/translate_file",
    ):
        return "libretranslate"
    return "own"


async def read_fields(request: Request) -> tuple[dict[str, Any], bool]:
    """The fields of a request body and whether it was a form: a JSON object as it is; a form (url-encoded or
    multipart) as lists of the values of each name. `RequestError` (400) for a body that is neither."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in FORM_TYPES:
        form = await request.form()
        return {name: [v for v in form.getlist(name) if isinstance(v, str)] for name in form}, True
    body = await request.body()
    if not body.strip():
        return {}, False
    try:
        fields = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RequestError(400, f"malformed JSON: {err}") from err
    if not isinstance(fields, dict):
        raise RequestError(400, "the body must be a JSON object")
    return fields, False


def first(fields: dict[str, Any], name: str, form: bool) -> Any:
    """The value of field ``name`` (a form's first value of that name); None when absent."""
    value = fields.get(name)
    return (value[0] if value else None) if form else value


def protect_field(value: Any) -> bool:
    """The ``protect`` field of a request (`serving.options.PROTECT_HELP`): True when absent; a boolean, or a form's
    "true"/"false"/"1"/"0". `RequestError` (400) for anything else."""
    if value is None or isinstance(value, bool):
        return value is not False
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "false", "0"):
        return value.strip().lower() in ("true", "1")
    raise RequestError(400, f"protect={value!r} is invalid: send true or false")


def dialect_router(
    api_name: str, routes: Iterable[tuple[str, Callable[..., Any], Sequence[str]]]
) -> APIRouter:
    """An `APIRouter` of each (path, endpoint, methods) of ``routes``, tagged ``api_name`` in the OpenAPI schema,
    one operation per method, its id made of the API's name, the method and the path it is served at (so that a
    router included under two prefixes gives distinct ids)."""

    def operation_id(route: APIRoute) -> str:
        method = next(iter(route.methods or ()))
        return re.sub(r"\W+", "_", f"{api_name} {method} {route.path}").strip("_").lower()

    router = APIRouter(tags=[api_name], generate_unique_id_function=operation_id)
    for path, endpoint, methods in routes:
        for method in methods:
            router.add_api_route(path, endpoint, methods=[method])
    return router
