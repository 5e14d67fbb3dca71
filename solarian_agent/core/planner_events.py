"""What the planner makes of an event once it is routed: an action's end advances the plan
queue, starts a rule's follow-up or wakes the planner with the news; a monitor verdict
concludes the action through ``skills/conclude`` or flags it.
"""

from __future__ import annotations

from . import event_types as et
from .clock import Clock
from .config import AgentConfig
from .events import Event
from .messages import MonitorVerdict, SkillGoal, SkillResult
from .planner_decide import ActionEnd, AfterKind, after_action, followup_holds
from .planner_goals import GoalSender
from .planner_journal import Journal, StatePublisher
from .planner_runs import RunControl
from .planner_state import ActionBook, RunState, TurnSlot, Wakes
from .planner_tools import ActionInfo, ToolCatalogue
from .result_text import result_text
from .statuses import Outcome, RunStatus, StepStatus
from .text import one_line, planner_wrote, quote


def trust(source: str, before: str) -> str:
    """How far the planner may trust a flag: the monitor's vision answers can be wrong (so it
    checks the newest image before stopping an action), a controller check
    (``check_agent_action``, from the readings) is reliable."""
    if source == "controller":
        return "A controller check is reliable: act on it."
    return f"A monitor flag can be wrong: check the newest image{before}."


class EventHandlers:
    """Turns routed events into news, wakes and plan steps: the run's messages and the
    operator go to :class:`RunControl`; an action's end is decided by
    :func:`.planner_decide.after_action`; a monitor verdict concludes or flags its action."""

    def __init__(self, clock: Clock, config: AgentConfig, run: RunState, book: ActionBook,
                 wakes: Wakes, slot: TurnSlot, journal: Journal, state: StatePublisher,
                 runs: RunControl, goals: GoalSender, catalogue: ToolCatalogue) -> None:
        self._clock = clock
        self._config = config
        self._run = run
        self._book = book
        self._wakes = wakes
        self._slot = slot
        self._journal = journal
        self._state = state
        self._runs = runs
        self._goals = goals
        self._catalogue = catalogue

    def handle_event(self, ev: Event) -> None:
        self._wakes.last_activity = self._clock.now()
        if ev.kind == "message":
            self._runs.handle_message(ev)
        elif ev.kind == "cancel":
            self._runs.handle_cancel(ev, forget=False)
        elif ev.kind == "reset":
            self._runs.handle_cancel(ev, forget=True)
        elif ev.kind == "operator":
            self._runs.handle_operator(ev)
        elif ev.kind == "action_ended":
            self.handle_action_ended(ev.context["result"], ev.context["goal"])
        elif ev.kind == "monitor_flag":
            self.handle_verdict(ev.context["verdict"])
        else:
            self._wakes.news.append(f"Event from {one_line(ev.source, 60)}: "
                                    f"{quote(ev.source, ev.content)}")
            self._wakes.wake(ev.kind or ev.source)

    def handle_action_ended(self, res: SkillResult, goal: SkillGoal) -> None:
        if self._slot.starting(res.action_id):
            # the tool call that started it is still being answered: handle the end after it
            self._slot.deferred.append(Event("skills", "action", res.outcome,
                                             {"result": res, "goal": goal}, "queue",
                                             "action_ended", self._clock.now()))
            return
        book, journal, news = self._book, self._journal, self._wakes.news
        info = book.pop(res.action_id)
        answered = res.action_id in book.answered_at_start
        book.answered_at_start.discard(res.action_id)
        if info is None and (res.outcome == Outcome.REFUSED or answered):
            # refused (or failed) before it started: the planner already got that as its tool
            # result, so it is not delivered a second time as news
            journal.event(et.ActionRefused(action_id=res.action_id, tool=goal.tool,
                          reason=res.reason))
            return
        tool = info.tool if info else goal.tool
        journal.event(et.ActionEnded(action_id=res.action_id, tool=tool, outcome=res.outcome,
                      reason=res.reason, data=res.data))
        followup, failed_by_monitor = book.settle(res.action_id)
        if followup is not None and not followup_holds(followup[1], res.outcome):
            journal.event(et.FollowupDropped(action_id=res.action_id, tool=followup[0],
                          decision=followup[1], outcome=res.outcome))
            followup = None
        if self._run.status not in (RunStatus.RUNNING, RunStatus.WAITING_USER):
            self._state.publish()  # the action is gone from any viewer's screen too
            return
        retries = self._config.budgets.retries_per_step
        step = self._run.step_ended(res.action_id, res.outcome, retries, failed_by_monitor)
        if step is not None and step.status == StepStatus.FAILED:
            journal.event(et.PlanStepFailed(step=step.index, tool=step.tool,
                          failures=step.failures, description=step.description))
        self._run.count_outcome(tool, res.outcome)
        if followup is not None and self.start_followup(res, tool, *followup):
            return
        decision = after_action(ActionEnd(
            outcome=res.outcome, failed_by_monitor=failed_by_monitor,
            others_running=bool(book.running), ran_plan_step=step is not None,
            next_step=self._run.plan.next_step(self._catalogue.needs_point(),
                                               set(self._catalogue.specs)),
            planner_must_decide=bool(self._wakes.held) or self._wakes.hold))
        if decision.kind is AfterKind.TELL_STOPPED:
            news.append(f"Action {res.action_id} ({tool}) has now stopped.")
            return
        if decision.kind is AfterKind.WAKE_FOR_END:
            self.wake_for_end(res, tool, info)
            return
        extra = {k: v for k, v in res.data.items() if k != "reason"}
        result = result_text(extra)  # what the planner still needs; the journal has all
        news.append(f"Action {res.action_id} ({tool}) succeeded"
                    + (f": {quote('skill', res.reason)}" if res.reason else ".")
                    + (f" Result: {quote('skill', result, 1500)}" if extra else ""))
        if decision.kind is AfterKind.WAKE_TASK_DONE:
            self._wakes.wake("task_done")  # a task the planner started itself: news now
        elif decision.kind is AfterKind.WAKE_BEFORE_STEP:
            # queued user additions, or the planner was woken (a failure, a timeout, a stop,
            # a monitor flag, the user) and has not replied: it decides the next step
            self._wakes.wake("queued events before the next plan step")
        elif decision.kind is AfterKind.START_STEP and decision.step is not None:
            nxt = decision.step
            args = dict(nxt.args or {})
            new_id = self._goals.by_harness(nxt.tool or "", args, by_harness=True,
                                            step_index=nxt.index)
            if new_id:
                journal.event(et.PlanStep(step=nxt.index, tool=nxt.tool, args=args,
                              action_id=new_id))
            else:
                self._wakes.wake(f"plan step {nxt.index} could not start")
        elif decision.kind is AfterKind.WAKE_FOR_PLAN:
            self._wakes.wake(decision.reason)

    def start_followup(self, res: SkillResult, tool: str, ftool: str, decision: str) -> bool:
        """Start a rule's follow-up (``then``) of the ended action.  True when the action's
        end is fully told by it (a finish the follow-up carries on)."""
        new_id = self._goals.by_harness(ftool, {}, by_harness=True)
        if not new_id:
            # the sender told why; the queue waits for the planner instead of going on as if
            # the step that always follows had run
            self._wakes.wake(f"follow-up {ftool} could not start", hold=True)
            return False
        if decision == "finish":
            taken = self._run.follow_up(res.action_id, ftool, new_id)
            info = self._book.get(new_id)
            if taken is not None and info is not None:
                info.step = taken.index
            self._wakes.news.append(f"Action {res.action_id} ({tool}) finished by the monitor "
                                    f"({quote('skill', res.reason)}); {ftool} started as its "
                                    f"follow-up ({new_id}).")
            return True
        self._wakes.news.append(f"{ftool} started ({new_id}) after {res.action_id} failed.")
        return False

    def wake_for_end(self, res: SkillResult, tool: str, info: ActionInfo | None) -> None:
        if res.outcome == Outcome.TIMED_OUT:
            if info is not None and info.watched:
                msg = (f"Action {res.action_id} ({tool}) ran its limit without the monitor "
                       "confirming success. Look at the newest image before undoing anything.")
            else:
                msg = (f"Action {res.action_id} ({tool}) ran its limit; judge from the newest "
                       "image whether it succeeded. Look before undoing anything.")
        elif res.outcome == Outcome.REFUSED:
            msg = f"Action {res.action_id} ({tool}) was refused: {quote('skill', res.reason)}"
        elif res.outcome == Outcome.STOPPED:
            msg = f"Action {res.action_id} ({tool}) was stopped: {quote('skill', res.reason)}"
        else:
            msg = f"Action {res.action_id} ({tool}) failed: {quote('skill', res.reason)}"
            extra = res.data.get("skill_reasons")
            if extra:
                msg += (" (the skill also reported: "
                        f"{quote('skill', '; '.join(str(x) for x in extra))})")
        step = self._run.plan.step_of(res.action_id) if info is not None else None
        n = self._run.tool_failures.get(tool, 0)
        retries = self._config.budgets.retries_per_step
        if step is not None and step.status == StepStatus.FAILED:
            msg += (f" Plan step {step.index} ({planner_wrote(step.description)}) has now failed "
                    f"{step.failures} times in a row (retries_per_step {retries}): the harness "
                    "will not retry it as it is. Change the plan with update_plan (another "
                    "approach as a new step, or this step skipped) or ask_user.")
        elif n >= retries:
            msg += (f" {tool} has failed {n} times in a row: change your approach instead of "
                    "retrying it the same way.")
        self._wakes.news.append(msg)
        self._wakes.wake(f"action_{res.outcome}", hold=True)

    def handle_verdict(self, v: MonitorVerdict) -> None:
        # while the planner waits for the user its actions still run: the monitor still ends
        # them (the planner hears of it with the user's answer)
        if v.action_id not in self._book.running or \
                self._run.status not in (RunStatus.RUNNING, RunStatus.WAITING_USER):
            return
        who = "controller check" if v.source == "controller" else "monitor"
        if v.decision in ("finish", "fail"):
            outcome = Outcome.SUCCEEDED if v.decision == "finish" else Outcome.FAILED
            r = self._goals.conclude(v.action_id, outcome,
                                     f"{who}: {v.reason or v.question + '=' + v.value}")
            self._journal.event(et.MonitorDecision(action_id=v.action_id,
                                decision=v.decision, source=v.source, then=v.then,
                                accepted=bool(r.get("ok")), reason=r.get("reason", "")))
            if not r.get("ok"):
                return
            if v.then:
                self._book.followups[v.action_id] = (v.then, v.decision)
            if v.decision == "fail":
                self._book.woken_for_fail.add(v.action_id)
                step = self._run.plan.step_of(v.action_id)
                self._wakes.news.append(
                    f"The {who} failed action {v.action_id} ({v.tool}): "
                    f"{quote('monitor', v.reason or v.value)}. " + trust(v.source, "")
                    + (f" Plan step {step.index} stays failed until you decide: call its tool "
                       "again, change the plan or ask the user." if step is not None else ""))
                self._wakes.wake("monitor_flag", hold=True)
        elif v.decision == "escalate":
            key = (v.action_id, v.question)
            if key in self._book.escalated:
                return
            self._book.escalated.add(key)
            why = f" {quote('monitor', v.reason)}" if v.reason else ""
            self._wakes.news.append(
                f"The {who} flags action {v.action_id} ({v.tool}): "
                f"{one_line(v.question, 300)} = {quote('monitor', v.value, 200)} "
                f"(p={v.probability:.2f}).{why} The action is still running. "
                + trust(v.source, " before stopping it"))
            self._wakes.wake("monitor_flag", hold=True)
