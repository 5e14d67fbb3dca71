"""What every HTTP model provider shares: the call skeleton (images checked and fitted before any
request, a timeout on every attempt, bounded retries, latency measured with ``time.monotonic``)
and the OpenAI client.  The parts it calls live beside it: :mod:`.image_fit` (images within a
provider's limits), :mod:`.sdk_errors` (SDK exceptions as :class:`ModelError` kinds),
:mod:`.tool_args` (tool-call arguments), :mod:`.usage` (token usage) and :mod:`.plain_json`
(reply data).

Keys
    A provider holds its key only inside the SDK client.  Every message that leaves this layer
    passes through :func:`scrub`, and mapped errors are raised outside the ``except`` block so
    no SDK exception (whose request object holds the auth header) stays attached as
    ``__context__`` or ``__cause__``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..core.model_api import ImagePart, ModelError, ModelReply, ModelRequest
from ..core.scrubbing import scrub
from .image_fit import ImageLimits, data_url, fit_request_images
from .plain_json import loads
from .retry import RetryPolicy, call_with_retries
from .sdk_errors import clip, map_sdk_error

log = logging.getLogger(__name__)

PURPOSES = ("planner", "monitor", "vision", "router")

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
            err = ModelError("bad_request", clip(scrub(
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
            err = ModelError("malformed", clip(scrub(
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
            raise ModelError("malformed", clip(
                f"typed answer {request.response_name!r} is not JSON ({e.msg} at char {e.pos})"
                f": {text[:200]!r}"), model=self.model) from None

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()



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
