"""Structured events and the bounded inbound queue.  Modelling every input the same way (who,
how, what) keeps the operator's words apart from a tool's result, whose text is data, never a
command.

Every input the planner reacts to is an :class:`Event` with a source (who), a channel (how it
arrived), content (what), context (anything that helps interpret it) and an urgency that decides
how it is routed: ``interrupt`` (stop now and re-plan), ``queue`` (deliver at the next natural
boundary, batched) or ``parallel`` (an independent quick question answered beside the main task).

The queue is bounded.  On overflow the configured rule applies and the loss is counted and
reported, never silent:

* ``drop_oldest_routine``: the oldest ``queue``/``parallel`` event is dropped; interrupts are
  never dropped.  If the queue holds only interrupts, the new routine event is dropped instead.
* ``reject_new``: the new event is refused (``put`` returns False).
"""

from __future__ import annotations

import collections
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

Urgency = Literal["interrupt", "queue", "parallel"]
URGENCIES: tuple[str, ...] = ("interrupt", "queue", "parallel")

_seq = itertools.count(1)


@dataclass(frozen=True)
class Event:
    source: str  # user | operator | skills | monitor | planner | timer | controller | system
    channel: str  # chat | action | verdict | tripwire | plan | heartbeat | teleop | ui | task
    content: str
    context: dict[str, Any] = field(default_factory=dict)
    urgency: str = "queue"
    kind: str = ""  # the wake reason: message, action_failed, monitor_flag, operator, ...
    t: float = 0.0
    seq: int = field(default_factory=lambda: next(_seq))

    def __post_init__(self) -> None:
        if self.urgency not in URGENCIES:
            raise ValueError(f"Event.urgency must be one of {URGENCIES}, got {self.urgency!r}")

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "channel": self.channel, "content": self.content,
                "context": self.context, "urgency": self.urgency, "kind": self.kind,
                "seq": self.seq}


class EventQueue:
    """A bounded, thread-safe FIFO of events with a defined overflow rule."""

    def __init__(self, maxsize: int = 256, overflow: str = "drop_oldest_routine") -> None:
        if maxsize < 1:
            raise ValueError(f"EventQueue maxsize must be >= 1, got {maxsize}")
        if overflow not in ("drop_oldest_routine", "reject_new"):
            raise ValueError(f"unknown overflow rule {overflow!r}")
        self.maxsize = maxsize
        self.overflow = overflow
        self._items: collections.deque[Event] = collections.deque()
        self._lock = threading.Lock()
        self.dropped: list[Event] = []
        self.dropped_count = 0

    def put(self, event: Event) -> bool:
        """Add an event; returns False when the event itself was refused or dropped."""
        with self._lock:
            if len(self._items) < self.maxsize:
                self._items.append(event)
                return True
            if self.overflow == "reject_new" and event.urgency != "interrupt":
                self._record_drop(event)
                return False
            victim = next((e for e in self._items if e.urgency != "interrupt"), None)
            if victim is None:
                if event.urgency == "interrupt":
                    # a queue full of interrupts still takes a new interrupt: the newest stop
                    # request must not be lost; the oldest interrupt is the one that goes
                    self._record_drop(self._items.popleft())
                    self._items.append(event)
                    return True
                self._record_drop(event)
                return False
            self._items.remove(victim)
            self._record_drop(victim)
            self._items.append(event)
            return True

    def _record_drop(self, event: Event) -> None:
        self.dropped_count += 1
        self.dropped.append(event)
        if len(self.dropped) > 100:
            del self.dropped[0]

    def drain(self) -> list[Event]:
        with self._lock:
            out = list(self._items)
            self._items.clear()
            return out

    def peek(self) -> list[Event]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
