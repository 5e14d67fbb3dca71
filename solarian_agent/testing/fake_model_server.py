"""A local HTTP server that speaks the model services' wire formats — the documented test fake.

The model SDKs are exercised for real, over HTTP, against this server; only the model's
judgement is scripted.  It serves, on ``127.0.0.1`` at a free port:

* Anthropic ``POST /v1/messages``
* OpenAI ``POST /v1/chat/completions``, ``POST /v1/responses`` and ``POST /v1/decisions``

each as a plain JSON reply or, when the request body says ``"stream": true``, as server-sent
events in the service's event grammar.  Every request is recorded (method, path, headers with
the credential values redacted, the parsed JSON body) for assertions.

Replies come from one FIFO script shared by all endpoints.  A script entry is provider-neutral
and rendered in the wire format of the endpoint that was called:

* :class:`Reply` — text, tool calls (arguments as a dict, or as raw text to send malformed
  JSON), optional thinking, usage, an optional ``delay_s`` before the reply,
  ``chunk_delay_s`` between streamed events, ``trickle_s`` between the small pieces of a
  non-streamed body (every read sees data, so only a bound on the whole call ends it) and
  ``stream_error`` (the service's error event in the middle of a stream);
* :class:`Refusal`, :class:`Empty` — a refusal / a reply with nothing in it;
* :class:`HTTPError` — any status with the service's error body, ``retry_after`` header;
* :class:`Malformed` — a 200 whose body is not valid JSON (or any raw bytes);
* :class:`Drop` — close the connection without answering;
* :class:`Decision` — answers for ``/v1/decisions`` (built from the request's questions when
  only ``values`` are given).

With ``api_key`` set the server checks the credential each SDK sends (``Authorization:
Bearer``, or Anthropic's ``x-api-key``) and answers 401 when it is wrong; the recorded headers
never hold it.  When the script is empty the server answers 400 ``fake_model_server: no
scripted reply left``.

Example::

    with FakeModelServer(api_key="sk-test") as server:
        server.add(Reply("hello"), HTTPError(429, retry_after=1), Reply(tool_calls=[
            ToolUse("pick", {"x": 3})]))
        client = anthropic.Anthropic(api_key="sk-test", base_url=server.anthropic_base_url)
        ...
        assert server.requests[0].body["model"] == "claude-test"
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .fake_model_script import (
    Decision,
    Drop,
    Empty,
    HTTPError,
    Malformed,
    Refusal,
    Reply,
    ScriptEntry,
    ToolUse,
)
from .fake_model_wire import ERROR_TYPES, RENDERERS, answer, fail_after, stream_error

__all__ = [
    "Decision",
    "Drop",
    "Empty",
    "FakeModelServer",
    "HTTPError",
    "Malformed",
    "RecordedRequest",
    "Refusal",
    "Reply",
    "ScriptEntry",
    "ToolUse",
]

REDACTED = "<redacted>"
TRICKLE_BYTES = 8
_SECRET_HEADERS = ("authorization", "x-api-key", "api-key", "proxy-authorization")


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    auth_ok: bool | None
    t: float

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))


# --------------------------------------------------------------------------- the server


class FakeModelServer:
    """Start with :meth:`start` (or ``with``); stop with :meth:`stop`."""

    def __init__(self, *, api_key: str | None = None, model: str = "fake-model") -> None:
        self.api_key = api_key
        self.model = model
        self.requests: list[RecordedRequest] = []
        self.unscripted = 0
        self._script: list[ScriptEntry] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0

    # -- lifecycle
    def start(self) -> FakeModelServer:
        handler = type("_Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="fake-model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the fake model server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    # -- script and records
    def add(self, *entries: ScriptEntry) -> None:
        with self._lock:
            self._script.extend(entries)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def bodies(self, path: str | None = None) -> list[Any]:
        with self._lock:
            return [r.body for r in self.requests if path is None or r.path == path]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self._script.clear()
            self.unscripted = 0

    def _pop(self) -> ScriptEntry | None:
        with self._lock:
            if not self._script:
                self.unscripted += 1
                return None
            return self._script.pop(0)

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)
            self._arrived.notify_all()

    def wait_for_requests(self, n: int, timeout_s: float) -> bool:
        """Block until ``n`` requests have arrived (True) or ``timeout_s`` passed (False)."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self.requests) >= n, timeout_s)

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}_{self._ids:04d}"

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


# --------------------------------------------------------------------------- HTTP handling


class _Handler(BaseHTTPRequestHandler):
    fake: FakeModelServer
    protocol_version = "HTTP/1.0"
    server_version = "FakeModelServer/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._json(404, {"error": {"type": "not_found_error", "message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass  # the client gave up (a timeout test): nothing to answer

    def _post(self) -> None:
        fake = self.fake
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = {"_raw": raw.decode("utf-8", "replace")}
        path = self.path.split("?", 1)[0]
        flavour = _FLAVOURS.get(path)
        auth_ok = self._auth_ok(flavour)
        headers = {k.lower(): (REDACTED if k.lower() in _SECRET_HEADERS else v)
                   for k, v in self.headers.items()}
        fake._record(RecordedRequest("POST", path, headers, body, raw, auth_ok, time.time()))
        if flavour is None:
            self._error("openai", HTTPError(404, f"no such endpoint {path}"))
            return
        if auth_ok is False:
            self._error(flavour, HTTPError(401, "invalid x-api-key" if flavour == "anthropic"
                                           else "Incorrect API key provided"))
            return
        entry = fake._pop()
        if entry is None:
            self._error(flavour, HTTPError(400, "fake_model_server: no scripted reply left"))
            return
        fake._wait(getattr(entry, "delay_s", 0.0))
        if fake._stopping.is_set():
            return
        req = body if isinstance(body, dict) else {}
        if isinstance(entry, HTTPError):
            self._error(flavour, entry)
        elif isinstance(entry, Malformed):
            self._send(entry.status, entry.body, entry.content_type)
        elif isinstance(entry, Drop):
            self.close_connection = True
        elif flavour == "decisions":
            self._decision(entry, req)
        elif isinstance(entry, Decision):
            self._error(flavour, HTTPError(400, "fake_model_server: a Decision was scripted "
                                           f"but {path} was called"))
        else:
            renderer = RENDERERS[flavour]
            stream = bool(req.get("stream"))
            model = (getattr(entry, "model", None) or req.get("model") or fake.model)
            events = renderer(fake._next_id, entry, str(model), req, stream)
            if stream:
                failure = getattr(entry, "stream_error", None)
                if failure is not None:
                    events = fail_after(events, 2, stream_error(flavour, failure))
                self._sse(events, getattr(entry, "chunk_delay_s", 0.0),
                          getattr(entry, "trickle_s", 0.0))
            else:
                self._json(200, next(iter(events))[1],
                           trickle_s=getattr(entry, "trickle_s", 0.0))

    def _auth_ok(self, flavour: str | None) -> bool | None:
        key = self.fake.api_key
        if key is None:
            return None
        bearer = self.headers.get("authorization") == f"Bearer {key}"
        if flavour == "anthropic":
            return bearer or self.headers.get("x-api-key") == key
        return bearer

    # -- writing
    def _send(self, status: int, data: bytes, content_type: str,
              headers: dict[str, str] | None = None, trickle_s: float = 0.0) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self._write(data, trickle_s)

    def _write(self, data: bytes, trickle_s: float) -> None:
        if trickle_s <= 0:
            self.wfile.write(data)
            self.wfile.flush()
            return
        for i in range(0, len(data), TRICKLE_BYTES):
            if self.fake._stopping.is_set():
                return
            self.wfile.write(data[i:i + TRICKLE_BYTES])
            self.wfile.flush()
            self.fake._wait(trickle_s)

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None,
              trickle_s: float = 0.0) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json",
                   {"request-id": self.fake._next_id("req"),
                    "x-request-id": self.fake._next_id("req"), **(headers or {})},
                   trickle_s)

    def _sse(self, events: Iterator[tuple[str | None, Any]], chunk_delay_s: float,
             trickle_s: float = 0.0) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for name, data in events:
            chunk = (f"event: {name}\n" if name else "") + "data: " + (
                data if isinstance(data, str) else json.dumps(data)) + "\n\n"
            if self.fake._stopping.is_set():
                return
            self._write(chunk.encode(), trickle_s)
            self.fake._wait(chunk_delay_s)
        self.close_connection = True

    def _error(self, flavour: str, e: HTTPError) -> None:
        etype = e.error_type or ERROR_TYPES.get(e.status, "api_error")
        message = e.message or f"fake error {e.status}"
        headers = dict(e.headers)
        if e.retry_after is not None:
            headers["retry-after"] = f"{e.retry_after:g}"
        headers.setdefault("x-should-retry", "false")
        if flavour == "anthropic":
            body: dict[str, Any] = {"type": "error", "error": {"type": etype,
                                                               "message": message}}
        else:
            body = {"error": {"message": message, "type": etype, "param": None,
                              "code": etype}}
        self._json(e.status, body, headers)

    def _decision(self, entry: ScriptEntry, req: dict[str, Any]) -> None:
        questions = req.get("questions") or []
        if isinstance(entry, Refusal):
            answers = [{"type": "refusal", "name": q.get("name")} for q in questions]
            entry = Decision(answers=answers)
        elif isinstance(entry, Empty):
            entry = Decision(answers=[])
        if not isinstance(entry, Decision):
            self._error("decisions", HTTPError(400, "fake_model_server: /v1/decisions needs a "
                                               "scripted Decision, Refusal or Empty"))
            return
        answers = entry.answers if entry.answers is not None else [
            answer(q, entry.values.get(q.get("name"))) for q in questions]
        self._json(200, {"answers": answers, "model": req.get("model") or self.fake.model,
                         "usage": {"input_tokens": entry.input_tokens,
                                   "input_tokens_details": {"cached_tokens": 0,
                                                            "cache_write_tokens": 0},
                                   "output_tokens": 0,
                                   "output_tokens_details": {"reasoning_tokens": 0},
                                   "total_tokens": entry.input_tokens}})


_FLAVOURS = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/decisions": "decisions",
}
