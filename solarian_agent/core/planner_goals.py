"""The :class:`GoalSender`: every skill goal the planner sends, stamped with the run's
generation (the executor refuses a goal of an older one, so nothing decided before a cancel,
reset or takeover is executed after it), recorded in the :class:`ActionBook`; and the stops and
conclusions the planner asks of the executor for a running action.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import event_types as et
from . import names
from .clock import Clock
from .errors import ToolCallRejected
from .executor import new_action_id
from .messages import SkillGoal
from .planner_journal import Journal, StatePublisher
from .planner_state import ActionBook, RunState, Wakes
from .planner_tools import ActionInfo, ToolCatalogue
from .text import quote, quote_prefix
from .transport import Bus, GoalHandle, GoalStatus


class GoalSender:
    """Sends skill goals and records them; ``on_done`` queues a goal's end for the tick."""

    def __init__(self, bus: Bus, clock: Clock, run: RunState, book: ActionBook,
                 catalogue: ToolCatalogue, wakes: Wakes, journal: Journal,
                 state: StatePublisher, on_done: Callable[[GoalHandle], None]) -> None:
        self._bus = bus
        self._clock = clock
        self._run = run
        self._book = book
        self._catalogue = catalogue
        self._wakes = wakes
        self._journal = journal
        self._state = state
        self._on_done = on_done

    def for_call(self, tool: str, args: dict[str, Any], observation_id: str,
                 watch_for: tuple[str, ...], watched: bool) -> tuple[str, GoalHandle]:
        """The goal of the planner's own skill call; refused (``ToolCallRejected``) when the
        skill's action server cannot take it."""
        action_id = new_action_id()
        goal = SkillGoal(tool, args, self._run.generation, action_id, observation_id,
                         watch_for)
        try:
            handle = self._bus.send_goal(names.skill_action(tool), goal, done_cb=self._on_done)
        except Exception as e:
            raise ToolCallRejected(f"{tool} is unavailable: {e}") from e
        self._book.add(ActionInfo(action_id, tool, args, self._clock.now(), handle, watched))
        return action_id, handle

    def by_harness(self, tool: str, args: dict[str, Any], *, by_harness: bool,
                   step_index: int | None = None) -> str:
        """Start a tool without the planner (plan step or ``then``).  '' if it was refused:
        the planner is told why with its next news."""
        spec = self._catalogue.specs.get(tool)
        news = self._wakes.news
        if spec is None:
            news.append(f"Could not start {quote_prefix(tool)}: no such tool.")
            return ""
        action_id = new_action_id()
        goal = SkillGoal(tool, args, self._run.generation, action_id)
        try:
            handle = self._bus.send_goal(names.skill_action(tool), goal, done_cb=self._on_done)
        except Exception as e:
            news.append(f"Could not start {tool}: {quote('error', e)}")
            return ""
        if handle.status == GoalStatus.ABORTED:
            reason = getattr(handle.result, "reason", "")
            news.append(f"Could not start {tool}: {quote('skill', reason)}")
            return ""
        self._book.add(ActionInfo(action_id, tool, args, self._clock.now(), handle,
                                  bool(spec.monitor), step_index))
        if step_index is not None:
            self._run.start_step(step_index, action_id)
        self._journal.event(et.ActionStarted(action_id=action_id, tool=tool, params=args,
                            by_harness=by_harness))
        self._state.publish()
        return action_id

    def conclude(self, action_id: str, outcome: str, reason: str) -> dict[str, Any]:
        """Ask the executor to end a running action with ``outcome`` (``skills/conclude``);
        an unreachable service is a refusal."""
        try:
            r = self._bus.call(names.SKILL_CONCLUDE, {
                "action_id": action_id, "outcome": outcome, "generation": self._run.generation,
                "reason": reason}, timeout_s=2.0)
        except Exception as e:
            r = {"ok": False, "reason": str(e)}
        return dict(r)

    def stop(self, action_id: str, info: ActionInfo, reason: str, by: str) -> bool:
        """Stop a running task with a reason the planner will read in its end event."""
        try:
            r = self._bus.call(names.SKILL_CONCLUDE, {
                "action_id": action_id, "outcome": "stopped", "generation": self._run.generation,
                "reason": reason}, timeout_s=2.0)
            ok = bool(r.get("ok"))
        except Exception:
            ok = False
        if not ok:  # not started yet, or the conclude service is unreachable
            ok = info.handle.cancel()
        self._journal.event(et.StopAction(by=by, action_id=action_id, tool=info.tool,
                            reason=reason, accepted=ok))
        return ok


__all__ = ["GoalSender"]
