"""The model provider interface: provider-neutral messages, tool definitions, calls and usage.

Every provider (anthropic, openai chat completions, openai responses, the offline ones and the
scripted test provider) turns a :class:`ModelRequest` into a :class:`ModelReply` or raises a
:class:`ModelError`.  Failures are structured so the harness hands them to the planner as
errors it can act on; they never end a run.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["user", "assistant", "tool"]


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    """An encoded image already sized for the provider (see ``ModelProvider.max_image_side``).

    ``data`` lives only in memory; ``observation_id`` ties it to the harness's observation so
    points the model reads off it map back to capture pixels exactly.
    """

    data: bytes = field(repr=False)
    media_type: str = "image/jpeg"  # image/jpeg | image/png
    width: int = 0
    height: int = 0
    observation_id: str = ""
    label: str = ""


Part = TextPart | ImagePart


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    # set when the model's argument text was not a JSON object; the harness refuses the call
    # with this error instead of guessing
    parse_error: str = ""


@dataclass(frozen=True)
class Message:
    role: Role
    content: tuple[Part, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()  # assistant only
    tool_call_id: str = ""  # tool only
    is_error: bool = False  # tool only

    @staticmethod
    def user(text: str, *images: ImagePart) -> Message:
        return Message("user", (TextPart(text), *images))

    def text(self) -> str:
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass(frozen=True)
class ModelRequest:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolDef, ...] = ()
    max_tokens: int = 2048
    # for typed answers (the monitor): a JSON Schema the reply text must satisfy
    response_schema: dict[str, Any] | None = None
    response_name: str = "answer"
    purpose: str = "planner"  # planner | monitor | vision | router


@dataclass(frozen=True)
class ModelReply:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    model: str = ""
    stop_reason: str = ""
    latency_s: float = 0.0

    def json(self) -> Any:
        """The reply text parsed as JSON (typed answers); raises ModelError(malformed)."""
        try:
            return json.loads(self.text)
        except json.JSONDecodeError as e:
            raise ModelError("malformed", f"reply is not JSON: {e}", model=self.model) from e


ErrorKind = Literal[
    "rate_limited", "server", "timeout", "connection", "malformed", "refusal", "empty",
    "auth", "config", "bad_request", "cancelled",
]
RETRYABLE: frozenset[str] = frozenset({"rate_limited", "server", "timeout", "connection"})


class ModelError(Exception):
    """A failed model call, structured for the planner: ``kind`` says what went wrong."""

    def __init__(self, kind: str, message: str, *, model: str = "", attempts: int = 1) -> None:
        self.kind = kind
        self.message = message
        self.model = model
        self.attempts = attempts
        super().__init__(f"{kind}: {message}")

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "model": self.model,
                "attempts": self.attempts}


class ModelConfigError(Exception):
    """A provider cannot be built (missing key variable, unknown provider, unsupported API)."""


@runtime_checkable
class ModelProvider(Protocol):
    name: str
    model: str
    reads_images: bool
    max_image_side: int  # the longest side the provider accepts without resizing it itself

    def complete(self, request: ModelRequest, *, timeout_s: float) -> ModelReply: ...


@dataclass
class RecordedCall:
    request: ModelRequest
    reply: ModelReply | None = None
    error: ModelError | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# the cancel scope of model calls: here, not in models/retry.py, so the core may use it (the
# core imports nothing outside itself)
_scope = threading.local()


@contextlib.contextmanager
def cancel_scope(event: threading.Event) -> Iterator[threading.Event]:
    """Model calls made on this thread inside the block stop once ``event`` is set."""
    outer = getattr(_scope, "event", None)
    _scope.event = event
    try:
        yield event
    finally:
        _scope.event = outer


def current_cancel() -> threading.Event | None:
    """The cancel event of the :func:`cancel_scope` this thread is in, or None."""
    event = getattr(_scope, "event", None)
    return event if isinstance(event, threading.Event) else None
