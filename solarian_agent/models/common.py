"""What every HTTP model provider shares: the call skeleton (images checked and fitted before any
request, a timeout on every attempt, bounded retries, latency measured with ``time.monotonic``),
SDK-exception mapping to :class:`ModelError` kinds, key scrubbing, tool-argument parsing and
token-usage normalisation.

Images
    Each provider has :class:`ImageLimits`: the longest side (``max_image_side``), a pixel cap,
    a count per request and a byte size per image.  **The harness prepares every image at
    ``min(config image_max_side, provider.max_image_side)`` (and within
    ``provider.max_image_pixels``) so that the image the model sees is exactly the one whose
    :class:`~solarian_agent.perception.images.Scaling` it recorded, and points read off it map
    back to capture pixels exactly.**  The resize here is only a safety net for callers that did
    not: it logs a warning, because points read off a resized image no longer map through the
    caller's scaling.  More images than ``max_images`` are refused with
    ``ModelError("bad_request")`` before any request is sent, never silently dropped.  The
    limits are on every provider as ``max_image_side``, ``max_image_pixels`` and
    ``max_images``.  An ``ImagePart.label`` is sent as a text part right before its image.

Usage
    ``Usage.input_tokens`` counts input that was neither read from nor written to the prompt
    cache (how Anthropic reports it); OpenAI's inclusive totals are split the same way, so the
    four fields add up to everything billed as input plus output across providers.

Keys
    A provider holds its key only inside the SDK client.  Every message that leaves this layer
    passes through :func:`scrub`, and mapped errors are raised outside the ``except`` block so
    no SDK exception (whose request object holds the auth header) stays attached as
    ``__context__`` or ``__cause__``.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.model_api import (
    ImagePart,
    Message,
    ModelError,
    ModelReply,
    ModelRequest,
    TextPart,
    Usage,
)
from ..core.scrubbing import scrub
from .retry import RetryPolicy, TransientModelError, call_with_retries, parse_retry_after

log = logging.getLogger(__name__)

PURPOSES = ("planner", "monitor", "vision", "router")
MAX_ERROR_CHARS = 600


@dataclass(frozen=True)
class ImageLimits:
    """What one provider accepts per request without resizing images itself."""

    max_side: int
    max_pixels: int
    max_images: int
    max_bytes: int


# ------------------------------------------------------- text (scrubbing: core/scrubbing.py)


def _clip(text: str, n: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def data_url(img: ImagePart) -> str:
    return f"data:{img.media_type};base64,{base64.b64encode(img.data).decode('ascii')}"


def b64(img: ImagePart) -> str:
    return base64.b64encode(img.data).decode("ascii")


# --------------------------------------------------------------------------- tool arguments


def json_int(digits: str) -> int | float:
    """An integer literal from a reply's JSON.  Past Python's limit on digits (4,300),
    ``int()`` refuses to convert it and the whole reply would be lost: it becomes a float
    instead (an infinity), which the tool-argument checks refuse by name."""
    try:
        return int(digits)
    except ValueError:
        return float(digits)


def loads(text: str | bytes) -> Any:
    """``json.loads`` for a model service's replies (see :func:`json_int`)."""
    return json.loads(text, parse_int=json_int)


def json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` with every float that is not finite replaced by its name as a string: a
    model's own NaN or Infinity argument, resent as part of its earlier call, must not make
    the next request impossible to encode (JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if depth > 100:
        return value
    if isinstance(value, dict):
        return {k: json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    return value


def parse_tool_arguments(raw: Any) -> tuple[dict[str, Any], str]:
    """Tool-call arguments as a dict, or ``({}, error)`` when they are not a JSON object.

    The error names what was wrong so the harness can refuse the call with it; an empty
    argument string means "no arguments".
    """
    if isinstance(raw, dict):
        return dict(raw), ""
    if raw is None:
        return {}, ""
    if not isinstance(raw, str):
        return {}, f"arguments must be a JSON object, got {type(raw).__name__}"
    if not raw.strip():
        return {}, ""
    try:
        obj = loads(raw)
    except json.JSONDecodeError as e:
        return {}, (f"arguments are not valid JSON ({e.msg} at char {e.pos}): "
                    f"{_clip(repr(raw), 200)}")
    if not isinstance(obj, dict):
        return {}, f"arguments must be a JSON object, got {type(obj).__name__}: {_clip(raw, 200)}"
    return obj, ""


def is_strict_schema(schema: Any) -> bool:
    """True when a JSON Schema meets OpenAI's strict mode (closed objects, all keys required)."""
    if isinstance(schema, list):
        return all(is_strict_schema(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required", [])) != set(props):
            return False
    for key in ("properties", "$defs", "definitions"):
        sub = schema.get(key)
        if isinstance(sub, dict) and not all(is_strict_schema(v) for v in sub.values()):
            return False
    for key in ("items", "anyOf", "oneOf", "allOf"):
        if key in schema and not is_strict_schema(schema[key]):
            return False
    return True


# --------------------------------------------------------------------------- usage


MAX_TOKEN_COUNT = 10**12  # no reply uses more tokens; a larger count is no count


def usage_count(v: Any, what: str = "usage count") -> int:
    """A token count from a reply's usage: a whole number from 0 to :data:`MAX_TOKEN_COUNT`
    (an integral float such as ``12.0`` too).  Anything else (negative, fractional, NaN, a
    string, a list) is logged as invalid, naming ``what``, and counted as 0: a usage block
    is bookkeeping and never costs the reply it came with.  A missing count is 0."""
    if v is None:
        return 0
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_TOKEN_COUNT:
        return v
    log.warning("invalid %s in a model reply's usage: %s (counted as 0)", what,
                _clip(repr(v), 80))
    return 0


def openai_usage(total_in: Any, out: Any, cached: Any, written: Any = 0) -> Usage:
    """Split an OpenAI-style inclusive input total into uncached / cache read / cache write."""
    t = usage_count(total_in, "input token count")
    c = usage_count(cached, "cached token count")
    w = usage_count(written, "cache write token count")
    return Usage(input_tokens=max(0, t - c - w),
                 output_tokens=usage_count(out, "output token count"),
                 cache_read_tokens=c, cache_write_tokens=w)


def dig(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, Mapping):
            return None
        d = d.get(k)
    return d


# --------------------------------------------------------------------------- images


def fit_image(img: ImagePart, limits: ImageLimits, index: int) -> ImagePart:
    """``img`` within ``limits`` (resized only when it is not; see the module docstring)."""
    w, h = img.width, img.height
    if w <= 0 or h <= 0:
        w, h = _decoded_size(img, index)
    scale = 1.0
    if max(w, h) > limits.max_side:
        scale = limits.max_side / max(w, h)
    if w * h * scale * scale > limits.max_pixels:
        scale = min(scale, (limits.max_pixels / float(w * h)) ** 0.5)
    out = img
    if scale < 1.0:
        out = _resize(img, max(1, int(w * scale)), max(1, int(h * scale)), index)
        log.warning("image %d (%s, %dx%d) exceeds this provider's limits; resized to %dx%d. "
                    "Prepare images at the provider's max_image_side so points map exactly.",
                    index, img.observation_id or "no observation id", w, h, out.width,
                    out.height)
    if len(out.data) > limits.max_bytes:
        raise ModelError("bad_request", (
            f"image {index} ({out.observation_id or 'no observation id'}) is "
            f"{len(out.data)} bytes encoded; this provider takes at most {limits.max_bytes}"))
    return out


def _decoded_size(img: ImagePart, index: int) -> tuple[int, int]:
    import cv2
    import numpy as np

    arr = cv2.imdecode(np.frombuffer(img.data, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    if arr is None:
        raise ModelError("bad_request", f"image {index} ({img.media_type}) could not be decoded")
    return int(arr.shape[1]), int(arr.shape[0])


def _resize(img: ImagePart, nw: int, nh: int, index: int) -> ImagePart:
    import cv2
    import numpy as np

    arr = cv2.imdecode(np.frombuffer(img.data, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    if arr is None:
        raise ModelError("bad_request", f"image {index} ({img.media_type}) could not be decoded")
    arr = cv2.resize(arr, (nw, nh), interpolation=cv2.INTER_AREA)
    if img.media_type == "image/png":
        ok, buf = cv2.imencode(".png", arr)
        mt = "image/png"
    else:
        ok, buf = cv2.imencode(".jpg", arr, [cv2.IMWRITE_JPEG_QUALITY, 90])
        mt = "image/jpeg"
    if not ok:
        raise ModelError("bad_request", f"image {index} could not be re-encoded after resizing")
    return dataclasses.replace(img, data=buf.tobytes(), media_type=mt, width=nw, height=nh)


def fit_request_images(request: ModelRequest, limits: ImageLimits, provider: str
                       ) -> ModelRequest:
    """The request with every image within ``limits``; too many images → bad_request."""
    count = sum(isinstance(p, ImagePart) for m in request.messages for p in m.content)
    if count > limits.max_images:
        raise ModelError("bad_request", (
            f"the request carries {count} images; {provider} takes at most "
            f"{limits.max_images} per request (keep fewer images in context)"))
    if count == 0:
        return request
    index = 0
    messages: list[Message] = []
    for m in request.messages:
        parts: list[TextPart | ImagePart] = []
        for p in m.content:
            if isinstance(p, ImagePart):
                index += 1
                parts.append(fit_image(p, limits, index))
            else:
                parts.append(p)
        messages.append(dataclasses.replace(m, content=tuple(parts)))
    return dataclasses.replace(request, messages=tuple(messages))


# --------------------------------------------------------------------------- error mapping


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
    message = _clip(scrub(message, secrets))
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


# --------------------------------------------------------------------------- the base class


MAX_REPLY_BYTES = 64 * 1024 * 1024  # a non-streamed reply body larger than this is refused


class HTTPModelProvider:
    """The call skeleton of a provider that talks to a model service through an SDK client.

    Subclasses set ``name`` and ``default_limits`` and implement ``_make_client``,
    ``_build`` (provider-neutral request → SDK keyword arguments, once per call), ``_send`` (one
    attempt; returns the reply as plain JSON-like data) and ``_parse`` (that data →
    :class:`ModelReply` or ModelError).
    """

    name = "http"
    reads_images = True
    default_limits = ImageLimits(max_side=1024, max_pixels=1024 * 1024, max_images=20,
                                 max_bytes=5 * 1024 * 1024)

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        purpose: str = "planner",
        max_retries: int = 3,
        max_tokens: int = 4096,
        timeout_s: float = 60.0,
        stream: bool = False,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        image_limits: ImageLimits | None = None,
        retry_policy: RetryPolicy | None = None,
        client: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if purpose not in PURPOSES:
            raise ValueError(f"purpose must be one of {PURPOSES}, not {purpose!r}")
        self.model = model
        self.purpose = purpose
        self.base_url = base_url
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.stream = stream
        self.image_limits = image_limits or self.default_limits
        self.max_image_side = self.image_limits.max_side
        self.max_image_pixels = self.image_limits.max_pixels
        self.max_images = self.image_limits.max_images
        policy = retry_policy or RetryPolicy()
        self.retry_policy = dataclasses.replace(
            policy, max_retries=0 if purpose == "vision" else max_retries)
        self._sleep = sleep
        self._clock = clock
        self._rng = rng or random.Random()
        self._secrets: tuple[str, ...] = (api_key,) if api_key else ()
        self._client = client if client is not None else self._make_client(api_key, base_url)

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(model={self.model!r}, purpose={self.purpose!r})"

    # -- subclass hooks
    def _make_client(self, api_key: str, base_url: str | None) -> Any:
        raise NotImplementedError

    def _build(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _send(self, params: dict[str, Any], timeout_s: float, deadline: float) -> Any:
        raise NotImplementedError

    def _parse(self, raw: Any, request: ModelRequest) -> ModelReply:
        raise NotImplementedError

    # -- the call
    def complete(self, request: ModelRequest, *, timeout_s: float | None = None) -> ModelReply:
        """One model call: one deadline, ``timeout_s`` from now, for the whole call (every
        attempt, every wait between them, every byte of every body), bounded retries, latency
        measured.

        ``latency_s`` on the reply is the whole call (``time.monotonic``), retries and backoff
        included.  Raises :class:`ModelError` only.
        """
        t0 = time.monotonic()
        timeout = self.timeout_s if timeout_s is None else float(timeout_s)
        deadline = self._clock() + timeout
        policy = self.retry_policy
        if request.purpose == "vision" and policy.max_retries:
            policy = dataclasses.replace(policy, max_retries=0)
        params = self._prepare(request)
        reply = call_with_retries(lambda _n: self._attempt(params, request, deadline),
                                  policy=policy, sleep=self._sleep, rng=self._rng,
                                  model=self.model, label=f"{self.name} {request.purpose} call",
                                  deadline=deadline, clock=self._clock)
        return dataclasses.replace(reply, latency_s=time.monotonic() - t0,
                                   model=reply.model or self.model)

    def _prepare(self, request: ModelRequest) -> dict[str, Any]:
        err: ModelError | None = None
        try:
            fitted = fit_request_images(request, self.image_limits, self.name)
            return self._build(fitted)
        except ModelError as e:
            err = map_sdk_error(e, provider=self.name, model=self.model, secrets=self._secrets)
        except (TypeError, ValueError) as e:  # e.g. tool parameters that are not JSON
            err = ModelError("bad_request", _clip(scrub(
                f"could not build the {self.name} request ({type(e).__name__}: {e})",
                self._secrets)), model=self.model)
        raise err

    def _attempt(self, params: dict[str, Any], request: ModelRequest,
                 deadline: float) -> ModelReply:
        """One request, its reads bounded by what is left of the call's ``deadline``."""
        err: ModelError | None = None
        left = deadline - self._clock()
        if left <= 0:
            raise ModelError("timeout", f"{self.name} call ran out of time before this attempt",
                             model=self.model)
        try:
            raw = self._send(params, left, time.monotonic() + left)
        except Exception as e:  # noqa: BLE001 - every SDK failure becomes a ModelError
            err = map_sdk_error(e, provider=self.name, model=self.model, secrets=self._secrets)
        if err is not None:
            raise err
        try:
            return self._parse(raw, request)
        except ModelError as e:
            err = map_sdk_error(e, provider=self.name, model=self.model, secrets=self._secrets)
        except Exception as e:  # noqa: BLE001
            err = ModelError("malformed", _clip(scrub(
                f"{self.name} reply could not be read ({type(e).__name__}: {e})",
                self._secrets)), model=self.model)
        raise err

    def _read_json(self, response: Any, deadline: float) -> Any:
        """The JSON body of a non-streamed reply, from the SDK's ``with_streaming_response``
        context ``response``, read piece by piece against ``deadline``: the HTTP client's
        timeout bounds each read, so a body trickled a few bytes at a time would otherwise
        hold the call far past its timeout."""
        chunks: list[bytes] = []
        size = 0
        with response as resp, self.cut_at(resp, deadline):
            for chunk in resp.iter_bytes():
                self._check_deadline(deadline)
                size += len(chunk)
                if size > MAX_REPLY_BYTES:
                    raise ModelError("malformed", f"{self.name} reply body is over "
                                     f"{MAX_REPLY_BYTES} bytes", model=self.model)
                chunks.append(chunk)
        self._check_deadline(deadline)
        return loads(b"".join(chunks))

    @contextlib.contextmanager
    def cut_at(self, response: Any, deadline: float) -> Iterator[None]:
        """Close ``response`` (a body being read) when ``deadline`` (``time.monotonic``)
        passes: the checks between pieces cannot run while one piece (a stream's event, a
        read) is still trickling in, so a timer ends it instead.  Whatever the reading then
        raises, or however it ends, the call ends as a timeout."""
        fired = threading.Event()

        def cut() -> None:
            fired.set()
            try:
                response.close()
            except Exception:  # noqa: BLE001 - closing is best effort; the read then fails
                log.debug("closing a reply at its deadline failed", exc_info=True)

        timer = threading.Timer(max(0.0, deadline - time.monotonic()), cut)
        timer.daemon = True
        timer.start()
        try:
            yield
        except Exception:
            if not fired.is_set():
                raise
        finally:
            timer.cancel()
        if fired.is_set():
            raise ModelError("timeout", f"{self.name} reply ran past the call's deadline",
                             model=self.model)

    def _check_deadline(self, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise ModelError("timeout", f"{self.name} reply ran past the call's deadline",
                             model=self.model)

    def _check_json(self, text: str, request: ModelRequest) -> None:
        if request.response_schema is None:
            return
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            raise ModelError("malformed", _clip(
                f"typed answer {request.response_name!r} is not JSON ({e.msg} at char {e.pos})"
                f": {text[:200]!r}"), model=self.model) from None

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()


def to_plain(obj: Any) -> Any:
    """An SDK model object as plain JSON-like data (dicts pass through)."""
    if isinstance(obj, (dict, list, str, int, float, bool)) or obj is None:
        return obj
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        # warnings off: a reply that does not match the SDK's types is judged by _parse
        return to_dict(warnings=False)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(warnings=False)
    raise ModelError("malformed", f"unexpected reply object {type(obj).__name__}")


OPENAI_LIMITS = ImageLimits(max_side=1024, max_pixels=1024 * 1024, max_images=50,
                            max_bytes=20 * 1024 * 1024)


class OpenAIProvider(HTTPModelProvider):
    """What the three OpenAI wire formats share: image limits, the client (SDK retries off:
    only ours apply) and the Responses-style input parts (also used by Decisions)."""

    default_limits = OPENAI_LIMITS

    def __init__(self, *, reasoning_effort: str | None = None, image_detail: str = "high",
                 **kwargs: Any) -> None:
        self.reasoning_effort = reasoning_effort
        self.image_detail = image_detail
        super().__init__(**kwargs)

    def _make_client(self, api_key: str, base_url: str | None) -> Any:
        import openai

        return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0,
                             timeout=self.timeout_s)

    def _parts(self, content: tuple[Any, ...]) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        for p in content:
            if isinstance(p, ImagePart):
                if p.label:
                    parts.append({"type": "input_text", "text": p.label})
                parts.append({"type": "input_image", "image_url": data_url(p),
                              "detail": self.image_detail})
            elif p.text:
                parts.append({"type": "input_text", "text": p.text})
        return parts
