"""Fitting a Chat Completions request to what a compatible server can take: a small context
window and no image input, adapted to instead of failing every call.

**A small context window** (llama.cpp ``-c 8192``, Ollama's ``num_ctx``): the server's 400
states its window, and most state the request's size too.  :func:`window_from` reads both;
the size against this module's own estimate (:func:`estimate`) gives the scale of the
server's count.  :func:`fit` then trims a request to :data:`FILL` of the window, in this
order, keeping what the planner still needs:

1. the system prompt, the tools, the task the run works on (the newest message that starts
   with the harness's task prefix), every message that carries an operator's mid-run message
   (the operator prefix: an instruction that still holds) and the newest turn (the last
   assistant message, its tool results and the wake after them) are never left out;
2. images older than the newest turn become a one-line text stub (the newest image of a
   camera is in the newest turn; an older one is history);
3. then the oldest messages are left out, an assistant message together with its tool
   results (a tool result without its call is an error on every server), and one line says
   how many were left out and why;
4. the output budget (``max_tokens``) is lowered to what is left of the window.

When even that does not fit, :func:`fit` returns None and the provider raises its one clear
error (:func:`~.openai_compat.clear_error`).

**No image input**: :func:`without_images` replaces every image with a text line that names
the observation, so the planner knows a view existed and what to do about it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..core.text import OPERATOR_PREFIX, TASK_PREFIX

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 256  # an image's guess before a server's count calibrates the scale
FILL = 0.9  # of the window: room for the server's own template tokens
MIN_OUTPUT = 256  # the least output budget a trimmed request keeps

# what a context-length refusal states: the window, the request's size, and (vLLM) how much
# of that size is the messages and how much the completion budget (max_tokens)
_WINDOW = re.compile(r"(?:context length|context window|context size|n_ctx)\D{0,20}?(\d[\d,]*)",
                     re.I)
_NEED = re.compile(r"(?:requested|request has|prompt has|need[s]?)\D{0,20}?(\d[\d,]*)", re.I)
_IN_MESSAGES = re.compile(r"(\d[\d,]*) (?:tokens )?in the messages", re.I)
_IN_COMPLETION = re.compile(r"(\d[\d,]*) (?:tokens )?in the completion", re.I)

# the fix for a window too small even for a trimmed request, in every error that says so
ADVICE = ("Start it with a larger one (llama.cpp -c 16384, Ollama num_ctx, vLLM "
          "--max-model-len), or send less: a shorter system prompt, fewer tools, or lower "
          "max_images_in_context and image_max_side in the agent config")


def _int(m: re.Match[str] | None) -> int | None:
    return int(m.group(1).replace(",", "")) if m is not None else None


def stated(message: str) -> tuple[int | None, int | None]:
    """The window and the prompt's size in tokens a context-length refusal states (None
    where it states none).  The prompt is the messages alone: a size that includes the
    completion budget ("9096 tokens (5000 in the messages, 4096 in the completion)") has
    that budget taken out, since :func:`estimate` counts no output."""
    window, need = _int(_WINDOW.search(message)), _int(_NEED.search(message))
    in_messages = _int(_IN_MESSAGES.search(message))
    if in_messages is not None:
        return window, in_messages
    completion = _int(_IN_COMPLETION.search(message))
    if need is not None and completion is not None:
        need = max(0, need - completion)
    return window, need


@dataclass(frozen=True)
class Window:
    """A server's context window as its refusal stated it, and how its count compares with
    :func:`estimate` (its count / the estimate of the refused request)."""

    tokens: int
    scale: float = 1.0


def _images(m: dict[str, Any]) -> int:
    content = m.get("content")
    return sum(1 for p in content if p.get("type") == "image_url") \
        if isinstance(content, list) else 0


def estimate(params: dict[str, Any]) -> int:
    """Tokens of ``params``: its text at about :data:`CHARS_PER_TOKEN` characters a token (the
    image data left out) and :data:`IMAGE_TOKENS` an image."""
    msgs = params.get("messages") or []
    text = [{**m, "content": [p for p in m["content"] if p.get("type") != "image_url"]}
            if isinstance(m.get("content"), list) else m for m in msgs]
    chars = len(json.dumps({**params, "messages": text}))
    return chars // CHARS_PER_TOKEN + IMAGE_TOKENS * sum(_images(m) for m in msgs)


def window_from(message: str, params: dict[str, Any]) -> Window | None:
    """The window a context-length refusal states (None if it states none)."""
    tokens, need = stated(message)
    if tokens is None:
        return None
    scale = 1.0
    if need:
        est = estimate(params)
        if est > 0:  # the server's count against ours, within reason
            scale = min(4.0, max(0.5, need / est))
    return Window(tokens, scale) if tokens > 0 else None


def _text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(str(p.get("text") or "") for p in c if p.get("type") == "text")
    return ""


def _stub_images(m: dict[str, Any], why: str) -> dict[str, Any]:
    content = m.get("content")
    if not isinstance(content, list) or not _images(m):
        return m
    return {**m, "content": [{"type": "text", "text": f"[image left out: {why}]"}
                             if p.get("type") == "image_url" else p for p in content]}


def _units(msgs: list[dict[str, Any]], start: int, stop: int) -> list[list[int]]:
    """Indexes of ``msgs[start:stop]`` in the groups they can be left out in: an assistant
    message with the tool results that follow it; any other message alone."""
    out: list[list[int]] = []
    i = start
    while i < stop:
        group = [i]
        if msgs[i].get("role") == "assistant":
            j = i + 1
            while j < stop and msgs[j].get("role") == "tool":
                group.append(j)
                j += 1
        out.append(group)
        i = group[-1] + 1
    return out


def fit(params: dict[str, Any], window: Window) -> dict[str, Any] | None:
    """``params`` trimmed to fit ``window`` (see the module docstring), or None when even the
    system prompt, the tools, the task, the operator's messages and the newest turn do not
    fit."""
    limit = int(window.tokens * FILL)

    def size(p: dict[str, Any]) -> float:
        return estimate(p) * window.scale

    msgs = list(params.get("messages") or [])
    head = 1 if msgs and msgs[0].get("role") == "system" else 0
    last_asst = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"),
                    default=len(msgs) - 1)
    tail = min(last_asst, len(msgs) - 1)
    task = max((i for i in range(head, tail)
                if msgs[i].get("role") == "user" and _text(msgs[i]).startswith(TASK_PREFIX)),
               default=-1)
    held = {task} | {i for i in range(head, tail)  # the operator's words still hold
                     if msgs[i].get("role") == "user" and OPERATOR_PREFIX in _text(msgs[i])}
    why = f"the server's context window is {window.tokens} tokens"
    out = dict(params)
    if size(out) > limit:  # 2: older images to text
        msgs = [_stub_images(m, why) if i < tail else m for i, m in enumerate(msgs)]
        out["messages"] = msgs
    if size(out) > limit:  # 3: the oldest messages left out
        keep = set(range(len(msgs)))
        dropped = 0
        for group in _units(msgs, head, tail):
            if held & set(group):
                continue
            keep -= set(group)
            dropped += len(group)
            note = {"role": "user", "content": f"[{dropped} earlier messages left out: {why}]"}
            trimmed = [m for i, m in enumerate(msgs) if i in keep]
            out["messages"] = trimmed[:head] + [note] + trimmed[head:]
            if size(out) <= limit:
                break
    if size(out) > limit:
        return None
    key = "max_tokens" if "max_tokens" in out else "max_completion_tokens"
    if key in out:  # 4: the output within what is left of the window
        left = int(window.tokens - size(out))
        out[key] = max(MIN_OUTPUT, min(int(out[key]), left))
    return out


def without_images(params: dict[str, Any], base_url: str) -> dict[str, Any]:
    """``params`` with every image replaced by a line saying it was not sent and why."""
    why = (f"the server at {base_url} takes no image input; serve a vision model, or give "
           "the planner a vision model that describes views (agent.runtime.vision)")
    return {**params, "messages": [_stub_images(m, why) for m in params.get("messages") or []]}


__all__ = ["ADVICE", "Window", "estimate", "fit", "stated", "window_from", "without_images"]
