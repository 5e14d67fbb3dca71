"""The conversation as the panel shows it: the planner's own (``agent/state``), and between its
entries what the operator should see there too, though the planner's list does not hold it:

* a tool call the harness refused (``tool_refused``, ``action_refused``, ``target_rejected``),
  where it happened;
* why the planner is silent: its model failed and is retried after a backoff
  (``planner_model_retry``), gave up until the next event (``planner_silent``), answers again
  (``planner_model_ok``);
* a message the operator sent that the planner has not yet taken in (it is queued in the
  planner's events, or its next state has not arrived), marked ``pending`` at the end until
  the planner's conversation has it.

The planner's state and the agent's acceptance of a message travel on different paths (a topic
and a service reply), so the state that holds the message can come first. A user message the
planner lists while nothing is pending for it is remembered for a short while (``claim_for_s``)
so that the acceptance that follows finds it seen and adds nothing pending.

Once the planner's run has ended, a pending message that is its task, or a user entry anywhere
in its list, is seen: the diff of two lists can miss an entry (the same exchange again after a
reset whose event comes later, on another topic), and a message must never stay pending after
its run ended.

The planner's list is its last 50 entries (a sliding window, or emptied by a reset); the view
keeps its own bounded timeline of what it has seen, so a note stays where it was.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

from ..core.statuses import RUN_ENDED as ENDED
from .event_lines import describe_event
from .link import new_entries

REFUSALS = ("tool_refused", "action_refused", "target_rejected")
# why the planner says nothing: its model fails (retried with a backoff, then silent)
PLANNER_NOTES = ("planner_model_retry", "planner_silent", "planner_model_ok")


class ConversationView:
    def __init__(self, clock_now: Any, keep: int = 200, pending_max: int = 20,
                 pending_for_s: float = 120.0, claim_for_s: float = 30.0) -> None:
        self._now = clock_now
        self.pending_for_s = pending_for_s
        self.claim_for_s = claim_for_s
        # user messages the planner listed before their sender heard they were accepted
        self._unclaimed: collections.deque[tuple[str, float]] = collections.deque(
            maxlen=pending_max)
        self._conv: list[dict[str, Any]] = []  # the planner's list as last seen
        self.timeline: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep)
        self.pending: collections.deque[dict[str, Any]] = collections.deque(maxlen=pending_max)

    def on_state(self, conversation: list[dict[str, Any]], status: str = "",
                 task: str = "") -> None:
        conv = [dict(m) for m in conversation]
        if self._conv and conv and not _overlaps(self._conv, conv):
            self.timeline.clear()  # a reset (its event may come later, on another topic)
            fresh = conv
        elif not conv:
            if self._conv:
                self.timeline.clear()
            fresh = []
        else:
            fresh = new_entries(self._conv, conv)
        self._conv = conv
        for m in fresh:
            self.timeline.append(m)
            if m.get("role") == "user":
                self._confirm(str(m.get("text", "")))
        if status in ENDED:  # the run is over: what it took in is not pending (module doc)
            seen = {str(m.get("text", "")) for m in conv if m.get("role") == "user"}
            for p in [p for p in self.pending if p["text"] in seen or p["text"] == task]:
                self.pending.remove(p)

    def on_event(self, kind: str, data: Mapping[str, Any]) -> bool:
        """True when the event changed the view."""
        if kind == "conversation_reset":
            self.timeline.clear()
            self._conv = []
            return True
        if kind in REFUSALS or kind in PLANNER_NOTES:
            self.timeline.append({"role": "system",
                                  "note": "refused" if kind in REFUSALS else "planner",
                                  "text": describe_event(kind, data)})
            return True
        return False

    def sent(self, text: str) -> None:
        """The operator sent ``text`` (the agent accepted it): pending until the planner's
        conversation has it."""
        now = self._now()
        for seen in list(self._unclaimed):
            if seen[0] == text and now - seen[1] <= self.claim_for_s:
                self._unclaimed.remove(seen)  # the planner already has it
                return
        self.pending.append({"role": "user", "text": text, "pending": True,
                             "sent_at": now})

    def _confirm(self, text: str) -> None:
        for p in list(self.pending):
            if p["text"] == text:
                self.pending.remove(p)
                return
        self._unclaimed.append((text, self._now()))

    def expire(self) -> bool:
        """Drop pending messages older than ``pending_for_s``; True when one was dropped."""
        now = self._now()
        old = [p for p in self.pending if now - float(p["sent_at"]) > self.pending_for_s]
        for p in old:
            self.pending.remove(p)
        while self._unclaimed and now - self._unclaimed[0][1] > self.claim_for_s:
            self._unclaimed.popleft()
        return bool(old)

    def entries(self) -> list[dict[str, Any]]:
        out = list(self.timeline)
        out += [{k: v for k, v in p.items() if k != "sent_at"} for p in self.pending]
        return out


def _overlaps(prev: list[dict[str, Any]], new: list[dict[str, Any]]) -> bool:
    """Whether ``new`` continues ``prev`` (the same list grown, or its window slid on)."""
    return any(prev[-k:] == new[:k] for k in range(min(len(prev), len(new)), 0, -1))


__all__ = ["ENDED", "PLANNER_NOTES", "REFUSALS", "ConversationView"]
