"""The fake model server's script: provider-neutral replies, errors and failures, each
rendered in the wire format of the endpoint that was called (see
:mod:`~solarian_agent.testing.fake_model_server`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolUse:
    """A tool call in a scripted reply; ``arguments`` as a str is sent as raw argument text."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass
class Reply:
    text: str = ""
    tool_calls: Sequence[ToolUse] = ()
    thinking: str = ""
    input_tokens: int = 100
    output_tokens: int = 20
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    stop_reason: str | None = None
    model: str | None = None
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    # the body (a plain JSON reply, or each server-sent event) goes out TRICKLE_BYTES at a
    # time, this far apart
    trickle_s: float = 0.0
    # plain JSON replies only: sent as the reply's usage as it is (a hostile usage block)
    raw_usage: Any = None
    # streams only: after two events, send the service's error event and end the stream
    stream_error: HTTPError | None = None


@dataclass
class Refusal:
    text: str = "I can't help with that."
    delay_s: float = 0.0


@dataclass
class Empty:
    delay_s: float = 0.0


@dataclass
class HTTPError:
    status: int
    message: str = ""
    error_type: str | None = None
    retry_after: float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Malformed:
    body: bytes = b'{"id": "broken", "content": [{"type": "text", "text": "cut off'
    status: int = 200
    content_type: str = "application/json"
    delay_s: float = 0.0


@dataclass
class Drop:
    """Close the connection without sending a response (a connection error)."""

    delay_s: float = 0.0


@dataclass
class Decision:
    """Answers for ``/v1/decisions``: explicit ``answers`` or ``values`` by question name."""

    answers: list[dict[str, Any]] | None = None
    values: dict[str, Any] = field(default_factory=dict)
    input_tokens: int = 300
    delay_s: float = 0.0


ScriptEntry = Reply | Refusal | Empty | HTTPError | Malformed | Drop | Decision


__all__ = ["Decision", "Drop", "Empty", "HTTPError", "Malformed", "Refusal", "Reply",
           "ScriptEntry", "ToolUse"]
