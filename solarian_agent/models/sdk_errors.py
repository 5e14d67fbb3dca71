"""SDK exceptions mapped to :class:`ModelError` kinds, and error text kept short.

A provider holds its key only inside the SDK client.  Every message made here passes through
:func:`scrub`, and a caller raises the mapped error outside its ``except`` block so no SDK
exception (whose request object holds the auth header) stays attached as ``__context__`` or
``__cause__``.  Headers that carry credentials are never read into a message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.model_api import ModelError
from ..core.scrubbing import scrub
from .plain_json import dig
from .retry import TransientModelError, parse_retry_after

MAX_ERROR_CHARS = 600


def clip(text: str, n: int = MAX_ERROR_CHARS) -> str:
    """``text`` cut to ``n`` characters: an error message quotes what it got, never all of it."""
    return text if len(text) <= n else text[: n - 1] + "…"


def _mro_names(e: BaseException) -> set[str]:
    return {c.__name__ for c in type(e).__mro__}


def map_sdk_error(e: BaseException, *, provider: str, model: str,
                  secrets: Sequence[str]) -> ModelError:
    """A ModelError for an exception raised by the anthropic / openai SDK (or while parsing).

    Works on both SDKs by their shared exception names, so neither has to be importable.
    """
    names = _mro_names(e)
    if isinstance(e, ModelError):
        return ModelError(e.kind, scrub(e.message, secrets), model=e.model or model,
                          attempts=e.attempts)
    raw_message = getattr(e, "message", None) or str(e) or type(e).__name__
    status = getattr(e, "status_code", None)
    headers = _headers(e)
    request_id = headers.get("request-id") or headers.get("x-request-id") or ""
    rid = f" [request id {request_id}]" if request_id else ""
    # APITimeoutError / APIConnectionError: the SDKs' own; TimeoutException / TransportError:
    # the HTTP client's, which can escape from the middle of a stream
    if names & {"APITimeoutError", "TimeoutException"} or isinstance(e, TimeoutError):
        kind, message = "timeout", f"{provider} did not answer in time"
    elif names & {"APIConnectionError", "TransportError", "RequestError"} or isinstance(
            e, ConnectionError):
        kind, message = "connection", f"could not reach {provider}: {raw_message}"
    elif "APIResponseValidationError" in names:
        kind = "malformed"
        message = f"{provider} sent a reply the SDK could not read: {raw_message}"
    elif isinstance(status, int):
        api_message = _api_message(getattr(e, "body", None)) or raw_message
        kind = _kind_for_status(status, getattr(e, "body", None))
        message = f"HTTP {status} from {provider}: {api_message}{rid}"
    elif "APIError" in names:  # an error event in the middle of a stream
        api_message = _api_message(getattr(e, "body", None)) or raw_message
        kind = _kind_for_status(200, getattr(e, "body", None) or {"type": getattr(e, "type", "")})
        message = f"{provider} reported an error mid-stream: {api_message}"
    elif isinstance(e, (json.JSONDecodeError, UnicodeDecodeError)):
        kind, message = "malformed", f"{provider} sent a body that is not valid JSON: {e}"
    else:
        kind, message = "bad_request", f"{type(e).__name__}: {raw_message}"
    message = clip(scrub(message, secrets))
    retry_after = parse_retry_after(headers) if kind in ("rate_limited", "server") else None
    if retry_after is not None:
        return TransientModelError(kind, message, model=model, retry_after_s=retry_after)
    return ModelError(kind, message, model=model)


def _headers(e: BaseException) -> dict[str, str]:
    resp = getattr(e, "response", None)
    h = getattr(resp, "headers", None)
    if h is None:
        return {}
    try:
        return {str(k).lower(): str(v) for k, v in h.items()
                if str(k).lower() not in ("authorization", "x-api-key", "set-cookie")}
    except Exception:
        return {}


def _api_message(body: Any) -> str:
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping):
            msg = err.get("message")
            typ = err.get("type")
            if msg:
                return f"{msg} ({typ})" if typ else str(msg)
        elif isinstance(err, str):
            return err
    return ""


def _kind_for_status(status: int, body: Any) -> str:
    if status == 429:
        return "rate_limited"
    if status in (401, 403):
        return "auth"
    if status == 408:
        return "timeout"
    if status >= 500 or status == 409:
        return "server"
    if status < 400:
        # an error event inside a 200 stream: its body says what it was
        typ = dig(body, "error", "type") or dig(body, "type") or ""
        if typ == "rate_limit_error":
            return "rate_limited"
        if typ in ("authentication_error", "permission_error"):
            return "auth"
        if typ == "invalid_request_error":
            return "bad_request"
        return "server"
    return "bad_request"

