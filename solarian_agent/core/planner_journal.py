"""What the planner tells the world: the :class:`Journal` (the run's episode log and the
``agent/events`` stream), the :class:`StatePublisher` (the latched ``agent/state``) and the
:class:`Inbox` (every input, from any thread, only queued for the tick)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import event_types as et
from .clock import Clock
from .episode_log import EpisodeLog
from .event_record import TypedEvent
from .events import Event, EventQueue
from .messages import AgentEvent, AgentState, MonitorVerdict, OperatorEvent, SkillResult
from .planner_state import ActionBook, MonitorNotes, RunState, Transcript
from .planner_tools import ToolCatalogue
from .transport import GoalHandle, Publisher, Subscription


class Journal:
    """Events of the run: written to its episode log (when there is one) and published."""

    def __init__(self, clock: Clock, events: Publisher[AgentEvent]) -> None:
        self._clock = clock
        self._events = events
        self.log: EpisodeLog | None = None
        self.errors = 0  # episode log writes that failed (the run goes on without them)
        self.turn_cursor: int | None = None  # after run_continued: log only newer messages

    def event(self, ev: TypedEvent) -> None:
        data = ev.to_record()
        self._write(ev.kind, data.pop("by", None), data)

    def relay(self, ev: AgentEvent) -> None:
        """Log a component's event (the executor's) with its record as that component wrote
        it: a relay neither adds nor drops a key."""
        data = dict(ev.data)
        self._write(ev.kind, data.pop("by", None), data)

    def _write(self, kind: str, by: str | None, data: dict[str, Any]) -> None:
        rec: dict[str, Any] | None = None
        if self.log is not None:
            try:
                rec = self.log.event(kind, by=by, **data)
            except Exception as e:
                # a full disk or a closed file must not take the control loop down (tick's own
                # error handler logs too): the event still goes out on the bus, and the first
                # failure is announced there
                self.errors += 1
                if self.errors == 1:
                    self._events.publish(AgentEvent.of(self._clock.wall(), et.HarnessError(
                        error=f"episode log write failed: {type(e).__name__}: {e}")))
        if rec is None:
            rec = {"t": self._clock.wall(), "kind": kind, **({"by": by} if by else {}), **data}
        self._events.publish(AgentEvent(rec["t"], kind, {k: v for k, v in rec.items()
                                                         if k not in ("t", "kind")}))


class StatePublisher:
    """``agent/state``: the run, its plan, the running actions and the conversation."""

    def __init__(self, clock: Clock, pub: Publisher[AgentState], run: RunState, book: ActionBook,
                 transcript: Transcript, arm_gate: Subscription[Any] | None = None) -> None:
        self._clock = clock
        self._arm_gate = arm_gate  # the arm driver's command gate: who holds the arm
        self._pub = pub
        self._run = run
        self._book = book
        self._transcript = transcript
        # each watched node's state (core/liveness.py), set where the watch is made
        self.nodes: Callable[[], tuple[dict[str, Any], ...]] = tuple

    def publish(self) -> None:
        now = self._clock.now()
        run = self._run
        self._pub.publish(AgentState(
            generation=run.generation, status=run.status, task=run.task,
            plan=tuple(run.plan.as_list()),
            actions=tuple({"action_id": a.action_id, "tool": a.tool, "params": a.params,
                           "elapsed_s": round(now - a.started_at, 2)}
                          for a in self._book.running.values()),
            conversation=tuple(self._transcript.recent(50)), stamp=now,
            arm_holder=self.arm_holder(), nodes=self.nodes()))

    def arm_holder(self) -> str:
        """The source holding the arm, as the driver's ``arm/gate`` last said ("" if none)."""
        gate = self._arm_gate.latest() if self._arm_gate is not None else None
        return str(gate.get("holder", "")) if isinstance(gate, dict) else ""


class Inbox:
    """The planner's inputs.  They arrive on any thread (a service, a subscription, the
    thread that ends a goal) and are only queued: everything is handled in the tick."""

    def __init__(self, clock: Clock, queue: EventQueue, journal: Journal, notes: MonitorNotes,
                 catalogue: ToolCatalogue) -> None:
        self._clock = clock
        self.queue = queue
        self._journal = journal
        self._notes = notes
        self._catalogue = catalogue

    def message(self, text: str, by: str = "user") -> dict[str, Any]:
        text = text.strip()
        if not text:
            return {"ok": False, "reason": "empty message"}
        if text in ("/cancel", "/reset"):
            return self.cancel(by) if text == "/cancel" else self.reset(by)
        self.queue.put(Event("user", "chat", text, {"by": by}, "queue", "message",
                             self._clock.now()))
        return {"ok": True, "reason": ""}

    def cancel(self, by: str = "operator") -> dict[str, Any]:
        self.queue.put(Event("user", "ui", "cancel", {"by": by}, "interrupt", "cancel",
                             self._clock.now()))
        return {"ok": True, "reason": ""}

    def reset(self, by: str = "operator") -> dict[str, Any]:
        self.queue.put(Event("user", "ui", "reset", {"by": by}, "interrupt", "reset",
                             self._clock.now()))
        return {"ok": True, "reason": ""}

    def operator(self, ev: OperatorEvent) -> None:
        self.queue.put(Event("operator", "teleop", ev.kind, dict(ev.detail), "interrupt",
                             "operator", self._clock.now()))

    def verdict(self, v: MonitorVerdict) -> None:
        self._journal.event(et.MonitorAnswer(action_id=v.action_id, tool=v.tool,
                            question=v.question, value=v.value, probability=v.probability,
                            decision=v.decision, source=v.source, reason=v.reason))
        if not v.decision and v.source == "monitor":
            # an answer below its rules' floor is no finding (the rules let it do nothing):
            # it is not shown, and the older answer it replaces is stale
            self._notes.note(v, self._catalogue.answer_floor(v))
        if v.decision:
            self.queue.put(Event(v.source, "verdict", v.reason or v.value, {"verdict": v},
                                 "interrupt" if v.decision == "fail" else "queue",
                                 "monitor_flag", self._clock.now()))

    def skill_event(self, ev: AgentEvent) -> None:
        self._journal.relay(ev)

    def goal_done(self, handle: GoalHandle) -> None:
        res = handle.result
        if isinstance(res, SkillResult):
            self.queue.put(Event("skills", "action", res.outcome, {"result": res,
                                                                    "goal": handle.goal},
                                 "queue", "action_ended", self._clock.now()))


__all__ = ["Inbox", "Journal", "StatePublisher"]
