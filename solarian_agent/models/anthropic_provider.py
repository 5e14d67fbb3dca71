"""The Anthropic Messages API through the official ``anthropic`` SDK.

What is sent
    * ``system`` as one text block marked ``cache_control: ephemeral``, and the last tool
      definition marked the same way, so the stable prefix (tools, then system) is read from the
      prompt cache on every later turn.  A planner call also marks the last block of the
      conversation, so the next turn reads everything up to it from the cache (3 of the 4
      breakpoints the API allows).
    * images as base64 ``image`` blocks; ``Message(role="tool")`` as ``tool_result`` blocks
      (``is_error`` kept), with consecutive tool messages (and a user message right after them)
      merged into one user turn, tool results first, as the API requires.
    * ``thinking_budget`` → ``thinking: {"type": "enabled", "budget_tokens": N}``, with
      ``max_tokens`` raised by N so the answer keeps its own budget.  With thinking and tool use
      the API wants the assistant turn's thinking blocks back unchanged; the provider-neutral
      :class:`Message` has no place for them, so this provider remembers them by tool-call id
      and puts them back itself.  When it does not have them (a conversation from before a
      restart), that one request is sent without thinking instead of failing.
    * ``response_schema`` → ``output_config.format`` (JSON schema); ``reasoning_effort`` →
      ``output_config.effort``.

What comes back
    text, tool calls (an argument text that is not a JSON object becomes
    ``ToolCall.parse_error``), ``stop_reason``, usage with cache reads and writes, the model
    name and the latency.  ``stop_reason == "refusal"`` → ``ModelError("refusal")``; no text and
    no tool call → ``ModelError("empty")``.

Images
    ``max_image_side`` 1568 and about 1.15 megapixels: beyond either the service scales the
    image down itself, which would break exact point mapping.  The harness prepares images at
    ``min(config image_max_side, provider.max_image_side)``; see :mod:`.common`.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any

from ..core.model_api import (
    ImagePart,
    Message,
    ModelError,
    ModelReply,
    ModelRequest,
    TextPart,
    ToolCall,
    Usage,
)
from .common import HTTPModelProvider
from .image_fit import ImageLimits, b64
from .plain_json import dig, json_safe, to_plain
from .tool_args import parse_tool_arguments
from .usage import usage_count

log = logging.getLogger(__name__)

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
MIN_THINKING_BUDGET = 1024
_EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}


class AnthropicProvider(HTTPModelProvider):
    """``provider: anthropic`` — the planner's default (prompt caching, extended thinking)."""

    name = "anthropic"
    default_limits = ImageLimits(max_side=1568, max_pixels=1_150_000, max_images=100,
                                 max_bytes=5 * 1024 * 1024)

    def __init__(self, *, thinking_budget: int | None = None,
                 reasoning_effort: str | None = None, cache_conversation: bool | None = None,
                 **kwargs: Any) -> None:
        if thinking_budget is not None and thinking_budget < MIN_THINKING_BUDGET:
            raise ValueError(f"thinking_budget must be at least {MIN_THINKING_BUDGET} tokens, "
                             f"not {thinking_budget}")
        self.thinking_budget = thinking_budget
        self.reasoning_effort = reasoning_effort
        super().__init__(**kwargs)
        self.cache_conversation = (self.purpose == "planner" if cache_conversation is None
                                   else cache_conversation)
        self._thinking_lock = threading.Lock()
        self._thinking: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    def _make_client(self, api_key: str, base_url: str | None) -> Any:
        import anthropic

        return anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0,
                                   timeout=self.timeout_s)

    # ------------------------------------------------------------------ request
    def _build(self, request: ModelRequest) -> dict[str, Any]:
        messages = self._messages(request.messages)
        if not messages:
            raise ModelError("bad_request", "the request has no messages", model=self.model)
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        max_tokens = max(1, min(request.max_tokens, self.max_tokens))
        if request.system:
            params["system"] = [{"type": "text", "text": request.system,
                                 "cache_control": dict(EPHEMERAL)}]
        if request.tools:
            tools = [{"name": t.name, "description": t.description,
                      "input_schema": t.parameters} for t in request.tools]
            tools[-1]["cache_control"] = dict(EPHEMERAL)
            params["tools"] = tools
        if self.cache_conversation:
            last = messages[-1]["content"]
            if last:
                last[-1]["cache_control"] = dict(EPHEMERAL)
        if self.thinking_budget:
            if self._thinking_missing(request.messages):
                log.info("thinking blocks for the last tool use are not known (a conversation "
                         "from an earlier process); sending this request without thinking")
            else:
                params["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
                max_tokens += self.thinking_budget
        params["max_tokens"] = max_tokens
        output_config: dict[str, Any] = {}
        if self.reasoning_effort:
            output_config["effort"] = _EFFORTS.get(self.reasoning_effort, self.reasoning_effort)
        if request.response_schema is not None:
            output_config["format"] = {"type": "json_schema", "schema": request.response_schema}
        if output_config:
            params["output_config"] = output_config
        return params

    def _messages(self, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "assistant":
                blocks = self._assistant_blocks(m)
                role = "assistant"
            elif m.role == "tool":
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id}
                content = _content_blocks(m.content)
                if content:
                    result["content"] = content
                if m.is_error:
                    result["is_error"] = True
                blocks, role = [result], "user"
            else:
                blocks, role = _content_blocks(m.content), "user"
            if not blocks:
                blocks = [{"type": "text", "text": "(empty)"}]
            if out and out[-1]["role"] == role:
                prev = out[-1]["content"]
                if role == "user" and blocks[0].get("type") == "tool_result":
                    # tool results lead their user turn
                    n = sum(1 for b in prev if b.get("type") == "tool_result")
                    prev[n:n] = blocks
                else:
                    prev.extend(blocks)
            else:
                out.append({"role": role, "content": blocks})
        return out

    def _assistant_blocks(self, m: Message) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if self.thinking_budget and m.tool_calls:
            with self._thinking_lock:
                thinking = self._thinking.get(m.tool_calls[0].id)
            if thinking:
                blocks.extend(dict(b) for b in thinking)
        text = m.text()
        if text.strip():
            blocks.append({"type": "text", "text": text})
        for c in m.tool_calls:
            blocks.append({"type": "tool_use", "id": c.id, "name": c.name,
                           "input": json_safe(dict(c.arguments))})
        return blocks

    def _thinking_missing(self, messages: tuple[Message, ...]) -> bool:
        last = next((m for m in reversed(messages) if m.role == "assistant"), None)
        if last is None or not last.tool_calls:
            return False
        with self._thinking_lock:
            return last.tool_calls[0].id not in self._thinking

    # ------------------------------------------------------------------ transport
    def _send(self, params: dict[str, Any], timeout_s: float, deadline: float) -> Any:
        if not self.stream:
            return self._read_json(self._client.messages.with_streaming_response.create(
                **params, timeout=timeout_s), deadline)
        stream = self._client.messages.create(**params, stream=True, timeout=timeout_s)
        try:
            with self.cut_at(stream, deadline):
                return self._accumulate(stream, deadline)
        finally:
            stream.close()

    def _accumulate(self, stream: Any, deadline: float) -> dict[str, Any]:
        msg: dict[str, Any] = {"content": [], "usage": {}}
        blocks: dict[int, dict[str, Any]] = {}
        json_parts: dict[int, list[str]] = {}
        for event in stream:
            self._check_deadline(deadline)
            ev = to_plain(event)
            t = ev.get("type")
            if t == "message_start":
                start = ev.get("message") or {}
                msg["model"] = start.get("model")
                msg["id"] = start.get("id")
                msg["usage"].update({k: v for k, v in (start.get("usage") or {}).items()
                                     if v is not None})
            elif t == "content_block_start":
                block = dict(ev.get("content_block") or {})
                if block.get("type") == "tool_use":
                    block["input"] = {}
                    json_parts[ev["index"]] = []
                blocks[ev["index"]] = block
            elif t == "content_block_delta":
                i, delta = ev["index"], ev.get("delta") or {}
                block = blocks.setdefault(i, {"type": "text", "text": ""})
                dt = delta.get("type")
                if dt == "text_delta":
                    block["text"] = block.get("text", "") + delta.get("text", "")
                elif dt == "input_json_delta":
                    json_parts.setdefault(i, []).append(delta.get("partial_json", ""))
                elif dt == "thinking_delta":
                    block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
                elif dt == "signature_delta":
                    block["signature"] = block.get("signature", "") + delta.get("signature", "")
            elif t == "message_delta":
                delta = ev.get("delta") or {}
                if delta.get("stop_reason"):
                    msg["stop_reason"] = delta["stop_reason"]
                if delta.get("stop_details"):
                    msg["stop_details"] = delta["stop_details"]
                msg["usage"].update({k: v for k, v in (ev.get("usage") or {}).items()
                                     if v is not None})
            elif t == "message_stop":
                break
        for i, parts in json_parts.items():
            raw = "".join(parts)
            # keep the raw text; _parse turns it into arguments or a parse error
            blocks[i]["input"] = raw if raw.strip() else {}
        msg["content"] = [blocks[i] for i in sorted(blocks)]
        return msg

    # ------------------------------------------------------------------ reply
    def _parse(self, raw: Any, request: ModelRequest) -> ModelReply:
        if not isinstance(raw, dict) or not isinstance(raw.get("content"), list):
            raise ModelError("malformed", "reply has no content list", model=self.model)
        stop = raw.get("stop_reason") or ""
        texts: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[dict[str, Any]] = []
        for block in raw["content"]:
            t = block.get("type") if isinstance(block, dict) else None
            if t == "text":
                texts.append(str(block.get("text") or ""))
            elif t == "tool_use":
                args, err = parse_tool_arguments(block.get("input"))
                calls.append(ToolCall(id=str(block.get("id") or f"toolu_{len(calls)}"),
                                      name=str(block.get("name") or ""), arguments=args,
                                      parse_error=err))
            elif t == "thinking":
                thinking.append({"type": "thinking", "thinking": block.get("thinking", ""),
                                 "signature": block.get("signature", "")})
            elif t == "redacted_thinking":
                thinking.append({"type": "redacted_thinking", "data": block.get("data", "")})
        text = "".join(texts)
        if stop == "refusal":
            detail = dig(raw, "stop_details", "explanation") or text.strip()
            category = dig(raw, "stop_details", "category")
            raise ModelError("refusal", f"the model declined: {detail or '(no explanation)'}"
                             + (f" [{category}]" if category else ""), model=self.model)
        if not text.strip() and not calls:
            raise ModelError("empty", f"reply has no text and no tool call (stop_reason "
                             f"{stop or 'missing'})", model=self.model)
        if thinking and calls:
            with self._thinking_lock:
                self._thinking[calls[0].id] = thinking
                while len(self._thinking) > 256:
                    self._thinking.popitem(last=False)
        if not calls:
            self._check_json(text, request)
        u = raw.get("usage")  # dig: a usage that is no object counts nothing, the reply kept
        usage = Usage(
            input_tokens=usage_count(dig(u, "input_tokens"), "input_tokens"),
            output_tokens=usage_count(dig(u, "output_tokens"), "output_tokens"),
            cache_read_tokens=usage_count(dig(u, "cache_read_input_tokens"),
                                          "cache_read_input_tokens"),
            cache_write_tokens=usage_count(dig(u, "cache_creation_input_tokens"),
                                           "cache_creation_input_tokens"),
        )
        return ModelReply(text=text, tool_calls=tuple(calls), usage=usage,
                          model=str(raw.get("model") or self.model), stop_reason=stop)


def _content_blocks(parts: tuple[TextPart | ImagePart, ...]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, ImagePart):
            if p.label:
                blocks.append({"type": "text", "text": p.label})
            blocks.append({"type": "image", "source": {"type": "base64",
                                                       "media_type": p.media_type,
                                                       "data": b64(p)}})
        elif p.text:
            blocks.append({"type": "text", "text": p.text})
    return blocks


__all__ = ["EPHEMERAL", "MIN_THINKING_BUDGET", "AnthropicProvider"]
