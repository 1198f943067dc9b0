"""The one place every API's refusals are shaped: its error field and its status codes, in its handlers and
before them (body limits, keys, rate limits, unknown paths)."""

from __future__ import annotations

from fastapi.responses import JSONResponse

# how each API shapes an error
ERROR_FIELD = {"own": "detail", "huggingface": "error", "libretranslate": "error", "deepl": "message"}
# the status each API answers in place of the server's own: LibreTranslate refuses a request with 400, DeepL too
# but for a body over the size limit (413)
ERROR_STATUS = {"libretranslate": {411: 400, 413: 400, 422: 400}, "deepl": {411: 400, 422: 400}}


def error_reply(api: str, status: int, message: str, *, close: bool = False) -> JSONResponse:
    """A refusal in the error shape and with the status codes of ``api`` (own, huggingface, libretranslate or
    deepl, `serving.dialects.request_api`); with ``close``, the connection is closed after it."""
    headers = {"connection": "close"} if close else None
    status = ERROR_STATUS.get(api, {}).get(status, status)
    return JSONResponse({ERROR_FIELD[api]: message}, status_code=status, headers=headers)


def rate_limited(api: str, per_minute: int, retry_after: int) -> JSONResponse:
    """The 429 of a client over the rate limit, in its API's error shape (LibreTranslate's "Slowdown", DeepL's
    "Too many requests"), with ``Retry-After`` in seconds."""
    message = {
        "libretranslate": f"Slowdown: {per_minute} per 1 minute",
        "deepl": "Too many requests, please wait and resend your request",
    }.get(api, f"more than {per_minute} requests a minute: retry in {retry_after} s")
    return JSONResponse(
        {ERROR_FIELD[api]: message}, status_code=429, headers={"Retry-After": str(retry_after)}
    )
