"""The decision after an action's end (core/planner_decide.py), as a pure function: each rule
on its own, with no harness."""

from __future__ import annotations

import pytest

from solarian_agent.core.plan import NextStep, PlanStep
from solarian_agent.core.planner_decide import (
    ActionEnd,
    AfterKind,
    after_action,
    followup_holds,
)

STEP = PlanStep(2, "place the cup", "place", {"to": "tray"})
NEXT = NextStep(STEP)
NEEDS_PLANNER = NextStep(None, "plan step 3 (pick) needs a point in a fresh image")


def end(outcome: str = "succeeded", *, by_monitor: bool = False, others: bool = False,
        plan_step: bool = True, nxt: NextStep = NEXT, must_decide: bool = False) -> ActionEnd:
    return ActionEnd(outcome, by_monitor, others, plan_step, nxt, must_decide)


def test_a_success_with_nothing_else_running_starts_the_next_complete_step_without_the_model():
    d = after_action(end())
    assert d.kind is AfterKind.START_STEP and d.step is STEP and d.reports_success


def test_a_step_that_needs_the_planner_wakes_it_with_the_queues_reason():
    d = after_action(end(nxt=NEEDS_PLANNER))
    assert d.kind is AfterKind.WAKE_FOR_PLAN and d.reason == NEEDS_PLANNER.wake_reason


def test_held_additions_or_a_holding_wake_let_the_planner_decide_the_next_step():
    assert after_action(end(must_decide=True)).kind is AfterKind.WAKE_BEFORE_STEP
    # with no step to start there is nothing to hold back: the queue's reason wakes it
    assert after_action(end(must_decide=True, nxt=NEEDS_PLANNER)).kind \
        is AfterKind.WAKE_FOR_PLAN


def test_a_success_while_others_run_starts_nothing():
    assert after_action(end(others=True)).kind is AfterKind.WAIT_FOR_OTHERS
    # ... but a task the planner started itself (no plan step) is news now
    assert after_action(end(others=True, plan_step=False)).kind is AfterKind.WAKE_TASK_DONE


@pytest.mark.parametrize("outcome", ["failed", "refused", "stopped", "timed_out"])
def test_any_other_end_wakes_the_planner_and_reports_no_success(outcome: str):
    d = after_action(end(outcome))
    assert d.kind is AfterKind.WAKE_FOR_END and not d.reports_success


@pytest.mark.parametrize("outcome", ["succeeded", "failed", "stopped"])
def test_an_action_the_monitor_failed_is_only_told_to_have_stopped(outcome: str):
    d = after_action(end(outcome, by_monitor=True))
    assert d.kind is AfterKind.TELL_STOPPED and not d.reports_success


def test_a_follow_up_runs_only_when_its_action_ended_as_the_monitor_decided():
    assert followup_holds("finish", "succeeded") and followup_holds("fail", "failed")
    assert not followup_holds("finish", "stopped") and not followup_holds("fail", "timed_out")
    assert not followup_holds("escalate", "succeeded")
