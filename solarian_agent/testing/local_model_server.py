"""A local OpenAI-compatible model server, run as its own process, that plans like a model:
``python -m solarian_agent.testing.local_model_server [--quirks Q,...] [--behaviour B]``.

It is the stand-in for a llama.cpp / Ollama / vLLM server in tests and in
``solarian-agent bench agent --planner openai --base-url ...``: ``POST /v1/chat/completions``
is decoded from the wire back into a :class:`~solarian_agent.core.model_api.ModelRequest`
(images from their ``data:`` URLs, the observation id from the caption before them) and
answered by the ``rules`` planner, whose reply is written back in the wire format.  Nothing is
mocked: the product's ``openai`` provider talks to it through the ``openai`` SDK over HTTP.

Quirks (``--quirks``, comma-separated) make it lack what small local servers lack:

* ``no_tool_choice``: a request with ``tool_choice`` is a 400;
* ``no_parallel_tools``: a request with ``parallel_tool_calls`` is a 400, and a reply carries
  at most one tool call (the rest are dropped, as such a model would never write them);
* ``no_images``: a request with an ``image_url`` part is a 400 ("image input is not
  supported", llama.cpp's wording without a vision projector);
* ``no_usage``: replies carry no ``usage`` block;
* ``text_tools``: tool calls come back as JSON inside the message text
  (``{"name": ..., "arguments": {...}}``, one per line), not as ``tool_calls``;
* ``ctx8k``: a request over 8192 tokens (4 characters a token, 256 tokens an image) is a 400
  with the context-length wording vLLM and OpenAI use.

A typed request (``response_format: json_schema``, a monitor's tick) is answered from its
schema: the first allowed value at probability 0, "cannot tell" (:func:`schema_answer`).

Behaviours (``--behaviour``) make it a bad model: ``good`` (default), ``silent`` (never calls a
tool), ``bad_args`` (every tool call's arguments are not JSON), ``slow:SECONDS`` (waits that
long before each answer).

On start it prints ``listening on http://127.0.0.1:PORT`` on stdout (port 0: a free one).
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..core.model_api import (
    ImagePart,
    Message,
    ModelError,
    ModelReply,
    ModelRequest,
    Part,
    TextPart,
    ToolCall,
    ToolDef,
)

QUIRKS = ("no_tool_choice", "no_parallel_tools", "no_images", "no_usage", "text_tools",
          "ctx8k")
CONTEXT_TOKENS = 8192
IMAGE_TOKENS = 256  # what one image costs in the ctx8k count
_OBS = re.compile(r"^(obs-\d+):")


def _image(url: str, caption: str, label: str) -> ImagePart:
    head, _, b64 = url.partition(",")
    media = head[5:].split(";")[0] if head.startswith("data:") else "image/jpeg"
    data = base64.b64decode(b64)
    import cv2
    import numpy as np

    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    h, w = (img.shape[:2] if img is not None else (0, 0))
    m = _OBS.match(caption)
    return ImagePart(data, media, int(w), int(h), m.group(1) if m else "", label)


def _parts(content: Any) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(content),)
    out: list[Part] = []
    texts: list[str] = []
    for p in content or []:
        if p.get("type") == "text":
            out.append(TextPart(str(p.get("text") or "")))
            texts.append(str(p.get("text") or ""))
        elif p.get("type") == "image_url":
            label = texts[-1] if texts else ""
            caption = texts[-2] if len(texts) > 1 else ""
            if out and isinstance(out[-1], TextPart) and out[-1].text == label:
                out.pop()  # the label is the image's, not text of its own
            out.append(_image(str(p["image_url"]["url"]), caption, label))
    return tuple(out)


def decode_request(body: dict[str, Any]) -> ModelRequest:
    """A chat completions request body back as the provider-neutral request."""
    system = ""
    msgs: list[Message] = []
    for m in body.get("messages") or []:
        role = m.get("role")
        if role == "system":
            system = str(m.get("content") or "")
        elif role == "assistant":
            calls = tuple(ToolCall(str(c.get("id")), str(c["function"]["name"]),
                                   json.loads(c["function"].get("arguments") or "{}"))
                          for c in m.get("tool_calls") or [])
            text = m.get("content") or ""
            msgs.append(Message("assistant", (TextPart(text),) if text else (), calls))
        elif role == "tool":
            text = str(m.get("content") or "")
            msgs.append(Message("tool", (TextPart(text.removeprefix("ERROR: ")),),
                                tool_call_id=str(m.get("tool_call_id") or ""),
                                is_error=text.startswith("ERROR")))
        else:
            msgs.append(Message("user", _parts(m.get("content"))))
    tools = tuple(ToolDef(t["function"]["name"], t["function"].get("description", ""),
                          t["function"].get("parameters") or {})
                  for t in body.get("tools") or [])
    return ModelRequest(system, tuple(msgs), tools)


def request_tokens(body: dict[str, Any]) -> int:
    """The ctx8k quirk's count: about 4 characters a token, :data:`IMAGE_TOKENS` an image."""
    images = json.dumps(body).count('"image_url": {')
    text = json.dumps({**body, "messages": [
        {**m, "content": m["content"] if isinstance(m.get("content"), str | None) else [
            p for p in m["content"] if p.get("type") != "image_url"]}
        for m in body.get("messages") or []]})
    return len(text) // 4 + IMAGE_TOKENS * images


def schema_answer(schema: dict[str, Any]) -> Any:
    """A typed request's answer from its JSON Schema (a monitor's tick): the rules planner
    reads no monitor questions, so every answer is the first allowed value at probability 0,
    "cannot tell" (the monitor acts on no such answer)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: schema_answer(props[k]) for k in schema.get("required", list(props))}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return 0
    if kind == "boolean":
        return False
    return "the local test model cannot tell"


class LocalModel:
    """The model behind the server: the rules planner, with the quirks and the behaviour."""

    def __init__(self, quirks: Sequence[str] = (), behaviour: str = "good") -> None:
        from ..models.rules_planner import RulesPlanner

        self.quirks = set(quirks)
        self.behaviour = behaviour
        self.planner = RulesPlanner()
        self.lock = threading.Lock()
        # no_parallel_tools: the calls a reply could not carry, written one a turn after it
        self.pending: list[ToolCall] = []

    def refuse(self, body: dict[str, Any]) -> str:
        """The 400 message a request gets for what this server lacks, or ''."""
        q = self.quirks
        if "no_tool_choice" in q and "tool_choice" in body:
            return "tool_choice is not supported by this server"
        if "no_parallel_tools" in q and "parallel_tool_calls" in body:
            return "parallel_tool_calls is not supported by this server"
        if "no_images" in q and '"image_url"' in json.dumps(body.get("messages")):
            return "image input is not supported by this model (no multimodal projector)"
        if "ctx8k" in q:
            n = request_tokens(body)
            if n > CONTEXT_TOKENS:
                return (f"This model's maximum context length is {CONTEXT_TOKENS} tokens. "
                        f"However, you requested {n} tokens in the messages. Please reduce "
                        "the length of the messages.")
        return ""

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.behaviour.startswith("slow:"):
            time.sleep(float(self.behaviour.split(":", 1)[1]))
        req = decode_request(body)
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":  # a monitor's tick: it cannot tell, and says so
            reply = ModelReply(json.dumps(schema_answer(fmt["json_schema"]["schema"])))
        elif self.behaviour == "silent":
            reply = ModelReply("I would tidy the table now, but I will just describe it.")
        elif self.pending:
            reply = ModelReply("", (self.pending.pop(0),))
        else:
            self.pending.clear()
            with self.lock:
                try:
                    reply = self.planner.complete(req, timeout_s=60.0)
                except ModelError as e:
                    reply = ModelReply(f"(error: {e.message})")
        calls = list(reply.tool_calls)
        if "no_parallel_tools" in self.quirks:  # one call a turn: the rest on later turns
            calls, rest = calls[:1], calls[1:]
            self.pending = rest + self.pending
        wire = [{"id": c.id or f"call_{i}", "type": "function", "function": {
            "name": c.name, "arguments": "{not json" if self.behaviour == "bad_args"
            else json.dumps(c.arguments)}} for i, c in enumerate(calls)]
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if wire and "text_tools" in self.quirks:
            lines = [json.dumps({"name": w["function"]["name"],
                                 "arguments": json.loads(w["function"]["arguments"])})
                     if self.behaviour != "bad_args" else w["function"]["arguments"]
                     for w in wire]
            message["content"] = "\n".join(([reply.text] if reply.text else []) + lines)
        elif wire:
            message["tool_calls"] = wire
        out: dict[str, Any] = {
            "id": "chatcmpl-local", "object": "chat.completion", "created": int(time.time()),
            "model": str(body.get("model") or "local"), "choices": [{
                "index": 0, "message": message,
                "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}]}
        if "no_usage" not in self.quirks:
            n = request_tokens(body)
            out["usage"] = {"prompt_tokens": n, "completion_tokens": len(json.dumps(message))
                            // 4, "total_tokens": n + len(json.dumps(message)) // 4}
        return out


def serve(model: LocalModel, port: int = 0) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            pass

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            n = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(n))
            except json.JSONDecodeError:
                return self._json(400, {"error": {"message": "body is not JSON"}})
            if not self.path.endswith("/chat/completions"):
                return self._json(404, {"error": {"message": f"no route {self.path}"}})
            why = model.refuse(body)
            if why:
                return self._json(400, {"error": {"message": why, "type":
                                                  "invalid_request_error", "code": 400}})
            if body.get("stream"):
                return self._json(400, {"error": {"message": "streaming is not served"}})
            self._json(200, model.answer(body))

        def _json(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a slow model's timeout)

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    return httpd


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m solarian_agent.testing.local_model_server")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--quirks", default="", help=f"comma-separated: {', '.join(QUIRKS)}")
    p.add_argument("--behaviour", default="good",
                   help="good, silent, bad_args or slow:SECONDS")
    a = p.parse_args(argv)
    quirks = [q for q in a.quirks.split(",") if q]
    bad = [q for q in quirks if q not in QUIRKS]
    if bad:
        p.error(f"unknown quirk {bad[0]!r}; quirks: {', '.join(QUIRKS)}")
    if a.behaviour not in ("good", "silent", "bad_args") and not re.fullmatch(
            r"slow:\d+(\.\d+)?", a.behaviour):
        p.error(f"unknown behaviour {a.behaviour!r}")
    httpd = serve(LocalModel(quirks, a.behaviour), a.port)
    print(f"listening on http://127.0.0.1:{httpd.server_address[1]}", flush=True)
    try:
        httpd.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
