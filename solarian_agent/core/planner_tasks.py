"""The planner's task and timer tools: ``task_status``, ``cancel_task``,
``set_timer`` and ``cancel_timer``.  Their results say that the task's end or the timer arrives
as its own event.
"""

from __future__ import annotations

from typing import Any

from . import event_types as et
from .clock import Clock
from .errors import ToolCallRejected
from .messages import SkillFeedback
from .model_api import ToolCall
from .planner_goals import GoalSender
from .planner_journal import Journal
from .planner_state import ActionBook
from .planner_tools import Turn, tool_msg
from .routing import pct
from .text import planner_wrote, quote
from .timers import TimerError, Timers
from .transport import GoalStatus


class TaskTools:
    """Answers the task and timer tools."""

    def __init__(self, clock: Clock, book: ActionBook, goals: GoalSender, timers: Timers,
                 journal: Journal) -> None:
        self._clock = clock
        self._book = book
        self._goals = goals
        self._timers = timers
        self._journal = journal

    def task_tool(self, turn: Turn, call: ToolCall, name: str, args: dict[str, Any]) -> None:
        if name == "task_status":
            turn.results[call.id] = tool_msg(call, self.task_status(str(args["task_id"])))
        elif name == "cancel_task":
            aid = str(args["task_id"])
            info = self._book.get(aid)
            if info is None:
                ended = self._book.ended.get(aid)
                raise ToolCallRejected(
                    f"task {aid} already ended ({ended})" if ended else
                    f"no running task {planner_wrote(aid, 60)} (running: "
                    f"{', '.join(self._book.running) or 'none'})")
            fb = info.handle.feedback
            at = (f", at {pct(fb.progress)}" if isinstance(fb, SkillFeedback)
                  and fb.progress >= 0 else "")
            reason = "cancelled by the planner" + (f": {args['reason']}"
                                                   if args.get("reason") else "")
            if not self._goals.stop(aid, info, reason, by="agent"):
                raise ToolCallRejected(f"task {aid} could not be cancelled (it may be ending)")
            if any(ps.action_id == aid for ps in turn.pending):
                # started by this very reply and not yet running: its own call is answered
                # with how it ended, and no end event follows, so no wake is promised (the
                # planner is called again when the reply's calls are all answered)
                turn.results[call.id] = tool_msg(
                    call, f"cancelling task {aid} ({info.tool}) before it started: the result "
                          "of the call that started it, in this reply, says how it ended")
                return
            turn.results[call.id] = tool_msg(
                call, f"cancelling task {aid} ({info.tool}{at}): it stops at the next control "
                      "tick; its end arrives as its own event and you will be woken then")
            turn.waits = True
        elif name == "set_timer":
            try:
                t = self._timers.set(float(args["seconds"]), str(args.get("note", "")),
                                      bool(args.get("repeat", False)))
            except TimerError as e:
                raise ToolCallRejected(str(e)) from e
            self._journal.event(et.TimerSet(timer_id=t.timer_id, seconds=t.seconds, note=t.note,
                             repeat=t.repeat))
            turn.results[call.id] = tool_msg(
                call, f"timer {t.timer_id} set: {t.describe(self._clock.now())}. It arrives as "
                      "its own event.")
            turn.waits = True
        elif name == "cancel_timer":
            tid = str(args["timer_id"])
            gone = self._timers.cancel(tid)
            if gone is None:
                ids = ", ".join(t.timer_id for t in self._timers.active) or "none"
                raise ToolCallRejected(f"no timer {planner_wrote(tid, 60)} (set: {ids})")
            self._journal.event(et.TimerCancelled(timer_id=tid))
            turn.results[call.id] = tool_msg(call, f"timer {tid} cancelled")

    def task_status(self, aid: str) -> str:
        info = self._book.get(aid)
        if info is None:
            ended = self._book.ended.get(aid)
            if ended is not None:
                return f"task {aid}: ended ({ended}); its result was delivered as an event."
            raise ToolCallRejected(f"no task {planner_wrote(aid, 60)} (running: "
                                   f"{', '.join(self._book.running) or 'none'})")
        st, fb = info.handle.status, info.handle.feedback
        if aid in self._book.stopping or st == GoalStatus.CANCELING:
            state = "stopping"
        elif st == GoalStatus.ACCEPTED and fb is None:
            state = "starting"
        else:
            state = "running"
        phase = fb.phase if isinstance(fb, SkillFeedback) else "starting"
        progress = (pct(fb.progress) if isinstance(fb, SkillFeedback) and fb.progress >= 0
                    else "unknown")
        elapsed = self._clock.now() - info.started_at
        return (f"task {aid} ({info.tool}): state {state}, phase {quote('skill', phase, 80)}, "
                f"progress {progress}, "
                f"{elapsed:.1f} s elapsed. No result yet: it arrives as its own event when the "
                "task ends.")
