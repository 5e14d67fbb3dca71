"""OpenAI Chat Completions through the official ``openai`` SDK — and any compatible server.

``base_url`` points the provider at vLLM, Ollama, llama.cpp or any other server that speaks
``/v1/chat/completions``.  Against OpenAI itself (no ``base_url``) the output budget is sent as
``max_completion_tokens`` (the only name reasoning models accept); against a compatible server
as ``max_tokens``, the name they all understand.

What is sent
    ``system`` as the first ``system`` message; user text and images as content parts (images
    as in-memory base64 ``data:`` URLs, ``detail: high``); assistant tool calls as
    ``tool_calls`` with JSON argument text; ``Message(role="tool")`` as ``tool`` messages.  A
    tool message can only carry text here, so images in tool results follow the block of tool
    messages as one user message that names the call they came from.  ``reasoning_effort`` is
    sent when configured; ``response_schema`` → ``response_format: json_schema`` (strict when
    the schema allows it).

What comes back
    Argument text that is not a JSON object → ``ToolCall.parse_error`` (never an exception); a
    ``refusal`` (or ``finish_reason: content_filter``) → ``ModelError("refusal")``; no text and
    no tool call → ``ModelError("empty")``.  Tool names are returned as the model wrote them:
    unknown tools are the harness's business.

Images: ``max_image_side`` 1024 by default — at OpenAI's high detail a 4:3 frame is scaled to
768 px on its short side by the service, so anything larger would be resized there and break
exact point mapping.  Pass ``image_limits`` for a local server with other limits.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..core.model_api import ImagePart, Message, ModelError, ModelReply, ModelRequest, ToolCall
from .common import OpenAIProvider
from .context_fit import ADVICE, Window, estimate, fit, window_from, without_images
from .image_fit import data_url
from .openai_compat import (
    DROPPABLE,
    clear_error,
    has_images,
    lacking,
    refuses_context,
    refuses_images,
    text_tool_calls,
)
from .plain_json import dig, to_plain
from .tool_args import is_strict_schema, parse_tool_arguments
from .usage import openai_usage

log = logging.getLogger(__name__)


class OpenAIChatProvider(OpenAIProvider):
    """``provider: openai`` — Chat Completions with tools and images."""

    name = "openai"
    # what a compatible server refused (400), adapted to in every later request: fields left
    # out, images sent as text, requests trimmed to its context window
    dropped: frozenset[str] = frozenset()
    images_dropped = False
    window: Window | None = None

    def __init__(self, *, parallel_tool_calls: bool | None = None, **kwargs: Any) -> None:
        self.parallel_tool_calls = parallel_tool_calls
        super().__init__(**kwargs)

    # ------------------------------------------------------------------ request
    def _build(self, request: ModelRequest) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(self._messages(request.messages))
        if not messages:
            raise ModelError("bad_request", "the request has no messages", model=self.model)
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        max_tokens = max(1, min(request.max_tokens, self.max_tokens))
        params["max_tokens" if self.base_url else "max_completion_tokens"] = max_tokens
        if request.tools:
            params["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in request.tools]
        if request.tools and self.parallel_tool_calls is not None:
            # planner.parallel_tool_calls: the model chooses whether to call, and how many
            params["tool_choice"] = "auto"
            params["parallel_tool_calls"] = self.parallel_tool_calls
        if self.reasoning_effort:
            params["reasoning_effort"] = self.reasoning_effort
        for k in self.dropped:
            params.pop(k, None)
        if request.response_schema is not None:
            params["response_format"] = {"type": "json_schema", "json_schema": {
                "name": request.response_name, "schema": request.response_schema,
                "strict": is_strict_schema(request.response_schema)}}
        return params

    def _messages(self, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        pending_images: list[dict[str, Any]] = []

        def flush() -> None:
            if pending_images:
                out.append({"role": "user", "content": list(pending_images)})
                pending_images.clear()

        for m in messages:
            if m.role != "tool":
                flush()
            if m.role == "assistant":
                text = m.text()
                msg: dict[str, Any] = {"role": "assistant", "content": text or (
                    None if m.tool_calls else "(empty)")}
                if m.tool_calls:
                    msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                        "name": c.name, "arguments": json.dumps(c.arguments)}}
                        for c in m.tool_calls]
                out.append(msg)
            elif m.role == "tool":
                text = m.text()
                if m.is_error:
                    text = f"ERROR: {text}" if text else "ERROR"
                out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": text})
                images = [p for p in m.content if isinstance(p, ImagePart)]
                if images:
                    pending_images.append({"type": "text", "text":
                                           f"Images returned by tool call {m.tool_call_id}:"})
                    pending_images.extend(self._parts(tuple(images)))
            else:
                parts = self._parts(m.content)
                out.append({"role": "user", "content": parts or "(empty)"})
        flush()
        return out

    def _parts(self, content: tuple[Any, ...]) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        for p in content:
            if isinstance(p, ImagePart):
                if p.label:
                    parts.append({"type": "text", "text": p.label})
                parts.append({"type": "image_url", "image_url": {
                    "url": data_url(p), "detail": image_detail(p, self.image_detail)}})
            elif p.text:
                parts.append({"type": "text", "text": p.text})
        return parts

    # ------------------------------------------------------------------ transport
    def _attempt(self, params: dict[str, Any], request: ModelRequest,
                 deadline: float) -> ModelReply:
        """A compatible server's 400 for what it lacks (:mod:`.openai_compat`) is adapted to
        and the request sent again: a field it refuses is left out, images it cannot take
        become text, a request over its context window is trimmed to fit
        (:mod:`.context_fit`); each for every later call too.  What cannot be adapted to is
        one clear error saying what fixes it."""
        params = self._adapted(params)
        for _ in range(len(DROPPABLE) + 3):  # each pass adapts to one more lack, or raises
            try:
                return super()._attempt(params, request, deadline)
            except ModelError as e:
                if e.kind != "bad_request" or not self.base_url:
                    raise
                params = self._adapt(e, params)
        return super()._attempt(params, request, deadline)

    def _adapted(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with what this server is known to lack already adapted to."""
        for k in self.dropped:
            params.pop(k, None)
        if self.images_dropped and has_images(params):
            params = without_images(params, str(self.base_url))
        if self.window is not None:
            fitted = fit(params, self.window)
            if fitted is None:
                raise self._too_big(params)
            params = fitted
        return params

    def _too_big(self, params: dict[str, Any]) -> ModelError:
        w = self.window.tokens if self.window is not None else 0
        return ModelError("bad_request", f"the server at {self.base_url} has too small a "
                          f"context window for the planner: its window is {w} tokens, and "
                          f"this request needs about {estimate(params)} even with older "
                          f"messages and images left out. {ADVICE}", model=self.model)

    def _adapt(self, e: ModelError, params: dict[str, Any]) -> dict[str, Any]:
        field = lacking(e.message, params)
        if field:
            self.dropped = self.dropped | {field}
            params.pop(field, None)
            return params
        if has_images(params) and not self.images_dropped and refuses_images(e.message):
            log.warning("the server at %s takes no image input: the planner's images are "
                        "sent as a line of text from now on (%s)", self.base_url,
                        e.message[:160])
            self.images_dropped = True
            self.reads_images = False  # a vision backend, if configured, describes views
            return without_images(params, str(self.base_url))
        window = window_from(e.message, params) if refuses_context(e.message) else None
        if window is not None and self.window != window:
            fitted = fit(params, window)
            if fitted is not None:
                if self.window is None:
                    log.warning("the server at %s has a context window of %d tokens: "
                                "older images and messages are left out to fit it",
                                self.base_url, window.tokens)
                self.window = window
                return fitted
        clear = clear_error(e.message, params, str(self.base_url), self.model)
        if clear is None:
            raise e
        raise clear from None

    def _send(self, params: dict[str, Any], timeout_s: float, deadline: float) -> Any:
        if not self.stream:
            return self._read_json(self._client.chat.completions.with_streaming_response.create(
                **params, timeout=timeout_s), deadline)
        stream = self._client.chat.completions.create(
            **params, stream=True, stream_options={"include_usage": True}, timeout=timeout_s)
        try:
            with self.cut_at(stream, deadline):
                return self._accumulate(stream, deadline)
        finally:
            stream.close()

    def _accumulate(self, stream: Any, deadline: float) -> dict[str, Any]:
        content: list[str] = []
        refusal: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        out: dict[str, Any] = {"model": None, "usage": None}
        finish = None
        for chunk in stream:
            self._check_deadline(deadline)
            c = to_plain(chunk)
            out["model"] = c.get("model") or out["model"]
            if c.get("usage"):
                out["usage"] = c["usage"]
            for ch in c.get("choices") or []:
                delta = ch.get("delta") or {}
                if delta.get("content"):
                    content.append(delta["content"])
                if delta.get("refusal"):
                    refusal.append(delta["refusal"])
                for tc in delta.get("tool_calls") or []:
                    slot = calls.setdefault(int(tc.get("index") or 0), {
                        "id": None, "type": "function", "function": {"name": "",
                                                                     "arguments": ""}})
                    if tc.get("id"):
                        slot["id"] = tc["id"]
                    fn = tc.get("function") or {}
                    if fn.get("name"):
                        slot["function"]["name"] += fn["name"]
                    if fn.get("arguments"):
                        slot["function"]["arguments"] += fn["arguments"]
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
        out["choices"] = [{"index": 0, "finish_reason": finish, "message": {
            "role": "assistant", "content": "".join(content) or None,
            "refusal": "".join(refusal) or None,
            "tool_calls": [calls[i] for i in sorted(calls)] or None}}]
        return out

    # ------------------------------------------------------------------ reply
    def _parse(self, raw: Any, request: ModelRequest) -> ModelReply:
        choices = raw.get("choices") if isinstance(raw, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ModelError("malformed", "reply has no choices", model=self.model)
        choice = choices[0]
        msg = choice.get("message")
        if not isinstance(msg, dict):
            raise ModelError("malformed", "reply choice has no message", model=self.model)
        finish = str(choice.get("finish_reason") or "")
        if msg.get("refusal"):
            raise ModelError("refusal", f"the model declined: {msg['refusal']}",
                             model=self.model)
        if finish == "content_filter":
            raise ModelError("refusal", "the reply was stopped by the content filter",
                             model=self.model)
        text = _text(msg.get("content"))
        calls: list[ToolCall] = []
        for i, tc in enumerate(msg.get("tool_calls") or []):
            fn = tc.get("function") or {}
            args, err = parse_tool_arguments(fn.get("arguments"))
            name = str(fn.get("name") or "")
            if not name:
                err = err or "the tool call has no name"
            calls.append(ToolCall(id=str(tc.get("id") or f"call_{i}"), name=name,
                                  arguments=args, parse_error=err))
        if not calls and request.tools and text.strip():  # a server that writes calls as text
            text, calls = text_tool_calls(text, {t.name for t in request.tools})
        if not text.strip() and not calls:
            raise ModelError("empty", f"reply has no text and no tool call (finish_reason "
                             f"{finish or 'missing'})", model=self.model)
        if not calls:
            self._check_json(text, request)
        u = raw.get("usage")  # dig: a usage that is no object counts nothing, the reply kept
        usage = openai_usage(dig(u, "prompt_tokens"), dig(u, "completion_tokens"),
                             dig(u, "prompt_tokens_details", "cached_tokens"))
        return ModelReply(text=text, tool_calls=tuple(calls), usage=usage,
                          model=str(raw.get("model") or self.model), stop_reason=finish)


LOW_DETAIL_SIDE = 512  # OpenAI's low detail: the image seen within 512 x 512, for 85 tokens


def image_detail(img: ImagePart, configured: str) -> str:
    """``low`` for an image that fits :data:`LOW_DETAIL_SIDE` when ``high`` is configured: low
    detail sees such an image whole, at its own size, for 85 tokens instead of 255 and more;
    any other image as configured."""
    if configured == "high" and 0 < max(img.width, img.height) <= LOW_DETAIL_SIDE:
        return "low"
    return configured


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some compatible servers answer with parts
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return ""
