"""A provider that replays given replies: the documented test double for a model's judgement.

Each script entry is a :class:`ModelReply`, a :class:`ModelError` (raised), or a callable that
receives the request and returns either.  Every request is recorded for assertions.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable

from ..core.model_api import ModelError, ModelReply, ModelRequest, RecordedCall, ToolCall, Usage

ScriptEntry = ModelReply | ModelError | Callable[[ModelRequest], "ModelReply | ModelError"]


_call_ids = itertools.count(1)


class ScriptExhausted(AssertionError):
    """The scripted provider was called more often than its script allows."""


class ScriptedProvider:
    name = "scripted"

    def __init__(
        self,
        script: Iterable[ScriptEntry] = (),
        *,
        model: str = "scripted-model",
        reads_images: bool = True,
        max_image_side: int = 1568,
        gate: threading.Event | None = None,
    ) -> None:
        self.model = model
        self.reads_images = reads_images
        self.max_image_side = max_image_side
        self._script = list(script)
        self._lock = threading.Lock()
        self.calls: list[RecordedCall] = []
        # a test can hold a call "in flight" until it sets the gate
        self.gate = gate

    def add(self, *entries: ScriptEntry) -> None:
        with self._lock:
            self._script.extend(entries)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def complete(self, request: ModelRequest, *, timeout_s: float) -> ModelReply:
        if self.gate is not None and not self.gate.wait(timeout_s):
            raise ModelError("timeout", f"scripted call held past {timeout_s}s", model=self.model)
        with self._lock:
            if not self._script:
                raise ScriptExhausted(f"scripted provider called {len(self.calls) + 1} times")
            entry = self._script.pop(0)
            rec = RecordedCall(request)
            self.calls.append(rec)
        out = entry(request) if callable(entry) else entry
        if isinstance(out, ModelError):
            rec.error = out
            raise out
        rec.reply = out
        return out


def reply(text: str = "", *calls: tuple[str, dict[str, object]], usage: Usage | None = None
          ) -> ModelReply:
    """Build a reply: ``reply("ok", ("update_plan", {...}), ("observe", {}))``."""
    tool_calls = tuple(
        ToolCall(id=f"call_{next(_call_ids)}", name=name, arguments=dict(args))
        for name, args in calls
    )
    return ModelReply(text=text, tool_calls=tool_calls, usage=usage or Usage(100, 20),
                      model="scripted-model", stop_reason="tool_use" if calls else "end_turn")
