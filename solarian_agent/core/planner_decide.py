"""What the planner does once an action has ended, as pure functions of what happened: the
harness starts the plan's next complete step without a model call when it can, and wakes the
planner when what happened may change the plan.  No state is read or written here, so each
rule is tested on its own (``test/core/test_planner_decide.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .plan import NextStep, PlanStep
from .statuses import Outcome

# the outcome a monitor decision ends its action with (SKILL_CONCLUDE)
DECIDED_OUTCOME = {"finish": Outcome.SUCCEEDED, "fail": Outcome.FAILED}


def followup_holds(decision: str, outcome: str) -> bool:
    """A rule's follow-up (``then``) runs only when its action ended as the monitor decided:
    ended otherwise (a stop or its limit came first), the follow-up was for a decision that
    did not happen, and after a stop it would move the arm on."""
    return outcome == DECIDED_OUTCOME.get(decision)


class AfterKind(enum.Enum):
    TELL_STOPPED = "tell_stopped"  # the monitor failed it and was told so: news, no wake
    WAIT_FOR_OTHERS = "wait_for_others"  # a plan step succeeded, others still run: wait
    WAKE_TASK_DONE = "wake_task_done"  # a task the planner started itself (no plan step)
    WAKE_BEFORE_STEP = "wake_before_step"  # the planner decides the next step itself
    START_STEP = "start_step"  # the harness starts the plan's next complete step
    WAKE_FOR_PLAN = "wake_for_plan"  # the queue needs the planner (``reason`` says why)
    WAKE_FOR_END = "wake_for_end"  # a failure, refusal, stop or timeout: the planner decides


@dataclass(frozen=True)
class ActionEnd:
    """What happened: how the action ended and the state of the run just after."""

    outcome: str  # succeeded | failed | refused | stopped | timed_out
    failed_by_monitor: bool  # the monitor (or a controller check) failed it before it ended
    others_running: bool  # other actions still run (a follow-up just started included)
    ran_plan_step: bool  # the action ran a step of the plan
    next_step: NextStep  # what the plan queue would start next
    planner_must_decide: bool  # user additions are held, or a wake holds the plan queue


@dataclass(frozen=True)
class AfterAction:
    kind: AfterKind
    step: PlanStep | None = None  # START_STEP: the step to start
    reason: str = ""  # WAKE_FOR_PLAN: the wake reason

    @property
    def reports_success(self) -> bool:
        """The planner is told the action succeeded (a monitor failure is told instead)."""
        return self.kind not in (AfterKind.TELL_STOPPED, AfterKind.WAKE_FOR_END)


def after_action(end: ActionEnd) -> AfterAction:
    """The rule after an action's end.

    * failed by the monitor: the planner was woken for the failure already; it hears that the
      action has now stopped;
    * any other end but success: the planner is woken, the plan queue held (it decides);
    * a success while other actions run: nothing starts (the arm is busy); a task started by
      the planner itself (no plan step) is woken for, since its result is news now;
    * a success with nothing running: the queue's next complete step starts without a model
      call, unless the planner must decide first (held user additions, or a wake that holds
      the queue since a failure, a stop, a monitor flag or the user may change the plan); a
      step that needs the planner (a point in a fresh image, no tool, failed, the last one)
      wakes it with the queue's reason.
    """
    if end.failed_by_monitor:
        return AfterAction(AfterKind.TELL_STOPPED)
    if end.outcome != Outcome.SUCCEEDED:
        return AfterAction(AfterKind.WAKE_FOR_END)
    if end.others_running:
        return AfterAction(AfterKind.WAIT_FOR_OTHERS if end.ran_plan_step
                           else AfterKind.WAKE_TASK_DONE)
    nxt = end.next_step
    if nxt.step is not None and end.planner_must_decide:
        return AfterAction(AfterKind.WAKE_BEFORE_STEP)
    if nxt.step is not None:
        return AfterAction(AfterKind.START_STEP, step=nxt.step)
    return AfterAction(AfterKind.WAKE_FOR_PLAN, reason=nxt.wake_reason)


__all__ = ["DECIDED_OUTCOME", "ActionEnd", "AfterAction", "AfterKind", "after_action",
           "followup_holds"]
