"""The fake model server's wire formats: a script entry as each service's reply body or
server-sent events (Anthropic messages, OpenAI chat completions and responses), the services'
error bodies, and the decisions endpoint's answers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from .fake_model_script import Empty, HTTPError, Refusal, Reply, ScriptEntry, ToolUse

ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
    500: "api_error", 503: "api_error", 529: "overloaded_error",
}


def stream_error(flavour: str, e: HTTPError) -> tuple[str | None, Any]:
    """The service's error event in the middle of a stream."""
    etype = e.error_type or ERROR_TYPES.get(e.status, "api_error")
    message = e.message or f"fake stream error {e.status}"
    if flavour == "anthropic":
        return "error", {"type": "error", "error": {"type": etype, "message": message}}
    if flavour == "responses":
        return "error", {"type": "error", "code": etype, "message": message, "param": None,
                         "sequence_number": 99}
    return None, {"error": {"message": message, "type": etype, "param": None, "code": etype}}


def fail_after(events: Iterator[tuple[str | None, Any]], n: int,
               error: tuple[str | None, Any]) -> Iterator[tuple[str | None, Any]]:
    """The first ``n`` events, then ``error``."""
    for i, ev in enumerate(events):
        if i == n:
            break
        yield ev
    yield error


def answer(q: dict[str, Any], value: Any) -> dict[str, Any]:
    """The decisions endpoint's answer to question ``q`` from a scripted ``value``."""
    name, t = q.get("name"), q.get("type")
    if t == "predicate":
        p = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
            else (0.9 if value else 0.1)
        return {"type": "predicate", "name": name, "probability": p}
    if t == "choice":
        values = [c.get("value") for c in q.get("choices") or []]
        pick = value if value in values else (values[0] if values else None)
        rest = (0.2 / (len(values) - 1)) if len(values) > 1 else 0.0
        return {"type": "choice", "name": name, "choice": pick, "confidence": 0.8,
                "probabilities": [{"value": v, "probability": 0.8 if v == pick else rest}
                                  for v in values]}
    levels = q.get("levels") or []
    score = float(value or 0)
    return {"type": "score", "name": name, "score": score, "confidence": 0.8,
            "probabilities": [{"label": lv.get("label"), "value": i,
                               "probability": 1.0 if i == round(score) else 0.0}
                              for i, lv in enumerate(levels)]}


# --------------------------------------------------------------------------- wire renderers
# Each renderer yields (event name, data) pairs: the first pair's data is the whole reply for
# a non-streamed call; for a streamed one every pair is one server-sent event.

Events = Iterator[tuple[str | None, Any]]
NextId = Callable[[str], str]  # a fresh id with a prefix (the server's counter)


def _args_text(tc: ToolUse) -> str:
    return tc.arguments if isinstance(tc.arguments, str) else json.dumps(tc.arguments)


def _halves(s: str) -> list[str]:
    if len(s) < 2:
        return [s] if s else []
    m = len(s) // 2
    return [s[:m], s[m:]]


def anthropic(next_id: NextId, entry: ScriptEntry, model: str, req: dict[str, Any],
              stream: bool) -> Events:
    r = entry if isinstance(entry, Reply) else Reply()
    content: list[dict[str, Any]] = []
    if r.thinking:
        content.append({"type": "thinking", "thinking": r.thinking,
                        "signature": "sig-" + next_id("th")})
    if isinstance(entry, Refusal):
        stop = "refusal"
    elif isinstance(entry, Empty):
        stop = "end_turn"
    else:
        if r.text:
            content.append({"type": "text", "text": r.text})
        for tc in r.tool_calls:
            content.append({"type": "tool_use", "id": tc.id or next_id("toolu"),
                            "name": tc.name, "input": tc.arguments})
        stop = r.stop_reason or ("tool_use" if r.tool_calls else "end_turn")
    usage = {"input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
             "cache_read_input_tokens": r.cache_read_tokens,
             "cache_creation_input_tokens": r.cache_write_tokens}
    msg: dict[str, Any] = {"id": next_id("msg"), "type": "message",
                           "role": "assistant", "model": model, "content": content,
                           "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if isinstance(entry, Refusal):
        msg["stop_details"] = {"type": "refusal", "category": None,
                               "explanation": entry.text}
    if not stream:
        yield None, ({**msg, "usage": r.raw_usage} if r.raw_usage is not None else msg)
        return
    yield "message_start", {"type": "message_start", "message": {
        **msg, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}}
    yield "ping", {"type": "ping"}
    for i, block in enumerate(content):
        t = block["type"]
        if t == "text":
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {"type": "text", "text": ""}}
            for piece in _halves(block["text"]):
                yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                              "delta": {"type": "text_delta", "text": piece}}
        elif t == "thinking":
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {"type": "thinking", "thinking": "",
                                                            "signature": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                "type": "thinking_delta", "thinking": block["thinking"]}}
            yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                "type": "signature_delta", "signature": block["signature"]}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {"type": "tool_use",
                                                            "id": block["id"],
                                                            "name": block["name"],
                                                            "input": {}}}
            raw = block["input"] if isinstance(block["input"], str) else json.dumps(
                block["input"])
            for piece in _halves(raw):
                yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                              "delta": {"type": "input_json_delta",
                                                        "partial_json": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None,
                                      "stop_details": msg.get("stop_details")},
                            "usage": {"output_tokens": r.output_tokens}}
    yield "message_stop", {"type": "message_stop"}


def chat(next_id: NextId, entry: ScriptEntry, model: str, req: dict[str, Any],
         stream: bool) -> Events:
    r = entry if isinstance(entry, Reply) else Reply()
    cid = next_id("chatcmpl")
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    tool_calls: list[dict[str, Any]] = []
    if isinstance(entry, Reply):
        tool_calls = [{"id": tc.id or next_id("call"), "type": "function",
                       "function": {"name": tc.name, "arguments": _args_text(tc)}}
                      for tc in r.tool_calls]
    if isinstance(entry, Refusal):
        message["refusal"] = entry.text
        finish = "stop"
    elif isinstance(entry, Empty):
        message["content"] = ""
        finish = "stop"
    else:
        message["content"] = r.text or None
        if tool_calls:
            message["tool_calls"] = tool_calls
        finish = r.stop_reason or ("tool_calls" if tool_calls else "stop")
    usage = {"prompt_tokens": r.input_tokens + r.cache_read_tokens,
             "completion_tokens": r.output_tokens,
             "total_tokens": r.input_tokens + r.cache_read_tokens + r.output_tokens,
             "prompt_tokens_details": {"cached_tokens": r.cache_read_tokens}}
    base = {"id": cid, "created": 1_700_000_000, "model": model}
    if not stream:
        yield None, {**base, "object": "chat.completion", "choices": [
            {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": r.raw_usage if r.raw_usage is not None else usage}
        return

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {**base, "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}

    yield None, chunk({"role": "assistant", "content": ""})
    if message.get("refusal"):
        for piece in _halves(message["refusal"]):
            yield None, chunk({"refusal": piece})
    for piece in _halves(message.get("content") or ""):
        yield None, chunk({"content": piece})
    for i, tc in enumerate(tool_calls):
        yield None, chunk({"tool_calls": [{"index": i, "id": tc["id"], "type": "function",
                                           "function": {"name": tc["function"]["name"],
                                                        "arguments": ""}}]})
        for piece in _halves(tc["function"]["arguments"]):
            yield None, chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield None, chunk({}, finish)
    if (req.get("stream_options") or {}).get("include_usage"):
        yield None, {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
    yield None, "[DONE]"


def responses(next_id: NextId, entry: ScriptEntry, model: str, req: dict[str, Any],
              stream: bool) -> Events:
    r = entry if isinstance(entry, Reply) else Reply()
    output: list[dict[str, Any]] = []
    if isinstance(entry, Refusal):
        output.append({"type": "message", "id": next_id("msg"), "status": "completed",
                       "role": "assistant",
                       "content": [{"type": "refusal", "refusal": entry.text}]})
    elif isinstance(entry, Reply):
        if r.thinking:
            output.append({"type": "reasoning", "id": next_id("rs"),
                           "summary": [{"type": "summary_text", "text": r.thinking}]})
        if r.text:
            output.append({"type": "message", "id": next_id("msg"),
                           "status": "completed", "role": "assistant", "content": [
                               {"type": "output_text", "text": r.text, "annotations": []}]})
        for tc in r.tool_calls:
            output.append({"type": "function_call", "id": next_id("fc"),
                           "call_id": tc.id or next_id("call"), "name": tc.name,
                           "arguments": _args_text(tc), "status": "completed"})
    status = "completed"
    incomplete = None
    if r.stop_reason in ("max_output_tokens", "content_filter"):
        status, incomplete = "incomplete", {"reason": r.stop_reason}
    total_in = r.input_tokens + r.cache_read_tokens + r.cache_write_tokens
    resp = {"id": next_id("resp"), "object": "response", "created_at": 1_700_000_000,
            "status": status, "model": model, "output": output, "error": None,
            "incomplete_details": incomplete, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": total_in,
                      "input_tokens_details": {"cached_tokens": r.cache_read_tokens,
                                               "cache_write_tokens": r.cache_write_tokens},
                      "output_tokens": r.output_tokens,
                      "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": total_in + r.output_tokens}}
    if not stream:
        yield None, ({**resp, "usage": r.raw_usage} if r.raw_usage is not None else resp)
        return
    seq = iter(range(1_000_000))
    yield "response.created", {"type": "response.created", "sequence_number": next(seq),
                               "response": {**resp, "status": "in_progress", "output": [],
                                            "usage": None}}
    for i, item in enumerate(output):
        yield "response.output_item.added", {"type": "response.output_item.added",
                                             "sequence_number": next(seq), "output_index": i,
                                             "item": {**item, "status": "in_progress"}}
        if item["type"] == "message" and item["content"][0]["type"] == "output_text":
            for piece in _halves(item["content"][0]["text"]):
                yield "response.output_text.delta", {
                    "type": "response.output_text.delta", "sequence_number": next(seq),
                    "item_id": item["id"], "output_index": i, "content_index": 0,
                    "delta": piece, "logprobs": []}
        elif item["type"] == "function_call":
            for piece in _halves(item["arguments"]):
                yield "response.function_call_arguments.delta", {
                    "type": "response.function_call_arguments.delta",
                    "sequence_number": next(seq), "item_id": item["id"], "output_index": i,
                    "delta": piece}
        yield "response.output_item.done", {"type": "response.output_item.done",
                                            "sequence_number": next(seq), "output_index": i,
                                            "item": item}
    final = "response.incomplete" if status == "incomplete" else "response.completed"
    yield final, {"type": final, "sequence_number": next(seq), "response": resp}


RENDERERS = {"anthropic": anthropic, "chat": chat, "responses": responses}


__all__ = ["ERROR_TYPES", "RENDERERS", "Events", "answer", "fail_after", "stream_error"]
