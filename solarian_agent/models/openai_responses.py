"""The OpenAI Responses API through the official ``openai`` SDK — the monitor's default.

What is sent
    ``system`` as ``instructions``; user text and images as ``input_text`` / ``input_image``
    parts (images as in-memory base64 ``data:`` URLs, never files or uploads); assistant tool
    calls as ``function_call`` items and ``Message(role="tool")`` as ``function_call_output``
    items (text, and images as ``input_image`` parts); function tools (``strict`` only when the
    parameter schema meets strict mode); ``reasoning: {"effort": ...}`` when
    ``reasoning_effort`` is configured; ``response_schema`` → structured output
    ``text: {"format": {"type": "json_schema", "name", "schema", "strict"}}`` for the monitor's
    typed answers.  ``store: false`` — nothing is kept on the service side.

What comes back
    text (``output_text`` parts), ``function_call`` items as tool calls (argument text that is
    not a JSON object → ``ToolCall.parse_error``), usage with cache reads and writes.  A
    ``refusal`` part or ``incomplete_details.reason == "content_filter"`` →
    ``ModelError("refusal")``; a failed response → ``ModelError("server")``; nothing usable →
    ``ModelError("empty")``; a typed answer that is not JSON → ``ModelError("malformed")``.

Images: ``max_image_side`` 1024 by default, as for :mod:`.openai_chat`.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.model_api import ImagePart, Message, ModelError, ModelReply, ModelRequest, ToolCall
from .common import OpenAIProvider
from .plain_json import dig, to_plain
from .tool_args import is_strict_schema, parse_tool_arguments
from .usage import openai_usage

_TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


class OpenAIResponsesProvider(OpenAIProvider):
    """``provider: openai_responses`` — the Responses API with function tools and typed answers."""

    name = "openai_responses"

    # ------------------------------------------------------------------ request
    def _build(self, request: ModelRequest) -> dict[str, Any]:
        items = self._input(request.messages)
        if not items:
            raise ModelError("bad_request", "the request has no messages", model=self.model)
        params: dict[str, Any] = {"model": self.model, "input": items, "store": False,
                                  "max_output_tokens": max(1, min(request.max_tokens,
                                                                  self.max_tokens))}
        if request.system:
            params["instructions"] = request.system
        if request.tools:
            params["tools"] = [{"type": "function", "name": t.name,
                                "description": t.description, "parameters": t.parameters,
                                "strict": is_strict_schema(t.parameters)}
                               for t in request.tools]
        if self.reasoning_effort:
            params["reasoning"] = {"effort": self.reasoning_effort}
        if request.response_schema is not None:
            params["text"] = {"format": {
                "type": "json_schema", "name": request.response_name,
                "schema": request.response_schema,
                "strict": is_strict_schema(request.response_schema)}}
        return params

    def _input(self, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "assistant":
                text = m.text()
                if text.strip():
                    items.append({"role": "assistant", "content": text})
                for c in m.tool_calls:
                    items.append({"type": "function_call", "call_id": c.id, "name": c.name,
                                  "arguments": json.dumps(c.arguments)})
            elif m.role == "tool":
                text = m.text()
                if m.is_error:
                    text = f"ERROR: {text}" if text else "ERROR"
                images = [p for p in m.content if isinstance(p, ImagePart)]
                output: str | list[dict[str, Any]] = text
                if images:
                    output = ([{"type": "input_text", "text": text}] if text else [])
                    output += self._parts(tuple(images))
                items.append({"type": "function_call_output", "call_id": m.tool_call_id,
                              "output": output})
            else:
                parts = self._parts(m.content)
                items.append({"role": "user", "content": parts or [
                    {"type": "input_text", "text": "(empty)"}]})
        return items

    # ------------------------------------------------------------------ transport
    def _send(self, params: dict[str, Any], timeout_s: float, deadline: float) -> Any:
        if not self.stream:
            return self._read_json(self._client.responses.with_streaming_response.create(
                **params, timeout=timeout_s), deadline)
        stream = self._client.responses.create(**params, stream=True, timeout=timeout_s)
        try:
            with self.cut_at(stream, deadline):
                return self._final_response(stream, deadline)
        finally:
            stream.close()

    def _final_response(self, stream: Any, deadline: float) -> Any:
        """The final response of a stream (or the error event's ModelError)."""
        for event in stream:
            self._check_deadline(deadline)
            ev = to_plain(event)
            t = ev.get("type")
            if t in _TERMINAL_EVENTS:
                return ev.get("response") or {}
            if t == "error":
                raise ModelError(_error_kind(ev), f"stream error from {self.name}: "
                                 f"{ev.get('message') or ev.get('code') or 'unknown'}",
                                 model=self.model)
        raise ModelError("malformed", "the stream ended without a final response",
                         model=self.model)

    # ------------------------------------------------------------------ reply
    def _parse(self, raw: Any, request: ModelRequest) -> ModelReply:
        if not isinstance(raw, dict):
            raise ModelError("malformed", "reply is not an object", model=self.model)
        status = str(raw.get("status") or "")
        if status == "failed":
            err = raw.get("error") or {}
            raise ModelError("server", f"the response failed: {err.get('message') or err}",
                             model=self.model)
        output = raw.get("output")
        if not isinstance(output, list):
            raise ModelError("malformed", "reply has no output list", model=self.model)
        texts: list[str] = []
        refusals: list[str] = []
        calls: list[ToolCall] = []
        for item in output:
            if not isinstance(item, dict):
                continue
            t = item.get("type")
            if t == "message":
                for part in item.get("content") or []:
                    if part.get("type") == "output_text":
                        texts.append(str(part.get("text") or ""))
                    elif part.get("type") == "refusal":
                        refusals.append(str(part.get("refusal") or ""))
            elif t == "function_call":
                args, perr = parse_tool_arguments(item.get("arguments"))
                name = str(item.get("name") or "")
                if not name:
                    perr = perr or "the tool call has no name"
                calls.append(ToolCall(id=str(item.get("call_id") or item.get("id")
                                             or f"call_{len(calls)}"),
                                      name=name, arguments=args, parse_error=perr))
        reason = str(dig(raw, "incomplete_details", "reason") or "")
        if refusals:
            raise ModelError("refusal", f"the model declined: {' '.join(refusals)}",
                             model=self.model)
        if reason == "content_filter":
            raise ModelError("refusal", "the reply was stopped by the content filter",
                             model=self.model)
        text = "".join(texts)
        if not text.strip() and not calls:
            why = f"status {status or 'missing'}" + (f", {reason}" if reason else "")
            raise ModelError("empty", f"reply has no text and no tool call ({why})",
                             model=self.model)
        if not calls:
            self._check_json(text, request)
        u = raw.get("usage")  # dig: a usage that is no object counts nothing, the reply kept
        usage = openai_usage(dig(u, "input_tokens"), dig(u, "output_tokens"),
                             dig(u, "input_tokens_details", "cached_tokens"),
                             dig(u, "input_tokens_details", "cache_write_tokens"))
        stop = "tool_use" if calls else (reason or status or "completed")
        return ModelReply(text=text, tool_calls=tuple(calls), usage=usage,
                          model=str(raw.get("model") or self.model), stop_reason=stop)


def _error_kind(ev: dict[str, Any]) -> str:
    code = str(ev.get("code") or "")
    if "rate" in code:
        return "rate_limited"
    if code in ("invalid_request_error", "invalid_prompt", "context_length_exceeded"):
        return "bad_request"
    return "server"  # server_error, overloaded_error, ...
