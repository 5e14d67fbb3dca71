"""Approval, for the cautious: with ``agent.approve: skills`` every skill goal the planner sends
waits for the operator's yes before it starts.

The executor asks :meth:`SkillApprovals.check` for each agent goal on each tick (never waiting
in a callback): ``go`` once the operator approved it, ``refuse`` when the operator refused it
or nobody answered within ``approve_timeout_s`` (the goal ends ``refused`` with that reason, so
the planner is told as of any refused goal), else ``wait``.  The operator answers on the
``skills/approve`` service (AgentCommand: ``text`` = ``approve [action_id]`` or
``refuse [action_id] [why]``, ``by`` = who; no action id = the oldest waiting goal) from the
terminal chat (``/approve``, ``/refuse``) or the panel.  Every request and every answer is a
``skill_approval`` event on ``skills/events`` naming who decided (the episode log keeps it).
Goals the operator sends (action ids ``op...``) need no approval.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from . import names
from .clock import Clock
from .event_record import TypedEvent
from .transport import Bus


@dataclass(frozen=True)
class SkillApproval(TypedEvent, kind="skill_approval"):
    """A skill goal waiting for the operator, or the operator's answer (or the timeout)."""

    action_id: str = ""
    skill: str = ""
    decision: str = ""  # waiting | approved | refused | timed_out
    by: str = ""
    reason: str = ""


def approve_timeout(cfg: Any) -> float | None:
    """The executor's approval timeout under ``agent.approve: skills``, else None (no
    approval)."""
    return float(cfg.approve_timeout_s) if getattr(cfg, "approve", "") == "skills" else None


class _Goal(Protocol):
    @property
    def goal(self) -> Any: ...
    @property
    def tool(self) -> str: ...
    @property
    def by(self) -> str: ...


T = TypeVar("T", bound=_Goal)


@dataclass
class _Waiting:
    tool: str
    since: float
    decision: str = ""  # "" | approved | refused
    by: str = ""
    note: str = ""


class SkillApprovals:
    def __init__(self, bus: Bus, clock: Clock, timeout_s: float | None,
                 emit: Callable[[TypedEvent], None], node: str = "skills") -> None:
        """``timeout_s`` None: approval is off (every goal starts as before); the service
        still answers, saying so."""
        self.clock = clock
        self.enabled = timeout_s is not None
        self.timeout_s = float(timeout_s or 0.0)
        self._emit = emit
        self._lock = threading.Lock()
        self._waiting: dict[str, _Waiting] = {}  # in arrival order
        bus.create_service(names.SKILL_APPROVE, names.T_AGENT_COMMAND, self._srv, node=node)

    def check(self, action_id: str, tool: str, now: float) -> tuple[str, str]:
        """``("go" | "refuse" | "wait", reason)`` for an agent goal due to start."""
        with self._lock:
            w = self._waiting.get(action_id)
            if w is None:
                self._waiting[action_id] = _Waiting(tool, now)
                ask = True
            else:
                ask = False
            if w is not None and w.decision:
                del self._waiting[action_id]
                decided: tuple[str, str, str] | None = (w.decision, w.by, w.note)
            elif w is not None and now - w.since >= self.timeout_s:
                del self._waiting[action_id]
                decided = ("timed_out", "", "")
            else:
                decided = None
        if ask:
            self._emit(SkillApproval(action_id=action_id, skill=tool, decision="waiting",
                                     reason="waiting for the operator's yes (/approve)"))
            return "wait", ""
        if decided is None:
            return "wait", ""
        decision, by, note = decided
        if decision == "approved":
            self._emit(SkillApproval(action_id=action_id, skill=tool, decision=decision, by=by))
            return "go", ""
        if decision == "refused":
            reason = f"refused: the operator ({by}) did not approve {tool}" + (
                f": {note}" if note else "")
        else:
            reason = (f"refused: {tool} was not approved within {self.timeout_s:g} s "
                      "(approve: skills; the operator answers with /approve or /refuse)")
        self._emit(SkillApproval(action_id=action_id, skill=tool, decision=decision, by=by,
                                 reason=reason))
        return "refuse", reason

    def due(self, pending: list[T], now: float) -> tuple[list[T], list[T], list[tuple[T, str]]]:
        """The executor's pending goals sorted: (start now, keep waiting, refuse with why).
        Only the agent's goals wait; the operator's start at once."""
        ready: list[T] = []
        wait: list[T] = []
        refuse: list[tuple[T, str]] = []
        for p in pending:
            verdict, why = ("go", "") if p.by != "agent" else self.check(
                p.goal.action_id, p.tool, now)
            if verdict == "go":
                ready.append(p)
            elif verdict == "refuse":
                refuse.append((p, why))
            else:
                wait.append(p)
        return ready, wait, refuse

    def forget(self, action_id: str) -> None:
        """A waiting goal that was cancelled or went stale."""
        with self._lock:
            self._waiting.pop(action_id, None)

    def waiting(self) -> list[dict[str, Any]]:
        with self._lock:
            return [{"action_id": a, "skill": w.tool, "since": w.since}
                    for a, w in self._waiting.items() if not w.decision]

    def answer(self, approve: bool, action_id: str = "", by: str = "operator",
               note: str = "") -> dict[str, Any]:
        with self._lock:
            open_ = [a for a, w in self._waiting.items() if not w.decision]
            target = action_id or (open_[0] if open_ else "")
            if target not in open_:
                return {"ok": False, "reason": f"no skill waiting for approval as "
                                               f"{action_id!r}" if action_id else
                        "no skill is waiting for approval"}
            w = self._waiting[target]
            w.decision, w.by, w.note = ("approved" if approve else "refused"), by, note
        return {"ok": True, "reason": f"{w.decision} {target} ({w.tool})"}

    def _srv(self, req: Mapping[str, Any]) -> dict[str, Any]:
        if not self.enabled:
            return {"ok": False, "reason": "approval is off (agent.approve is not 'skills')"}
        words = str(req.get("text", "")).split()
        by = str(req.get("by", "")) or "operator"
        if not words or words[0] not in ("approve", "refuse"):
            return {"ok": False, "reason": "text must be 'approve [action_id]' or "
                                           "'refuse [action_id] [why]'"}
        rest = words[1:]
        waiting = {w["action_id"] for w in self.waiting()}
        action_id = rest.pop(0) if rest and rest[0] in waiting else ""
        return self.answer(words[0] == "approve", action_id, by, " ".join(rest))


__all__ = ["SkillApproval", "SkillApprovals", "approve_timeout"]
