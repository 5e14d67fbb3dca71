"""What an OpenAI-compatible server lacks, and what the ``openai`` provider does about it.
Local servers (llama.cpp, Ollama, vLLM) implement Chat Completions unevenly:

* **no ``tool_choice`` / no ``parallel_tool_calls``**: the provider sends them only when
  ``planner.parallel_tool_calls`` is set (the harness never forces a tool and reads any
  number of calls), and a 400 naming one of them drops it from the request and sends it
  again, for every later call too;
* **no image input**: images are sent as a line of text from then on, with one warning, and
  the provider reads no images (a configured vision backend describes the views instead,
  ``agent.runtime.vision``); the line names what fixes it (:mod:`.context_fit`);
* **no usage fields**: the reply's usage is zero; ``bench agent`` then estimates the tokens
  and labels them estimated (:mod:`solarian_agent.benchmarks.agent_meter`);
* **tool calls written as JSON in the text**: read back as tool calls
  (:func:`text_tool_calls`) when they name a tool of the request;
* **a small context window** (8k): requests are trimmed to the window the server states,
  older images and messages first, keeping the system prompt, the tools, the task and the
  newest turn (:mod:`.context_fit`); one clear error with the window and the request's size,
  and the options that fix it, only when even that does not fit.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..core.model_api import ModelError, ToolCall
from .context_fit import ADVICE, stated

DROPPABLE = ("tool_choice", "parallel_tool_calls")
_CONTEXT = re.compile(r"context length|context window|context size|n_ctx|too many tokens|"
                      r"maximum context", re.I)


def lacking(message: str, params: dict[str, Any]) -> str:
    """Which request field a 400 ``message`` refuses that can be left out, or ''."""
    low = message.lower()
    return next((k for k in DROPPABLE if k in params and k in low), "")


# a server that takes no images at all (llama.cpp without --mmproj, a text-only Ollama or
# vLLM model): only wordings that say the server or model takes no image input.  One bad
# image ("cannot identify image file", "unable to decode image data", "image too large")
# says nothing about the next one, and must not turn images off for the whole session
_NO_IMAGES = re.compile(r"(?:image|vision|multimodal)[^.]{0,40}(?:not supported|unsupported|"
                        r"not enabled)|(?:does not|doesn't|do not|don't) support[^.]{0,40}"
                        r"(?:image|vision|multimodal)|not a multimodal|mmproj|projector", re.I)


def refuses_images(message: str) -> bool:
    return bool(_NO_IMAGES.search(message))


def refuses_context(message: str) -> bool:
    return bool(_CONTEXT.search(message))


def has_images(params: dict[str, Any]) -> bool:
    return any(isinstance(m.get("content"), list) and any(
        p.get("type") == "image_url" for p in m["content"]) for m in params.get("messages", []))


def clear_error(message: str, params: dict[str, Any], base_url: str, model: str
                ) -> ModelError | None:
    """The one clear error for a 400 that says what the server lacks, or None."""
    if _CONTEXT.search(message):
        window, need = stated(message)
        sizes = f" (the server says: {message[:200]})" if window is None else (
            f": the server's window is {window} tokens"
            + (f", this request needs about {need}" if need else ""))
        return ModelError("bad_request", f"the server at {base_url} has too small a context "
                          f"window for the planner{sizes}. {ADVICE}", model=model)
    if has_images(params) and refuses_images(message):
        return ModelError("bad_request", f"the server at {base_url} takes no image input "
                          f"({message[:160]}); the planner points in camera images, so serve "
                          "a vision model (llama.cpp --mmproj, an Ollama vision model, vLLM "
                          "with a multimodal model) or set planner.model to one", model=model)
    return None


def _candidates(text: str) -> list[Any]:
    """JSON values found in ``text``: the whole of it, each fenced block, each line."""
    found: list[Any] = []
    pieces = [text] + re.findall(r"```(?:json)?\s*(.*?)```", text, re.S) + text.splitlines()
    for piece in pieces:
        piece = piece.strip()
        if not piece or piece[0] not in "[{":
            continue
        try:
            value = json.loads(piece)
        except json.JSONDecodeError:
            continue
        found.extend(value if isinstance(value, list) else [value])
        if piece == text.strip():
            break  # the whole text was the JSON: its lines are parts of it
    return found


def text_tool_calls(text: str, tools: set[str]) -> tuple[str, list[ToolCall]]:
    """Tool calls a model wrote as JSON in its text (``{"name": ..., "arguments": {...}}``,
    also ``"parameters"`` or a ``"function"`` wrapper; one object, a list, fenced blocks or
    one a line) whose name is one of ``tools``; the text without them.  A call whose
    arguments are no JSON object keeps them as a parse error, as a ``tool_calls`` one would."""
    calls: list[ToolCall] = []
    for v in _candidates(text):
        if not isinstance(v, dict):
            continue
        fn = v.get("function") if isinstance(v.get("function"), dict) else v
        name = fn.get("name")
        if not isinstance(name, str) or name not in tools:
            continue
        args = fn.get("arguments", fn.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = None
        err = "" if isinstance(args, dict) else "the tool call's arguments are not a JSON object"
        calls.append(ToolCall(f"text_call_{len(calls)}", name,
                              args if isinstance(args, dict) else {}, parse_error=err))
    if not calls:
        return text, []
    rest = [ln for ln in text.splitlines() if not ln.strip().startswith(("{", "[", "```"))]
    return "\n".join(rest).strip(), calls


__all__ = ["DROPPABLE", "clear_error", "has_images", "lacking", "refuses_context",
           "refuses_images", "text_tool_calls"]
