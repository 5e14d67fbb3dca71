"""What the planner makes of an event once it is routed: an action's end advances the plan
queue, starts a rule's follow-up or wakes the planner with the news; a monitor verdict
concludes the action through ``skills/conclude`` or flags it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from . import names
from .events import Event
from .messages import MonitorVerdict, SkillGoal, SkillResult
from .planner_tools import ActionInfo
from .text import one_line, planner_wrote, quote

if TYPE_CHECKING:
    from .planner import Planner


def trust(source: str, before: str) -> str:
    """How far the planner may trust a flag: the monitor's vision answers can be wrong (so it
    checks the newest image before stopping an action), a controller check
    (``check_agent_action``, from the readings) is reliable."""
    if source == "controller":
        return "A controller check is reliable: act on it."
    return f"A monitor flag can be wrong: check the newest image{before}."

# the outcome a monitor decision ends its action with (SKILL_CONCLUDE)
_DECIDED_OUTCOME = {"finish": "succeeded", "fail": "failed"}


class EventHandlers:
    """Turns routed events into news, wakes and plan steps.  ``self.p``: the planner."""

    def __init__(self, planner: Planner) -> None:
        self.p = planner

    def handle_event(self, ev: Event) -> None:
        self.p.last_activity = self.p.clock.now()
        if ev.kind == "message":
            self.p.runs.handle_message(ev)
        elif ev.kind == "cancel":
            self.p.runs.handle_cancel(ev, forget=False)
        elif ev.kind == "reset":
            self.p.runs.handle_cancel(ev, forget=True)
        elif ev.kind == "operator":
            self.p.runs.handle_operator(ev)
        elif ev.kind == "action_ended":
            self.handle_action_ended(ev.context["result"], ev.context["goal"])
        elif ev.kind == "monitor_flag":
            self.handle_verdict(ev.context["verdict"])
        else:
            self.p.news.append(f"Event from {one_line(ev.source, 60)}: "
                               f"{quote(ev.source, ev.content)}")
            self.p.wake(ev.kind or ev.source)

    def handle_action_ended(self, res: SkillResult, goal: SkillGoal) -> None:
        if self.p.turn is not None and any(ps.action_id == res.action_id
                                           for ps in self.p.turn.pending):
            # the tool call that started it is still being answered: handle the end after it
            self.p.deferred.append(Event("skills", "action", res.outcome,
                                         {"result": res, "goal": goal}, "queue", "action_ended",
                                         self.p.clock.now()))
            return
        info = self.p.actions.pop(res.action_id, None)
        answered = res.action_id in self.p.calls.answered_at_start
        self.p.calls.answered_at_start.discard(res.action_id)
        if info is None and (res.outcome == "refused" or answered):
            # refused (or failed) before it started: the planner already got that as its tool
            # result, so it is not delivered a second time as news
            self.p.log_event("action_refused", action_id=res.action_id, tool=goal.tool,
                             reason=res.reason)
            return
        tool = info.tool if info else goal.tool
        self.p.log_event("action_ended", action_id=res.action_id, tool=tool, outcome=res.outcome,
                         reason=res.reason, data=res.data)
        with self.p.notes_lock:
            for key in [k for k in self.p.monitor_notes if k[0] == res.action_id]:
                del self.p.monitor_notes[key]
        # per-action bookkeeping ends with the action, whatever the run's status is now (a
        # paused or ended run must not keep it for the life of the process)
        followup = self.p.followups.pop(res.action_id, None)
        if followup is not None and res.outcome != _DECIDED_OUTCOME.get(followup[1]):
            # it ended otherwise than the monitor decided (a stop or its limit came first):
            # the follow-up was for that decision, and after a stop it would move the arm on
            self.p.log_event("followup_dropped", action_id=res.action_id, tool=followup[0],
                             decision=followup[1], outcome=res.outcome)
            followup = None
        woken_for_fail = res.action_id in self.p.woken_for_fail
        self.p.woken_for_fail.discard(res.action_id)
        self.p.escalated = {k for k in self.p.escalated if k[0] != res.action_id}
        if self.p.status not in ("running", "waiting_user"):
            self.p.publish_state()  # the action is gone from any viewer's screen too
            return
        retries = self.p.config.budgets.retries_per_step
        step = self.p.plan.action_ended(res.action_id, res.outcome, retries,
                                        by_monitor=woken_for_fail)
        if step is not None and step.status == "failed":
            self.p.log_event("plan_step_failed", step=step.index, tool=step.tool,
                             failures=step.failures, description=step.description)
        if res.outcome == "succeeded":
            self.p.tool_failures[tool] = 0
        elif res.outcome not in ("stopped", "timed_out"):  # a timeout is not a failure
            self.p.tool_failures[tool] = self.p.tool_failures.get(tool, 0) + 1
        if followup is not None:
            ftool, decision = followup
            new_id = self.p.calls.send_goal(ftool, {}, by_harness=True)
            if not new_id:
                # send_goal told why; the queue waits for the planner instead of going on
                # as if the step that always follows had run
                self.p.wake(f"follow-up {ftool} could not start", hold=True)
            if new_id and decision == "finish":
                taken = self.p.plan.follow_up(res.action_id, ftool, new_id)
                if taken is not None and new_id in self.p.actions:
                    self.p.actions[new_id].step = taken.index
                self.p.news.append(f"Action {res.action_id} ({tool}) finished by the monitor "
                                   f"({quote('skill', res.reason)}); {ftool} started as its "
                                   f"follow-up ({new_id}).")
                return
            if new_id:
                self.p.news.append(f"{ftool} started ({new_id}) after {res.action_id} failed.")
        if woken_for_fail:
            self.p.news.append(f"Action {res.action_id} ({tool}) has now stopped.")
            return
        if res.outcome == "succeeded":
            extra = {k: v for k, v in res.data.items() if k != "reason"}
            result = json.dumps(extra, default=str)
            self.p.news.append(f"Action {res.action_id} ({tool}) succeeded"
                               + (f": {quote('skill', res.reason)}" if res.reason else ".")
                               + (f" Result: {quote('skill', result, 1500)}" if extra else ""))
            if self.p.actions:
                if step is None:  # a task the planner started itself: its result is news now
                    self.p.wake("task_done")
                return
            nxt = self.p.plan.next_step(self.p.calls.needs_point(), set(self.p.specs))
            if nxt.step is not None and (self.p.routing.held or self.p.plan_hold):
                # queued user additions, or the planner was woken (a failure, a timeout, a
                # stop, a monitor flag, the user) and has not replied: it decides the next step
                self.p.wake("queued events before the next plan step")
                return
            if nxt.step is not None:
                args = dict(nxt.step.args or {})
                new_id = self.p.calls.send_goal(nxt.step.tool or "", args, by_harness=True,
                                                step_index=nxt.step.index)
                if new_id:
                    self.p.log_event("plan_step", step=nxt.step.index, tool=nxt.step.tool,
                                     args=args, action_id=new_id)
                    return
                self.p.wake(f"plan step {nxt.step.index} could not start")
                return
            self.p.wake(nxt.wake_reason)
            return
        self.wake_for_end(res, tool, info)

    def wake_for_end(self, res: SkillResult, tool: str, info: ActionInfo | None) -> None:
        if res.outcome == "timed_out":
            if info is not None and info.watched:
                msg = (f"Action {res.action_id} ({tool}) ran its limit without the monitor "
                       "confirming success. Look at the newest image before undoing anything.")
            else:
                msg = (f"Action {res.action_id} ({tool}) ran its limit; judge from the newest "
                       "image whether it succeeded. Look before undoing anything.")
        elif res.outcome == "refused":
            msg = f"Action {res.action_id} ({tool}) was refused: {quote('skill', res.reason)}"
        elif res.outcome == "stopped":
            msg = f"Action {res.action_id} ({tool}) was stopped: {quote('skill', res.reason)}"
        else:
            msg = f"Action {res.action_id} ({tool}) failed: {quote('skill', res.reason)}"
            extra = res.data.get("skill_reasons")
            if extra:
                msg += (" (the skill also reported: "
                        f"{quote('skill', '; '.join(str(x) for x in extra))})")
        step = self.p.plan.step_of(res.action_id) if info is not None else None
        n = self.p.tool_failures.get(tool, 0)
        retries = self.p.config.budgets.retries_per_step
        if step is not None and step.status == "failed":
            msg += (f" Plan step {step.index} ({planner_wrote(step.description)}) has now failed "
                    f"{step.failures} times in a row (retries_per_step {retries}): the harness "
                    "will not retry it as it is. Change the plan with update_plan (another "
                    "approach as a new step, or this step skipped) or ask_user.")
        elif n >= retries:
            msg += (f" {tool} has failed {n} times in a row: change your approach instead of "
                    "retrying it the same way.")
        self.p.news.append(msg)
        self.p.wake(f"action_{res.outcome}", hold=True)

    def handle_verdict(self, v: MonitorVerdict) -> None:
        # while the planner waits for the user its actions still run: the monitor still ends
        # them (the planner hears of it with the user's answer)
        if v.action_id not in self.p.actions or self.p.status not in ("running", "waiting_user"):
            return
        who = "controller check" if v.source == "controller" else "monitor"
        if v.decision in ("finish", "fail"):
            outcome = "succeeded" if v.decision == "finish" else "failed"
            try:
                r = self.p.bus.call(names.SKILL_CONCLUDE, {
                    "action_id": v.action_id, "outcome": outcome, "generation": self.p.generation,
                    "reason": f"{who}: {v.reason or v.question + '=' + v.value}"},
                    timeout_s=2.0)
            except Exception as e:
                r = {"ok": False, "reason": str(e)}
            self.p.log_event("monitor_decision", action_id=v.action_id, decision=v.decision,
                             source=v.source, then=v.then, accepted=bool(r.get("ok")),
                             reason=r.get("reason", ""))
            if not r.get("ok"):
                return
            if v.then:
                self.p.followups[v.action_id] = (v.then, v.decision)
            if v.decision == "fail":
                self.p.woken_for_fail.add(v.action_id)
                step = self.p.plan.step_of(v.action_id)
                self.p.news.append(f"The {who} failed action {v.action_id} ({v.tool}): "
                                   f"{quote('monitor', v.reason or v.value)}. "
                                   + trust(v.source, "")
                                   + (f" Plan step {step.index} stays failed until you decide: "
                                      "call its tool again, change the plan or ask the user."
                                      if step is not None else ""))
                self.p.wake("monitor_flag", hold=True)
        elif v.decision == "escalate":
            key = (v.action_id, v.question)
            if key in self.p.escalated:
                return
            self.p.escalated.add(key)
            why = f" {quote('monitor', v.reason)}" if v.reason else ""
            self.p.news.append(f"The {who} flags action {v.action_id} ({v.tool}): "
                               f"{one_line(v.question, 300)} = {quote('monitor', v.value, 200)} "
                               f"(p={v.probability:.2f}).{why} The action is still running. "
                               + trust(v.source, " before stopping it"))
            self.p.wake("monitor_flag", hold=True)
